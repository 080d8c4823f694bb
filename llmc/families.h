// families.h: the model families, listed in this one place. Everything else (the training
// loop, checkpoints, the ZeRO layout, the gradient buckets, the tools) sees a ModelBase
// (llmc/model.h) and calls these, which hand the work to the family's own code:
//   GPT-2 / GPT-3   llmc/gpt2.h     gpt2:..., d12, gpt3:c768
//   Llama 3         llmc/llama3.h   llama3:l4c256h8kv2f704, llama3.1:8b
// A third family adds its header, an enum value in llmc/model.h, a case in each function
// here, its model-file header in llmc/checkpoint.h and its tensor names in llmc/safetensors.h.
// defines: ModelConfig, model_family_name, model_config_from_descriptor, model_config_problem,
//          model_config_table, model_config_num_layers, model_config_channels, model_config_num_parameters,
//          ValueBytes, MemoryPlan, model_memory_plan, model_config_of,
//          gpt2_take_over, model_new, model_delete, model_init_values, model_init_random,
//          model_alloc_state, model_bind_views, model_bind_params, model_bind_grads, model_forward, model_backward,
//          model_logits, model_losses, model_update, model_flops_per_token, model_describe, model_stage, model_part_shard,
//          model_new_part, model_stage_input,
//          model_stage_grad, model_stage_output, ActsSets, model_acts_sets, model_acts_select, model_acts_sets_free,
//          model_tp_problem
#pragma once
#include <cmath>
#include <string>

#include "model.h"   // defines: ModelBase, ModelFamily, GradSink, adamw_update_table
#include "gpt2.h"    // defines: GPT2, GPT2Config, gpt2_*
#include "llama3.h"  // defines: Llama, LlamaConfig, llama_*

// A configuration of any family: the family, and that family's configuration.
struct ModelConfig {
    ModelFamily family = FAMILY_GPT2;
    GPT2Config gpt2 = {};
    LlamaConfig llama = {};
};

inline const char* model_family_name(ModelFamily f) { return f == FAMILY_LLAMA3 ? "Llama 3" : "GPT-2"; }

// -e's descriptors of every family. Returns false if desc is none of them.
inline bool model_config_from_descriptor(const char* desc, ModelConfig* out) {
    ModelConfig c;
    if (llama_config_from_descriptor(desc, &c.llama)) {
        c.family = FAMILY_LLAMA3;
    } else if (gpt2_config_from_descriptor(desc, &c.gpt2)) {
        c.family = FAMILY_GPT2;
    } else {
        return false;
    }
    *out = c;
    return true;
}

// nullptr when the configuration is sane, else what is wrong
inline const char* model_config_problem(const ModelConfig& c) {
    return c.family == FAMILY_LLAMA3 ? llama_config_problem(c.llama) : gpt2_config_problem(c.gpt2);
}

// The table of a sane configuration (table[MAX_PARAM_TENSORS]) and its layout; returns the
// parameter count (padded vocabulary rows included).
inline size_t model_config_table(const ModelConfig& c, ParamTensor* table, ParamLayout* layout) {
    if (c.family == FAMILY_LLAMA3) {
        *layout = llama_layout(table, c.llama.num_layers);
        return llama_param_table(c.llama, table);
    }
    *layout = gpt2_layout(table, c.gpt2.num_layers);
    return gpt2_param_table(c.gpt2, table);
}

inline int model_config_num_layers(const ModelConfig& c) {
    return c.family == FAMILY_LLAMA3 ? c.llama.num_layers : c.gpt2.num_layers;
}
inline int model_config_channels(const ModelConfig& c) {
    return c.family == FAMILY_LLAMA3 ? c.llama.channels : c.gpt2.channels;
}

inline size_t model_config_num_parameters(const ModelConfig& c) {
    ParamTensor table[MAX_PARAM_TENSORS];
    ParamLayout layout;
    return model_config_table(c, table, &layout);
}

// Bytes per value of what a process holds. The defaults are the CPU trainer's (fp32, no master
// copy); the GPU trainers' parameters and gradients are floatX (2 bytes in the bf16 build, which
// with -w 1 also keeps an fp32 master copy of the values it updates). AdamW's m and v are fp32.
struct ValueBytes {
    double param = 4, grad = 4, master = 0;  // master 0: no master weights
};

// What one process holds, in bytes, at micro-batch B x T on `world` processes at ZeRO `stage`
// (llmc/zero.h): the parameters (ZeRO 3: the front and tail rows, two layer slots and the owned
// slice; else all of them, padded to the layout), the gradients (ZeRO 2 and 3: the front and
// tail rows, two layer buckets and the owned slice; else all of them, and with several
// processes two layer buckets), AdamW's m and v and the master weights (ZeRO 1 to 3: the owned
// slice) and the CPU trainer's activations (Llama's at recompute level `recompute`). The GPU
// trainers replace activations by their own plan's and count their scratch (train_gpt.cu).
struct MemoryPlan {
    double params = 0, grads = 0, adamw = 0, master = 0, activations = 0, scratch = 0;
    double total() const { return params + grads + adamw + master + activations + scratch; }
};

inline MemoryPlan model_memory_plan(const ModelConfig& c, int B, int T, int world, int stage,
                                    const ValueBytes& bytes = ValueBytes(), int recompute = 0) {
    ParamTensor table[MAX_PARAM_TENSORS];
    ParamLayout t;
    const double n = (double)model_config_table(c, table, &t);
    if (world == 1) stage = 0;
    const double shard = std::ceil(n / world / 64) * 64, padded = shard * world;  // zero.h's ZERO_ALIGN
    const double updated = stage == 0 ? n : shard;  // the values this process's AdamW updates
    double layer = 0;
    for (int i = 0; i < t.layers; i++) layer += (double)table[t.first_layer + i].numel / t.L;
    const double front_and_tail = (double)t.front_len() + (n - (double)t.tail_begin());
    MemoryPlan p;
    p.params = bytes.param * (stage == 3 ? front_and_tail + 2 * layer + shard : padded);
    p.grads = stage >= 2 ? bytes.grad * (front_and_tail + 2 * layer + shard)
                         : bytes.grad * (padded + (world > 1 ? 2 * layer : 0));
    p.adamw = 8 * updated;
    p.master = bytes.master * updated;
    size_t sizes[LLAMA_NUM_ACTIVATIONS > GPT2_NUM_ACTIVATIONS ? LLAMA_NUM_ACTIVATIONS : GPT2_NUM_ACTIVATIONS];
    p.activations = 4 * (double)(c.family == FAMILY_LLAMA3 ? llama_activation_sizes(c.llama, B, T, sizes, recompute)
                                                           : gpt2_activation_sizes(c.gpt2, B, T, sizes));
    return p;
}

inline ModelConfig model_config_of(const ModelBase* m) {
    ModelConfig c;
    c.family = m->family;
    if (m->family == FAMILY_LLAMA3) c.llama = static_cast<const Llama*>(m)->config;
    else c.gpt2 = static_cast<const GPT2*>(m)->config;
    return c;
}

// A new model of configuration c, its parameters zeroed (with_params false: no parameter
// buffer, see model_base_init). Fails with a message on a bad one.
inline ModelBase* model_new(const ModelConfig& c, bool with_params = true) {
    if (c.family == FAMILY_LLAMA3) {
        Llama* m = new Llama();
        llama_init(m, c.llama, with_params);
        return m;
    }
    GPT2* m = new GPT2();
    gpt2_init(m, c.gpt2, with_params);
    return m;
}

inline void model_delete(ModelBase* m) {
    if (m == nullptr) return;
    model_free_buffers(m);
    if (m->family == FAMILY_LLAMA3) delete static_cast<Llama*>(m);
    else delete static_cast<GPT2*>(m);
}

// For the programs that run GPT-2 only: *out takes over a GPT-2 model (its buffers; loaded is
// deleted). Returns false, and leaves both alone, when loaded is of another family.
inline bool gpt2_take_over(GPT2* out, ModelBase* loaded) {
    if (loaded->family != FAMILY_GPT2) return false;
    GPT2* g = static_cast<GPT2*>(loaded);
    *out = *g;
    out->p = param_ptrs(out->params, out->tensors);
    out->g = param_ptrs(out->grads, out->tensors);
    g->params = g->grads = g->m = g->v = g->acts_memory = nullptr;
    delete g;
    return true;
}

// The random init's values that are not 0, to emit(begin, values, count) in flat order
// (init_emit in llmc/model.h); m needs its table only.
template <typename Emit>
inline void model_init_values(const ModelBase* m, uint32_t seed, Emit&& emit) {
    if (m->family == FAMILY_LLAMA3) llama_init_values(static_cast<const Llama*>(m)->config, m->tensors, seed, emit);
    else gpt2_init_values(static_cast<const GPT2*>(m)->config, m->tensors, seed, emit);
}

inline void model_init_random(ModelBase* m, uint32_t seed) {
    if (m->family == FAMILY_LLAMA3) llama_init_random(static_cast<Llama*>(m), seed);
    else gpt2_init_random(static_cast<GPT2*>(m), seed);
}

// Gradients, AdamW moments and activations for micro-batches of B x T (grads_len, opt_len: see
// model_base_alloc_state; recompute: Llama's level, GPT-2 on the CPU keeps every activation).
inline void model_alloc_state(ModelBase* m, int B, int T, size_t grads_len = SIZE_MAX, size_t opt_len = SIZE_MAX,
                              int recompute = 0) {
    if (m->family == FAMILY_LLAMA3) llama_alloc_state(static_cast<Llama*>(m), B, T, grads_len, opt_len, recompute);
    else gpt2_alloc_state(static_cast<GPT2*>(m), B, T, grads_len, opt_len);
}

// The named views of params and grads again, after the buffers moved (the ZeRO layout pads them;
// grads may not be there yet: ZeRO 2 and 3 place them, llmc/grad_sync.h).
inline void model_bind_views(ModelBase* m) {
    if (m->family == FAMILY_LLAMA3) {
        Llama* l = static_cast<Llama*>(m);
        l->p = llama_param_ptrs(l->params, l->tensors);
        if (l->grads != nullptr) l->g = llama_param_ptrs(l->grads, l->tensors);
    } else {
        GPT2* g = static_cast<GPT2*>(m);
        g->p = param_ptrs(g->params, g->tensors);
        if (g->grads != nullptr) g->g = param_ptrs(g->grads, g->tensors);
    }
}

// The parameter views from views[i], where row i lives (ZeRO 3 keeps only the front and tail
// rows in the model, in a buffer of their own; the layers come from its ParamSource).
inline void model_bind_params(ModelBase* m, float* const* views) {
    if (m->family == FAMILY_LLAMA3) static_cast<Llama*>(m)->p = llama_param_ptrs_of(views);
    else static_cast<GPT2*>(m)->p = param_ptrs_of(views);
}

// The gradient views from views[i], where row i's gradient lives (ZeRO 2 keeps the front and
// tail rows' gradients in a buffer of their own).
inline void model_bind_grads(ModelBase* m, float* const* views) {
    if (m->family == FAMILY_LLAMA3) llama_bind_grads(static_cast<Llama*>(m), views);
    else gpt2_bind_grads(static_cast<GPT2*>(m), views);
}

// -pp (and -vp): the model's layers cut into stages x vp virtual stages of consecutive layers,
// sizes[k] for virtual stage k (-pl), or balanced by count (nullptr: the later ones the fewer
// where L does not divide, the last also runs the head); pipeline stage `stage` holds virtual
// stages stage, stage + stages, ... (Megatron-LM's
// interleaving; one with vp 1). *layers gets its layers in order, chunk_begin[c] where its
// virtual stage c * stages + stage starts among them (and a last entry: their count); the
// embedding rows are on the first stage, the head's on the last; hold[i] for
// tensor_parallel.h's tp_shard_make (GPT-2's tied wte is on the last stage too, as a copy whose
// gradient joins the first stage's).
inline void model_stage(const ModelConfig& c, int stage, int stages, int vp, std::vector<int>* layers,
                        std::vector<int>* chunk_begin, int hold[MAX_PARAM_TENSORS],
                        const std::vector<int>* sizes = nullptr) {
    ParamTensor table[MAX_PARAM_TENSORS];
    ParamLayout lt;
    model_config_table(c, table, &lt);
    const bool first = stage == 0, last = stage == stages - 1;
    const int V = stages * vp;
    layers->clear();
    chunk_begin->clear();
    auto begin = [&](int k) {  // virtual stage k's first layer
        if (sizes == nullptr) return (k * lt.L + V - 1) / V;
        int l = 0;
        for (int j = 0; j < k; j++) l += (*sizes)[j];
        return l;
    };
    for (int k = stage; k < V; k += stages) {
        chunk_begin->push_back((int)layers->size());
        for (int l = begin(k); l < begin(k + 1); l++) layers->push_back(l);
    }
    chunk_begin->push_back((int)layers->size());
    for (int i = 0; i < lt.count; i++)
        hold[i] = lt.per_layer(i) ? 1 : i < lt.first_layer ? (first ? 1 : 0) : (last ? 1 : 0);
    if (c.family == FAMILY_GPT2 && last && !first) hold[0] = 2;  // the tied head
}

// -tp and -pp: the part of configuration c that rank tp_rank of a tensor-parallel group of
// tp_size (llmc/tensor_parallel.h) of pipeline stage `stage` of `stages` (model_stage) holds:
// *shard gets its table and the runs that map it onto the model file's, *layers the layers it
// runs. Any rank's part can be made on any rank (the checkpoints put them together so). Returns
// "", or why a tensor does not split.
inline std::string model_part_shard(const ModelConfig& c, int tp_size, int tp_rank, int stage, int stages, int vp,
                                    TpShard* shard, std::vector<int>* layers, const std::vector<int>* sizes = nullptr) {
    ParamTensor table[MAX_PARAM_TENSORS];
    ParamLayout lt;
    model_config_table(c, table, &lt);
    TpSplit splits[MAX_PARAM_TENSORS];
    if (c.family == FAMILY_LLAMA3) llama_tp_splits(c.llama, tp_size, splits);
    else gpt2_tp_splits(c.gpt2, splits);
    std::vector<int> chunks;
    int hold[MAX_PARAM_TENSORS];
    model_stage(c, stage, stages, vp, layers, &chunks, hold, sizes);
    return tp_shard_make(table, lt.count, lt, splits, tp_size, tp_rank, shard, layers, hold);
}

// -tp and -pp: a new model of configuration c holding that part (model_part_shard), its
// parameters zeroed; tp: the group's collectives (nullptr when tp_size is 1). Returns nullptr,
// with *problem, when a tensor does not split.
inline ModelBase* model_new_part(const ModelConfig& c, TensorParallel* tp, int tp_size, int tp_rank, int stage,
                                 int stages, int vp, TpShard* shard, std::string* problem,
                                 const std::vector<int>* sizes = nullptr) {
    std::vector<int> layers;
    *problem = model_part_shard(c, tp_size, tp_rank, stage, stages, vp, shard, &layers, sizes);
    if (!problem->empty()) return nullptr;
    ModelBase* m = model_new(c, false);
    memcpy(m->tensors, shard->local, m->num_tensors * sizeof(ParamTensor));
    m->num_parameters = shard->local_n;
    m->num_layers = (int)layers.size();
    m->pp_first = stage == 0;
    m->pp_last = stage == stages - 1;
    m->tp = tp;
    m->params = xcalloc_floats(m->num_parameters);
    model_bind_views(m);
    return m;
}

// -pp: the buffer a stage after the first reads its input from, and the one a stage before the
// last gets its output's gradient in (and leaves its input's): (B, T, C) each
inline float* model_stage_input(ModelBase* m) {  // the first layer it runs reads it (-vp: a later chunk's)
    const int l = m->run_lo;
    return (float*)(m->family == FAMILY_LLAMA3 ? llama_layer_acts(static_cast<Llama*>(m), l).residual
                                               : gpt2_layer_acts(static_cast<GPT2*>(m), l).residual);
}
inline float* model_stage_grad(ModelBase* m) {
    return m->family == FAMILY_LLAMA3 ? static_cast<Llama*>(m)->acts.dres : static_cast<GPT2*>(m)->acts.dres;
}
// -pp: the stage's output, the last layer's residual stream (B, T, C)
inline float* model_stage_output(ModelBase* m) {
    const int l = (m->run_hi < 0 ? m->num_layers : m->run_hi) - 1;  // the last layer it runs
    if (m->family == FAMILY_LLAMA3) return llama_layer_acts(static_cast<Llama*>(m), l).residual3;
    return gpt2_layer_acts(static_cast<GPT2*>(m), l).residual3;
}

// -pp: the activations of several micro-batches in flight. model_acts_sets(m, K) makes K - 1
// more sets beside the one model_alloc_state made (each as large); model_acts_select(m, i)
// points the model at set i (0: the first). The model frees set 0, model_acts_sets_free the rest.
struct ActsSets {
    std::vector<float*> memory;            // [0]: the model's own
    std::vector<std::vector<char>> views;  // each set's family activation struct, as bytes
};
inline void model_acts_sets(ModelBase* m, int K, ActsSets* sets) {
    const bool llama = m->family == FAMILY_LLAMA3;
    const size_t bytes = llama ? sizeof(LlamaActivations) : sizeof(Activations);
    void* own = llama ? (void*)&static_cast<Llama*>(m)->acts : (void*)&static_cast<GPT2*>(m)->acts;
    sets->memory.assign(1, m->acts_memory);
    sets->views.assign(1, std::vector<char>((char*)own, (char*)own + bytes));
    for (int k = 1; k < K; k++) {
        std::vector<char> v(bytes);
        size_t floats = 0;
        if (llama) {
            size_t sizes[LLAMA_NUM_ACTIVATIONS];
            const Llama* l = static_cast<const Llama*>(m);
            llama_activation_sizes(l->config, m->B, m->T, sizes, l->recompute, m->tp != nullptr ? m->tp->size : 1,
                                   m->num_layers, m->tp != nullptr && m->tp->sp);
            sets->memory.push_back(carve_buffers((float**)v.data(), sizes, LLAMA_NUM_ACTIVATIONS, &floats));
        } else {
            size_t sizes[GPT2_NUM_ACTIVATIONS];
            gpt2_activation_sizes(static_cast<const GPT2*>(m)->config, m->B, m->T, sizes,
                                  m->tp != nullptr ? m->tp->size : 1, m->num_layers, m->tp != nullptr && m->tp->sp);
            sets->memory.push_back(carve_buffers((float**)v.data(), sizes, GPT2_NUM_ACTIVATIONS, &floats));
        }
        sets->views.push_back(v);
    }
}
inline void model_acts_select(ModelBase* m, const ActsSets& sets, int i) {
    void* own = m->family == FAMILY_LLAMA3 ? (void*)&static_cast<Llama*>(m)->acts : (void*)&static_cast<GPT2*>(m)->acts;
    memcpy(own, sets.views[i].data(), sets.views[i].size());
}
inline void model_acts_sets_free(ActsSets* sets) {
    for (size_t k = 1; k < sets->memory.size(); k++) free(sets->memory[k]);
    sets->memory.clear();
    sets->views.clear();
}

// -tp, -pp: why configuration c cannot run on tensor-parallel groups of tp ranks in pp
// pipeline stages ("" if it can): whole heads on each rank, Llama's KV heads split with its
// query heads or shared by whole groups of ranks, the MLP's hidden units and the padded
// vocabulary's rows in equal parts; at least a layer a stage.
inline std::string model_tp_problem(const ModelConfig& c, int tp, int pp = 1) {
    char buf[200] = "";
    const int L = model_config_num_layers(c);
    if (pp > L) {
        snprintf(buf, sizeof(buf), "%d pipeline stages (-pp x -vp) but the model has %d layers", pp, L);
        return buf;
    }
    const int NH = c.family == FAMILY_LLAMA3 ? c.llama.num_heads : c.gpt2.num_heads;
    const int Vp = c.family == FAMILY_LLAMA3 ? c.llama.padded_vocab_size : c.gpt2.padded_vocab_size;
    if (NH % tp != 0) snprintf(buf, sizeof(buf), "the model's %d heads do not split into %d equal parts", NH, tp);
    else if (c.family == FAMILY_LLAMA3 && c.llama.num_kv_heads % tp != 0 && tp % c.llama.num_kv_heads != 0)
        snprintf(buf, sizeof(buf), "the model's %d KV heads neither split into %d equal parts nor are shared by whole "
                 "groups of its ranks", c.llama.num_kv_heads, tp);
    else if (c.family == FAMILY_LLAMA3 && c.llama.ffn_hidden % tp != 0)
        snprintf(buf, sizeof(buf), "the MLP's %d hidden units do not split into %d equal parts", c.llama.ffn_hidden, tp);
    else if (Vp % tp != 0)
        snprintf(buf, sizeof(buf), "the padded vocabulary's %d rows do not split into %d equal parts", Vp, tp);
    return buf;
}

// Forward of B x T tokens; with targets, the losses and m->mean_loss.
inline void model_forward(ModelBase* m, const int* inputs, const int* targets, int B, int T) {
    if (m->family == FAMILY_LLAMA3) llama_forward(static_cast<Llama*>(m), inputs, targets, B, T);
    else gpt2_forward(static_cast<GPT2*>(m), inputs, targets, B, T);
}

// Backward of the last forward, gradients accumulating (+=); sink: see llmc/model.h.
inline void model_backward(ModelBase* m, const int* inputs, const int* targets, float dloss, GradSink* sink) {
    if (m->family == FAMILY_LLAMA3) llama_backward(static_cast<Llama*>(m), inputs, targets, dloss, sink);
    else gpt2_backward(static_cast<GPT2*>(m), inputs, targets, dloss, sink);
}

// The last forward's logits (B, T, Vp) and per-position losses (B, T), at the allocated strides.
inline float* model_logits(ModelBase* m) {
    return m->family == FAMILY_LLAMA3 ? static_cast<Llama*>(m)->acts.logits : static_cast<GPT2*>(m)->acts.logits;
}
inline float* model_losses(ModelBase* m) {
    return m->family == FAMILY_LLAMA3 ? static_cast<Llama*>(m)->acts.losses : static_cast<GPT2*>(m)->acts.losses;
}

// One AdamW step over every row (weight decay where the table says); t is 1-based.
inline void model_update(ModelBase* m, float lr, float beta1, float beta2, float eps, float weight_decay,
                         float grad_scale, int t) {
    adamw_update_table(m->tensors, m->num_tensors, m->params, m->grads, m->m, m->v, lr, beta1, beta2, eps,
                       weight_decay, grad_scale, t);
}

// Training FLOPs per token at sequence length T (llmc/model.h: flops_per_token). GPT-2's wte
// is also its classifier; Llama's wte is only looked up, so its weights do not count.
inline double model_flops_per_token(const ModelBase* m, int T) {
    double weights = (double)m->num_parameters;
    if (m->family == FAMILY_LLAMA3) weights -= (double)m->tensors[0].numel;
    return flops_per_token(weights, m->num_layers, m->channels, T);
}

// The plan's description of the model's shape.
inline std::string model_describe(const ModelBase* m) {
    char buf[256];
    if (m->family == FAMILY_LLAMA3) {
        const LlamaConfig& c = static_cast<const Llama*>(m)->config;
        snprintf(buf, sizeof(buf), "Llama 3 L=%d C=%d NH=%d NKV=%d F=%d V=%d (Vp %d) maxT=%d theta=%g eps=%g%s",
                 c.num_layers, c.channels, c.num_heads, c.num_kv_heads, c.ffn_hidden, c.vocab_size,
                 c.padded_vocab_size, c.max_seq_len, c.rope_theta, c.norm_eps,
                 c.rope_scaling.factor != 0.0f ? " (RoPE scaled)" : "");
    } else {
        return gpt2_describe(static_cast<const GPT2*>(m)->config);
    }
    return buf;
}
