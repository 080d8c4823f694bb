// encoder.cuh: token + position embedding on the GPU, forward and a deterministic backward.
// defines: encoder_forward, EncoderBuckets, encoder_buckets_init, encoder_buckets_build,
//          encoder_buckets_free, encoder_backward
// CPU reference: llmc/cpu/encoder.h
//
// The backward has to add each position's gradient row into the wte row of its token, and
// the same token can occur anywhere in the batch. Float atomics would make the sum depend
// on timing; instead the positions are bucketed by token on the host (the token ids are on
// the host anyway: the data loader reads them there), in (b,t) order within a bucket, and
// one thread per (bucket, 16-byte channel group) sums its bucket in that fixed order.
#pragma once
#include <algorithm>
#include <climits>
#include <vector>
#include "common.cuh"

// ---------------------------------------------------------------------------------------
// kernels

// out (N,C) = wte[inp[n]] + wpe[n % T] (wpe nullptr: no position term, Llama's lookup); one
// thread per 16-byte group of channels. -tp: wte holds the vocabulary's rows [v0, v0 + rows)
// only, and a token outside them looks up zeros (the group's all-reduce adds the rows)
__global__ void encoder_forward_kernel(floatX* out, const int* inp, const floatX* wte,
                                       const floatX* wpe, int N, int T, int C, int v0, int rows) {
    const int groups = C / x128::size;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)N * groups) return;
    int n = (int)(idx / groups);
    int c = (int)(idx % groups) * x128::size;
    int t = n % T;
    const int row = inp[n] - v0;
    x128 tok = row >= 0 && row < rows ? load128(wte + (size_t)row * C + c) : x128::zeros();
    if (wpe == nullptr) {
        store128(out + (size_t)n * C + c, tok);
        return;
    }
    x128 pos = load128(wpe + (size_t)t * C + c);
    x128 o;
    for (int k = 0; k < x128::size; k++) o[k] = from_float<floatX>(to_float(tok[k]) + to_float(pos[k]));
    store128(out + (size_t)n * C + c, o);
}

// dwpe[t] += sum_b dout[b,t], b in order; one thread per (t, channel group)
__global__ void encoder_backward_wpe_kernel(floatX* dwpe, const floatX* dout, int B, int T, int C) {
    const int groups = C / x128::size;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)T * groups) return;
    int t = (int)(idx / groups);
    int c = (int)(idx % groups) * x128::size;
    float acc[x128::size] = {};
    for (int b = 0; b < B; b++) {
        x128 d = load128(dout + ((size_t)b * T + t) * C + c);  // read again by the wte kernel: keep it cached
        for (int k = 0; k < x128::size; k++) acc[k] += to_float(d[k]);
    }
    floatX* dst = dwpe + (size_t)t * C + c;
    x128 old = load128(dst);
    for (int k = 0; k < x128::size; k++) old[k] = from_float<floatX>(to_float(old[k]) + acc[k]);
    store128(dst, old);
}

// dwte[token of bucket] += sum of dout rows of the bucket's positions, in bucket order.
// grid.x = bucket, grid.y * blockDim.x covers the channel groups.
// buckets: tokens (nb) | starts (nb+1) | positions (N)
__global__ void encoder_backward_wte_kernel(floatX* dwte, const floatX* dout, const int* buckets,
                                            int num_buckets, int C) {
    const int groups = C / x128::size;
    int g = blockIdx.y * blockDim.x + threadIdx.x;
    if (g >= groups) return;
    int bucket = blockIdx.x;
    const int* tokens = buckets;
    const int* starts = buckets + num_buckets;
    const int* positions = starts + num_buckets + 1;
    int c = g * x128::size;
    float acc[x128::size] = {};
    for (int p = starts[bucket]; p < starts[bucket + 1]; p++) {
        x128 d = load128(dout + (size_t)positions[p] * C + c);
        for (int k = 0; k < x128::size; k++) acc[k] += to_float(d[k]);
    }
    floatX* dst = dwte + (size_t)tokens[bucket] * C + c;
    x128 old = load128(dst);
    for (int k = 0; k < x128::size; k++) old[k] = from_float<floatX>(to_float(old[k]) + acc[k]);
    store128(dst, old);
}

// ---------------------------------------------------------------------------------------
// launchers

// out (B,T,C) = wte[inp[b,t]] + wpe[t]. inp (B,T) token ids on the device, all < rows of
// wte (the trainer checks them on the host before upload). wte (Vp,C), wpe (maxT,C), T <= maxT;
// wpe nullptr: out = wte[inp] alone (a family without learned positions). -tp (rows > 0): wte
// is the vocabulary's rows [v0, v0 + rows), other tokens give zeros (a vocab-parallel lookup).
inline void encoder_forward(const CudaContext& ctx, floatX* out, const int* inp, const floatX* wte,
                            const floatX* wpe, int B, int T, int C, int v0 = 0, int rows = -1) {
    CHECK(B > 0 && T > 0 && C > 0, "B=%d T=%d C=%d", B, T, C);
    CHECK(C % x128::size == 0, "C=%d must be a multiple of %d", C, x128::size);
    CHECK(is_aligned16(out) && is_aligned16(wte) && is_aligned16(wpe), "out=%p wte=%p wpe=%p not 16-byte aligned",
          (void*)out, (const void*)wte, (const void*)wpe);
    const int block = 256;
    size_t threads = (size_t)B * T * (C / x128::size);
    size_t grid = ceil_div(threads, block);
    CHECK(grid < (1u << 31), "grid=%zu", grid);
    encoder_forward_kernel<<<(unsigned)grid, block, 0, ctx.stream>>>(out, inp, wte, wpe, B * T, T, C, v0,
                                                                      rows < 0 ? INT_MAX : rows);
    CHECK_LAUNCH();
}

// The bucketed positions of one batch, built on the host, copied to the device.
struct EncoderBuckets {
    int* host = nullptr;        // pinned, so the copy is asynchronous
    int* device = nullptr;
    size_t capacity = 0;        // ints: 3 * max_N + 1
    int num_buckets = 0;
    int max_bucket = 0;         // size of the largest bucket (the slowest thread's work)
    bool built = false;         // for the batch now queued (-tp: possibly with no token of this rank's)
    cudaEvent_t copied = nullptr;  // the host buffer may be rewritten once this has passed
};

inline void encoder_buckets_init(EncoderBuckets* eb, int max_N) {
    CHECK(max_N > 0, "max_N=%d", max_N);
    eb->capacity = 3 * (size_t)max_N + 1;
    CHECK_CUDA(cudaMallocHost(&eb->host, eb->capacity * sizeof(int)));
    CHECK_CUDA(cudaMalloc(&eb->device, eb->capacity * sizeof(int)));
    CHECK_CUDA(cudaEventCreateWithFlags(&eb->copied, cudaEventDisableTiming));
    CHECK_CUDA(cudaEventRecord(eb->copied, 0));
}

inline void encoder_buckets_free(EncoderBuckets* eb) {
    CHECK_CUDA(cudaEventSynchronize(eb->copied));
    CHECK_CUDA(cudaFreeHost(eb->host));
    CHECK_CUDA(cudaFree(eb->device));
    CHECK_CUDA(cudaEventDestroy(eb->copied));
    *eb = EncoderBuckets();
}

// Buckets the B*T positions of inp_host (host token ids) by token, positions ascending
// within a bucket, and queues the copy on ctx.stream. Call any time after the batch is
// known and before encoder_backward (e.g. right after uploading the inputs). -tp (rows > 0):
// only the tokens of the rows [v0, v0 + rows) this rank holds, numbered from v0.
inline void encoder_buckets_build(const CudaContext& ctx, EncoderBuckets* eb, const int* inp_host,
                                  int B, int T, int v0 = 0, int rows = -1) {
    size_t N = (size_t)B * T;
    CHECK(B > 0 && T > 0 && 3 * N + 1 <= eb->capacity, "B=%d T=%d capacity=%zu", B, T, eb->capacity);
    // sort (token, position) pairs: one 64-bit key each, so the order is total and fixed
    std::vector<uint64_t> keys;
    keys.reserve(N);
    for (size_t i = 0; i < N; i++) {
        CHECK(inp_host[i] >= 0, "token %d at %zu", inp_host[i], i);
        const int row = inp_host[i] - v0;
        if (rows < 0 || (row >= 0 && row < rows)) keys.push_back(((uint64_t)(uint32_t)row << 32) | (uint64_t)i);
    }
    std::sort(keys.begin(), keys.end());
    N = keys.size();
    int nb = 0;
    for (size_t i = 0; i < N; i++) nb += (i == 0 || (keys[i] >> 32) != (keys[i - 1] >> 32));
    // the previous batch's copy must be done before its host buffer is overwritten
    CHECK_CUDA(cudaEventSynchronize(eb->copied));
    int* tokens = eb->host;
    int* starts = tokens + nb;
    int* positions = starts + nb + 1;
    int b = -1, max_bucket = 0;
    for (size_t i = 0; i < N; i++) {
        if (i == 0 || (keys[i] >> 32) != (keys[i - 1] >> 32)) {
            b++;
            tokens[b] = (int)(keys[i] >> 32);
            starts[b] = (int)i;
            if (b > 0) max_bucket = std::max(max_bucket, starts[b] - starts[b - 1]);
        }
        positions[i] = (int)(uint32_t)keys[i];
    }
    starts[nb] = (int)N;
    if (nb > 0) max_bucket = std::max(max_bucket, starts[nb] - starts[nb - 1]);
    eb->num_buckets = nb;
    eb->max_bucket = max_bucket;
    eb->built = true;
    size_t used = 2 * (size_t)nb + 1 + N;
    CHECK_CUDA(cudaMemcpyAsync(eb->device, eb->host, used * sizeof(int), cudaMemcpyHostToDevice, ctx.stream));
    CHECK_CUDA(cudaEventRecord(eb->copied, ctx.stream));
}

// Accumulates (+=) dwte (Vp,C) and dwpe (maxT,C) from dout (B,T,C), deterministically.
// eb must have been built for this batch (same B, T). dwpe nullptr: no position embedding.
inline void encoder_backward(const CudaContext& ctx, floatX* dwte, floatX* dwpe, const floatX* dout,
                             const EncoderBuckets& eb, int B, int T, int C) {
    CHECK(B > 0 && T > 0 && C > 0, "B=%d T=%d C=%d", B, T, C);
    CHECK(C % x128::size == 0, "C=%d must be a multiple of %d", C, x128::size);
    CHECK(eb.built && eb.num_buckets <= B * T, "num_buckets=%d B*T=%d (buckets not built?)", eb.num_buckets, B * T);
    CHECK(is_aligned16(dwte) && is_aligned16(dwpe) && is_aligned16(dout), "dwte=%p dwpe=%p dout=%p not 16-byte aligned",
          (void*)dwte, (void*)dwpe, (const void*)dout);
    const int groups = C / x128::size;
    const int block = 256;
    if (dwpe != nullptr) {
        size_t grid_wpe = ceil_div((size_t)T * groups, block);
        encoder_backward_wpe_kernel<<<(unsigned)grid_wpe, block, 0, ctx.stream>>>(dwpe, dout, B, T, C);
        CHECK_LAUNCH();
    }
    if (eb.num_buckets == 0) return;  // -tp: none of the batch's tokens is among this rank's rows
    // small C: fewer threads per block so a bucket does not leave most of a block idle
    int wte_block = std::min(256, (groups + 31) / 32 * 32);
    dim3 grid_wte(eb.num_buckets, (unsigned)ceil_div(groups, wte_block));
    CHECK(grid_wte.y <= 65535, "C=%d too wide", C);
    encoder_backward_wte_kernel<<<grid_wte, wte_block, 0, ctx.stream>>>(dwte, dout, eb.device,
                                                                         eb.num_buckets, C);
    CHECK_LAUNCH();
}
