// ceilings.cu: the best this GPU does, measured in every scripts/gpu_check.sh run, so each
// kernel's GB/s or TFLOP/s can be read as a share of what the device reaches (gpu_check.sh
// prints that share next to every RESULT line):
//   ceiling:copy    a plain copy kernel, 16-byte loads and stores, over 1 GiB: the ceiling of
//                   the memory-bound kernels; GB/s counts the bytes read plus those written
//   ceiling:memcpy  cudaMemcpyAsync device to device over the same buffers (for comparison)
//   ceiling:matmul  cuBLASLt through llmc/cuda/matmul.cuh at 8192 x 8192 x 8192: bf16, or in
//                   the fp32 build TF32 as the fp32 trainer runs by default: the ceiling of the
//                   compute-bound kernels
// Each is checked before it is timed: the copies against their source, and 64 entries of the
// product against a CPU dot product in double. --quick: small sizes, for compute-sanitizer.
#include "dev_common.cuh"
#include "../../llmc/cuda/matmul.cuh"

__global__ void ceiling_copy_kernel(int4* dst, const int4* src, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

static void ceiling_copy(const CudaContext& ctx, int4* dst, const int4* src, size_t n) {
    const int block = 512;
    const unsigned grid = (unsigned)std::min<size_t>(ceil_div(n, (size_t)block), 8 * (size_t)ctx.props.multiProcessorCount);
    ceiling_copy_kernel<<<grid, block, 0, ctx.stream>>>(dst, src, n);
    CHECK_LAUNCH();
}

static void run_copy(const CudaContext& ctx, size_t bytes) {
    const size_t n = bytes / sizeof(int4);
    std::vector<uint32_t> host(bytes / 4);
    DevRng rng(5);
    for (uint32_t& x : host) x = (uint32_t)rng.next();
    int4 *src, *dst;
    CHECK_CUDA(cudaMalloc(&src, bytes));
    CHECK_CUDA(cudaMalloc(&dst, bytes));
    CHECK_CUDA(cudaMemcpy(src, host.data(), bytes, cudaMemcpyHostToDevice));
    std::vector<uint32_t> back(bytes / 4);
    char what[32];
    snprintf(what, sizeof(what), "%zu MiB", bytes >> 20);

    CHECK_CUDA(cudaMemset(dst, 0, bytes));
    ceiling_copy(ctx, dst, src, n);
    CHECK_CUDA(cudaMemcpy(back.data(), dst, bytes, cudaMemcpyDeviceToHost));
    dev_expect("ceiling:copy", what, memcmp(back.data(), host.data(), bytes) == 0);
    float ms = bench_ms(ctx, 10, [&] { ceiling_copy(ctx, dst, src, n); });
    dev_report_gbs("ceiling", "copy", 2.0 * bytes, ms);

    CHECK_CUDA(cudaMemset(dst, 0, bytes));
    CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx.stream));
    CHECK_CUDA(cudaMemcpy(back.data(), dst, bytes, cudaMemcpyDeviceToHost));
    dev_expect("ceiling:memcpy", what, memcmp(back.data(), host.data(), bytes) == 0);
    ms = bench_ms(ctx, 10, [&] { CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, ctx.stream)); });
    dev_report_gbs("ceiling", "memcpy", 2.0 * bytes, ms);
    CHECK_CUDA(cudaFree(src));
    CHECK_CUDA(cudaFree(dst));
}

static void run_matmul(const CudaContext& ctx, int M) {
    const int N = M, K = M;  // out (M,N) = inp (M,K) . weight (N,K)^T
    DevRng rng(17);
    std::vector<float> inp = rand_vec(rng, (size_t)M * K), weight = rand_vec(rng, (size_t)N * K);
    round_to_floatX(inp);
    round_to_floatX(weight);
    floatX *d_inp = dev_upload(inp), *d_weight = dev_upload(weight), *d_out;
    CHECK_CUDA(cudaMalloc(&d_out, (size_t)M * N * sizeof(floatX)));
    matmul_forward(ctx, d_out, nullptr, d_inp, d_weight, nullptr, M, K, N);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    std::vector<float> out = dev_download(d_out, (size_t)M * N);
    std::vector<float> got, ref;
    for (int s = 0; s < 64; s++) {
        int i = rng.below(M), o = rng.below(N);
        double acc = 0.0;
        for (int k = 0; k < K; k++) acc += (double)inp[(size_t)i * K + k] * weight[(size_t)o * K + k];
        got.push_back(out[(size_t)i * N + o]);
        ref.push_back((float)acc);
    }
    char what[32];
    snprintf(what, sizeof(what), "%d^3, 64 entries", M);
    // TF32 keeps 10 mantissa bits of each input, bf16 7 (and rounds the output): loose, but
    // a wrong layout or a garbage algorithm is off by the size of the values themselves
    dev_check("ceiling:matmul", what, got, ref, tol_for({1e-2, 5e-3}, {2e-2, 1e-2}));
    float ms = bench_ms(ctx, 10, [&] { matmul_forward(ctx, d_out, nullptr, d_inp, d_weight, nullptr, M, K, N); });
    dev_report_tflops("ceiling", "matmul", 2.0 * M * N * K, ms);
    CHECK_CUDA(cudaFree(d_inp));
    CHECK_CUDA(cudaFree(d_weight));
    CHECK_CUDA(cudaFree(d_out));
}

int main(int argc, char** argv) {
    dev_parse_args(argc, argv);
    CudaContext ctx;
    cuda_context_init(&ctx, 0);
    ctx.tf32 = true;  // the fp32 trainer's default (-f 1)
    dev_print_device(ctx, "ceilings");
    run_copy(ctx, g_dev_quick ? (2u << 20) : (1u << 30));
    run_matmul(ctx, g_dev_quick ? 256 : 8192);
    cuda_context_free(&ctx);
    return dev_finish("ceilings");
}
