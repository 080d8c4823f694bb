// test_emu_races.cu: the race check (EMU_RACECHECK=1, llmc/emu/racecheck.cpp) against the
// classes of bug an audit planted and the two-order comparison before it could not see: each a
// program with the bug, which the race check must stop naming its kernel, and the same program
// corrected, which must run to the end with the right results. Built for the emulated GPU only
// (emu.mk: build/emu/race/test_emu_races with the race check's instrumentation, and
// build/emu/test_emu_races with ASan like the other emulator tests).
//
//   test_emu_races              every corrected program, PASS/FAIL a check (exit: failures)
//   test_emu_races --fail NAME  the program with the bug NAME; exits 0 if it ran to the end with
//                               the right results (the bug went unseen), 1 with "wrong results"
//
// test/test_emu.sh runs the corrected ones with EMU_RACECHECK=1 in three thread orders, and each
// bug with EMU_RACECHECK=1, where it must stop with "race: kernel NAME: ... hazard".
// Built against the emulator before the race check (666a58b's llmc/emu), 5 of the 6 bugs ran to
// the end with the right results under its EMU_RACECHECK=1 (two thread orders compared) in
// both orders, and cp_async_raw stopped only as "writes ... differently in forward and
// reverse", no hazard named; the cp.async landing check (cp_async_war, EMU_ORDER=reverse, no
// race check) ran to the end with the right results: test_emu failed on all of them.
#include <cstdio>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include "../llmc/cuda/ptx.cuh"    // defines: ptx_cp_async_16, ptx_cp_async_commit, ptx_cp_async_wait, ptx_wgmma_*
#include "../llmc/cuda/wgmma.cuh"  // defines: wgmma_desc, wgmma_sw128_offset

static int failures = 0;
static void check(bool ok, const char* what) {
    printf("%s %s\n", ok ? "PASS" : "FAIL", what);
    if (!ok) failures++;
}
#define CHECK_OK(x)                                                                                 \
    do {                                                                                            \
        cudaError_t e_ = (x);                                                                       \
        if (e_ != cudaSuccess) {                                                                    \
            printf("FAIL %s: %s\n", #x, cudaGetErrorString(e_));                                    \
            return false;                                                                           \
        }                                                                                           \
    } while (0)

// ---------------------------------------------------------------------------------------
// 1. cp.async: a two-stage pipeline. PTX ISA, "Data Movement and Conversion Instructions:
// cp.async": the copy's writes may be performed any time before the cp.async.wait_group (or
// wait_all) that completes it, and no other synchronization guarantees its completion. So the
// copy of tile j+1 into a stage must be issued only after the __syncthreads that tells every
// thread is done reading that stage (tile j-1): issued before it, it may overwrite the tile
// under a slow thread's reads. (The emulator used to land every copy at its wait_group, so
// the early issue could never show.) And a thread's wait completes its own copies only: the
// tile is everyone's after the barrier that follows the waits (cp_async_raw, which the old
// check caught too, by its wrong values). 64 threads, tiles of 256 floats, one 16-byte copy a
// thread.

constexpr int PIPE_THREADS = 64, PIPE_TILE = 256, PIPE_TILES = 6;

__device__ void pipe_copy_tile(float* stage, const float* in, int tile) {
    const int t = threadIdx.x;
    ptx_cp_async_16(stage + 4 * (size_t)t, in + (size_t)tile * PIPE_TILE + 4 * (size_t)t);
    ptx_cp_async_commit();
}
// every thread sums 16 floats that 16 other threads copied
__device__ float pipe_use_tile(const float* stage) {
    float s = 0.0f;
    for (int i = 0; i < 16; i++) s += stage[(threadIdx.x + 16 * i + 5) % PIPE_TILE];
    return s;
}

// BUG 1: the copy of tile j+1 issued before the barrier; BUG 2: no barrier after the wait, so
// a thread reads the other threads' copies of tile j, which only their own waits complete
template <int BUG>
__global__ void pipeline_kernel(float* out, const float* in) {
    __shared__ float4 stages4[2][PIPE_TILE / 4];  // float4: the 16-byte alignment cp.async needs
    float* stages = reinterpret_cast<float*>(stages4);
    pipe_copy_tile(stages, in, 0);
    for (int j = 0; j < PIPE_TILES; j++) {
        float* next = stages + (size_t)((j + 1) & 1) * PIPE_TILE;
        if (BUG == 1) {
            // the bug: stage (j+1)&1 still holds tile j-1, which slower threads may be reading
            if (j + 1 < PIPE_TILES) pipe_copy_tile(next, in, j + 1);
            if (j + 1 < PIPE_TILES) ptx_cp_async_wait<1>();  // tile j (tile j+1 stays in flight)
            else ptx_cp_async_wait<0>();
            __syncthreads();
        } else {
            ptx_cp_async_wait<0>();        // this thread's copies of tile j
            if (BUG != 2) __syncthreads();  // everyone's; and nobody reads tile j-1 any more
            if (j + 1 < PIPE_TILES) pipe_copy_tile(next, in, j + 1);
        }
        out[(blockIdx.x * PIPE_TILES + j) * PIPE_THREADS + threadIdx.x] = pipe_use_tile(stages + (size_t)(j & 1) * PIPE_TILE);
    }
}

static bool run_pipeline(int bug) {
    // two blocks stream the same tiles, each to its own outputs
    std::vector<float> h((size_t)PIPE_TILES * PIPE_TILE), want((size_t)2 * PIPE_TILES * PIPE_THREADS);
    for (size_t i = 0; i < h.size(); i++) h[i] = (float)(i % 97);
    for (int j = 0; j < 2 * PIPE_TILES; j++)
        for (int t = 0; t < PIPE_THREADS; t++) {
            float s = 0.0f;
            for (int i = 0; i < 16; i++) s += h[j % PIPE_TILES * PIPE_TILE + (t + 16 * i + 5) % PIPE_TILE];
            want[j * PIPE_THREADS + t] = s;
        }
    float *in, *out;
    CHECK_OK(cudaMalloc(&in, h.size() * sizeof(float)));
    CHECK_OK(cudaMalloc(&out, want.size() * sizeof(float)));
    CHECK_OK(cudaMemcpy(in, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
    if (bug == 1) pipeline_kernel<1><<<2, PIPE_THREADS>>>(out, in);
    else if (bug == 2) pipeline_kernel<2><<<2, PIPE_THREADS>>>(out, in);
    else pipeline_kernel<0><<<2, PIPE_THREADS>>>(out, in);
    CHECK_OK(cudaGetLastError());
    std::vector<float> got(want.size());
    CHECK_OK(cudaMemcpy(got.data(), out, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
    cudaFree(in);
    cudaFree(out);
    return got == want;
}

// ---------------------------------------------------------------------------------------
// 2. Lost updates: every thread of 4 blocks adds 1 to one float. Programming Guide, "Atomic
// Functions": an atomic function performs its read-modify-write without interference from any
// other thread; a plain += is a read and a write, and two threads' pairs may interleave. (The
// emulator switches threads only at barriers and warp operations, so a plain += was never
// interrupted and the count came out right in every order.)

template <bool PLAIN>
__global__ void count_kernel(float* counter) {
    if (PLAIN) *counter += 1.0f;  // the bug
    else atomicAdd(counter, 1.0f);
}

static bool run_count(bool bug) {
    float* d;
    CHECK_OK(cudaMalloc(&d, sizeof(float)));
    CHECK_OK(cudaMemset(d, 0, sizeof(float)));
    if (bug) count_kernel<true><<<4, 128>>>(d);
    else count_kernel<false><<<4, 128>>>(d);
    float h = 0.0f;
    CHECK_OK(cudaMemcpy(&h, d, sizeof(float), cudaMemcpyDeviceToHost));
    cudaFree(d);
    return h == 512.0f;
}

// ---------------------------------------------------------------------------------------
// 3. A cross-warp write-after-read. Programming Guide, "Synchronization Functions": only
// __syncthreads orders the shared memory accesses of the block's threads; a warp operation
// (here a shuffle, "Warp Shuffle Functions") involves the lanes of one warp only. Each thread
// reads the element of a thread in the other warp, shuffles, and overwrites its own element
// without a barrier, while the other warp may not have read it yet. (The emulator ran every
// thread up to the shuffle before any went on, so all reads came before all writes.)

template <bool NO_BARRIER>
__global__ void swap_halves_kernel(float* out, const float* in) {
    __shared__ float s[64];
    const int t = threadIdx.x;
    s[t] = in[t];
    __syncthreads();
    float v = s[63 - t];  // the other warp's element
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    if (!NO_BARRIER) __syncthreads();  // every thread has read before any overwrites
    s[t] = v;
    __syncthreads();
    out[t] = s[t] + s[(t + 1) % 64];
}

static bool run_swap(bool bug) {
    std::vector<float> h(64), want(64), v(64);
    for (int t = 0; t < 64; t++) h[t] = (float)(t * 3 + 1);
    for (int t = 0; t < 64; t++) v[t] = h[63 - t] + h[63 - (t ^ 1)];
    for (int t = 0; t < 64; t++) want[t] = v[t] + v[(t + 1) % 64];
    float *in, *out;
    CHECK_OK(cudaMalloc(&in, 64 * sizeof(float)));
    CHECK_OK(cudaMalloc(&out, 64 * sizeof(float)));
    CHECK_OK(cudaMemcpy(in, h.data(), 64 * sizeof(float), cudaMemcpyHostToDevice));
    if (bug) swap_halves_kernel<true><<<1, 64>>>(out, in);
    else swap_halves_kernel<false><<<1, 64>>>(out, in);
    std::vector<float> got(64);
    CHECK_OK(cudaMemcpy(got.data(), out, 64 * sizeof(float), cudaMemcpyDeviceToHost));
    cudaFree(in);
    cudaFree(out);
    return got == want;
}

// ---------------------------------------------------------------------------------------
// 4. Streams. Programming Guide, "Streams" and "Events"; Runtime API, "Stream synchronization
// behavior": operations of different streams may run in any order or at the same time; a
// stream's later work waits for another's only through an event it waits for
// (cudaStreamWaitEvent) or a synchronisation. A kernel on stream b reads what one on stream a
// writes, and (the fifth case) a copy on stream b reads it back, without the wait. (The two-order check
// serialised the streams, in the order of the calls, so the reads always came after.)

__global__ void produce_kernel(float* buf, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) buf[i] = (float)i * 0.5f;
}
__global__ void consume_kernel(float* out, const float* buf, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = buf[i] + 1.0f;
}

// what: "kernel" (5's copy when "copy"); bug: without the event
static bool run_streams(bool bug, bool copy) {
    const int n = 4096;
    float *buf, *out, *host;
    cudaStream_t a, b;
    cudaEvent_t written;
    CHECK_OK(cudaMalloc(&buf, n * sizeof(float)));
    CHECK_OK(cudaMalloc(&out, n * sizeof(float)));
    CHECK_OK(cudaMallocHost(&host, n * sizeof(float)));
    CHECK_OK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK_OK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CHECK_OK(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));
    produce_kernel<<<n / 256, 256, 0, a>>>(buf, n);
    if (!bug) {
        CHECK_OK(cudaEventRecord(written, a));
        CHECK_OK(cudaStreamWaitEvent(b, written, 0));
    }
    if (copy) {
        CHECK_OK(cudaMemcpyAsync(host, buf, n * sizeof(float), cudaMemcpyDeviceToHost, b));
    } else {
        consume_kernel<<<n / 256, 256, 0, b>>>(out, buf, n);
        CHECK_OK(cudaMemcpyAsync(host, out, n * sizeof(float), cudaMemcpyDeviceToHost, b));
    }
    CHECK_OK(cudaStreamSynchronize(b));
    bool ok = true;
    for (int i = 0; i < n; i++) ok &= host[i] == (float)i * 0.5f + (copy ? 0.0f : 1.0f);
    CHECK_OK(cudaStreamSynchronize(a));
    cudaEventDestroy(written);
    cudaStreamDestroy(a);
    cudaStreamDestroy(b);
    cudaFreeHost(host);
    cudaFree(buf);
    cudaFree(out);
    return ok;
}

// ---------------------------------------------------------------------------------------
// 5. wgmma's A fragment in registers (sm_90a). PTX ISA, "wgmma.mma_async": the operation may
// read its registers any time before the wgmma.wait_group that completes it, and accessing the
// accumulator or A's registers before that wait is undefined. A pipelined kernel that builds
// the next product's A fragment in the registers of the one in flight (the attention forward's
// P, kept a step) is this bug; the emulated wgmma takes A at the issue, so no thread order
// would show it in the data. One warpgroup: D (64 x 64) = A (64 x 16) B (16 x 64), A from
// registers, B's columns as the rows of a 128-byte-swizzled tile (K-major), small integers:
// exact in bf16 and in the fp32 sums. BUG: A's first register rewritten before the wait.

__device__ inline float wgmma_test_a(int m, int k) { return (float)((m + 2 * k) % 5 - 2); }
__device__ inline float wgmma_test_b(int k, int n) { return (float)((3 * k + n) % 7 - 3); }
__device__ inline uint32_t wgmma_test_pack(float lo, float hi) {
    const __nv_bfloat16 l = __float2bfloat16(lo), h = __float2bfloat16(hi);
    return (uint32_t)*reinterpret_cast<const uint16_t*>(&l) | ((uint32_t)*reinterpret_cast<const uint16_t*>(&h) << 16);
}

template <bool BUG>
__global__ void wgmma_regs_kernel(float* out) {
    extern __shared__ float4 wgmma_test_smem4[];
    unsigned char* raw = reinterpret_cast<unsigned char*>(wgmma_test_smem4);
    const uint32_t raw_addr = ptx_shared_address(raw), base = (raw_addr + 1023u) & ~1023u;  // the swizzle's pattern
    unsigned char* tile = raw + (base - raw_addr);
    for (int i = threadIdx.x; i < 64 * 64; i += 128) {  // row n, column k: B (k, n), zero past k 16
        const int n = i / 64, k = i % 64;
        const __nv_bfloat16 v = __float2bfloat16(k < 16 ? wgmma_test_b(k, n) : 0.0f);
        *reinterpret_cast<__nv_bfloat16*>(tile + wgmma_sw128_offset(n, k)) = v;
    }
    ptx_fence_proxy_async_shared();  // the stores, seen by wgmma's reads
    __syncthreads();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, m = 16 * warp + g;
    // mma.m16n8k16's A fragment of rows 16 warp..: (g, 2t..), (g + 8, 2t..), (g, 2t + 8..), (g + 8, 2t + 8..)
    uint32_t a[4] = {wgmma_test_pack(wgmma_test_a(m, 2 * t), wgmma_test_a(m, 2 * t + 1)),
                     wgmma_test_pack(wgmma_test_a(m + 8, 2 * t), wgmma_test_a(m + 8, 2 * t + 1)),
                     wgmma_test_pack(wgmma_test_a(m, 2 * t + 8), wgmma_test_a(m, 2 * t + 9)),
                     wgmma_test_pack(wgmma_test_a(m + 8, 2 * t + 8), wgmma_test_a(m + 8, 2 * t + 9))};
    float d[32];
    ptx_wgmma_fence();
    ptx_wgmma_m64n64k16_bf16_f32_rs<0>(d, a, wgmma_desc(base, 16, 1024, WGMMA_SWIZZLE_128B), 0);
    ptx_wgmma_commit_group();
    if (BUG) a[0] = 0;  // the next fragment, written into the registers of the product in flight
    ptx_wgmma_wait_group<0>();
    if (!BUG) a[0] = 0;  // after the wait: allowed
    for (int v = 0; v < 32; v++)
        out[(m + 8 * ((v >> 1) & 1)) * 64 + 8 * (v >> 2) + 2 * t + (v & 1)] = d[v] + (float)a[0];
}

static bool run_wgmma_regs(bool bug) {
    float *d_out, host[64 * 64];
    CHECK_OK(cudaMalloc(&d_out, sizeof(host)));
    const size_t smem = 64 * 128 + 1024;
    if (bug) {
        wgmma_regs_kernel<true><<<1, 128, smem>>>(d_out);
    } else {
        wgmma_regs_kernel<false><<<1, 128, smem>>>(d_out);
    }
    CHECK_OK(cudaGetLastError());
    CHECK_OK(cudaMemcpy(host, d_out, sizeof(host), cudaMemcpyDeviceToHost));
    cudaFree(d_out);
    bool ok = true;
    for (int m = 0; m < 64; m++)
        for (int n = 0; n < 64; n++) {
            float want = 0.0f;
            for (int k = 0; k < 16; k++) want += (float)(((m + 2 * k) % 5 - 2) * ((3 * k + n) % 7 - 3));
            ok &= host[m * 64 + n] == want;
        }
    return ok;
}

// ---------------------------------------------------------------------------------------
// 6. A copy past the end of shared memory: each of 64 threads copies its 16 bytes by cp.async
// into the dynamic shared memory at 16 x its index; the bug launches it with one unit too few
// (a tile-offset slip, the kind a kernel with several tiles makes). On a GPU the last copy lands
// outside the block's shared memory (an illegal address, or another block's); the emulator
// stops it at the issue, in every build.
__global__ void smem_copy_kernel(float* out, const float* in) {
    extern __shared__ float4 copy_smem4[];
    float* buf = reinterpret_cast<float*>(copy_smem4);
    const size_t mine = 4 * (size_t)threadIdx.x, next = 4 * (size_t)((threadIdx.x + 1) % 64);
    ptx_cp_async_16(buf + mine, in + mine);
    ptx_cp_async_commit();
    ptx_cp_async_wait<0>();
    __syncthreads();
    out[threadIdx.x] = buf[next];  // another thread's copy
}

static bool run_smem_copy(bool bug) {
    std::vector<float> h(256);
    for (int i = 0; i < 256; i++) h[i] = (float)(i % 13);
    float *in, *out, got[64];
    CHECK_OK(cudaMalloc(&in, h.size() * sizeof(float)));
    CHECK_OK(cudaMalloc(&out, sizeof(got)));
    CHECK_OK(cudaMemcpy(in, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
    smem_copy_kernel<<<1, 64, (size_t)(bug ? 63 : 64) * 16>>>(out, in);
    CHECK_OK(cudaGetLastError());
    CHECK_OK(cudaMemcpy(got, out, sizeof(got), cudaMemcpyDeviceToHost));
    cudaFree(in);
    cudaFree(out);
    bool ok = true;
    for (int t = 0; t < 64; t++) ok &= got[t] == h[4 * (size_t)((t + 1) % 64)];
    return ok;
}

// 7. An ldmatrix row past the end of shared memory: 32 rows of 8 bf16, each lane writes its own
// and gives its address to ldmatrix.x4 (lanes 8j.. the rows of matrix j); the bug gives lane 31
// the row after its own, one past the end (an off-by-one in a row index). ldmatrix.x4 returns
// each lane row 8j + lane / 4, columns 2 (lane % 4), +1 of matrix j (PTX ISA, "Matrix Fragments
// for mma.m16n8k16"). The emulator stops the read at the instruction, in every build.
template <bool BUG>
__global__ void ldmatrix_rows_kernel(uint32_t* out) {
    extern __shared__ float4 rows_smem4[];
    uint16_t* rows = reinterpret_cast<uint16_t*>(rows_smem4);
    const int lane = threadIdx.x;
    for (int c = 0; c < 8; c++) rows[8 * lane + c] = (uint16_t)(8 * lane + c);
    __syncthreads();
    uint32_t r[4];
    ptx_ldmatrix_x4(r, rows + 8 * (size_t)(lane + (BUG && lane == 31 ? 1 : 0)));
    for (int j = 0; j < 4; j++) out[4 * lane + j] = r[j];
}

static bool run_ldmatrix_rows(bool bug) {
    uint32_t* out;
    uint32_t got[128];
    CHECK_OK(cudaMalloc(&out, sizeof(got)));
    const size_t smem = 32 * sizeof(float4);  // 32 rows of 16 bytes
    if (bug) {
        ldmatrix_rows_kernel<true><<<1, 32, smem>>>(out);
    } else {
        ldmatrix_rows_kernel<false><<<1, 32, smem>>>(out);
    }
    CHECK_OK(cudaGetLastError());
    CHECK_OK(cudaMemcpy(got, out, sizeof(got), cudaMemcpyDeviceToHost));
    cudaFree(out);
    bool ok = true;
    for (int l = 0; l < 32; l++)
        for (int j = 0; j < 4; j++) {
            const uint32_t e = (uint32_t)(8 * (8 * j + l / 4) + 2 * (l % 4));  // element (row 8j + l/4, col 2(l%4))
            ok &= got[4 * l + j] == (e | (e + 1) << 16);
        }
    return ok;
}

// ---------------------------------------------------------------------------------------

struct Case {
    const char* name;
    bool (*run)(bool bug);
    const char* fixed;  // what the corrected program does
};
static const Case CASES[] = {
    {"cp_async_war", [](bool bug) { return run_pipeline(bug ? 1 : 0); },
     "cp.async pipeline: the next tile's copy issued after the barrier that frees its stage"},
    {"cp_async_raw", [](bool bug) { return run_pipeline(bug ? 2 : 0); },
     "cp.async pipeline: the tile read after the wait and a barrier"},
    {"lost_update", run_count, "512 threads count with atomicAdd"},
    {"cross_warp_war", run_swap, "threads overwrite what the other warp read only after a __syncthreads"},
    {"cross_stream_raw", [](bool bug) { return run_streams(bug, false); },
     "a kernel reads another stream's kernel's output after cudaStreamWaitEvent"},
    {"cross_stream_copy", [](bool bug) { return run_streams(bug, true); },
     "a copy reads another stream's kernel's output after cudaStreamWaitEvent"},
    {"wgmma_a_regs", run_wgmma_regs, "wgmma's A registers rewritten only after the wait that completes it"},
    {"cp_async_past_smem", run_smem_copy, "cp.async copies into the block's shared memory, every one inside it"},
    {"ldmatrix_past_smem", run_ldmatrix_rows, "ldmatrix.x4 reads rows inside the block's shared memory, as the ISA lays them out"},
};

int main(int argc, char** argv) {
    if (argc == 3 && strcmp(argv[1], "--fail") == 0) {
        for (const Case& c : CASES)
            if (strcmp(argv[2], c.name) == 0) {
                const bool right = c.run(true);
                printf("the %s case ran to the end: %s\n", c.name, right ? "right results" : "wrong results");
                return right ? 0 : 1;
            }
        fprintf(stderr, "unknown case %s\n", argv[2]);
        return 2;
    }
    for (const Case& c : CASES) check(c.run(false), c.fixed);
    printf("%d failed\n", failures);
    return failures;
}
