// wgmma.cu: Hopper's warpgroup MMA (ptx.cuh's ptx_wgmma_*, wgmma.cuh's descriptors and tile
// layouts) against a CPU product: one warpgroup computes D (64 x N) = A (64 x 64) B (64 x N) in
// four wgmma.mma_async.m64nNk16 steps, N = 64 or 128, A and B placed in shared memory in each
// layout the attention kernels are to use (K-major and MN-major, interleaved and 128-byte
// swizzled), or A in registers; scale-d 0 on the first step (D's old value, NaN, must not count)
// or 1 (D's old value added). On a GPU this is the check of the emulated GPU's wgmma
// (llmc/emu/ptx.h), which the kernels built on it are tested with: the same tile placed and read
// by the hardware's rules. bf16 build, sm_90a (cuda.mk builds it so); elsewhere it says why and
// passes nothing. At N = 128 a B of 128 rows: K-major, 16 groups of 8 rows (interleaved: the
// leading offset twice 64 rows'); N-major 128-byte swizzled, two 64-column tiles one leading
// offset (8 KB) apart.
// Tolerance: bf16 inputs are exact in the products, sums of 64 in fp32: rtol 1e-5 + 1e-5*max.
#include "dev_common.cuh"
#include "../../llmc/cuda/wgmma.cuh"

#ifdef ENABLE_BF16
constexpr int WG_K = 64;  // A's columns, B's rows: four k steps of 16

// how an operand sits in shared memory: K-major (rows along M or N, k contiguous) or MN-major
// (rows along k), interleaved or 128-byte swizzled; A_REGS: A from registers instead
enum WgLayout { WG_K_NONE, WG_K_SW128, WG_MN_NONE, WG_MN_SW128 };

// byte offset of operand element (mn, k) in a tile of MN x 64 (mn < MN) in that layout, and the
// descriptor of k step ks (16 k) of the tile at shared-window address base
__device__ inline uint32_t wg_offset(int layout, int mn, int k, int MN) {
    switch (layout) {
        case WG_K_NONE: return wgmma_interleave_offset(mn, k, MN);
        case WG_K_SW128: return wgmma_sw128_offset(mn, k);
        case WG_MN_NONE: return wgmma_interleave_offset(k, mn, WG_K);
        default: return (mn / 64) * 8192 + wgmma_sw128_offset(k, mn % 64);  // 64-column tiles of 64 k rows
    }
}
__device__ inline uint64_t wg_desc(int layout, uint32_t base, int ks, int MN) {
    switch (layout) {
        case WG_K_NONE: return wgmma_desc(base + ks * MN * 32, MN * 16, 128, WGMMA_SWIZZLE_NONE);
        case WG_K_SW128: return wgmma_desc(base + ks * 32, 16, 1024, WGMMA_SWIZZLE_128B);
        case WG_MN_NONE: return wgmma_desc(base + ks * 256, 128, 1024, WGMMA_SWIZZLE_NONE);
        default: return wgmma_desc(base + ks * 2048, 8192, 1024, WGMMA_SWIZZLE_128B);
    }
}

__device__ inline uint32_t wg_pack(__nv_bfloat16 lo, __nv_bfloat16 hi) {
    return (uint32_t)__bfloat16_as_ushort(lo) | ((uint32_t)__bfloat16_as_ushort(hi) << 16);
}

// out (64 x N, row-major) = (accumulate_first ? init : 0) + A B, A (64 x 64, row m) and Bt
// (N x 64, row n: B transposed) in global memory; one block of 128 threads (a warpgroup)
template <int N, int A_LAYOUT, int B_LAYOUT, bool A_REGS>
__global__ void __launch_bounds__(128) wgmma_gemm_kernel(float* out, const __nv_bfloat16* A, const __nv_bfloat16* Bt,
                                                         int accumulate_first, float init) {
    extern __shared__ float4 wg_smem4[];
    unsigned char* raw = reinterpret_cast<unsigned char*>(wg_smem4);
    // the tiles on the 128-byte swizzle's 1024-byte pattern, in the shared window
    const uint32_t raw_addr = ptx_shared_address(raw), base = (raw_addr + 1023u) & ~1023u;
    unsigned char* As = raw + (base - raw_addr);
    unsigned char* Bs = As + 8192;
    for (int i = threadIdx.x; i < N * WG_K; i += 128) {
        const int r = i / WG_K, c = i % WG_K;  // A (m, k) = (r, c); B (n, k) = (r, c)
        if (!A_REGS && r < 64) *reinterpret_cast<__nv_bfloat16*>(As + wg_offset(A_LAYOUT, r, c, 64)) = A[i];
        *reinterpret_cast<__nv_bfloat16*>(Bs + wg_offset(B_LAYOUT, r, c, N)) = Bt[i];
    }
    ptx_fence_proxy_async_shared();  // the stores above, seen by wgmma's reads
    __syncthreads();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    float d[N / 2];
    for (int v = 0; v < N / 2; v++) d[v] = init;
    uint32_t a[4][4];  // A_REGS: k step ks's fragment, mma.m16n8k16's A of rows 16 warp..
    if (A_REGS) {
        for (int ks = 0; ks < 4; ks++) {
            const int at = (16 * warp + g) * 64 + 16 * ks + 2 * t;  // A (16 warp + g, 16 ks + 2t)
            const __nv_bfloat16* r0 = A + at;
            const __nv_bfloat16* r8 = r0 + 512;  // 8 rows down
            a[ks][0] = wg_pack(r0[0], r0[1]);
            a[ks][1] = wg_pack(r8[0], r8[1]);
            a[ks][2] = wg_pack(r0[8], r0[9]);
            a[ks][3] = wg_pack(r8[8], r8[9]);
        }
    }
    ptx_wgmma_fence_operands(d);  // d and a stay in their registers from here to the wait
    ptx_wgmma_fence_operands(a);
    ptx_wgmma_fence();
    const uint32_t a_base = base, b_base = base + 8192;
#pragma unroll
    for (int ks = 0; ks < 4; ks++) {
        const int acc = ks > 0 || accumulate_first;
        if (A_REGS) {
            ptx_wgmma_m64nNk16_bf16_f32_rs<N, B_LAYOUT >= WG_MN_NONE>(d, a[ks], wg_desc(B_LAYOUT, b_base, ks, N),
                                                                      acc);
        } else {
            ptx_wgmma_m64nNk16_bf16_f32_ss<N, A_LAYOUT >= WG_MN_NONE, B_LAYOUT >= WG_MN_NONE>(
                d, wg_desc(A_LAYOUT, a_base, ks, 64), wg_desc(B_LAYOUT, b_base, ks, N), acc);
        }
    }
    ptx_wgmma_commit_group();
    ptx_wgmma_fence_operands(d);
    ptx_wgmma_fence_operands(a);
    ptx_wgmma_wait_group<0>();
    ptx_wgmma_fence_operands(d);
    for (int v = 0; v < N / 2; v++)
        out[(16 * warp + g + 8 * ((v >> 1) & 1)) * N + 8 * (v >> 2) + 2 * t + (v & 1)] = d[v];
}

template <int N, int A_LAYOUT, int B_LAYOUT, bool A_REGS>
static void run_case(const CudaContext& ctx, const char* name, const __nv_bfloat16* d_A, const __nv_bfloat16* d_Bt,
                     float* d_out, const std::vector<float>& ref) {
    const size_t smem = 1024 + 8192 + (size_t)N * WG_K * 2;
    CHECK_CUDA(cudaFuncSetAttribute(wgmma_gemm_kernel<N, A_LAYOUT, B_LAYOUT, A_REGS>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const std::string op = "wgmma m64n" + std::to_string(N) + "k16";
    for (int accumulate = 0; accumulate < 2; accumulate++) {
        // scale-d 0: D's NaN must not count; 1: D's 0.5 is added
        const float init = accumulate ? 0.5f : NAN;
        CHECK_CUDA(cudaMemset(d_out, 0xFF, (size_t)64 * N * sizeof(float)));
        wgmma_gemm_kernel<N, A_LAYOUT, B_LAYOUT, A_REGS><<<1, 128, smem, ctx.stream>>>(d_out, d_A, d_Bt, accumulate,
                                                                                       init);
        CHECK_LAUNCH();
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        std::vector<float> want = ref;
        if (accumulate)
            for (float& x : want) x += 0.5f;
        const std::string what = std::string(name) + (accumulate ? ", D + 0.5" : ", D NaN, scale-d 0");
        dev_check(op.c_str(), what.c_str(), dev_download_f32(d_out, (size_t)64 * N), want, {1e-5, 1e-5});
    }
}
#endif

int main(int argc, char** argv) {
    dev_parse_args(argc, argv);
    CudaContext ctx;
    cuda_context_init(&ctx, 0);
    dev_print_device(ctx, "wgmma");
#ifdef ENABLE_BF16
    if (ctx.props.major != 9) {
        printf("wgmma: needs sm_90 (this GPU: sm_%d%d); nothing checked\n", ctx.props.major, ctx.props.minor);
        cuda_context_free(&ctx);
        return dev_finish("wgmma");
    }
    DevRng rng(2024);
    // A (64 x 64) and Bt (128 x 64: B's columns as rows); the N = 64 cases take Bt's first 64 rows
    std::vector<float> A = rand_vec(rng, (size_t)64 * WG_K, 1.0f), Bt = rand_vec(rng, (size_t)128 * WG_K, 1.0f);
    round_to_floatX(A);
    round_to_floatX(Bt);
    auto product = [&](int N) {
        std::vector<float> ref((size_t)64 * N);
        for (int m = 0; m < 64; m++)
            for (int n = 0; n < N; n++) {
                double acc = 0.0;
                for (int k = 0; k < WG_K; k++) acc += (double)A[m * WG_K + k] * Bt[n * WG_K + k];
                ref[m * N + n] = (float)acc;
            }
        return ref;
    };
    const std::vector<float> ref64 = product(64), ref128 = product(128);
    floatX *d_A = dev_upload(A), *d_Bt = dev_upload(Bt);
    float* d_out;
    CHECK_CUDA(cudaMalloc(&d_out, (size_t)64 * 128 * sizeof(float)));
    run_case<64, WG_K_NONE, WG_K_NONE, false>(ctx, "A, B K-major interleaved", d_A, d_Bt, d_out, ref64);
    run_case<64, WG_K_SW128, WG_K_SW128, false>(ctx, "A, B K-major 128B-swizzled (Q K^T)", d_A, d_Bt, d_out, ref64);
    run_case<64, WG_K_SW128, WG_MN_SW128, false>(ctx, "A K-major, B N-major, 128B-swizzled (P V)", d_A, d_Bt, d_out,
                                                 ref64);
    run_case<64, WG_MN_NONE, WG_MN_NONE, false>(ctx, "A M-major, B N-major interleaved", d_A, d_Bt, d_out, ref64);
    run_case<64, WG_K_NONE, WG_MN_SW128, true>(ctx, "A in registers, B N-major 128B-swizzled (P V)", d_A, d_Bt, d_out,
                                               ref64);
    run_case<64, WG_K_NONE, WG_K_SW128, true>(ctx, "A in registers, B K-major 128B-swizzled", d_A, d_Bt, d_out, ref64);
    // N = 128: Q K^T of 128 keys (the forward's 128-key tiles), its layouts beside
    run_case<128, WG_K_SW128, WG_K_SW128, false>(ctx, "A, B K-major 128B-swizzled (Q K^T, 128 keys)", d_A, d_Bt, d_out,
                                                 ref128);
    run_case<128, WG_K_NONE, WG_K_NONE, false>(ctx, "A, B K-major interleaved", d_A, d_Bt, d_out, ref128);
    run_case<128, WG_K_NONE, WG_K_SW128, true>(ctx, "A in registers, B K-major 128B-swizzled", d_A, d_Bt, d_out,
                                               ref128);
    run_case<128, WG_K_SW128, WG_MN_SW128, false>(ctx, "A K-major, B N-major 128B-swizzled, two 64-column tiles", d_A,
                                                  d_Bt, d_out, ref128);
    CHECK_CUDA(cudaFree(d_A));
    CHECK_CUDA(cudaFree(d_Bt));
    CHECK_CUDA(cudaFree(d_out));
#else
    printf("wgmma: the bf16 build's (its operands are bf16); nothing checked\n");
#endif
    cuda_context_free(&ctx);
    return dev_finish("wgmma");
}
