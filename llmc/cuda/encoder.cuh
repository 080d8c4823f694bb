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
// A frequent token ("\n", "the", EOT: 5-50% of a batch) makes one bucket thousands of rows
// long, and its threads' serial loop would be the whole kernel's time while the GPU idles.
// So a bucket over ENCODER_HEAVY_ROWS rows is cut into chunks of ENCODER_CHUNK_ROWS, each
// summed like a bucket into an fp32 partial sum, and a second kernel adds a heavy token's
// partials in chunk order into dwte: a fixed order again, so the bits never depend on timing.
#pragma once
#include <algorithm>
#include <climits>
#include <vector>
#include "common.cuh"
#include "../gpu_scratch.h"  // defines: ENCODER_CHUNK_ROWS, ENCODER_HEAVY_ROWS, encoder_buckets_ints,
                             //          encoder_buckets_max_chunks, encoder_buckets_device_bytes

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

// Sums the dout rows of an item's positions in bucket order. An item is a light bucket, whose
// sum goes into dwte[its token] (+=), or one chunk of a heavy bucket (its token entry is
// -1 - slot), whose sum goes to partials[slot] (fp32, C) for encoder_backward_heavy_kernel.
// grid.x = item, grid.y * blockDim.x covers the channel groups.
// items: tokens (ni) | starts (ni+1) | positions (N)
__global__ void encoder_backward_wte_kernel(floatX* dwte, float* partials, const floatX* dout, const int* items,
                                            int num_items, int C) {
    const int groups = C / x128::size;
    int g = blockIdx.y * blockDim.x + threadIdx.x;
    if (g >= groups) return;
    int item = blockIdx.x;
    const int* tokens = items;
    const int* starts = items + num_items;
    const int* positions = starts + num_items + 1;
    int c = g * x128::size;
    float acc[x128::size] = {};
    for (int p = starts[item]; p < starts[item + 1]; p++) {
        x128 d = load128(dout + (size_t)positions[p] * C + c);
        for (int k = 0; k < x128::size; k++) acc[k] += to_float(d[k]);
    }
    if (tokens[item] < 0) {
        float* part = partials + (size_t)(-1 - tokens[item]) * C + c;
        // plain stores: packing acc into 16-byte vectors took bf16 from 32 registers to 34 (75%
        // occupancy), for a store that is 1/64 of the chunk's traffic
        for (int k = 0; k < x128::size; k++) part[k] = acc[k];
        return;
    }
    floatX* dst = dwte + (size_t)tokens[item] * C + c;
    x128 old = load128(dst);
    for (int k = 0; k < x128::size; k++) old[k] = from_float<floatX>(to_float(old[k]) + acc[k]);
    store128(dst, old);
}

// dwte[token of heavy bucket h] += the sum of its chunks' partials, added in chunk order.
// grid.x = heavy bucket, grid.y * blockDim.x covers the channel groups.
// heavy: tokens (nh) | first slots (nh+1)
__global__ void encoder_backward_heavy_kernel(floatX* dwte, const float* partials, const int* heavy,
                                              int num_heavy, int C) {
    const int groups = C / x128::size;
    int g = blockIdx.y * blockDim.x + threadIdx.x;
    if (g >= groups) return;
    int h = blockIdx.x;
    const int* first = heavy + num_heavy;
    int c = g * x128::size;
    float acc[x128::size] = {};
    // a heavy bucket's partials are a long chain (1,024 for a batch of 65,536 positions of one
    // token): the loads of U chunks are issued before their adds, so 8 loads are in flight
    constexpr int V = x128::size / f128::size;  // 16-byte loads per chunk: 1 (fp32) or 2 (bf16)
    constexpr int U = 8 / V;
    int s = first[h];
    const int end = first[h + 1];
    for (; s + U <= end; s += U) {
        f128 v[U][V];
        for (int u = 0; u < U; u++)
            for (int j = 0; j < V; j++) {
                const int cj = c + j * f128::size;
                v[u][j] = load128(partials + (size_t)(s + u) * C + cj);
            }
        for (int u = 0; u < U; u++)
            for (int j = 0; j < V; j++)
                for (int k = 0; k < f128::size; k++) acc[j * f128::size + k] += v[u][j][k];
    }
    for (; s < end; s++)
        for (int j = 0; j < V; j++) {
            const int cj = c + j * f128::size;
            f128 v = load128(partials + (size_t)s * C + cj);
            for (int k = 0; k < f128::size; k++) acc[j * f128::size + k] += v[k];
        }
    floatX* dst = dwte + (size_t)heavy[h] * C + c;
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

// The bucketed positions of one batch, built on the host, copied to the device, and the
// partial sums of the heavy buckets' chunks (llmc/gpu_scratch.h: why chunks of
// ENCODER_CHUNK_ROWS, and the bytes all this takes).
struct EncoderBuckets {
    int* host = nullptr;        // pinned, so the copy is asynchronous
    int* device = nullptr;
    size_t capacity = 0;        // ints: items, positions and heavy buckets of max_N positions
    float* partials = nullptr;  // (max_chunks, max_C) fp32 on the device
    size_t max_chunks = 0;
    int max_C = 0;
    int heavy_rows = ENCODER_HEAVY_ROWS;  // longer buckets are split (dev/cuda/encoder.cu raises
                                          // it to time the one-pass kernel); >= 2 chunks
    int num_positions = 0;      // of this batch (-tp: of this rank's tokens)
    int num_buckets = 0;        // distinct tokens
    int num_items = 0;          // light buckets and chunks: the blocks of the one-pass kernel
    int num_heavy = 0;          // buckets split into chunks
    int num_chunks = 0;
    int max_bucket = 0;         // size of the largest bucket
    bool built = false;         // for the batch now queued (-tp: possibly with no token of this rank's)
    cudaEvent_t copied = nullptr;  // the host buffer may be rewritten once this has passed
};

inline void encoder_buckets_init(EncoderBuckets* eb, int max_N, int C) {
    CHECK(max_N > 0 && C > 0, "max_N=%d C=%d", max_N, C);
    eb->capacity = encoder_buckets_ints(max_N);
    eb->max_chunks = encoder_buckets_max_chunks(max_N);
    eb->max_C = C;
    CHECK_CUDA(cudaMallocHost(&eb->host, eb->capacity * sizeof(int)));
    CHECK_CUDA(cudaMalloc(&eb->device, eb->capacity * sizeof(int)));
    if (eb->max_chunks > 0) CHECK_CUDA(cudaMalloc(&eb->partials, eb->max_chunks * C * sizeof(float)));
    CHECK_CUDA(cudaEventCreateWithFlags(&eb->copied, cudaEventDisableTiming));
    CHECK_CUDA(cudaEventRecord(eb->copied, 0));
}

inline void encoder_buckets_free(EncoderBuckets* eb) {
    CHECK_CUDA(cudaEventSynchronize(eb->copied));
    CHECK_CUDA(cudaFreeHost(eb->host));
    CHECK_CUDA(cudaFree(eb->device));
    if (eb->partials != nullptr) CHECK_CUDA(cudaFree(eb->partials));
    CHECK_CUDA(cudaEventDestroy(eb->copied));
    *eb = EncoderBuckets();
}

// Buckets the B*T positions of inp_host (host token ids) by token, positions ascending
// within a bucket, cuts the buckets over eb->heavy_rows into chunks, and queues the copy on
// ctx.stream. Call any time after the batch is known and before encoder_backward (e.g. right
// after uploading the inputs). -tp (rows > 0): only the tokens of the rows [v0, v0 + rows)
// this rank holds, numbered from v0.
inline void encoder_buckets_build(const CudaContext& ctx, EncoderBuckets* eb, const int* inp_host,
                                  int B, int T, int v0 = 0, int rows = -1) {
    size_t N = (size_t)B * T;
    CHECK(B > 0 && T > 0 && encoder_buckets_ints(N) <= eb->capacity, "B=%d T=%d capacity=%zu", B, T, eb->capacity);
    CHECK(eb->heavy_rows >= ENCODER_HEAVY_ROWS, "heavy_rows=%d < %d: more chunks than the partials hold",
          eb->heavy_rows, ENCODER_HEAVY_ROWS);
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
    std::vector<int> first;  // each bucket's first key, then N
    for (size_t i = 0; i < N; i++)
        if (i == 0 || (keys[i] >> 32) != (keys[i - 1] >> 32)) first.push_back((int)i);
    first.push_back((int)N);
    const int nb = (int)first.size() - 1;
    int ni = 0, nh = 0, chunks = 0, max_bucket = 0;
    for (int b = 0; b < nb; b++) {
        const int len = first[b + 1] - first[b];
        max_bucket = std::max(max_bucket, len);
        const int n = len > eb->heavy_rows ? (int)ceil_div(len, ENCODER_CHUNK_ROWS) : 1;
        ni += n;
        if (len > eb->heavy_rows) nh++, chunks += n;
    }
    CHECK((size_t)chunks <= eb->max_chunks, "%d chunks, room for %zu", chunks, eb->max_chunks);
    // the previous batch's copy must be done before its host buffer is overwritten
    CHECK_CUDA(cudaEventSynchronize(eb->copied));
    int* tokens = eb->host;
    int* starts = tokens + ni;
    int* positions = starts + ni + 1;
    int* heavy = positions + N;
    int* heavy_first = heavy + nh;
    int item = 0, h = 0, slot = 0;
    for (int b = 0; b < nb; b++) {
        const int token = (int)(keys[first[b]] >> 32);
        if (first[b + 1] - first[b] <= eb->heavy_rows) {
            tokens[item] = token;
            starts[item++] = first[b];
            continue;
        }
        heavy[h] = token;
        heavy_first[h++] = slot;
        for (int p = first[b]; p < first[b + 1]; p += ENCODER_CHUNK_ROWS) {
            tokens[item] = -1 - slot++;
            starts[item++] = p;
        }
    }
    starts[ni] = (int)N;
    heavy_first[nh] = slot;
    for (size_t i = 0; i < N; i++) positions[i] = (int)(uint32_t)keys[i];
    eb->num_positions = (int)N;
    eb->num_buckets = nb;
    eb->num_items = ni;
    eb->num_heavy = nh;
    eb->num_chunks = chunks;
    eb->max_bucket = max_bucket;
    eb->built = true;
    size_t used = 2 * (size_t)ni + 1 + N + 2 * (size_t)nh + 1;
    CHECK_CUDA(cudaMemcpyAsync(eb->device, eb->host, used * sizeof(int), cudaMemcpyHostToDevice, ctx.stream));
    CHECK_CUDA(cudaEventRecord(eb->copied, ctx.stream));
}

// Accumulates (+=) dwte (Vp,C) and dwpe (maxT,C) from dout (B,T,C), deterministically.
// eb must have been built for this batch (same B, T). dwpe nullptr: no position embedding.
inline void encoder_backward(const CudaContext& ctx, floatX* dwte, floatX* dwpe, const floatX* dout,
                             const EncoderBuckets& eb, int B, int T, int C) {
    CHECK(B > 0 && T > 0 && C > 0, "B=%d T=%d C=%d", B, T, C);
    CHECK(C % x128::size == 0, "C=%d must be a multiple of %d", C, x128::size);
    CHECK(eb.built && eb.num_items <= B * T, "num_items=%d B*T=%d (buckets not built?)", eb.num_items, B * T);
    CHECK(eb.num_chunks == 0 || C <= eb.max_C, "C=%d but the partials hold C=%d", C, eb.max_C);
    CHECK(is_aligned16(dwte) && is_aligned16(dwpe) && is_aligned16(dout), "dwte=%p dwpe=%p dout=%p not 16-byte aligned",
          (void*)dwte, (void*)dwpe, (const void*)dout);
    const int groups = C / x128::size;
    const int block = 256;
    if (dwpe != nullptr) {
        size_t grid_wpe = ceil_div((size_t)T * groups, block);
        encoder_backward_wpe_kernel<<<(unsigned)grid_wpe, block, 0, ctx.stream>>>(dwpe, dout, B, T, C);
        CHECK_LAUNCH();
    }
    if (eb.num_items == 0) return;  // -tp: none of the batch's tokens is among this rank's rows
    // small C: fewer threads per block so a bucket does not leave most of a block idle
    int wte_block = std::min(256, (groups + 31) / 32 * 32);
    dim3 grid_wte(eb.num_items, (unsigned)ceil_div(groups, wte_block));
    CHECK(grid_wte.y <= 65535, "C=%d too wide", C);
    encoder_backward_wte_kernel<<<grid_wte, wte_block, 0, ctx.stream>>>(dwte, eb.partials, dout, eb.device,
                                                                         eb.num_items, C);
    CHECK_LAUNCH();
    if (eb.num_heavy == 0) return;
    const int* heavy = eb.device + 2 * (size_t)eb.num_items + 1 + eb.num_positions;
    dim3 grid_heavy(eb.num_heavy, grid_wte.y);
    encoder_backward_heavy_kernel<<<grid_heavy, wte_block, 0, ctx.stream>>>(dwte, eb.partials, heavy,
                                                                             eb.num_heavy, C);
    CHECK_LAUNCH();
}
