// gpt2.h: the GPT-2 model on the CPU: configuration, the parameter table, random init,
// forward, backward, AdamW. One training step reads top to bottom in gpt2_forward,
// gpt2_backward and gpt2_update.
// defines: GPT2Config, gpt2_config_problem, gpt2_config_from_descriptor, gpt2_describe, gpt2_param_table, ParamPtrs, param_ptrs,
//          gpt2_layout, GPT2, LayerPtrs, layer_ptrs, param_is_per_layer,
//          gpt2_activation_sizes, GPT2Dims, gpt2_dims, gpt2_dims_of, GPT2LayerActs, gpt2_layer_acts, gpt2_init, gpt2_alloc_state, gpt2_bind_grads, gpt2_init_random, gpt2_forward, gpt2_backward,
//          gpt2_zero_grad, gpt2_grad_norm, gpt2_update, gpt2_free
//
// Glossary: B batch, T sequence length, C channels, NH heads, hs = C/NH head size,
// L layers, V vocabulary, Vp vocabulary padded to a multiple of 128, maxT positions.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "utils.h"            // defines: CHECK, fail, xmalloc
#include "model.h"            // defines: ParamTensor, ParamRow, param_table_build, ParamLayout, GradSinkOf, ModelBase, ...
#include "cpu/encoder.h"      // defines: encoder_forward, encoder_backward
#include "cpu/layernorm.h"    // defines: layernorm_forward, layernorm_backward
#include "cpu/matmul.h"       // defines: matmul_forward, matmul_backward
#include "cpu/attention.h"    // defines: attention_forward, attention_backward
#include "cpu/gelu.h"         // defines: gelu_forward, gelu_backward
#include "cpu/residual.h"     // defines: residual_forward
#include "cpu/crossentropy.h" // defines: crossentropy_forward, crossentropy_backward
#include "phases.h"           // defines: PhaseClock, phase_clock_mark (-pb 1)
#include "tensor_parallel.h"  // defines: TpSplit, tp_embedding_lookup, tp_crossentropy_forward, tp_crossentropy_backward

struct GPT2Config {
    int max_seq_len;        // maxT: positions in wpe
    int vocab_size;         // V: real tokens (50257 for GPT-2)
    int padded_vocab_size;  // Vp: V rounded up to 128, so the classifier matmul tiles evenly
    int num_layers;         // L
    int num_heads;          // NH
    int channels;           // C
};

inline int round_up_128(int v) { return (v + 127) / 128 * 128; }

// Checks a configuration from a descriptor or a file header before anything is allocated.
// Returns nullptr when it is sane, else what is wrong.
inline const char* gpt2_config_problem(const GPT2Config& c) {
    if (c.max_seq_len < 1 || c.max_seq_len > 1 << 20) return "maxT out of range [1, 2^20]";
    if (c.vocab_size < 1 || c.vocab_size > 1 << 24) return "vocab size out of range [1, 2^24]";
    if (c.padded_vocab_size < c.vocab_size || c.padded_vocab_size > (1 << 24) + 128)
        return "padded vocab size smaller than vocab size or too large";
    if (c.num_layers < 1 || c.num_layers > 1000) return "layer count out of range [1, 1000]";
    if (c.channels < 1 || c.channels > 1 << 16) return "channels out of range [1, 65536]";
    if (c.num_heads < 1 || c.channels % c.num_heads != 0) return "channels not divisible by heads";
    return nullptr;
}

// "d12" and "gpt2:d12": GPT-2 by depth (llm.c's table); "gpt3:c768": GPT-3 by width;
// "gpt2:l4c256" or "gpt2:l4c256h4": an explicit small GPT-2 (heads default to C/64).
// Returns false if the descriptor is not one of these forms.
inline bool gpt2_config_from_descriptor(const char* desc, GPT2Config* out) {
    GPT2Config c;
    c.vocab_size = 50257;
    c.padded_vocab_size = 50304;
    long long a = 0, b = 0, h = 0;
    char tail[64];
    const char* s = desc;
    if (strncmp(s, "gpt2:", 5) == 0) s += 5;
    if (s != desc || s[0] == 'd') {  // GPT-2 family
        c.max_seq_len = 1024;
        if (s[0] == 'd' && parse_int(s + 1, 1, 1000, &a)) {
            static const int table[][3] = {  // depth, channels, heads
                {6, 384, 6}, {12, 768, 12}, {24, 1024, 16}, {36, 1280, 20},
                {48, 1600, 25}, {60, 1920, 30}, {72, 2880, 30}, {84, 3456, 36}};
            for (auto& row : table) {
                if (row[0] == a) {
                    c.num_layers = row[0]; c.channels = row[1]; c.num_heads = row[2];
                    *out = c;
                    return true;
                }
            }
            return false;
        }
        if (sscanf(s, "l%lldc%lld%63s", &a, &b, tail) == 3 && sscanf(tail, "h%lld", &h) == 1) {
            char check[80];
            snprintf(check, sizeof(check), "l%lldc%lldh%lld", a, b, h);
            if (strcmp(check, s) != 0) return false;
        } else if (sscanf(s, "l%lldc%lld", &a, &b) == 2) {
            char check[80];
            snprintf(check, sizeof(check), "l%lldc%lld", a, b);
            if (strcmp(check, s) != 0 || b % 64 != 0) return false;
            h = b / 64;
        } else {
            return false;
        }
        if (a < 1 || a > 1000 || b < 1 || b > 65536 || h < 1) return false;
        c.num_layers = (int)a; c.channels = (int)b; c.num_heads = (int)h;
        *out = c;
        return gpt2_config_problem(c) == nullptr;
    }
    if (strncmp(desc, "gpt3:c", 6) == 0 && parse_int(desc + 6, 1, 1 << 16, &a)) {
        static const int table[][3] = {  // channels, depth, head size
            {384, 6, 64}, {768, 12, 64}, {1024, 24, 64}, {1536, 24, 96}, {2048, 24, 128},
            {2560, 32, 80}, {4096, 32, 128}, {5140, 40, 128}, {12288, 96, 128}};
        for (auto& row : table) {
            if (row[0] == a) {
                c.max_seq_len = 2048;
                c.channels = row[0]; c.num_layers = row[1]; c.num_heads = row[0] / row[2];
                *out = c;
                return true;
            }
        }
    }
    return false;
}

// The plan's description of the shape: "L=12 C=768 NH=12 V=50257 (Vp 50304) maxT=1024".
inline std::string gpt2_describe(const GPT2Config& c) {
    char buf[160];
    snprintf(buf, sizeof(buf), "L=%d C=%d NH=%d V=%d (Vp %d) maxT=%d", c.num_layers, c.channels, c.num_heads,
             c.vocab_size, c.padded_vocab_size, c.max_seq_len);
    return buf;
}

// ---------------------------------------------------------------------------------------
// The parameter table (llmc/model.h: ParamTensor), in checkpoint order.
enum { NUM_PARAM_TENSORS = 16 };
static_assert((int)NUM_PARAM_TENSORS <= (int)MAX_PARAM_TENSORS, "GPT-2's table fits the model's");


// Fills table[16]; returns the total number of parameters (padded wte rows included).
inline size_t gpt2_param_table(const GPT2Config& cfg, ParamTensor table[NUM_PARAM_TENSORS]) {
    size_t Vp = cfg.padded_vocab_size, C = cfg.channels, L = cfg.num_layers, maxT = cfg.max_seq_len;
    const ParamRow rows[NUM_PARAM_TENSORS] = {
        {"wte", true, 2, Vp, C, 0},           {"wpe", true, 2, maxT, C, 0},
        {"ln1w", false, 2, L, C, 0},          {"ln1b", false, 2, L, C, 0},
        {"qkvw", true, 3, L, 3 * C, C},       {"qkvb", false, 2, L, 3 * C, 0},
        {"attprojw", true, 3, L, C, C},       {"attprojb", false, 2, L, C, 0},
        {"ln2w", false, 2, L, C, 0},          {"ln2b", false, 2, L, C, 0},
        {"fcw", true, 3, L, 4 * C, C},        {"fcb", false, 2, L, 4 * C, 0},
        {"fcprojw", true, 3, L, C, 4 * C},    {"fcprojb", false, 2, L, C, 0},
        {"lnfw", false, 1, C, 0, 0},          {"lnfb", false, 1, C, 0, 0},
    };
    return param_table_build(rows, NUM_PARAM_TENSORS, table);
}

// Tensor parallelism (llmc/tensor_parallel.h): QKV and FC column-parallel (QKV's q, k and v
// rows each split, so a rank has whole heads), the projections row-parallel, wte by vocabulary
// rows; the norms, wpe and the projections' biases whole on every rank.
inline void gpt2_tp_splits(const GPT2Config& cfg, TpSplit splits[NUM_PARAM_TENSORS]) {
    const size_t C = cfg.channels;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) splits[i] = TpSplit();
    splits[0] = {TP_ROWS, 1, {(size_t)cfg.padded_vocab_size}};  // wte
    splits[4] = splits[5] = {TP_ROWS, 3, {C, C, C}};             // qkvw, qkvb
    splits[6].mode = TP_COLS;                                     // attprojw
    splits[10] = splits[11] = {TP_ROWS, 1, {4 * C}};             // fcw, fcb
    splits[12].mode = TP_COLS;                                    // fcprojw
}

// Named views into a buffer laid out by the table (parameters or their gradients).
struct ParamPtrs {
    float *wte, *wpe, *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb;
    float *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb, *lnfw, *lnfb;
};

// views[i]: where row i starts
inline ParamPtrs param_ptrs_of(float* const views[NUM_PARAM_TENSORS]) {
    ParamPtrs v;
    float** fields[NUM_PARAM_TENSORS] = {&v.wte, &v.wpe, &v.ln1w, &v.ln1b, &v.qkvw, &v.qkvb,
        &v.attprojw, &v.attprojb, &v.ln2w, &v.ln2b, &v.fcw, &v.fcb, &v.fcprojw, &v.fcprojb,
        &v.lnfw, &v.lnfb};
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) *fields[i] = views[i];
    return v;
}

inline ParamPtrs param_ptrs(float* base, const ParamTensor table[NUM_PARAM_TENSORS]) {
    float* views[NUM_PARAM_TENSORS];
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) views[i] = base + table[i].offset;
    return param_ptrs_of(views);
}

// The per-layer tensors are the table's rows FIRST_LAYER_TENSOR .. +NUM_LAYER_TENSORS (ln1w ..
// fcprojb), each stacked over layers as (L, ...); the others are wte, wpe, lnfw, lnfb.
enum { FIRST_LAYER_TENSOR = 2, NUM_LAYER_TENSORS = 12 };

inline bool param_is_per_layer(int tensor) {
    return tensor >= FIRST_LAYER_TENSOR && tensor < FIRST_LAYER_TENSOR + NUM_LAYER_TENSORS;
}

inline ParamLayout gpt2_layout(const ParamTensor table[NUM_PARAM_TENSORS], int L) {
    ParamLayout t;
    t.tensors = table; t.count = NUM_PARAM_TENSORS; t.first_layer = FIRST_LAYER_TENSOR;
    t.layers = NUM_LAYER_TENSORS; t.L = L;
    return t;
}

// One layer's slice of each per-layer tensor (of the parameters, or of their gradients); F is
// the element type (float here, floatX in the GPU trainer).
template <typename F>
struct LayerPtrsOf {
    F *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw, *fcprojb;
};
using LayerPtrs = LayerPtrsOf<float>;

// slice[i]: where per-layer tensor FIRST_LAYER_TENSOR + i of the layer starts.
template <typename F>
inline LayerPtrsOf<F> layer_ptrs_of(F* const slice[NUM_LAYER_TENSORS]) {
    LayerPtrsOf<F> v;
    F** fields[NUM_LAYER_TENSORS] = {&v.ln1w, &v.ln1b, &v.qkvw, &v.qkvb, &v.attprojw, &v.attprojb,
                                     &v.ln2w, &v.ln2b, &v.fcw, &v.fcb, &v.fcprojw, &v.fcprojb};
    for (int i = 0; i < NUM_LAYER_TENSORS; i++) *fields[i] = slice[i];
    return v;
}

// Layer l's slices of a buffer laid out by the table.
template <typename F>
inline LayerPtrsOf<F> layer_ptrs(F* base, const ParamTensor table[NUM_PARAM_TENSORS], int l, int L) {
    F* slice[NUM_LAYER_TENSORS];
    layer_slices(base, gpt2_layout(table, L), l, slice);
    return layer_ptrs_of(slice);
}

// ---------------------------------------------------------------------------------------
// Activations kept from forward for backward, and the gradient buffers backward reuses
// layer after layer. Sized for the largest (B, T) the model was set up with.
struct Activations {
    float* encoded;    // (B,T,C)
    float* ln1;        // (L,B,T,C)
    float* ln1_mean;   // (L,B,T)
    float* ln1_rstd;   // (L,B,T)
    float* qkv;        // (L,B,T,3C)
    float* atty;       // (L,B,T,C)
    float* att;        // (L,B,NH,T,T) softmax probabilities
    float* residual2;  // (L,B,T,C)
    float* ln2;        // (L,B,T,C)
    float* ln2_mean;   // (L,B,T)
    float* ln2_rstd;   // (L,B,T)
    float* fch;        // (L,B,T,4C)
    float* fch_gelu;   // (L,B,T,4C)
    float* residual3;  // (L,B,T,C)
    float* lnf;        // (B,T,C)
    float* lnf_mean;   // (B,T)
    float* lnf_rstd;   // (B,T)
    float* logits;     // (B,T,Vp), overwritten by dlogits in backward
    float* losses;     // (B,T)
    float* proj;       // (B,T,C) scratch: a projection's output before the residual add
    // backward scratch
    float* dres;       // (B,T,C) gradient of the residual stream
    float* dtmp;       // (B,T,C)
    float* dqkv;       // (B,T,3C)
    float* dfch;       // (B,T,4C)
    float* dfch_gelu;  // (B,T,4C)
};

// The model: the buffers and table every family has (llmc/model.h), GPT-2's configuration,
// named views of the parameters and gradients, and the activations.
struct GPT2 : ModelBase {
    GPT2Config config;
    ParamPtrs p, g;
    Activations acts;
};


// The floats of each activation (in Activations' order) for micro-batches of B x T. size_t:
// L*B*NH*T*T passes 2^31 at d12, B=16, T=1024. Returns their sum.
constexpr int GPT2_NUM_ACTIVATIONS = sizeof(Activations) / sizeof(float*);
// tp: the ranks of a tensor-parallel group (each holds 1/tp of the heads, of FC's hidden units
// and of the vocabulary's logits); sp: with sequence parallelism, 1/tp of the positions of the
// residual stream, the norms and their outputs (and of the gradient of the residual stream).
inline size_t gpt2_activation_sizes(const GPT2Config& cfg, int B, int T, size_t sizes[GPT2_NUM_ACTIVATIONS],
                                    int tp = 1, int layers = -1, bool sp = false) {  // layers: -pp, the stage's
    const size_t L = layers >= 0 ? layers : cfg.num_layers, C = cfg.channels, NH = cfg.num_heads / tp, Vp = cfg.padded_vocab_size / tp;
    const size_t BT = (size_t)B * T, A = C / tp;  // A: this rank's attention channels (its heads)
    const size_t R = (size_t)B * T / (sp ? tp : 1);  // rows of the residual stream here
    const size_t s[] = {R * C, L * R * C, L * R, L * R, L * BT * 3 * A, L * BT * A,
                        L * B * NH * T * T, L * R * C, L * R * C, L * R, L * R,
                        L * BT * 4 * A, L * BT * 4 * A, L * R * C, R * C, R, R, BT * Vp, BT,
                        BT * C, R * C, BT * C, BT * 3 * A, BT * 4 * A, BT * 4 * A};
    static_assert(sizeof(s) / sizeof(s[0]) == GPT2_NUM_ACTIVATIONS, "one size per activation");
    size_t total = 0;
    for (int i = 0; i < GPT2_NUM_ACTIVATIONS; i++) total += (sizes[i] = s[i]);
    return total;
}

// Sets up the table and the parameter buffer (zeroed; with_params false: none, see
// model_base_init). Fails with a message on a bad config.
inline void gpt2_init(GPT2* model, const GPT2Config& cfg, bool with_params = true) {
    const char* problem = gpt2_config_problem(cfg);
    if (problem != nullptr) fail("model config: %s", problem);
    model->config = cfg;
    const size_t n = gpt2_param_table(cfg, model->tensors);
    model_base_init(model, FAMILY_GPT2, gpt2_layout(model->tensors, cfg.num_layers), n, cfg.channels, cfg.vocab_size,
                    cfg.padded_vocab_size, cfg.max_seq_len, with_params);
    if (with_params) model->p = param_ptrs(model->params, model->tensors);
}

// Gradients, optimizer moments and activations for micro-batch B x T.
// grads_len, opt_len: see model_base_alloc_state.
inline void gpt2_alloc_state(GPT2* model, int B, int T, size_t grads_len = SIZE_MAX, size_t opt_len = SIZE_MAX) {
    model_base_alloc_state(model, B, T, grads_len, opt_len);
    if (model->grads != nullptr) model->g = param_ptrs(model->grads, model->tensors);
    size_t sizes[GPT2_NUM_ACTIVATIONS];
    gpt2_activation_sizes(model->config, B, T, sizes, model->tp != nullptr ? model->tp->size : 1, model->num_layers,
                          model->tp != nullptr && model->tp->sp);
    model->acts_memory = carve_buffers((float**)&model->acts, sizes, GPT2_NUM_ACTIVATIONS, &model->acts_floats);
}


// Gradient views from where each row's gradient lives (views[i]; a per-layer row's is unused
// when a GradSink places the layers).
inline void gpt2_bind_grads(GPT2* model, float* const views[NUM_PARAM_TENSORS]) { model->g = param_ptrs_of(views); }

// GPT-2 init: weights N(0, 0.02), the two residual projections N(0, 0.02/sqrt(2L)),
// LayerNorm weights 1, biases 0, padded wte rows 0. The values that are not 0 go to
// emit(begin, values, count) in flat order (init_emit), so a ZeRO 3 rank keeps only its part.
template <typename Emit>
inline void gpt2_init_values(const GPT2Config& cfg, const ParamTensor table[NUM_PARAM_TENSORS], uint32_t seed,
                             Emit&& emit) {
    NormalRng rng(seed);
    float residual_std = 0.02f / sqrtf(2.0f * cfg.num_layers);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        const ParamTensor& t = table[i];
        bool is_ln_weight = !strcmp(t.name, "ln1w") || !strcmp(t.name, "ln2w") || !strcmp(t.name, "lnfw");
        if (is_ln_weight) {
            init_emit(t.offset, t.numel, [] { return 1.0f; }, emit);
        } else if (t.decays) {
            float std = (!strcmp(t.name, "attprojw") || !strcmp(t.name, "fcprojw")) ? residual_std : 0.02f;
            size_t n = t.numel;
            if (!strcmp(t.name, "wte")) n = (size_t)cfg.vocab_size * cfg.channels;  // padding stays 0
            init_emit(t.offset, n, [&] { return (float)(std * rng.next()); }, emit);
        }  // biases stay 0
    }
}

inline void gpt2_init_random(GPT2* model, uint32_t seed) {
    gpt2_init_values(model->config, model->tensors, seed, [&](size_t begin, const float* v, size_t count) {
        memcpy(model->params + begin, v, count * sizeof(float));
    });
}

// The sizes a rank computes with: the whole model's, or with -tp its part of the heads (NH), of
// the attention's channels (A), of FC's hidden units (H) and of the vocabulary's rows
// [v0, v0 + Vp) (as Llama's llama_dims).
struct GPT2Dims {
    int A, NH, H, Vp, v0;
};
// (tp, rank: the rank's place in its tensor-parallel group; the GPU model asks with its own)
inline GPT2Dims gpt2_dims(const GPT2Config& c, int tp, int rank) {
    const int C = c.channels, Vl = c.padded_vocab_size / tp;
    return {C / tp, c.num_heads / tp, 4 * C / tp, Vl, rank * Vl};
}
inline GPT2Dims gpt2_dims_of(const GPT2* m) {
    return gpt2_dims(m->config, m->tp != nullptr ? m->tp->size : 1, m->tp != nullptr ? m->tp->rank : 0);
}

// Layer l's slices of the kept activations, and the residual stream it reads, for the
// allocated B x T (a smaller forward batch is a prefix of each slice). size_t throughout:
// test_offsets checks them at GPT-3 175B's shape.
struct GPT2LayerActs {
    const float* residual;  // (B,T,C) the layer's input: encoded, or the previous layer's residual3
    float *ln1, *ln1_mean, *ln1_rstd, *qkv, *atty, *att, *residual2, *ln2, *ln2_mean, *ln2_rstd, *fch, *fch_gelu,
        *residual3;
};
inline GPT2LayerActs gpt2_layer_acts(const GPT2* model, int l) {
    const Activations& a = model->acts;
    const int tp = model->tp != nullptr ? model->tp->size : 1, sp = model->tp != nullptr && model->tp->sp ? tp : 1;
    const size_t BT = (size_t)model->B * model->T, BTA = BT * model->config.channels / tp, li = (size_t)l;  // BTA: this rank's heads' channels
    const size_t R = BT / sp, RC = R * model->config.channels;  // -sp: this rank's positions of the residual stream
    const size_t att_stride = BT * (model->config.num_heads / tp) * model->T;
    GPT2LayerActs v;
    v.residual = l == 0 ? a.encoded : a.residual3 + (li - 1) * RC;
    v.ln1 = a.ln1 + li * RC;
    v.ln1_mean = a.ln1_mean + li * R;
    v.ln1_rstd = a.ln1_rstd + li * R;
    v.qkv = a.qkv + li * 3 * BTA;
    v.atty = a.atty + li * BTA;
    v.att = a.att + li * att_stride;
    v.residual2 = a.residual2 + li * RC;
    v.ln2 = a.ln2 + li * RC;
    v.ln2_mean = a.ln2_mean + li * R;
    v.ln2_rstd = a.ln2_rstd + li * R;
    v.fch = a.fch + li * 4 * BTA;
    v.fch_gelu = a.fch_gelu + li * 4 * BTA;
    v.residual3 = a.residual3 + li * RC;
    return v;
}

// ---------------------------------------------------------------------------------------
// Forward: inputs (B,T) token ids; targets (B,T) or nullptr. With targets, fills
// acts.losses and model->mean_loss. B and T may be smaller than what was allocated.
inline void gpt2_forward(GPT2* model, const int* inputs, const int* targets, int B, int T) {
    const GPT2Config& cfg = model->config;
    CHECK(B <= model->B && T <= model->T, "B=%d T=%d but allocated for B=%d T=%d", B, T, model->B, model->T);
    // L: this stage's layers (-pp; all of them otherwise)
    int L = model->num_layers, C = cfg.channels, V = cfg.vocab_size, Vp = cfg.padded_vocab_size;
    for (int i = 0; model->pp_first && i < B * T; i++)
        CHECK(inputs[i] >= 0 && inputs[i] < V, "token %d at %d outside vocab %d", inputs[i], i, V);
    const ParamPtrs& p = model->p;
    Activations& a = model->acts;
    int N = B * T;
    // -tp: this rank's heads (A channels of attention, NHl heads), FC units (H) and vocabulary
    // rows [v0, v0 + Vl); the row-parallel projections' partial sums meet in `meet`
    TensorParallel* tp = model->tp;
    const GPT2Dims d = gpt2_dims_of(model);
    const int A = d.A, NHl = d.NH, H = d.H, v0 = d.v0, Vl = d.Vp;
    // -sp: the residual stream holds Nr of the N positions (llmc/tensor_parallel.h: sp_row); a
    // norm's output is gathered to all N (`whole`) for the matmul that reads it, and `meet`
    // reduce-scatters instead of all-reducing. Returns where the sum is: x, or (-sp) the scratch.
    TpStream ts(tp, B, T, C);
    const bool sp = ts.sp;
    const int Nr = ts.rows;
    auto whole = [&](const float* x) { return ts.whole(x); };
    auto meet = [&](float* x, const float* bias) -> float* {  // the group's sum, then the bias once
        if (tp == nullptr) return x;
        float* out = ts.sum(x);
        for (int i = 0; i < Nr; i++)
            for (int c = 0; c < C; c++) out[(size_t)i * C + c] += bias[c];
        return out;
    };

    auto phase = [model](Phase p) { phase_clock_mark(model->phases, p); };
    phase(PHASE_ENCODER);
    if (!model->pp_first) {
        // -pp: a.encoded holds the stage before's output
    } else if (tp == nullptr) {
        encoder_forward(a.encoded, inputs, p.wte, p.wpe, B, T, C);
    } else {  // the token's row from the rank that holds it, then the position's, as encoder_forward adds them
        tp_embedding_lookup(tp, sp ? a.proj : a.encoded, inputs, p.wte, N, C, v0, Vl, !sp);
        if (sp) sp_reduce_scatter(tp, a.proj, a.encoded, B, T, C);  // this rank's positions
        for (int i = 0; i < Nr; i++)
            for (int c = 0; c < C; c++) a.encoded[(size_t)i * C + c] += p.wpe[ts.position(i) * C + c];
    }
    const int run_lo = model->run_lo, run_hi = model->run_hi < 0 ? L : model->run_hi;  // -vp: one chunk's
    for (int l = run_lo; l < run_hi; l++) {
        const GPT2LayerActs la = gpt2_layer_acts(model, l);
        float* slice[NUM_LAYER_TENSORS];
        phase(PHASE_COMM);  // ZeRO 3 waits here for the layer's gather
        model_layer_params(model, l, l + 1 < L ? l + 1 : -1, slice);
        const LayerPtrs lp = layer_ptrs_of(slice);
        phase(PHASE_LAYERNORM);
        layernorm_forward(la.ln1, la.ln1_mean, la.ln1_rstd, la.residual, lp.ln1w, lp.ln1b, Nr, C);
        phase(PHASE_MATMUL);
        matmul_forward(la.qkv, whole(la.ln1), lp.qkvw, lp.qkvb, B, T, C, 3 * A);
        phase(PHASE_ATTENTION_FWD);
        attention_forward(la.atty, la.att, la.qkv, B, T, A, NHl);
        phase(PHASE_MATMUL);
        matmul_forward(a.proj, la.atty, lp.attprojw, tp == nullptr ? lp.attprojb : nullptr, B, T, A, C);
        phase(PHASE_COMM);
        const float* attn = meet(a.proj, lp.attprojb);
        phase(PHASE_LAYERNORM);
        residual_forward(la.residual2, la.residual, attn, (size_t)Nr * C);
        layernorm_forward(la.ln2, la.ln2_mean, la.ln2_rstd, la.residual2, lp.ln2w, lp.ln2b, Nr, C);
        phase(PHASE_MATMUL);
        matmul_forward(la.fch, whole(la.ln2), lp.fcw, lp.fcb, B, T, C, H);
        phase(PHASE_GELU);
        gelu_forward(la.fch_gelu, la.fch, (size_t)N * H);
        phase(PHASE_MATMUL);
        matmul_forward(a.proj, la.fch_gelu, lp.fcprojw, tp == nullptr ? lp.fcprojb : nullptr, B, T, H, C);
        phase(PHASE_COMM);
        const float* mlp = meet(a.proj, lp.fcprojb);
        phase(PHASE_LAYERNORM);
        residual_forward(la.residual3, la.residual2, mlp, (size_t)Nr * C);
    }
    if (!model->pp_last) {  // -pp: the last layer's residual3 goes to the next stage
        phase(PHASE_OTHER);
        return;
    }
    layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, gpt2_layer_acts(model, L - 1).residual3, p.lnfw, p.lnfb, Nr, C);
    phase(PHASE_CLASSIFIER_MATMUL);
    matmul_forward(a.logits, whole(a.lnf), p.wte, nullptr, B, T, C, Vl);  // tied head: wte is the classifier
    if (targets != nullptr) {
        phase(PHASE_CLASSIFIER);
        for (int i = 0; i < N; i++)
            CHECK(targets[i] >= 0 && targets[i] < V, "target %d at %d outside vocab %d", targets[i], i, V);
        if (tp != nullptr) tp_crossentropy_forward(tp, a.losses, a.logits, targets, N, V, v0, Vl);
        else crossentropy_forward(a.losses, a.logits, targets, N, V, Vp);
        double sum = 0.0;
        for (int i = 0; i < N; i++) sum += a.losses[i];
        model->mean_loss = (float)(sum / N);
    }
    phase(PHASE_OTHER);
}

// Backward of the last forward (same inputs/targets, full allocated B and T), accumulating
// (+=) into model->grads, or where sink says for the layers. dloss is the weight of each
// position's loss in the step's mean: 1 / (B * T * grad_accum_steps).
inline void gpt2_backward(GPT2* model, const int* inputs, const int* targets, float dloss,
                          GradSink* sink = nullptr) {
    const GPT2Config& cfg = model->config;
    int B = model->B, T = model->T;
    int L = model->num_layers, C = cfg.channels, V = cfg.vocab_size, Vp = cfg.padded_vocab_size;
    const ParamPtrs& p = model->p;
    const ParamPtrs& g = model->g;
    Activations& a = model->acts;
    size_t BTC = (size_t)B * T * C;
    int N = B * T;
    // -tp: as in the forward; a column-parallel matmul's input gradient is this rank's part of
    // the sum: `meet` adds the group's
    TensorParallel* tp = model->tp;
    const GPT2Dims d = gpt2_dims_of(model);
    const int A = d.A, NHl = d.NH, H = d.H, v0 = d.v0, Vl = d.Vp;
    const size_t BTA = (size_t)B * T * A;
    // -sp (as in the forward): dres holds this rank's Nr positions; `whole` gathers a buffer of
    // the residual stream's positions for a matmul, `meet` reduce-scatters an input gradient to
    // this rank's positions (returning where it is), and `norm_grads` adds a norm's weight
    // gradients, found from this rank's positions, over the group
    TpStream ts(tp, B, T, C);
    const bool sp = ts.sp;
    const int Nr = ts.rows;
    auto whole = [&](const float* x) { return ts.whole(x); };
    auto meet = [&](float* x) {
        if (tp != nullptr) phase_clock_mark(model->phases, PHASE_COMM);
        return ts.sum(x);
    };
    auto norm_grads = [&](float* w, float* b, auto&& compute) {
        float* g2[2] = {w, b};
        const size_t n2[2] = {(size_t)C, (size_t)C};
        ts.norm_grads(g2, n2, 2, compute);
    };

    auto phase = [model](Phase p) { phase_clock_mark(model->phases, p); };
    if (model->pp_last) {  // -pp: else dres holds the next stage's gradient of this stage's output
        phase(PHASE_CLASSIFIER);
        if (tp != nullptr) tp_crossentropy_backward(tp, a.logits, targets, dloss, N, V, v0, Vl);
        else crossentropy_backward(a.logits, targets, dloss, N, V, Vp);  // logits now hold dlogits
        phase(PHASE_CLASSIFIER_MATMUL);
        memset(a.dtmp, 0, BTC * sizeof(float));
        matmul_backward(a.dtmp, g.wte, nullptr, a.logits, whole(a.lnf), p.wte, B, T, C, Vl);
        const float* dlnf = meet(a.dtmp);
        phase(PHASE_LAYERNORM);
        memset(a.dres, 0, (size_t)Nr * C * sizeof(float));
        norm_grads(g.lnfw, g.lnfb, [&] {
            layernorm_backward(a.dres, g.lnfw, g.lnfb, dlnf, gpt2_layer_acts(model, L - 1).residual3, p.lnfw,
                               a.lnf_mean, a.lnf_rstd, Nr, C);
        });
    }
    // dres is the gradient of the residual stream; each block adds into it on the way down
    const int run_lo = model->run_lo, run_hi = model->run_hi < 0 ? L : model->run_hi;  // -vp: one chunk's
    for (int l = run_hi - 1; l >= run_lo; l--) {
        float* pslice[NUM_LAYER_TENSORS];
        phase(PHASE_COMM);
        model_layer_params(model, l, l - 1, pslice);
        const LayerPtrs lp = layer_ptrs_of(pslice);
        LayerPtrs lg = layer_ptrs(model->grads, model->tensors, l, L);
        if (sink != nullptr) {
            float* slice[NUM_LAYER_TENSORS];
            sink->layer_grads(l, slice);
            lg = layer_ptrs_of(slice);
        }
        const GPT2LayerActs la = gpt2_layer_acts(model, l);
        // residual3 = residual2 + fcproj(gelu(fc(ln2(residual2))))
        phase(PHASE_MATMUL);
        memset(a.dfch_gelu, 0, 4 * BTA * sizeof(float));
        matmul_backward(a.dfch_gelu, lg.fcprojw, lg.fcprojb, whole(a.dres), la.fch_gelu, lp.fcprojw, B, T, H, C);
        phase(PHASE_GELU);
        memset(a.dfch, 0, 4 * BTA * sizeof(float));
        gelu_backward(a.dfch, la.fch, a.dfch_gelu, 4 * BTA);
        phase(PHASE_MATMUL);
        memset(a.dtmp, 0, BTC * sizeof(float));
        matmul_backward(a.dtmp, lg.fcw, lg.fcb, a.dfch, whole(la.ln2), lp.fcw, B, T, C, H);
        const float* dln2 = meet(a.dtmp);
        phase(PHASE_LAYERNORM);
        norm_grads(lg.ln2w, lg.ln2b, [&] {
            layernorm_backward(a.dres, lg.ln2w, lg.ln2b, dln2, la.residual2, lp.ln2w, la.ln2_mean, la.ln2_rstd, Nr, C);
        });
        // residual2 = residual + attproj(attention(qkv(ln1(residual))))
        phase(PHASE_MATMUL);
        memset(a.dtmp, 0, BTC * sizeof(float));
        matmul_backward(a.dtmp, lg.attprojw, lg.attprojb, whole(a.dres), la.atty, lp.attprojw, B, T, A, C);
        phase(PHASE_ATTENTION_BWD);
        memset(a.dqkv, 0, 3 * BTA * sizeof(float));
        attention_backward(a.dqkv, a.dtmp, la.qkv, la.att, B, T, A, NHl);
        phase(PHASE_MATMUL);
        memset(a.dtmp, 0, BTC * sizeof(float));
        matmul_backward(a.dtmp, lg.qkvw, lg.qkvb, a.dqkv, whole(la.ln1), lp.qkvw, B, T, C, 3 * A);
        const float* dln1 = meet(a.dtmp);
        phase(PHASE_LAYERNORM);
        norm_grads(lg.ln1w, lg.ln1b, [&] {
            layernorm_backward(a.dres, lg.ln1w, lg.ln1b, dln1, la.residual, lp.ln1w, la.ln1_mean, la.ln1_rstd, Nr, C);
        });
        if (sink != nullptr) {
            phase(PHASE_COMM);
            sink->layer_done(l);  // its reduction may start now
        }
    }
    phase(PHASE_ENCODER);
    if (!model->pp_first) {
        // -pp: dres is the gradient of this stage's input, for the stage before
    } else if (tp == nullptr) {
        encoder_backward(g.wte, g.wpe, a.dres, inputs, B, T, C);
    } else if (!sp) {  // wpe whole, wte's rows of this rank's tokens only: the same sums in the same order
        for (int t = 0; t < T; t++)
            for (int b = 0; b < B; b++)
                for (int c = 0; c < C; c++) g.wpe[(size_t)t * C + c] += a.dres[((size_t)b * T + t) * C + c];
        for (int i = 0; i < N; i++) {
            const int tok = inputs[i] - v0;
            if (tok < 0 || tok >= Vl) continue;
            for (int c = 0; c < C; c++) g.wte[(size_t)tok * C + c] += a.dres[(size_t)i * C + c];
        }
    } else {  // -sp: wpe's rows of this rank's positions (added over the group), wte's from every position
        float* gw[1] = {g.wpe};
        const size_t nw[1] = {(size_t)cfg.max_seq_len * C};
        ts.norm_grads(gw, nw, 1, [&] {
            for (int i = 0; i < Nr; i++)
                for (int c = 0; c < C; c++) g.wpe[ts.position(i) * C + c] += a.dres[(size_t)i * C + c];
        });
        const float* dres = whole(a.dres);
        for (int i = 0; i < N; i++) {
            const int tok = inputs[i] - v0;
            if (tok < 0 || tok >= Vl) continue;
            for (int c = 0; c < C; c++) g.wte[(size_t)tok * C + c] += dres[(size_t)i * C + c];
        }
    }
    if (sink != nullptr) {
        phase(PHASE_COMM);
        sink->backward_done();
    }
    phase(PHASE_OTHER);
}

inline void gpt2_zero_grad(GPT2* model) {
    memset(model->grads, 0, model->num_parameters * sizeof(float));
}

// Global L2 norm of all gradients, summed in double.
inline float gpt2_grad_norm(const GPT2* model) {
    return (float)std::sqrt(grad_sum_squares(model->grads, model->num_parameters));
}

// One AdamW step over every tensor; t is the 1-based step count (bias correction).
inline void gpt2_update(GPT2* model, float lr, float beta1, float beta2, float eps,
                        float weight_decay, float grad_scale, int t) {
    adamw_update_table(model->tensors, NUM_PARAM_TENSORS, model->params, model->grads, model->m, model->v, lr, beta1,
                       beta2, eps, weight_decay, grad_scale, t);
}

inline void gpt2_free(GPT2* model) { model_free_buffers(model); }
