// zero.h: how the flat parameter vector is split over ranks, one layout for the CPU and GPU
// trainers and for the checkpoint files (ZeRO, Rajbhandari et al. 2020).
// defines: ZeroLayout, zero_layout, ZeroSegment, zero_segments, zero_state_slice,
//          ZeroPiece, zero_bucket_pieces, zero_flat_runs, zero_run_counts, zero_run_len,
//          zero3_layer_gathers_per_step, zero_comm_bytes_per_step, zero_stage_name
//
// The parameters, their gradients, and the AdamW state all follow the model family's table
// (llmc/model.h): one flat vector of n values. With W ranks it is cut into W equal slices of
// `shard` values (rounded up to a multiple of ZERO_ALIGN and padded at the end, so any n
// works and every slice starts on 256 bytes); rank r owns [r*shard, (r+1)*shard). The
// parameter and gradient buffers are allocated `padded` = W*shard long; the padding is
// zero and never updated.
//   stage 0: gradients all-reduced; every rank runs AdamW on all n values (m, v full size)
//   stage 1: gradients reduce-scattered (rank r receives the sum of its slice); AdamW state
//            (m, v, fp32 master weights) only for the owned slice; the updated parameters
//            are all-gathered
//   stage 2: as stage 1, and the gradients are reduce-scattered after every micro-step
//            into an owned-slice accumulator, so no rank keeps a full gradient between
//            micro-steps
//   stage 3: as stage 2, and the parameters too: a rank keeps its slice (AdamW updates it in
//            place) and the front and tail rows; each layer is all-gathered as the forward and
//            the backward reach it, into one of two slots (llmc/grad_sync.h)
// Whatever the stage, a rank's state file holds the AdamW state of its owned slice only, so
// a checkpoint is W files that together cover the vector once, and a resume with another
// W reads whichever files overlap its new slice (checkpoint.h: state_read_range).
#pragma once
#include <algorithm>
#include <vector>

#include "model.h"       // defines: ParamTensor, ParamLayout
#include "checkpoint.h"  // defines: TrainState

constexpr size_t ZERO_ALIGN = 64;  // values: 256 bytes of fp32, 128 of bf16

struct ZeroLayout {
    int stage = 0, rank = 0, world = 1;
    size_t n = 0;          // parameters
    size_t shard = 0;      // values per rank, a multiple of ZERO_ALIGN; world*shard >= n
    size_t padded = 0;     // world*shard: the length of the communicated buffers
    size_t own_begin = 0;  // this rank's slice, clipped to n (may be empty: own_begin == own_end)
    size_t own_end = 0;
    size_t opt_begin = 0;  // the values this rank's AdamW updates: [0, n) at stage 0, else the slice
    size_t opt_end = 0;
    size_t opt_count() const { return opt_end - opt_begin; }
};

inline ZeroLayout zero_layout(size_t n, int stage, int rank, int world) {
    ZeroLayout z;
    z.stage = stage;
    z.rank = rank;
    z.world = world;
    z.n = n;
    size_t per_rank = (n + world - 1) / world;
    z.shard = (per_rank + ZERO_ALIGN - 1) / ZERO_ALIGN * ZERO_ALIGN;
    z.padded = z.shard * world;
    z.own_begin = std::min(n, (size_t)rank * z.shard);
    z.own_end = std::min(n, z.own_begin + z.shard);
    z.opt_begin = stage == 0 ? 0 : z.own_begin;
    z.opt_end = stage == 0 ? n : z.own_end;
    return z;
}

// A piece of [begin, end) that lies in one parameter tensor (weight decay is per tensor).
struct ZeroSegment {
    size_t begin, end;  // absolute indices into the flat vector
    int tensor;         // index into the table
};

// The pieces of tensors[0..count) covering [begin, end), in order.
inline std::vector<ZeroSegment> zero_segments(const ParamTensor* tensors, int count, size_t begin, size_t end) {
    std::vector<ZeroSegment> segs;
    for (int i = 0; i < count; i++) {
        size_t b = std::max(begin, tensors[i].offset), e = std::min(end, tensors[i].offset + tensors[i].numel);
        if (b < e) segs.push_back({b, e, i});
    }
    return segs;
}

// Gradient buckets (llmc/grad_sync.h, llmc/cuda/grad_sync_gpu.cuh): what the backward finishes
// together. Bucket l < L is layer l's slice of each per-layer tensor, bucket L the rest (the
// front and the tail: GPT-2's wte, wpe, lnfw, lnfb; Llama's wte, rmsfw, lmheadw). Its pieces are ranges [begin, end) of the flat vector, in order; packed
// is where a piece sits in a buffer that holds them back to back (a run).
struct ZeroPiece {
    size_t begin, end, packed;
};

inline std::vector<ZeroPiece> zero_bucket_pieces(const ParamLayout& table, int b) {
    std::vector<ZeroPiece> pieces;
    size_t packed = 0;
    const int L = table.L;
    for (int i = 0; i < table.count; i++) {
        const ParamTensor& t = table.tensors[i];
        if (table.per_layer(i) != (b < L)) continue;
        size_t len = table.per_layer(i) ? t.numel / L : t.numel;
        size_t begin = t.offset + (b < L ? (size_t)b * len : 0);
        pieces.push_back({begin, begin + len, packed});
        packed += len;
    }
    return pieces;
}

// Pieces left where the flat vector holds them, as runs of adjacent ones (the rest bucket:
// the front rows, and the tail rows), packed renumbered from each run's start.
inline std::vector<std::vector<ZeroPiece>> zero_flat_runs(const std::vector<ZeroPiece>& pieces) {
    std::vector<std::vector<ZeroPiece>> runs;
    for (const ZeroPiece& p : pieces) {
        if (runs.empty() || runs.back().back().end != p.begin) runs.emplace_back();
        size_t start = runs.back().empty() ? p.begin : runs.back().front().begin;
        runs.back().push_back({p.begin, p.end, p.begin - start});
    }
    return runs;
}

// The values of a run in each rank's slice: counts[r], consecutive in rank order, since the
// pieces are in flat order and the slices cut the flat vector in rank order. A reduce-scatter
// with these part sizes hands each owner the sum of its part.
inline std::vector<size_t> zero_run_counts(const ZeroLayout& z, const std::vector<ZeroPiece>& run) {
    std::vector<size_t> counts(z.world, 0);
    for (const ZeroPiece& p : run)
        for (int r = 0; r < z.world; r++) {
            size_t b = std::max(p.begin, (size_t)r * z.shard), e = std::min(p.end, (size_t)(r + 1) * z.shard);
            if (b < e) counts[r] += e - b;
        }
    return counts;
}

// The values of a run: where its last piece ends.
inline size_t zero_run_len(const std::vector<ZeroPiece>& run) {
    return run.empty() ? 0 : run.back().packed + (run.back().end - run.back().begin);
}

// What a rank's state file holds: the AdamW state of its owned slice.
inline void zero_state_slice(TrainState* s, const ZeroLayout& z) {
    s->range_begin = z.own_begin;
    s->range_count = z.own_end - z.own_begin;
    s->zero_stage = z.stage;
}

// Layer gathers per optimizer step at ZeRO 3 with L layers: the first forward after the update
// gathers every layer; each backward, and each later forward, finds the two layers the pass
// before ended with still in the slots (llmc/grad_sync.h).
inline long long zero3_layer_gathers_per_step(int L, int grad_accum) {
    const long long rest = L > 2 ? L - 2 : 0;
    return L + rest + (long long)(grad_accum - 1) * 2 * rest;
}

// Bytes one rank sends per optimizer step (ring collectives: each of reduce-scatter and
// all-gather sends (W-1)/W of the buffer). grad_bytes/param_bytes: bytes per value as
// communicated (4 for fp32, 2 for bf16). ZeRO 3 also needs the model's layers (L) and one
// layer's values (layer_n): every layer gather sends (W-1)/W of a layer on average.
inline double zero_comm_bytes_per_step(const ZeroLayout& z, int grad_accum, size_t grad_bytes, size_t param_bytes,
                                       int L = 0, size_t layer_n = 0) {
    if (z.world == 1) return 0.0;
    const double part = (double)(z.world - 1) / z.world, ring = part * (double)z.padded;
    switch (z.stage) {
        case 0: return 2.0 * ring * grad_bytes;  // all-reduce = reduce-scatter + all-gather
        case 1: return ring * grad_bytes + ring * param_bytes;
        case 2: return grad_accum * ring * grad_bytes + ring * param_bytes;
        default: {
            const double rest = (double)z.padded - (double)L * layer_n;  // the front and tail rows, after the update
            return grad_accum * ring * grad_bytes +
                   (part * rest + part * (double)layer_n * zero3_layer_gathers_per_step(L, grad_accum)) * param_bytes;
        }
    }
}

inline const char* zero_stage_name(int stage) {
    switch (stage) {
        case 0: return "ZeRO 0 (all-reduce gradients, full AdamW state per rank)";
        case 1: return "ZeRO 1 (reduce-scatter gradients, sharded AdamW state, all-gather parameters)";
        case 2: return "ZeRO 2 (reduce-scatter every micro-step, sharded gradients and AdamW state)";
        default: return "ZeRO 3 (ZeRO 2, and sharded parameters: each layer all-gathered as it runs, the next prefetched)";
    }
}
