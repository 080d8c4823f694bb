// tensor_parallel.h: tensor parallelism (-tp N), Megatron-LM's way, for every model family on
// the CPU trainer. The N ranks of a tensor-parallel group each hold a part of every layer and
// compute that part of it; the residual stream, the norms and their weights are whole on each.
//
//   column-parallel  (QKV, FC; Llama's gate/up): the weight's output rows are split, so each
//                    rank computes some heads (some hidden units) from the whole input; the
//                    backward's input gradient is a partial sum: all-reduced
//   row-parallel     (attention projection, FC projection): the weight's input columns are
//                    split to match, each rank's product is a partial sum of the output:
//                    all-reduced, then the bias (whole on every rank) is added once
//   vocab-parallel   (the token embedding; the classifier and its cross-entropy): the rows of
//                    the vocabulary are split. A rank looks up the tokens it holds (0 for the
//                    others) and the group adds; the classifier makes each rank's columns of the
//                    logits only, and the softmax's max, sum and target logit are all-reduced,
//                    so no rank ever builds a full row of logits
//
//   who holds what, -tp 2, one GPT-2 layer (q k v: the query, key and value rows of QKV)
//            ln1  qkvw             attprojw     ln2  fcw       fcprojw     wte
//   rank 0   all  q0 k0 v0 (rows)  cols 0..C/2  all  rows 0..2C cols 0..2C  rows 0..Vp/2
//   rank 1   all  q1 k1 v1         cols C/2..C  all  rows 2C..4C cols 2C..4C rows Vp/2..Vp
//
// The family says how each tensor of its table splits (gpt2_tp_splits, llama_tp_splits); this
// file turns that into the rank's own table (the same names, smaller shapes: the model then
// allocates and trains only its part) and the runs that map its flat vector onto the model
// file's, so model files and checkpoints stay those of one process (layout-free).
// defines: TpMode, TpSplit, TpRun, TpShard, tp_shard_make, tp_local_to_global, tp_global_to_local,
//          tp_embedding_lookup, tp_crossentropy_forward, tp_crossentropy_backward, sp_row,
//          sp_gather, sp_reduce_scatter, sp_grad_sum, TpStream
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "utils.h"            // defines: fail, CHECK
#include "model.h"            // defines: ParamTensor, ParamRow, param_table_build, ParamLayout, TensorParallel, MAX_PARAM_TENSORS
#include "cpu/vmath.h"        // defines: exp_f32

enum TpMode { TP_WHOLE, TP_ROWS, TP_COLS };

// How one tensor of the table splits. A tensor is seen as (outer, rows, cols): a per-layer
// (L, R, K) or (L, R) row has outer L, rows R, cols K (or 1); a whole (R, K) or (R) one has
// outer 1. TP_ROWS splits each of `blocks` consecutive groups of rows (QKV's q, k and v;
// Llama's gate and up) into N equal parts, rank r taking part r of each; TP_COLS splits the
// columns of every row into N parts. A block may split into fewer parts P than ranks (N a
// multiple of P: Llama's KV heads when there are fewer than ranks): rank r then holds part
// r / (N / P), the same as the N / P - 1 ranks beside it.
struct TpSplit {
    TpMode mode = TP_WHOLE;
    int blocks = 1;
    size_t block_rows[3] = {0, 0, 0};  // TP_ROWS: the rows of each block (they sum to R)
    int parts[3] = {0, 0, 0};          // TP_ROWS: the block's distinct parts (0: one per rank)
};

// Values [local, local + len) of the rank's flat vector are [global, global + len) of the
// model's; first: no lower rank of the group holds them too (what the grad norm counts).
struct TpRun {
    size_t global, local, len;
    bool first;
};

// A rank's part of the model: the full table (the model file's), the rank's own table, and
// the runs from one to the other, in the rank's order.
struct TpShard {
    int size = 1, rank = 0;
    ParamTensor global[MAX_PARAM_TENSORS];
    ParamTensor local[MAX_PARAM_TENSORS];
    TpSplit splits[MAX_PARAM_TENSORS];
    int count = 0;
    size_t global_n = 0, local_n = 0;
    std::vector<TpRun> runs;
};

// (outer, rows, cols) of row t of a table with layout lt (per_layer: the row is stacked over L)
inline void tp_dims(const ParamTensor& t, bool per_layer, size_t* outer, size_t* rows, size_t* cols) {
    if (per_layer) {
        *outer = t.shape[0]; *rows = t.shape[1]; *cols = t.ndim > 2 ? t.shape[2] : 1;
    } else {
        *outer = 1; *rows = t.shape[0]; *cols = t.ndim > 1 ? t.shape[1] : 1;
    }
}

// The rank's part of the table `global` (count rows, layout lt) split as `splits` over `size`
// ranks. A pipeline stage (-pp) holds the layers in `layers` (ascending; nullptr: all; -vp:
// several runs of them) and of the other rows
// those hold[i] says: 0 none, 1 its own, 2 a copy whose gradient another stage's counts (GPT-2's
// tied wte on the last stage); nullptr: all. Returns "" or, when something does not divide,
// the tensor and the numbers (the caller names the flag).
inline std::string tp_shard_make(const ParamTensor* global, int count, const ParamLayout& lt, const TpSplit* splits,
                                 int size, int rank, TpShard* out, const std::vector<int>* layers = nullptr,
                                 const int* hold = nullptr) {
    std::vector<int> all_layers;
    if (layers == nullptr) {
        for (int l = 0; l < lt.L; l++) all_layers.push_back(l);
        layers = &all_layers;
    }
    out->size = size;
    out->rank = rank;
    out->count = count;
    out->runs.clear();
    ParamRow rows[MAX_PARAM_TENSORS];
    for (int i = 0; i < count; i++) {
        const ParamTensor& t = global[i];
        const TpSplit& s = splits[i];
        out->global[i] = t;
        out->splits[i] = s;
        size_t outer, R, K;
        tp_dims(t, lt.per_layer(i), &outer, &R, &K);
        size_t r_local = R, k_local = K;
        if (s.mode == TP_ROWS) {
            r_local = 0;
            for (int b = 0; b < s.blocks; b++) {
                const int parts = s.parts[b] > 0 ? s.parts[b] : size;
                if (s.block_rows[b] % parts != 0 || size % parts != 0)
                    return std::string(t.name) + "'s " + std::to_string(s.block_rows[b]) + " rows do not split into " +
                           std::to_string(parts) + " parts for " + std::to_string(size) + " ranks";
                r_local += s.block_rows[b] / parts;
            }
        } else if (s.mode == TP_COLS) {
            if (K % size != 0)
                return std::string(t.name) + "'s " + std::to_string(K) + " columns do not split into " +
                       std::to_string(size) + " parts";
            k_local = K / size;
        }
        ParamRow& row = rows[i];
        row.name = t.name;
        row.decays = t.decays;
        row.ndim = t.ndim;
        if (lt.per_layer(i)) {
            row.s0 = layers->size(); row.s1 = r_local; row.s2 = t.ndim > 2 ? k_local : 0;
        } else {
            row.s0 = hold == nullptr || hold[i] != 0 ? r_local : 0;  // a row this stage does not hold: empty
            row.s1 = t.ndim > 1 ? k_local : 0; row.s2 = 0;
        }
    }
    out->global_n = global[count - 1].offset + global[count - 1].numel;
    out->local_n = param_table_build(rows, count, out->local);
    // the runs, in local order: per tensor, per outer index, per block (rows) or per row (cols)
    for (int i = 0; i < count; i++) {
        const ParamTensor &g = global[i], &l = out->local[i];
        const TpSplit& s = splits[i];
        size_t outer, R, K;
        tp_dims(g, lt.per_layer(i), &outer, &R, &K);
        size_t at = l.offset;
        auto add = [&](size_t gbegin, size_t len, bool first) {
            TpRun* last = out->runs.empty() ? nullptr : &out->runs.back();
            if (last != nullptr && last->global + last->len == gbegin && last->local + last->len == at &&
                last->first == first)
                last->len += len;  // contiguous with the run before
            else
                out->runs.push_back({gbegin, at, len, first});
            at += len;
        };
        const bool layer = lt.per_layer(i);
        if (!layer && hold != nullptr && hold[i] == 0) continue;
        const bool own = layer || hold == nullptr || hold[i] == 1;  // not a copy counted elsewhere
        const size_t outers = layer ? layers->size() : outer;
        for (size_t oi = 0; oi < outers; oi++) {
            const size_t o = layer ? (size_t)(*layers)[oi] : oi;
            const size_t base = g.offset + o * R * K;
            if (s.mode == TP_WHOLE) {
                add(base, R * K, own && rank == 0);
            } else if (s.mode == TP_ROWS) {
                size_t row0 = 0;
                for (int b = 0; b < s.blocks; b++) {
                    const int parts = s.parts[b] > 0 ? s.parts[b] : size, share = size / parts;  // ranks per part
                    const size_t rows = s.block_rows[b] / parts;
                    add(base + (row0 + (size_t)(rank / share) * rows) * K, rows * K, own && rank % share == 0);
                    row0 += s.block_rows[b];
                }
            } else {
                const size_t part = K / size;
                for (size_t r = 0; r < R; r++) add(base + r * K + rank * part, part, own);
            }
        }
        CHECK(at == l.offset + l.numel, "%s: %zu local values mapped, %zu in the table", l.name, at - l.offset, l.numel);
    }
    return "";
}

// dst (the model file's flat vector) gets the rank's values src[0..count), which are its
// local values [begin, begin + count)
inline void tp_local_to_global(const TpShard& s, size_t begin, size_t count, const float* src, float* dst) {
    const size_t end = begin + count;
    for (const TpRun& r : s.runs) {
        const size_t lo = std::max(begin, r.local), hi = std::min(end, r.local + r.len);
        if (lo < hi) memcpy(dst + r.global + (lo - r.local), src + (lo - begin), (hi - lo) * sizeof(float));
    }
}

// The other way: dst[0..count) gets the rank's local values [begin, begin + count) from the
// model file's flat vector src
inline void tp_global_to_local(const TpShard& s, size_t begin, size_t count, const float* src, float* dst) {
    const size_t end = begin + count;
    for (const TpRun& r : s.runs) {
        const size_t lo = std::max(begin, r.local), hi = std::min(end, r.local + r.len);
        if (lo < hi) memcpy(dst + (lo - begin), src + r.global + (lo - r.local), (hi - lo) * sizeof(float));
    }
}

// out (N,C): each position's row of the token embedding where this rank holds the token (wte:
// its rows [v0, v0 + rows)), 0 elsewhere; all-reduced, every position has its row once
// (reduce false: not yet all-reduced, for sequence parallelism's reduce-scatter)
inline void tp_embedding_lookup(TensorParallel* tp, float* out, const int* inputs, const float* wte, int N, int C,
                                int v0, int rows, bool reduce = true) {
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const int tok = inputs[i] - v0;
        float* o = out + (size_t)i * C;
        if (tok >= 0 && tok < rows) memcpy(o, wte + (size_t)tok * C, C * sizeof(float));
        else memset(o, 0, C * sizeof(float));
    }
    if (reduce) tp->all_reduce(out, (size_t)N * C, false);
}

// Each row's softmax over the whole vocabulary from the ranks' columns: logits (N, rows) are
// columns [v0, v0 + rows) of the padded vocabulary, V of which are real. mx[i], sum[i] get the
// row's max over every rank's real columns and the sum of exp(x - max) (all-reduced: every
// rank has the same).
inline void tp_softmax_stats(TensorParallel* tp, const float* logits, int N, int V, int v0, int rows,
                             std::vector<float>* mx, std::vector<float>* sum) {
    const int real = std::max(0, std::min(rows, V - v0));  // this rank's real columns
    mx->assign(N, -INFINITY);
    sum->assign(N, 0.0f);
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const float* row = logits + (size_t)i * rows;
        float m = -INFINITY;
        for (int j = 0; j < real; j++) m = row[j] > m ? row[j] : m;
        (*mx)[i] = m;
    }
    tp->all_reduce(mx->data(), N, true);
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const float* row = logits + (size_t)i * rows;
        double s = 0.0;
        for (int j = 0; j < real; j++) s += exp_f32(row[j] - (*mx)[i]);
        (*sum)[i] = (float)s;
    }
    tp->all_reduce(sum->data(), N, false);
}

// The vocab-parallel crossentropy_forward (llmc/cpu/crossentropy.h): losses (N) =
// log(sum) - (x_target - max), the target's logit from the rank that holds it.
inline void tp_crossentropy_forward(TensorParallel* tp, float* losses, const float* logits, const int* targets, int N,
                                    int V, int v0, int rows) {
    std::vector<float> mx, sum, target(N, 0.0f);
    tp_softmax_stats(tp, logits, N, V, v0, rows, &mx, &sum);
    for (int i = 0; i < N; i++) {
        const int j = targets[i] - v0;
        if (j >= 0 && j < rows) target[i] = logits[(size_t)i * rows + j];
    }
    tp->all_reduce(target.data(), N, false);
    for (int i = 0; i < N; i++) losses[i] = (float)(std::log((double)sum[i]) - (double)(target[i] - mx[i]));
}

// The vocab-parallel crossentropy_backward: this rank's columns of dlogits = (softmax -
// onehot(target)) * dloss, in place; padded columns 0.
inline void tp_crossentropy_backward(TensorParallel* tp, float* logits, const int* targets, float dloss, int N, int V,
                                     int v0, int rows) {
    std::vector<float> mx, sum;
    tp_softmax_stats(tp, logits, N, V, v0, rows, &mx, &sum);
    const int real = std::max(0, std::min(rows, V - v0));
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        float* row = logits + (size_t)i * rows;
        const float scale = (float)(dloss / (double)sum[i]);
        for (int j = 0; j < real; j++) row[j] = exp_f32(row[j] - mx[i]) * scale;
        for (int j = real; j < rows; j++) row[j] = 0.0f;
        const int t = targets[i] - v0;
        if (t >= 0 && t < rows) row[t] -= dloss;
    }
}

// ---------------------------------------------------------------------------------------
// Sequence parallelism (-sp 1, with -tp; Korthikanti et al. 2022): between the tensor-parallel
// matmuls, the residual stream, the norms and their outputs are split along T, each rank
// holding T/N positions of every sequence, so no rank keeps them whole. A norm's output is
// all-gathered before the column-parallel matmul that reads it, and a row-parallel matmul's
// partial sums are reduce-scattered, each rank summing its positions, where -tp alone
// all-reduces. Rank r's row i (B x T/N rows) is position r T/N + i % (T/N) of sequence i / (T/N).
inline size_t sp_row(int rank, int i, int T, int parts) {
    const int Tl = T / parts;
    return (size_t)(i / Tl) * T + (size_t)rank * Tl + i % Tl;
}
// full (B T rows of C) := every rank's rows (local: B T / N rows of C) in place
inline void sp_gather(TensorParallel* tp, const float* local, float* full, int B, int T, int C) {
    const int rows = B * T / tp->size;
    float* all = tp->scratch(1, (size_t)B * T * C);
    tp->all_gather(local, (size_t)rows * C, all);
    for (int r = 0; r < tp->size; r++)
        for (int i = 0; i < rows; i++)
            memcpy(full + sp_row(r, i, T, tp->size) * C, all + ((size_t)r * rows + i) * C, C * sizeof(float));
}
// local (this rank's B T / N rows) := the group's sum of those rows of full (B T rows, partial sums)
inline void sp_reduce_scatter(TensorParallel* tp, const float* full, float* local, int B, int T, int C) {
    const int rows = B * T / tp->size;
    float* all = tp->scratch(1, (size_t)B * T * C);
    for (int r = 0; r < tp->size; r++)  // the rows each rank sums, rank by rank
        for (int i = 0; i < rows; i++)
            memcpy(all + ((size_t)r * rows + i) * C, full + sp_row(r, i, T, tp->size) * C, C * sizeof(float));
    tp->reduce_scatter(all, (size_t)rows * C, local);
}
// The gradient of a weight every rank holds whole, computed from this rank's positions: added
// over the group. g (n) holds earlier micro-steps' sums and, after `compute`, this one's part
// too; only this micro-step's parts are added, then the earlier sums back.
template <typename Fn>
inline void sp_grad_sum(TensorParallel* tp, float* const* g, const size_t* n, int count, Fn&& compute) {
    size_t total = 0;
    for (int k = 0; k < count; k++) total += n[k];
    std::vector<float> keep(total), part(total);
    size_t at = 0;
    for (int k = 0; k < count; k++) {
        memcpy(keep.data() + at, g[k], n[k] * sizeof(float));
        memset(g[k], 0, n[k] * sizeof(float));
        at += n[k];
    }
    compute();
    at = 0;
    for (int k = 0; k < count; k++) {
        memcpy(part.data() + at, g[k], n[k] * sizeof(float));
        at += n[k];
    }
    tp->all_reduce(part.data(), total, false);
    at = 0;
    for (int k = 0; k < count; k++) {
        for (size_t j = 0; j < n[k]; j++) g[k][j] = keep[at + j] + part[at + j];
        at += n[k];
    }
}

// What a family's forward and backward do where a layer's parts meet, for B x T positions of
// C channels, with or without -sp (tp nullptr: one rank, nothing to do):
//   whole(x)      the positions' rows of a buffer of the residual stream's (x itself; -sp:
//                 gathered from every rank into the scratch)
//   sum(x)        x (all N rows) holds this rank's partial sums: the group's sum, of every row
//                 in x (all-reduced), or (-sp) of this rank's rows, in the scratch; returns where
//   norm_grads    a norm's weight gradients, found from this rank's rows only under -sp, added
//                 over the group (sp_grad_sum); without -sp compute() alone
// rows: the residual stream's rows here (N, or N / tp under -sp).
struct TpStream {
    TensorParallel* tp;
    bool sp;
    int B, T, C, N, rows;
    float* scratch;
    TpStream(TensorParallel* group, int B_, int T_, int C_)
        : tp(group), sp(group != nullptr && group->sp), B(B_), T(T_), C(C_), N(B_ * T_),
          rows(sp ? B_ * T_ / group->size : B_ * T_),
          scratch(sp ? group->scratch(0, (size_t)B_ * T_ * C_) : nullptr) {}
    const float* whole(const float* x) {
        if (!sp) return x;
        sp_gather(tp, x, scratch, B, T, C);
        return scratch;
    }
    float* sum(float* x) {
        if (tp == nullptr) return x;
        if (!sp) {
            tp->all_reduce(x, (size_t)N * C, false);
            return x;
        }
        sp_reduce_scatter(tp, x, scratch, B, T, C);
        return scratch;
    }
    template <typename Fn>
    void norm_grads(float* const* g, const size_t* n, int count, Fn&& compute) {
        if (!sp) return compute();
        sp_grad_sum(tp, g, n, count, compute);
    }
    // the position (in its sequence) of this rank's row i of the residual stream
    size_t position(int i) const { return sp ? sp_row(tp->rank, i, T, tp->size) % T : (size_t)(i % T); }
};
