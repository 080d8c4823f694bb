// llama3.h: the Llama 3 model on the CPU: configuration, the parameter table, random init,
// forward, backward. One training step reads top to bottom in llama_forward and
// llama_backward; AdamW is GPT-2's (cpu/adamw.h) over this table.
// defines: LlamaConfig, llama_config_problem, llama_config_from_descriptor, LLAMA_NUM_PARAM_TENSORS,
//          llama_param_table, llama_layout, Llama, llama_activation_sizes, LlamaLayerActs, llama_layer_acts, llama_init, llama_alloc_state, llama_bind_grads,
//          llama_init_random, llama_forward, llama_backward, llama_zero_grad, llama_update, llama_free
//
// The architecture (Meta's Llama 3, as Hugging Face's LlamaForCausalLM computes it):
//   x = wte[tokens]
//   per layer:  x = x + attproj(attention(rope(qkv(rmsnorm1(x)))))   grouped-query heads
//               x = x + fcproj(silu(gate(rmsnorm2(x))) * up(rmsnorm2(x)))
//   logits = lmhead(rmsnorm_f(x))                                      an untied head
// No biases. Glossary: B batch, T sequence length, C channels, NH query heads, NKV key/value
// heads (NH/NKV query heads share one), hs = C/NH head size, F the MLP's hidden size,
// L layers, V vocabulary, Vp vocabulary padded to a multiple of 128, maxT positions.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "model.h"            // defines: ParamTensor, param_table_build, ModelBase, GradSink, carve_buffers, NormalRng, ...
#include "gpt2.h"             // defines: round_up_128 (and the CPU layers: matmul, attention, residual, cross-entropy)
#include "cpu/rmsnorm.h"      // defines: rmsnorm_forward, rmsnorm_backward
#include "cpu/rope.h"         // defines: rope_table, rope_forward, rope_backward
#include "cpu/swiglu.h"       // defines: swiglu_forward, swiglu_backward
#include "tensor_parallel.h"  // defines: TpSplit, tp_embedding_lookup, tp_crossentropy_forward, tp_crossentropy_backward

struct LlamaConfig {
    int max_seq_len;        // maxT
    int vocab_size;         // V
    int padded_vocab_size;  // Vp
    int num_layers;         // L
    int num_heads;          // NH: query heads
    int num_kv_heads;       // NKV: key/value heads, NH % NKV == 0
    int channels;           // C = NH * hs
    int ffn_hidden;         // F: the SwiGLU MLP's hidden size
    float norm_eps;         // RMSNorm's epsilon
    float rope_theta;       // RoPE's base
    RopeScaling rope_scaling;  // Llama 3.1's long-context frequencies (factor 0: none)
};

// nullptr when the configuration is sane, else what is wrong
inline const char* llama_config_problem(const LlamaConfig& c) {
    if (c.max_seq_len < 1 || c.max_seq_len > 1 << 20) return "maxT out of range [1, 2^20]";
    if (c.vocab_size < 1 || c.vocab_size > 1 << 24) return "vocab size out of range [1, 2^24]";
    if (c.padded_vocab_size < c.vocab_size || c.padded_vocab_size > (1 << 24) + 128)
        return "padded vocab size smaller than vocab size or too large";
    if (c.num_layers < 1 || c.num_layers > 1000) return "layer count out of range [1, 1000]";
    if (c.channels < 1 || c.channels > 1 << 16) return "channels out of range [1, 65536]";
    if (c.num_heads < 1 || c.channels % c.num_heads != 0) return "channels not divisible by heads";
    if ((c.channels / c.num_heads) % 2 != 0) return "head size odd (RoPE turns pairs of channels)";
    if (c.num_kv_heads < 1 || c.num_heads % c.num_kv_heads != 0) return "heads not divisible by key/value heads";
    if (c.ffn_hidden < 1 || c.ffn_hidden > 1 << 20) return "MLP hidden size out of range [1, 2^20]";
    if (!(c.norm_eps > 0.0f && c.norm_eps < 1.0f)) return "norm eps out of range (0, 1)";
    if (!(c.rope_theta > 1.0f && std::isfinite(c.rope_theta))) return "RoPE theta not above 1";
    const RopeScaling& r = c.rope_scaling;
    if (r.factor != 0.0f && !(r.factor >= 1.0f && r.low_freq_factor > 0.0f && r.high_freq_factor > r.low_freq_factor &&
                              r.original_max_pos >= 1.0f && std::isfinite(r.factor) && std::isfinite(r.high_freq_factor) &&
                              std::isfinite(r.original_max_pos)))
        return "RoPE scaling needs factor >= 1, 0 < low_freq_factor < high_freq_factor and an original context >= 1";
    return nullptr;
}

// "llama3:l4c256h8kv2f704": L=4, C=256, NH=8, NKV=2, F=704, with Llama 3's vocabulary
// (128,256), maxT 8192, eps 1e-5, theta 500,000; "llama3:l4c256h8kv2f704v50257": the same
// with another vocabulary size (GPT-2's, to train on GPT-2-tokenized shards). "llama3.1:8b", "llama3.1:70b",
// "llama3.1:405b": Meta's shapes (8 key/value heads, head size 128, maxT 131,072, RoPE
// scaling factor 8, low 1, high 4, original context 8192). Returns false if the descriptor is
// not one of these or the configuration it gives is not sane.
inline bool llama_config_from_descriptor(const char* desc, LlamaConfig* out) {
    static const struct { const char* name; int L, C, NH, F; } released[] = {
        {"llama3.1:8b", 32, 4096, 32, 14336},
        {"llama3.1:70b", 80, 8192, 64, 28672},
        {"llama3.1:405b", 126, 16384, 128, 53248},
    };
    for (const auto& r : released) {
        if (strcmp(desc, r.name) != 0) continue;
        LlamaConfig cfg = {131072, 128256, round_up_128(128256), r.L, r.NH, 8, r.C, r.F, 1e-5f, 500000.0f, {}};
        cfg.rope_scaling = {8.0f, 1.0f, 4.0f, 8192.0f};
        *out = cfg;
        return true;
    }
    long long l = 0, c = 0, h = 0, kv = 0, f = 0, v = 128256;
    char check[128];
    if (strncmp(desc, "llama3:", 7) != 0) return false;
    const int fields = sscanf(desc + 7, "l%lldc%lldh%lldkv%lldf%lldv%lld", &l, &c, &h, &kv, &f, &v);
    if (fields != 5 && fields != 6) return false;
    snprintf(check, sizeof(check), "llama3:l%lldc%lldh%lldkv%lldf%lld", l, c, h, kv, f);
    if (fields == 6) snprintf(check + strlen(check), sizeof(check) - strlen(check), "v%lld", v);
    if (strcmp(check, desc) != 0) return false;  // no trailing text, no leading zeros or signs
    if (l < 1 || l > 1000 || c < 1 || c > 65536 || h < 1 || h > 65536 || kv < 1 || kv > 65536 || f < 1 ||
        f > (1 << 20) || v < 2 || v > (1 << 24))
        return false;
    LlamaConfig cfg = {8192, (int)v, round_up_128((int)v), (int)l, (int)h, (int)kv, (int)c, (int)f, 1e-5f, 500000.0f, {}};
    if (llama_config_problem(cfg) != nullptr) return false;
    *out = cfg;
    return true;
}

// ---------------------------------------------------------------------------------------
// The parameter table, in checkpoint order: it drives allocation, init, weight decay (the 2-D
// matrices) and, as GPT-2's, checkpoints and the ZeRO layout.
enum { LLAMA_NUM_PARAM_TENSORS = 9, LLAMA_FIRST_LAYER_TENSOR = 1, LLAMA_NUM_LAYER_TENSORS = 6 };

// Fills table[9]; returns the total number of parameters (padded vocabulary rows included).
inline size_t llama_param_table(const LlamaConfig& cfg, ParamTensor table[LLAMA_NUM_PARAM_TENSORS]) {
    const size_t Vp = cfg.padded_vocab_size, C = cfg.channels, L = cfg.num_layers, F = cfg.ffn_hidden;
    const size_t hs = C / cfg.num_heads, QKV = (cfg.num_heads + 2 * (size_t)cfg.num_kv_heads) * hs;
    const ParamRow rows[LLAMA_NUM_PARAM_TENSORS] = {
        {"wte", true, 2, Vp, C, 0},                  // token embedding
        {"rms1w", false, 2, L, C, 0},                // RMSNorm before attention
        {"qkvw", true, 3, L, QKV, C},                // [q (NH*hs) | k (NKV*hs) | v (NKV*hs)] rows
        {"attprojw", true, 3, L, C, C},              // o_proj
        {"rms2w", false, 2, L, C, 0},                // RMSNorm before the MLP
        {"fcw", true, 3, L, 2 * F, C},               // [gate (F) | up (F)] rows
        {"fcprojw", true, 3, L, C, F},               // down_proj
        {"rmsfw", false, 1, C, 0, 0},                // final RMSNorm
        {"lmheadw", true, 2, Vp, C, 0},              // the untied output head
    };
    return param_table_build(rows, LLAMA_NUM_PARAM_TENSORS, table);
}

// Tensor parallelism (llmc/tensor_parallel.h) over tp ranks: QKV column-parallel by heads (q's
// NH heads and k's and v's NKV each split, so a rank's query heads find their KV heads on the
// same rank; with fewer KV heads than ranks each rank holds the one its query heads share, the
// same as tp / NKV - 1 other ranks), gate and up column-parallel, o_proj and down_proj
// row-parallel, wte and the head by vocabulary rows; the RMSNorm weights whole on every rank.
inline void llama_tp_splits(const LlamaConfig& cfg, int tp, TpSplit splits[LLAMA_NUM_PARAM_TENSORS]) {
    const size_t hs = cfg.channels / cfg.num_heads, F = cfg.ffn_hidden, Vp = cfg.padded_vocab_size;
    const int kv_parts = cfg.num_kv_heads < tp ? cfg.num_kv_heads : 0;  // 0: one part per rank
    for (int i = 0; i < LLAMA_NUM_PARAM_TENSORS; i++) splits[i] = TpSplit();
    splits[0] = {TP_ROWS, 1, {Vp}};                                                      // wte
    splits[2] = {TP_ROWS, 3, {cfg.num_heads * hs, cfg.num_kv_heads * hs, cfg.num_kv_heads * hs}, {0, kv_parts, kv_parts}};  // qkvw
    splits[3].mode = TP_COLS;                                                           // attprojw
    splits[5] = {TP_ROWS, 2, {F, F}};                                                   // fcw
    splits[6].mode = TP_COLS;                                                           // fcprojw
    splits[8] = {TP_ROWS, 1, {Vp}};                                                     // lmheadw
}

// The sizes a rank computes with: the whole model's, or with -tp its part of the heads (NH
// query, NKV key/value), of the MLP's hidden units (F), of the attention's channels (A = NH hs)
// and of the vocabulary's rows [v0, v0 + Vp).
struct LlamaDims {
    int C, hs, NH, NKV, F, QKV, A, Vp, v0;
};
inline LlamaDims llama_dims(const LlamaConfig& cfg, int tp = 1, int tp_rank = 0) {
    LlamaDims d;
    d.C = cfg.channels;
    d.hs = cfg.channels / cfg.num_heads;
    d.NH = cfg.num_heads / tp;
    d.NKV = cfg.num_kv_heads >= tp ? cfg.num_kv_heads / tp : 1;  // fewer than ranks: the shared one
    d.F = cfg.ffn_hidden / tp;
    d.QKV = (d.NH + 2 * d.NKV) * d.hs;
    d.A = d.NH * d.hs;
    d.Vp = cfg.padded_vocab_size / tp;
    d.v0 = tp_rank * d.Vp;
    return d;
}
inline LlamaDims llama_dims_of(const ModelBase* m, const LlamaConfig& cfg) {
    return m->tp != nullptr ? llama_dims(cfg, m->tp->size, m->tp->rank) : llama_dims(cfg);
}

struct LlamaParams {
    float *wte, *rms1w, *qkvw, *attprojw, *rms2w, *fcw, *fcprojw, *rmsfw, *lmheadw;
};

// views[i]: where row i starts
inline LlamaParams llama_param_ptrs_of(float* const views[LLAMA_NUM_PARAM_TENSORS]) {
    LlamaParams v;
    float** fields[LLAMA_NUM_PARAM_TENSORS] = {&v.wte, &v.rms1w, &v.qkvw, &v.attprojw, &v.rms2w,
                                               &v.fcw, &v.fcprojw, &v.rmsfw, &v.lmheadw};
    for (int i = 0; i < LLAMA_NUM_PARAM_TENSORS; i++) *fields[i] = views[i];
    return v;
}

inline LlamaParams llama_param_ptrs(float* base, const ParamTensor table[LLAMA_NUM_PARAM_TENSORS]) {
    float* views[LLAMA_NUM_PARAM_TENSORS];
    for (int i = 0; i < LLAMA_NUM_PARAM_TENSORS; i++) views[i] = base + table[i].offset;
    return llama_param_ptrs_of(views);
}

// The per-layer rows are rms1w .. fcprojw; wte in front, rmsfw and lmheadw behind.
inline ParamLayout llama_layout(const ParamTensor table[LLAMA_NUM_PARAM_TENSORS], int L) {
    ParamLayout t;
    t.tensors = table; t.count = LLAMA_NUM_PARAM_TENSORS; t.first_layer = LLAMA_FIRST_LAYER_TENSOR;
    t.layers = LLAMA_NUM_LAYER_TENSORS; t.L = L;
    return t;
}

// Activations kept from forward for backward, and the backward's scratch; sized for the
// (B, T) the model was set up with. Recompute (-r) keeps less and redoes it in the backward,
// from the kept inputs with the forward's own functions, so the gradients are -r 0's bits:
//   -r 0  every layer's buffers below
//   -r 1  RMSNorm's outputs (rms1, rms2) and SwiGLU's (fch_swiglu) for one layer only: the
//         backward recomputes them from the layer's kept input, residual2 and fch
//   -r 2  only each layer's input (the residual stream: encoded, residual3) is kept; every
//         other per-layer buffer is one layer's, and the backward runs the layer's forward
//         again from its input before its backward
struct LlamaActivations {
    float* encoded;      // (B,T,C)
    float* rms1;         // (L,B,T,C)
    float* rms1_rstd;    // (L,B,T)
    float* qkv;          // (L,B,T,QKV) after RoPE
    float* atty;         // (L,B,T,C)
    float* att;          // (L,B,NH,T,T) softmax probabilities
    float* residual2;    // (L,B,T,C)
    float* rms2;         // (L,B,T,C)
    float* rms2_rstd;    // (L,B,T)
    float* fch;          // (L,B,T,2F) [gate | up]
    float* fch_swiglu;   // (L,B,T,F)
    float* residual3;    // (L,B,T,C)
    float* rmsf;         // (B,T,C)
    float* rmsf_rstd;    // (B,T)
    float* logits;       // (B,T,Vp), overwritten by dlogits in backward
    float* losses;       // (B,T)
    float* proj;         // (B,T,C) scratch: a projection's output before the residual add
    float* dres;         // (B,T,C) gradient of the residual stream
    float* dtmp;         // (B,T,C)
    float* dqkv;         // (B,T,QKV)
    float* dfch;         // (B,T,2F)
    float* dfch_swiglu;  // (B,T,F)
};

// The model: the buffers and table every family has (llmc/model.h), the configuration, named
// views of the parameters and gradients, the activations and the RoPE tables.
struct Llama : ModelBase {
    LlamaConfig config;
    int recompute = 0;  // -r: 0, 1 or 2 (LlamaActivations)
    LlamaParams p, g;
    LlamaActivations acts;
    std::vector<float> rope_cos, rope_sin;  // (T, hs/2)
};

// The floats of each activation (in LlamaActivations' order) for micro-batches of B x T at
// recompute level r. Returns their sum.
constexpr int LLAMA_NUM_ACTIVATIONS = sizeof(LlamaActivations) / sizeof(float*);
inline size_t llama_activation_sizes(const LlamaConfig& cfg, int B, int T, size_t sizes[LLAMA_NUM_ACTIVATIONS],
                                     int r = 0, int tp = 1, int layers = -1, bool sp = false) {  // layers: -pp, the stage's
    const LlamaDims d = llama_dims(cfg, tp);  // -tp: this rank's heads, hidden units and logits
    const size_t L = layers >= 0 ? layers : cfg.num_layers, C = cfg.channels, NH = d.NH, Vp = d.Vp, A = d.A;
    const size_t F = d.F, QKV = d.QKV;
    const size_t BT = (size_t)B * T, R = BT / (sp ? tp : 1);  // R: -sp, the residual stream's rows here
    const size_t kept = r >= 2 ? 1 : L, norm = r >= 1 ? 1 : L;  // layers of the recomputed buffers
    const size_t s[] = {R * C, norm * R * C, kept * R, kept * BT * QKV, kept * BT * A, kept * B * NH * T * T,
                        kept * R * C, norm * R * C, kept * R, kept * BT * 2 * F, norm * BT * F, L * R * C, R * C,
                        R, BT * Vp, BT, BT * C, R * C, BT * C, BT * QKV, BT * 2 * F, BT * F};
    static_assert(sizeof(s) / sizeof(s[0]) == LLAMA_NUM_ACTIVATIONS, "one size per activation");
    size_t total = 0;
    for (int i = 0; i < LLAMA_NUM_ACTIVATIONS; i++) total += (sizes[i] = s[i]);
    return total;
}

// with_params false: no parameter buffer (see model_base_init)
inline void llama_init(Llama* model, const LlamaConfig& cfg, bool with_params = true) {
    const char* problem = llama_config_problem(cfg);
    if (problem != nullptr) fail("model config: %s", problem);
    model->config = cfg;
    const size_t n = llama_param_table(cfg, model->tensors);
    model_base_init(model, FAMILY_LLAMA3, llama_layout(model->tensors, cfg.num_layers), n, cfg.channels, cfg.vocab_size,
                    cfg.padded_vocab_size, cfg.max_seq_len, with_params);
    if (with_params) model->p = llama_param_ptrs(model->params, model->tensors);
}

// grads_len, opt_len: see model_base_alloc_state; recompute: LlamaActivations.
inline void llama_alloc_state(Llama* model, int B, int T, size_t grads_len = SIZE_MAX, size_t opt_len = SIZE_MAX,
                              int recompute = 0) {
    const LlamaConfig& cfg = model->config;
    CHECK(recompute >= 0 && recompute <= 2, "recompute=%d", recompute);
    model->recompute = recompute;
    model_base_alloc_state(model, B, T, grads_len, opt_len);
    if (model->grads != nullptr) model->g = llama_param_ptrs(model->grads, model->tensors);
    size_t sizes[LLAMA_NUM_ACTIVATIONS];
    llama_activation_sizes(cfg, B, T, sizes, recompute, model->tp != nullptr ? model->tp->size : 1, model->num_layers,
                           model->tp != nullptr && model->tp->sp);
    model->acts_memory = carve_buffers((float**)&model->acts, sizes, LLAMA_NUM_ACTIVATIONS, &model->acts_floats);
    rope_table(&model->rope_cos, &model->rope_sin, T, cfg.channels / cfg.num_heads, cfg.rope_theta, cfg.rope_scaling);
}

// Layer l's slices of the kept activations, and the residual stream it reads, for the
// allocated B x T (a smaller forward batch is a prefix of each slice; with recompute the
// buffers of one layer serve every layer). size_t throughout: l * B*T * 2F passes 2^31 at
// Llama 3.1 8B and T=4096 (test_offsets checks 8B, 70B, 405B).
struct LlamaLayerActs {
    const float* residual;  // (B,T,C) the layer's input: encoded, or the previous layer's residual3
    float *rms1, *rms1_rstd, *qkv, *atty, *att, *residual2, *rms2, *rms2_rstd, *fch, *fch_swiglu, *residual3;
};
inline LlamaLayerActs llama_layer_acts(const Llama* model, int l) {
    const LlamaConfig& cfg = model->config;
    const LlamaActivations& a = model->acts;
    const LlamaDims d = llama_dims_of(model, cfg);
    const size_t C = cfg.channels, NH = d.NH, F = d.F, QKV = d.QKV, A = d.A;
    const size_t BT = (size_t)model->B * model->T, li = (size_t)l;
    const size_t R = BT / (model->tp != nullptr && model->tp->sp ? model->tp->size : 1), RC = R * C;  // -sp: rows here
    const size_t kept = model->recompute >= 2 ? 0 : li, norm = model->recompute >= 1 ? 0 : li;  // the slice's layer
    LlamaLayerActs v;
    v.residual = l == 0 ? a.encoded : a.residual3 + (li - 1) * RC;
    v.rms1 = a.rms1 + norm * RC;
    v.rms1_rstd = a.rms1_rstd + kept * R;
    v.qkv = a.qkv + kept * BT * QKV;
    v.atty = a.atty + kept * BT * A;
    v.att = a.att + kept * BT * NH * model->T;
    v.residual2 = a.residual2 + kept * RC;
    v.rms2 = a.rms2 + norm * RC;
    v.rms2_rstd = a.rms2_rstd + kept * R;
    v.fch = a.fch + kept * BT * 2 * F;
    v.fch_swiglu = a.fch_swiglu + norm * BT * F;
    v.residual3 = a.residual3 + li * RC;
    return v;
}

// Gradient views from where each row's gradient lives (a per-layer row's is unused when a
// GradSink places the layers).
inline void llama_bind_grads(Llama* model, float* const views[LLAMA_NUM_PARAM_TENSORS]) {
    model->g = llama_param_ptrs_of(views);
}

// Weights N(0, 0.02), the two residual projections N(0, 0.02/sqrt(2L)), RMSNorm weights 1,
// padded vocabulary rows 0.
template <typename Emit>
inline void llama_init_values(const LlamaConfig& cfg, const ParamTensor table[LLAMA_NUM_PARAM_TENSORS], uint32_t seed,
                              Emit&& emit) {
    NormalRng rng(seed);
    const float residual_std = 0.02f / sqrtf(2.0f * cfg.num_layers);
    for (int i = 0; i < LLAMA_NUM_PARAM_TENSORS; i++) {
        const ParamTensor& t = table[i];
        if (!t.decays) {  // the RMSNorm weights
            init_emit(t.offset, t.numel, [] { return 1.0f; }, emit);
            continue;
        }
        const bool residual = !strcmp(t.name, "attprojw") || !strcmp(t.name, "fcprojw");
        const bool vocab_rows = !strcmp(t.name, "wte") || !strcmp(t.name, "lmheadw");
        const size_t n = vocab_rows ? (size_t)cfg.vocab_size * cfg.channels : t.numel;  // padding stays 0
        const float std = residual ? residual_std : 0.02f;
        init_emit(t.offset, n, [&] { return (float)(std * rng.next()); }, emit);
    }
}

inline void llama_init_random(Llama* model, uint32_t seed) {
    llama_init_values(model->config, model->tensors, seed, [&](size_t begin, const float* v, size_t count) {
        memcpy(model->params + begin, v, count * sizeof(float));
    });
}

// ---------------------------------------------------------------------------------------
// One layer's forward, B x T positions: lp its weights (rms1w, qkvw, attprojw, rms2w, fcw,
// fcprojw), la its activations. The backward at -r 2 runs it again, so it is the one place
// a layer's forward is written.
inline void llama_layer_forward(Llama* model, float* const* lp, const LlamaLayerActs& la, int B, int T) {
    const LlamaConfig& cfg = model->config;
    const LlamaDims d = llama_dims_of(model, cfg);  // -tp: this rank's heads and hidden units
    const int C = cfg.channels, NH = d.NH, NKV = d.NKV, F = d.F, hs = d.hs, QKV = d.QKV, A = d.A, N = B * T;
    float* proj = model->acts.proj;
    TpStream ts(model->tp, B, T, C);  // -tp, -sp: where the layer's parts meet (llmc/tensor_parallel.h)
    const int Nr = ts.rows;
    auto meet = [&]() {  // -tp: a row-parallel projection's partial sums, added over the group
        if (model->tp != nullptr) phase_clock_mark(model->phases, PHASE_COMM);
        return ts.sum(proj);
    };
    auto phase = [model](Phase ph) { phase_clock_mark(model->phases, ph); };
    phase(PHASE_LAYERNORM);
    rmsnorm_forward(la.rms1, la.rms1_rstd, la.residual, lp[0], Nr, C, cfg.norm_eps);
    phase(PHASE_MATMUL);
    matmul_forward(la.qkv, ts.whole(la.rms1), lp[1], nullptr, B, T, C, QKV);
    phase(PHASE_ATTENTION_FWD);
    rope_forward(la.qkv, B, T, NH, NKV, hs, model->rope_cos.data(), model->rope_sin.data());
    attention_forward_gqa(la.atty, la.att, la.qkv, B, T, NH, NKV, hs);
    phase(PHASE_MATMUL);
    matmul_forward(proj, la.atty, lp[2], nullptr, B, T, A, C);
    const float* attn = meet();
    phase(PHASE_LAYERNORM);
    residual_forward(la.residual2, la.residual, attn, (size_t)Nr * C);
    rmsnorm_forward(la.rms2, la.rms2_rstd, la.residual2, lp[3], Nr, C, cfg.norm_eps);
    phase(PHASE_MATMUL);
    matmul_forward(la.fch, ts.whole(la.rms2), lp[4], nullptr, B, T, C, 2 * F);
    phase(PHASE_GELU);
    swiglu_forward(la.fch_swiglu, la.fch, N, F);
    phase(PHASE_MATMUL);
    matmul_forward(proj, la.fch_swiglu, lp[5], nullptr, B, T, F, C);
    const float* mlp = meet();
    phase(PHASE_LAYERNORM);
    residual_forward(la.residual3, la.residual2, mlp, (size_t)Nr * C);
}

// Forward: inputs (B,T) token ids; targets (B,T) or nullptr (then no loss). B and T may be
// smaller than allocated.
inline void llama_forward(Llama* model, const int* inputs, const int* targets, int B, int T) {
    const LlamaConfig& cfg = model->config;
    CHECK(B <= model->B && T <= model->T, "B=%d T=%d but allocated for B=%d T=%d", B, T, model->B, model->T);
    const int L = model->num_layers, C = cfg.channels, V = cfg.vocab_size, Vp = cfg.padded_vocab_size;  // L: -pp, the stage's
    for (int i = 0; model->pp_first && i < B * T; i++)
        CHECK(inputs[i] >= 0 && inputs[i] < V, "token %d at %d outside vocab %d", inputs[i], i, V);
    const LlamaParams& p = model->p;
    LlamaActivations& a = model->acts;
    const int N = B * T;
    auto phase = [model](Phase ph) { phase_clock_mark(model->phases, ph); };

    const LlamaDims d = llama_dims_of(model, cfg);  // -tp: the vocabulary rows [d.v0, d.v0 + d.Vp) are here
    TpStream ts(model->tp, B, T, C);                // -sp: the residual stream's rows here
    phase(PHASE_ENCODER);
    if (!model->pp_first) {
        // -pp: a.encoded holds the stage before's output
    } else if (ts.sp) {  // the rows of every position, then this rank's positions summed
        tp_embedding_lookup(model->tp, a.proj, inputs, p.wte, N, C, d.v0, d.Vp, false);
        sp_reduce_scatter(model->tp, a.proj, a.encoded, B, T, C);
    } else if (model->tp != nullptr) {
        tp_embedding_lookup(model->tp, a.encoded, inputs, p.wte, N, C, d.v0, d.Vp);
    } else {
        for (int i = 0; i < N; i++) memcpy(a.encoded + (size_t)i * C, p.wte + (size_t)inputs[i] * C, C * sizeof(float));
    }
    const int run_lo = model->run_lo, run_hi = model->run_hi < 0 ? L : model->run_hi;  // -vp: one chunk's
    for (int l = run_lo; l < run_hi; l++) {
        float* lp[LLAMA_NUM_LAYER_TENSORS];  // rms1w, qkvw, attprojw, rms2w, fcw, fcprojw
        phase(PHASE_COMM);  // ZeRO 3 waits here for the layer's gather
        model_layer_params(model, l, l + 1 < L ? l + 1 : -1, lp);
        llama_layer_forward(model, lp, llama_layer_acts(model, l), B, T);
    }
    if (!model->pp_last) {  // -pp: the last layer's residual3 goes to the next stage
        phase(PHASE_OTHER);
        return;
    }
    rmsnorm_forward(a.rmsf, a.rmsf_rstd, llama_layer_acts(model, L - 1).residual3, p.rmsfw, ts.rows, C, cfg.norm_eps);
    phase(PHASE_CLASSIFIER_MATMUL);
    matmul_forward(a.logits, ts.whole(a.rmsf), p.lmheadw, nullptr, B, T, C, d.Vp);
    if (targets != nullptr) {
        phase(PHASE_CLASSIFIER);
        for (int i = 0; i < N; i++)
            CHECK(targets[i] >= 0 && targets[i] < V, "target %d at %d outside vocab %d", targets[i], i, V);
        if (model->tp != nullptr) tp_crossentropy_forward(model->tp, a.losses, a.logits, targets, N, V, d.v0, d.Vp);
        else crossentropy_forward(a.losses, a.logits, targets, N, V, Vp);
        double sum = 0.0;
        for (int i = 0; i < N; i++) sum += a.losses[i];
        model->mean_loss = (float)(sum / N);
    }
    phase(PHASE_OTHER);
}

// Backward of the last forward (same inputs/targets, full allocated B and T), accumulating
// (+=) into model->grads, or where sink says for the layers (and telling it when each layer
// is done). dloss is the weight of each position's loss in the step's mean.
inline void llama_backward(Llama* model, const int* inputs, const int* targets, float dloss,
                           GradSink* sink = nullptr) {
    const LlamaConfig& cfg = model->config;
    const int B = model->B, T = model->T;
    const LlamaDims d = llama_dims_of(model, cfg);  // -tp: this rank's part, as in the forward
    const int L = model->num_layers, C = cfg.channels, NH = d.NH, NKV = d.NKV, A = d.A;  // L: -pp, the stage's
    const int V = cfg.vocab_size, Vp = cfg.padded_vocab_size, F = d.F, hs = d.hs;
    const int QKV = d.QKV;
    TensorParallel* tp = model->tp;
    // -tp, -sp (llmc/tensor_parallel.h): `meet` adds a column-parallel matmul's input gradient
    // over the group (-sp: this rank's positions of it, returning where); under -sp dres holds
    // this rank's Nr positions, ts.whole gathers the rows a matmul reads, and `norm_grads` adds
    // an RMSNorm weight's gradient, found from this rank's positions, over the group
    TpStream ts(tp, B, T, C);
    const int Nr = ts.rows;
    auto meet = [&](float* x) {
        if (tp != nullptr) phase_clock_mark(model->phases, PHASE_COMM);
        return ts.sum(x);
    };
    auto norm_grads = [&](float* w, auto&& compute) {
        const size_t n1[1] = {(size_t)C};
        ts.norm_grads(&w, n1, 1, compute);
    };
    // -tp with fewer KV heads than ranks: the tp / NKV ranks that share a KV head each find the
    // part of its k and v rows' gradient that their query heads make; a micro-step's parts are
    // added over the group (each rank's in the slot of its head, zeros elsewhere), then to what
    // the rows held (earlier micro-steps)
    const bool kv_shared = tp != nullptr && cfg.num_kv_heads < tp->size;
    const size_t kv_vals = (size_t)2 * hs * C;  // one KV head's k and v rows
    const int kv_head = kv_shared ? tp->rank / (tp->size / cfg.num_kv_heads) : 0;
    std::vector<float> kv_keep(kv_shared ? kv_vals : 0), kv_all(kv_shared ? kv_vals * cfg.num_kv_heads : 0);
    const LlamaParams& p = model->p;
    const LlamaParams& g = model->g;
    LlamaActivations& a = model->acts;
    const size_t BT = (size_t)B * T, BTC = BT * C;
    const ParamLayout layout = llama_layout(model->tensors, L);
    const int N = B * T;
    auto phase = [model](Phase ph) { phase_clock_mark(model->phases, ph); };

    if (model->pp_last) {  // -pp: else dres holds the next stage's gradient of this stage's output
        phase(PHASE_CLASSIFIER);
        if (tp != nullptr) tp_crossentropy_backward(tp, a.logits, targets, dloss, N, V, d.v0, d.Vp);
        else crossentropy_backward(a.logits, targets, dloss, N, V, Vp);  // logits now hold dlogits
        phase(PHASE_CLASSIFIER_MATMUL);
        memset(a.dtmp, 0, BTC * sizeof(float));
        matmul_backward(a.dtmp, g.lmheadw, nullptr, a.logits, ts.whole(a.rmsf), p.lmheadw, B, T, C, d.Vp);
        const float* drmsf = meet(a.dtmp);
        phase(PHASE_LAYERNORM);
        memset(a.dres, 0, (size_t)Nr * C * sizeof(float));
        norm_grads(g.rmsfw, [&] {
            rmsnorm_backward(a.dres, g.rmsfw, drmsf, llama_layer_acts(model, L - 1).residual3, p.rmsfw, a.rmsf_rstd, Nr,
                             C);
        });
    }
    // dres is the gradient of the residual stream; each block adds into it on the way down
    const int run_lo = model->run_lo, run_hi = model->run_hi < 0 ? L : model->run_hi;  // -vp: one chunk's
    for (int l = run_hi - 1; l >= run_lo; l--) {
        // this layer's weights and where its gradients go: rms1w, qkvw, attprojw, rms2w, fcw, fcprojw
        float *lp[LLAMA_NUM_LAYER_TENSORS], *lg[LLAMA_NUM_LAYER_TENSORS];
        phase(PHASE_COMM);
        model_layer_params(model, l, l - 1, lp);
        if (sink != nullptr) sink->layer_grads(l, lg);
        else layer_slices(model->grads, layout, l, lg);
        const LlamaLayerActs la = llama_layer_acts(model, l);
        if (model->recompute >= 2) {
            llama_layer_forward(model, lp, la, B, T);  // everything but its input, again
        } else if (model->recompute == 1) {  // the outputs of the norms and of SwiGLU
            phase(PHASE_LAYERNORM);
            rmsnorm_forward(la.rms1, la.rms1_rstd, la.residual, lp[0], Nr, C, cfg.norm_eps);
            rmsnorm_forward(la.rms2, la.rms2_rstd, la.residual2, lp[3], Nr, C, cfg.norm_eps);
            phase(PHASE_GELU);
            swiglu_forward(la.fch_swiglu, la.fch, N, F);
        }
        // residual3 = residual2 + fcproj(swiglu(fc(rms2(residual2))))
        phase(PHASE_MATMUL);
        memset(a.dfch_swiglu, 0, BT * F * sizeof(float));
        matmul_backward(a.dfch_swiglu, lg[5], nullptr, ts.whole(a.dres), la.fch_swiglu, lp[5], B, T, F, C);
        phase(PHASE_GELU);
        memset(a.dfch, 0, BT * 2 * F * sizeof(float));
        swiglu_backward(a.dfch, la.fch, a.dfch_swiglu, N, F);
        phase(PHASE_MATMUL);
        memset(a.dtmp, 0, BTC * sizeof(float));
        matmul_backward(a.dtmp, lg[4], nullptr, a.dfch, ts.whole(la.rms2), lp[4], B, T, C, 2 * F);
        const float* drms2 = meet(a.dtmp);
        phase(PHASE_LAYERNORM);
        norm_grads(lg[3], [&] { rmsnorm_backward(a.dres, lg[3], drms2, la.residual2, lp[3], la.rms2_rstd, Nr, C); });
        // residual2 = residual + attproj(attention(rope(qkv(rms1(residual)))))
        phase(PHASE_MATMUL);
        memset(a.dtmp, 0, BTC * sizeof(float));
        matmul_backward(a.dtmp, lg[2], nullptr, ts.whole(a.dres), la.atty, lp[2], B, T, A, C);
        phase(PHASE_ATTENTION_BWD);
        memset(a.dqkv, 0, BT * QKV * sizeof(float));
        attention_backward_gqa(a.dqkv, a.dtmp, la.qkv, la.att, B, T, NH, NKV, hs);
        rope_backward(a.dqkv, B, T, NH, NKV, hs, model->rope_cos.data(), model->rope_sin.data());
        phase(PHASE_MATMUL);
        memset(a.dtmp, 0, BTC * sizeof(float));
        float* kv_rows = lg[1] + (size_t)A * C;  // after the query heads' rows
        if (kv_shared) {
            memcpy(kv_keep.data(), kv_rows, kv_vals * sizeof(float));
            memset(kv_rows, 0, kv_vals * sizeof(float));
        }
        matmul_backward(a.dtmp, lg[1], nullptr, a.dqkv, ts.whole(la.rms1), lp[1], B, T, C, QKV);
        if (kv_shared) {
            phase(PHASE_COMM);
            std::fill(kv_all.begin(), kv_all.end(), 0.0f);
            memcpy(kv_all.data() + kv_head * kv_vals, kv_rows, kv_vals * sizeof(float));
            tp->all_reduce(kv_all.data(), kv_all.size(), false);
            for (size_t i = 0; i < kv_vals; i++) kv_rows[i] = kv_keep[i] + kv_all[kv_head * kv_vals + i];
        }
        const float* drms1 = meet(a.dtmp);
        phase(PHASE_LAYERNORM);
        norm_grads(lg[0], [&] { rmsnorm_backward(a.dres, lg[0], drms1, la.residual, lp[0], la.rms1_rstd, Nr, C); });
        if (sink != nullptr) {
            phase(PHASE_COMM);
            sink->layer_done(l);  // its reduction may start now
        }
    }
    phase(PHASE_ENCODER);
    // the same token can repeat anywhere in the batch: a serial pass in (b,t) order keeps the
    // sums deterministic (-pp: only the first stage has the embedding; dres is the gradient of
    // a later stage's input)
    const float* dres = model->pp_first ? ts.whole(a.dres) : nullptr;  // -sp: every position's
    for (int i = 0; model->pp_first && i < N; i++) {
        if (inputs[i] < d.v0 || inputs[i] >= d.v0 + d.Vp) continue;  // -tp: another rank's row
        float* dt = g.wte + (size_t)(inputs[i] - d.v0) * C;
        const float* d = dres + (size_t)i * C;
        for (int c = 0; c < C; c++) dt[c] += d[c];
    }
    if (sink != nullptr) {
        phase(PHASE_COMM);
        sink->backward_done();
    }
    phase(PHASE_OTHER);
}

inline void llama_zero_grad(Llama* model) { memset(model->grads, 0, model->num_parameters * sizeof(float)); }

inline void llama_update(Llama* model, float lr, float beta1, float beta2, float eps, float weight_decay,
                         float grad_scale, int t) {
    adamw_update_table(model->tensors, LLAMA_NUM_PARAM_TENSORS, model->params, model->grads, model->m, model->v, lr,
                       beta1, beta2, eps, weight_decay, grad_scale, t);
}

inline void llama_free(Llama* model) { model_free_buffers(model); }
