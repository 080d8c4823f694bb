// model.h: what every model family shares (GPT-2 in gpt2.h, Llama 3 in llama3.h): the
// parameter table and its layout, the buffers of a model in host memory, the gradient sink the
// backward reports to, random init, the gradient norm and AdamW over a table. The families
// are listed in one place, llmc/families.h.
// defines: ParamTensor, ParamRow, param_table_build, MAX_PARAM_TENSORS, ParamLayout, layer_slices,
//          layer_slices_packed, GradSinkOf, GradSink, ParamSourceOf, ParamSource, TensorParallel, ModelFamily, ModelBase,
//          model_layer_params, xcalloc_floats, carve_buffers,
//          NormalRng, grad_sum_squares, grad_clip_scale, adamw_update_table, flops_per_token, model_base_init,
//          model_base_alloc_state, model_free_buffers
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

#include "utils.h"       // defines: CHECK, fail, xmalloc
#include "cpu/adamw.h"   // defines: adamw_update
#include "phases.h"      // defines: PhaseClock (-pb 1)

// ---------------------------------------------------------------------------------------
// The parameter table: one row per tensor, in checkpoint order. It drives allocation,
// checkpoint read/write, weight decay, the ZeRO layout and the gradient buckets.
struct ParamTensor {
    const char* name;
    size_t numel;
    size_t offset;   // in floats, from the start of the parameter buffer
    bool decays;     // AdamW weight decay applies (the 2-D weight matrices)
    int ndim;
    size_t shape[3];
};

// One row of a model family's table as written out: its name, weight decay, and shape.
struct ParamRow {
    const char* name;
    bool decays;
    int ndim;
    size_t s0, s1, s2;
};

// table[0..n) from rows, laid out one after the other; returns the total element count.
inline size_t param_table_build(const ParamRow* rows, int n, ParamTensor* table) {
    size_t offset = 0;
    for (int i = 0; i < n; i++) {
        const ParamRow& r = rows[i];
        ParamTensor& t = table[i];
        t.name = r.name; t.decays = r.decays; t.ndim = r.ndim;
        t.shape[0] = r.s0; t.shape[1] = r.s1; t.shape[2] = r.s2;
        t.numel = r.s0 * (r.ndim > 1 ? r.s1 : 1) * (r.ndim > 2 ? r.s2 : 1);
        t.offset = offset;
        offset += t.numel;
    }
    return offset;
}

enum { MAX_PARAM_TENSORS = 16 };  // the most rows a family's table has (GPT-2's 16)

// A family's table as the shared machinery sees it. Every family lays its tensors out as
// some whole tensors (the front: embeddings), then the per-layer tensors, each stacked over
// the L layers as (L, ...), then whole tensors again (the tail: final norm, output head).
// That is what the gradient buckets follow: the backward finishes layer L-1, ..., 0, then
// the front and the tail.
struct ParamLayout {
    const ParamTensor* tensors = nullptr;
    int count = 0;        // rows
    int first_layer = 0;  // the per-layer rows are [first_layer, first_layer + layers)
    int layers = 0;
    int L = 0;            // model layers
    bool per_layer(int i) const { return i >= first_layer && i < first_layer + layers; }
    // the row holding flat index i (i < the total)
    const ParamTensor& tensor_at(size_t i) const {
        int r = 0;
        while (r + 1 < count && tensors[r + 1].offset <= i) r++;
        return tensors[r];
    }
    size_t front_len() const { return tensors[first_layer].offset; }  // values before the layers
    size_t tail_begin() const {  // where the values after the layers start
        const ParamTensor& last = tensors[first_layer + layers - 1];
        return last.offset + last.numel;
    }
};

// slices[i]: where layer l's slice of per-layer row first_layer + i starts in a buffer laid
// out by the table (the parameters, or their gradients). F: float, or the GPU's floatX.
template <typename F>
inline void layer_slices(F* base, const ParamLayout& t, int l, F** slices) {
    for (int i = 0; i < t.layers; i++) {
        const ParamTensor& row = t.tensors[t.first_layer + i];
        slices[i] = base + row.offset + (size_t)l * (row.numel / t.L);
    }
}

// The same slices one after the other in a buffer of one layer's values (a gradient bucket).
template <typename F>
inline void layer_slices_packed(F* bucket, const ParamLayout& t, F** slices) {
    size_t at = 0;
    for (int i = 0; i < t.layers; i++) {
        slices[i] = bucket + at;
        at += t.tensors[t.first_layer + i].numel / t.L;
    }
}

// Where the backward puts each layer's gradients, and whom it tells when a layer is done:
// the callback a data-parallel trainer hands the model (llmc/grad_sync.h,
// llmc/cuda/grad_sync_gpu.cuh) to start reducing a finished layer while the backward goes on
// down. Without one the gradients accumulate into the model's gradient buffer.
template <typename F>
struct GradSinkOf {
    virtual void layer_grads(int l, F** slices) = 0;  // slices as layer_slices: where layer l's gradients accumulate (+=)
    virtual void layer_done(int l) = 0;               // layer l's gradients of this micro-batch are complete
    virtual void backward_done() = 0;                 // and the front and tail: the backward is over
    virtual ~GradSinkOf() = default;
};
using GradSink = GradSinkOf<float>;

// Where the forward and the backward read each layer's parameters when the model does not hold
// them all: ZeRO 3 (llmc/grad_sync.h) keeps a 1/N slice per rank and all-gathers a layer just
// before it runs, the next one meanwhile. Without one the layers are read from the parameter buffer.
template <typename F>
struct ParamSourceOf {
    // slices as layer_slices: layer l's parameters, to read until the next call (the caller is
    // done with every other layer's); next: the layer wanted after it (-1: none), fetched meanwhile
    virtual void layer_params(int l, int next, F** slices) = 0;
    virtual ~ParamSourceOf() = default;
};
using ParamSource = ParamSourceOf<float>;

// Tensor parallelism (-tp N, llmc/tensor_parallel.h): the group of ranks that share each
// layer, and its all-reduce, which a family's forward and backward call where a layer's parts
// meet. Every rank of the group gets the same bits.
struct TensorParallel {
    int size = 1, rank = 0;
    bool sp = false;  // -sp 1: sequence parallelism, the residual stream split along T (llmc/tensor_parallel.h)
    virtual void all_reduce(float* x, size_t n, bool max) = 0;  // sum (max: the largest) over the group
    // all (size x n) := every rank's n values in rank order
    virtual void all_gather(const float* mine, size_t n, float* all) = 0;
    // mine (n) := the sum over ranks of part `rank` of each rank's all (size x n), in rank order
    virtual void reduce_scatter(const float* all, size_t n, float* mine) = 0;
    virtual float* scratch(int i, size_t n) = 0;  // scratch buffer i (0, 1) of at least n floats
    virtual ~TensorParallel() = default;
};

// ---------------------------------------------------------------------------------------
// A model in host memory (fp32), whatever its family: the table, the four buffers laid out
// by it, the activations, and the dimensions every family has. Each family's struct starts
// with this and adds its configuration, named views and activations.
enum ModelFamily { FAMILY_GPT2 = 0, FAMILY_LLAMA3 = 1 };

struct ModelBase {
    ModelFamily family = FAMILY_GPT2;
    ParamTensor tensors[MAX_PARAM_TENSORS];
    int num_tensors = 0, first_layer_tensor = 0, num_layer_tensors = 0;
    int num_layers = 0, channels = 0, vocab_size = 0, padded_vocab_size = 0, max_seq_len = 0;
    size_t num_parameters = 0;
    float* params = nullptr;  // one allocation for every parameter
    float* grads = nullptr;   // same layout (ZeRO 2 over several ranks: the front and tail only)
    float* m = nullptr;       // AdamW first moment
    float* v = nullptr;       // AdamW second moment
    float* acts_memory = nullptr;
    size_t acts_floats = 0;
    int B = 0, T = 0;         // what the activations are sized for
    float mean_loss = 0.0f;   // mean loss of the last forward with targets
    PhaseClock* phases = nullptr;  // -pb 1: forward and backward mark their phases here
    ParamSource* param_source = nullptr;  // ZeRO 3: where the layers' parameters come from (params
                                          // then holds only the front and tail rows)
    TensorParallel* tp = nullptr;  // -tp: the tables are this rank's part (llmc/tensor_parallel.h); nullptr: all here
    // -pp: this rank is a pipeline stage of num_layers consecutive layers (its table holds those,
    // and the embedding on the first stage, the head on the last). A stage after the first reads
    // its input from model_stage_input (llmc/families.h), a stage before the last starts its
    // backward from the gradient in model_stage_grad, and leaves its input's gradient there.
    bool pp_first = true, pp_last = true;
    // -vp: the local layers [run_lo, run_hi) a forward or backward runs (-1: to the last): one
    // virtual stage's; pp_first and pp_last then say whether it is the model's first or last
    int run_lo = 0, run_hi = -1;

    ParamLayout layout() const {
        ParamLayout t;
        t.tensors = tensors; t.count = num_tensors; t.first_layer = first_layer_tensor;
        t.layers = num_layer_tensors; t.L = num_layers;
        return t;
    }
};

// Layer l's parameters as the forward or backward reads them (see ParamSourceOf; next: the
// layer it runs after l, -1 for none).
inline void model_layer_params(ModelBase* m, int l, int next, float** slices) {
    if (m->param_source != nullptr) return m->param_source->layer_params(l, next, slices);
    layer_slices(m->params, m->layout(), l, slices);
}

// n floats, zeroed
inline float* xcalloc_floats(size_t n) {
    float* p = (float*)xmalloc(n * sizeof(float));
    memset(p, 0, n * sizeof(float));
    return p;
}

// One zeroed allocation cut into count buffers of sizes[i] floats, in order; ptrs[i] gets the
// i-th. Returns the allocation (*total: its floats).
inline float* carve_buffers(float** ptrs, const size_t* sizes, int count, size_t* total) {
    *total = 0;
    for (int i = 0; i < count; i++) *total += sizes[i];
    float* memory = xcalloc_floats(*total);
    float* cursor = memory;
    for (int i = 0; i < count; i++) { ptrs[i] = cursor; cursor += sizes[i]; }
    return memory;
}

// Normal(0, 1) from a Mersenne Twister by Box-Muller: std::mt19937's output is fixed by the
// standard, std::normal_distribution's is not, so this keeps init identical everywhere.
struct NormalRng {
    std::mt19937 gen;
    bool has_spare = false;
    double spare = 0.0;
    explicit NormalRng(uint32_t seed) : gen(seed) {}
    double uniform() { return (gen() + 0.5) / 4294967296.0; }  // in (0, 1)
    double next() {
        if (has_spare) { has_spare = false; return spare; }
        double u1 = uniform(), u2 = uniform();
        double r = std::sqrt(-2.0 * std::log(u1));
        spare = r * std::sin(2.0 * M_PI * u2);
        has_spare = true;
        return r * std::cos(2.0 * M_PI * u2);
    }
};

// Sum of squares of n gradients, in double (a ZeRO rank sums its slice, then the ranks add).
// Blocks of 64K values are summed in 16 lanes (independent chains of adds, which vectorize,
// where one running sum would wait on each add), then the blocks' sums in order: the same bits
// whatever the thread count.
inline double grad_sum_squares(const float* g, size_t n) {
    enum { BLOCK = 1 << 16, LANES = 16 };
    const size_t blocks = (n + BLOCK - 1) / BLOCK;
    double* block_sum = (double*)xmalloc((blocks > 0 ? blocks : 1) * sizeof(double));
    #pragma omp parallel for schedule(static)
    for (size_t b = 0; b < blocks; b++) {
        const float* x = g + b * BLOCK;
        const size_t len = b + 1 < blocks ? (size_t)BLOCK : n - b * BLOCK;
        double lane[LANES] = {};
        size_t i = 0;
        for (; i + LANES <= len; i += LANES)
            for (int k = 0; k < LANES; k++) lane[k] += (double)x[i + k] * x[i + k];
        double sum = 0.0;
        for (int k = 0; k < LANES; k++) sum += lane[k];
        for (; i < len; i++) sum += (double)x[i] * x[i];
        block_sum[b] = sum;
    }
    double sum = 0.0;
    for (size_t b = 0; b < blocks; b++) sum += block_sum[b];
    free(block_sum);
    return sum;
}

// Gradient scale for clipping at max_norm, as torch.nn.utils.clip_grad_norm_ computes it.
inline float grad_clip_scale(float grad_norm, float max_norm) {
    float coef = max_norm / (grad_norm + 1e-6f);
    return coef < 1.0f ? coef : 1.0f;
}

// AdamW over table[0..n) of a model family's buffers: weight decay where the table says.
inline void adamw_update_table(const ParamTensor* table, int n, float* params, const float* grads, float* m, float* v,
                               float lr, float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                               int t) {
    for (int i = 0; i < n; i++) {
        const ParamTensor& pt = table[i];
        size_t o = pt.offset;
        adamw_update(params + o, grads + o, m + o, v + o, pt.numel, lr, beta1, beta2, eps,
                     pt.decays ? weight_decay : 0.0f, grad_scale, t);
    }
}

// What every family's init sets once its table is in m->tensors: the family, the table's
// layout, the dimensions, and the parameters (zeroed; with_params false: none, for a trainer
// that places them itself, ZeRO 3). n: the table's total.
inline void model_base_init(ModelBase* m, ModelFamily family, const ParamLayout& t, size_t n, int C, int V, int Vp,
                            int maxT, bool with_params = true) {
    m->family = family;
    m->num_parameters = n;
    m->num_tensors = t.count;
    m->first_layer_tensor = t.first_layer;
    m->num_layer_tensors = t.layers;
    m->num_layers = t.L; m->channels = C; m->vocab_size = V; m->padded_vocab_size = Vp; m->max_seq_len = maxT;
    m->params = with_params ? xcalloc_floats(n) : nullptr;
}

// Random init without the whole vector at hand: values [offset, offset + n) of the flat vector
// from gen(), handed to emit(begin, values, count) a chunk at a time, in order (the families'
// init_values; llmc/families.h: model_init_values).
template <typename Gen, typename Emit>
inline void init_emit(size_t offset, size_t n, Gen&& gen, Emit&& emit) {
    enum { CHUNK = 4096 };
    float chunk[CHUNK];
    for (size_t j0 = 0; j0 < n; j0 += CHUNK) {
        const size_t len = n - j0 < (size_t)CHUNK ? n - j0 : (size_t)CHUNK;
        for (size_t k = 0; k < len; k++) chunk[k] = gen();
        emit(offset + j0, (const float*)chunk, len);
    }
}

// What every family's alloc_state sets before its activations: gradients and AdamW moments
// (zeroed), and the micro-batch B x T the activations are sized for. A data-parallel trainer
// asks for the lengths its ZeRO layout keeps (llmc/zero.h; SIZE_MAX: every parameter; 0: none,
// the trainer places them), so no process ever holds (or touches) the full state it would drop.
inline void model_base_alloc_state(ModelBase* m, int B, int T, size_t grads_len = SIZE_MAX, size_t opt_len = SIZE_MAX) {
    CHECK(B >= 1 && T >= 1 && T <= m->max_seq_len, "B=%d T=%d maxT=%d", B, T, m->max_seq_len);
    if (grads_len == SIZE_MAX) grads_len = m->num_parameters;
    if (opt_len == SIZE_MAX) opt_len = m->num_parameters;
    m->grads = grads_len > 0 ? xcalloc_floats(grads_len) : nullptr;
    m->m = xcalloc_floats(opt_len);
    m->v = xcalloc_floats(opt_len);
    m->B = B;
    m->T = T;
}

// The buffers of a model (parameters, gradients, AdamW moments, activations).
inline void model_free_buffers(ModelBase* model) {
    free(model->params); free(model->grads); free(model->m); free(model->v);
    free(model->acts_memory);
    model->params = model->grads = model->m = model->v = model->acts_memory = nullptr;
}

// Training FLOPs per token at sequence length T, for GFLOP/s and MFU: 6 per weight that
// multiplies (forward 2, backward 4), plus attention's scores and weighted sums (6 L C T,
// C = heads x head size).
inline double flops_per_token(double matmul_weights, int L, int C, int T) {
    return 6.0 * matmul_weights + 6.0 * L * C * T;
}
