// plan.h: the planner's model of a large run (./plan, plan.cpp): what one GPU holds at a ZeRO
// stage and recompute level, and a PREDICTED step time on N GPUs from a compute rate and a
// bandwidth/latency model of NCCL's rings (dev/SCALING.md, its "ZeRO 3" section). Host only:
// the shapes come from llmc/families.h, the ZeRO sums from llmc/zero.h; no CUDA header is
// included, so it builds without nvcc. Nothing here is measured: every time is a prediction.
// defines: PLAN_VALUE_BYTES, PLAN_WORKSPACE_BYTES, plan_activation_bytes, plan_memory, PlanGpu, PLAN_GPUS,
//          plan_gpu_by_flag, PlanShape, plan_shape, PlanLinks, plan_ring_seconds, PlanStep, plan_step
//
// Glossary (as llmc/gpt2.h and llmc/llama3.h): B micro-batch, T sequence length, N = B*T
// positions, C channels, NH heads, hs = C/NH, L layers, Vp padded vocabulary; Llama: NKV
// key/value heads, QKV = (NH + 2 NKV) hs, F the MLP's hidden size. W GPUs (processes).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>

#include "utils.h"     // defines: CHECK
#include "families.h"  // defines: ModelConfig, model_config_table, MemoryPlan, model_memory_plan, ValueBytes
#include "zero.h"      // defines: zero_layout, zero3_layer_gathers_per_step, zero_comm_bytes_per_step

// The GPU trainer in bf16 with fp32 master weights (-w 1): parameters and gradients 2 bytes a
// value, the master copy 4; AdamW's m and v are fp32 whatever the build (model_memory_plan).
const ValueBytes PLAN_VALUE_BYTES = {2, 2, 4};
// cuBLASLt's workspace, allocated once per GPU (llmc/cuda/common.cuh: CUDA_WORKSPACE_BYTES)
constexpr double PLAN_WORKSPACE_BYTES = 32.0 * 1048576.0;

// ---------------------------------------------------------------------------------------
// Activations on the GPU, in bytes: value_bytes per activation value (2 in bf16), the
// normalisation statistics, losses, log-sum-exps and RoPE tables in fp32, token ids int32.
// The trainers carve every buffer from one allocation, each rounded up to 256 bytes
// (model_cuda.cuh: cuda_slots_bytes), and so does this sum.
//
// GPT-2 / GPT-3, as gpt2_cuda_activation_plan allocates them (all three levels run today):
//   per layer, L deep: ln1, ln2 (N,C); ln1 and ln2's mean and rstd (N) fp32; qkv (N,3C);
//     atty (N,C); att_lse (B,NH,T) fp32; residual2, residual3 (N,C); fch, fch_gelu (N,4C)
//   once: encoded, lnf (N,C); lnf's mean and rstd (N) fp32; logits (N,Vp); losses (N) fp32;
//     the backward's scratch proj, dres, dtmp (N,C), dqkv (N,3C), dfch (N,4C); inputs and
//     targets (N) int32
//   -r 1: GELU's output is recomputed from fch in the backward: fch_gelu is one layer deep
//   -r 2: also the two LayerNorm outputs, from the kept input, mean and rstd: ln1, ln2 one layer
//
// Llama 3, as llama_cuda_activation_plan allocates them (test_offsets checks all three levels):
//   per layer, L deep: rms1, rms2 (N,C); their rstd (N) fp32; qkv (N,QKV) after RoPE; atty
//     (N,C); att_lse (B,NH,T) fp32; residual2, residual3 (N,C); fch (N,2F) [gate | up];
//     fch_swiglu (N,F)
//   once: encoded, rmsf (N,C); rmsf's rstd (N) fp32; logits (N,Vp); losses (N) fp32; the
//     backward's scratch dres, dtmp (N,C), dqkv (N,QKV), dfch (N,2F), dfch_swiglu (N,F); with
//     NKV < NH the key/value heads repeated for the attention kernels, qkv_mha and dqkv_mha
//     (N,3C); RoPE's cos and sin (T, hs/2) fp32; inputs and targets (N) int32
//   -r 1: RMSNorm's outputs (from the layer's input or residual2 and the kept rstd) and
//     SwiGLU's output (from fch) are recomputed in the backward: rms1, rms2, fch_swiglu one layer
//   -r 2: the whole layer is recomputed from its input in the backward: only the residual
//     stream between the layers stays L deep (encoded is layer 0's input, residual3 of layer l
//     the input of layer l+1, the last one the final RMSNorm's), every other per-layer buffer
//     is one layer's
inline double plan_activation_bytes(const ModelConfig& c, int B, int T, int recompute, double value_bytes = 2) {
    double total = 0;
    auto add = [&](size_t count, double elem) { total += std::ceil((double)count * elem / 256.0) * 256.0; };
    const double X = value_bytes, FL = 4, I = 4;
    const size_t N = (size_t)B * T;
    if (c.family == FAMILY_LLAMA3) {
        const LlamaConfig& m = c.llama;
        const size_t L = m.num_layers, C = m.channels, NH = m.num_heads, Vp = m.padded_vocab_size;
        const size_t F = m.ffn_hidden, hs = C / NH, QKV = (NH + 2 * (size_t)m.num_kv_heads) * hs;
        const size_t mha = m.num_kv_heads < m.num_heads ? N * 3 * C : 0;
        const size_t kept = recompute >= 2 ? 1 : L;    // layers of what the layer's recompute rebuilds
        const size_t norms = recompute >= 1 ? 1 : L;   // layers of rms1, rms2 and fch_swiglu
        add(N * C, X);                                               // encoded
        add(norms * N * C, X);       add(kept * N, FL);              // rms1, rms1_rstd
        add(kept * N * QKV, X);      add(mha, X);                    // qkv, qkv_mha
        add(kept * N * C, X);        add(kept * B * NH * T, FL);     // atty, att_lse
        add(kept * N * C, X);                                        // residual2
        add(norms * N * C, X);       add(kept * N, FL);              // rms2, rms2_rstd
        add(kept * N * 2 * F, X);    add(norms * N * F, X);          // fch, fch_swiglu
        add(L * N * C, X);                                           // residual3: always L deep
        add(N * C, X);               add(N, FL);                     // rmsf, rmsf_rstd
        add(N * Vp, X);              add(N, FL);                     // logits, losses
        add(N * C, X);               add(N * C, X);                  // dres, dtmp
        add(N * QKV, X);             add(mha, X);                    // dqkv, dqkv_mha
        add(N * 2 * F, X);           add(N * F, X);                  // dfch, dfch_swiglu
        add(T * hs / 2, FL);         add(T * hs / 2, FL);            // rope_cos, rope_sin
        add(N, I);                   add(N, I);                      // inputs, targets
        return total;
    }
    const GPT2Config& m = c.gpt2;
    const size_t L = m.num_layers, C = m.channels, NH = m.num_heads, Vp = m.padded_vocab_size;
    const size_t ln = recompute >= 2 ? 1 : L, gelu = recompute >= 1 ? 1 : L;
    add(N * C, X);                                                   // encoded
    add(ln * N * C, X);          add(L * N, FL);   add(L * N, FL);   // ln1, its mean and rstd
    add(L * N * 3 * C, X);       add(L * N * C, X);                  // qkv, atty
    add(L * B * NH * T, FL);     add(L * N * C, X);                  // att_lse, residual2
    add(ln * N * C, X);          add(L * N, FL);   add(L * N, FL);   // ln2, its mean and rstd
    add(L * N * 4 * C, X);       add(gelu * N * 4 * C, X);           // fch, fch_gelu
    add(L * N * C, X);                                               // residual3
    add(N * C, X);               add(N, FL);       add(N, FL);       // lnf, its mean and rstd
    add(N * Vp, X);              add(N, FL);                         // logits, losses
    add(N * C, X);               add(N * C, X);    add(N * C, X);    // proj, dres, dtmp
    add(N * 3 * C, X);           add(N * 4 * C, X);                  // dqkv, dfch
    add(N, I);                   add(N, I);                          // inputs, targets
    return total;
}

// What one GPU holds at micro-batch B x T on `world` GPUs at ZeRO `stage` and recompute level
// `recompute`: model_memory_plan's parameters, gradients, AdamW m and v and master weights
// (PLAN_VALUE_BYTES), the activations above, cuBLASLt's workspace as scratch.
inline MemoryPlan plan_memory(const ModelConfig& c, int B, int T, int world, int stage, int recompute) {
    MemoryPlan p = model_memory_plan(c, B, T, world, stage, PLAN_VALUE_BYTES);
    p.activations = plan_activation_bytes(c, B, T, recompute, PLAN_VALUE_BYTES.param);
    p.scratch = PLAN_WORKSPACE_BYTES;
    return p;
}

// ---------------------------------------------------------------------------------------
// The GPUs: device memory as CUDA and nvidia-smi report it. H100 SXM 80 GB: 81,559 MiB;
// H200: 143,771 MiB, as the H200 lent to this project reported it
// (dev/results/2026-11-26_gpu_h200_short_check.txt). Both have the same 989 TFLOP/s of dense
// bf16 (NVIDIA's datasheets); the H200 has more and faster memory, not more compute.
struct PlanGpu {
    const char* flag;   // -gpu's value
    const char* name;
    double memory_mib;
};
const PlanGpu PLAN_GPUS[] = {{"h100", "H100 SXM 80 GB", 81559}, {"h200", "H200 141 GB", 143771}};

inline const PlanGpu* plan_gpu_by_flag(const char* flag) {
    for (const PlanGpu& g : PLAN_GPUS)
        if (strcmp(g.flag, flag) == 0) return &g;
    return nullptr;
}

// ---------------------------------------------------------------------------------------
// The shape the cost model needs, from the family's parameter table.
struct PlanShape {
    double n = 0;        // parameters (padded vocabulary rows included)
    double layer = 0;    // one layer's values (what a ZeRO 3 gather brings)
    double weights = 0;  // the weights that multiply: model_flops_per_token's convention (families.h)
    int L = 0, C = 0;
};

inline PlanShape plan_shape(const ModelConfig& c) {
    ParamTensor table[MAX_PARAM_TENSORS];
    ParamLayout t;
    PlanShape s;
    s.n = (double)model_config_table(c, table, &t);
    for (int i = 0; i < t.layers; i++) s.layer += (double)table[t.first_layer + i].numel / t.L;
    // GPT-2's wte is also its classifier and counts; Llama's wte is only looked up (its head is lmheadw)
    s.weights = s.n - (c.family == FAMILY_LLAMA3 ? (double)table[0].numel : 0.0);
    s.L = t.L;
    s.C = c.family == FAMILY_LLAMA3 ? c.llama.channels : c.gpt2.channels;
    return s;
}

// The links (dev/SCALING.md): NVLink inside a node; across nodes the rail-aligned ring, whose
// share of the buffer leaves the node through all G NICs at once, at min(NVLink, G x NIC).
struct PlanLinks {
    double nvlink_gbs = 450;  // NVLink per GPU, GB/s (H100/H200 NVLink 4: 450 per direction)
    double ib_gbs = 50;       // the GPU's own NIC, GB/s (InfiniBand NDR 400 Gb/s)
    double latency_us = 5;    // one ring hop, paid once per collective
    double overlap = 0.8;     // of the gradient traffic that can hide behind the backward
    int gpus_per_node = 8;
};

// One reduce-scatter or all-gather of `bytes` over n GPUs as a ring, sent as `collectives`
// separate collectives (buckets): (n-1)/n of the buffer at the ring's bus bandwidth, plus n-1
// hops of latency per collective.
inline double plan_ring_seconds(double bytes, int n, const PlanLinks& k, int collectives) {
    if (n <= 1) return 0.0;
    const double g = std::min(n, k.gpus_per_node);
    const double gbs = n <= k.gpus_per_node ? k.nvlink_gbs : std::min(k.nvlink_gbs, g * k.ib_gbs);
    return (n - 1.0) / n * bytes / (gbs * 1e9) + (n - 1.0) * k.latency_us * 1e-6 * collectives;
}

// One optimizer step, PREDICTED. Times in seconds, bytes what one GPU sends.
struct PlanStep {
    int accum = 1;              // micro-steps per optimizer step
    double tokens = 0;          // tokens per step: W x B x T x accum (-d rounded up to that)
    double t_micro = 0;         // one micro-step's compute, recompute included
    double t_compute = 0;       // accum x t_micro
    double t_ideal = 0;         // the step's compute without recompute: the 1-GPU-equivalent
    double t_layer_fwd = 0, t_layer_bwd = 0;  // one layer's forward, and its backward (+ recompute)
    double grad_bytes = 0, gather_bytes = 0, after_bytes = 0;
    double t_grad_round = 0;    // one micro-step's gradient collective(s), on the links
    int grad_rounds = 0;        // micro-steps that reduce gradients (1, or accum at ZeRO 2 and 3)
    long long gathers = 0;      // ZeRO 3 layer gathers per step (zero3_layer_gathers_per_step)
    double t_gather = 0;        // one layer's gather
    double t_after = 0;         // what follows the update: the parameters (ZeRO 1, 2) or the front and tail rows (3)
    double exposed_forward = 0, exposed_backward = 0, exposed_after = 0;
    double step = 0, tokens_per_s = 0, efficiency = 0;
    double sent() const { return grad_bytes + gather_bytes + after_bytes; }
    double link_seconds() const { return grad_rounds * t_grad_round + gathers * t_gather + t_after; }
};

// The step of `batch_tokens` tokens (rounded up to whole micro-steps) on `world` GPUs at ZeRO
// `stage` and recompute level `recompute`, each GPU computing at `flops_per_s`.
//   compute: flops_per_token (6 x weights + 6 L C T) per token; recompute adds work to the
//     backward: -r 1 about 2% of the step (the elementwise parts: GELU, or RMSNorm and SwiGLU),
//     -r 2 one more forward of every layer (1/3 of the layers' 6 x layer weights + 6 C T)
//   gradients: ZeRO 0 an all-reduce (2 rings) and ZeRO 1 a reduce-scatter, both after the last
//     micro-step's backward only; ZeRO 2 and 3 a reduce-scatter after every micro-step. L+1
//     buckets each (llmc/grad_sync.h). While the backward runs layer by layer, `overlap` of it
//     goes out a layer's share at a time, hidden where that layer's backward is longer; the
//     rest (the last bucket: the front and tail rows, finished last) waits in full.
//   ZeRO 3 gathers (zero3_layer_gathers_per_step): the first layer's after each update waits in
//     full; every other one is prefetched behind the layer before it, so only what it takes
//     beyond that layer's compute shows; in the backward it shares the links with the layer's
//     gradient share.
//   after the update, waiting in full: ZeRO 1 and 2 all-gather the parameters, ZeRO 3 the front
//     and tail rows (its layers are gathered as the next forward reaches them).
//   AdamW's own time, the loss and norm reductions and stragglers are left out.
inline PlanStep plan_step(const ModelConfig& c, int B, int T, int world, int stage, int recompute,
                          double batch_tokens, double flops_per_s, const PlanLinks& k) {
    const PlanShape s = plan_shape(c);
    if (world == 1) stage = 0;
    PlanStep r;
    const double micro_tokens = (double)B * T;
    r.accum = std::max(1, (int)std::ceil(batch_tokens / (micro_tokens * world)));
    r.tokens = micro_tokens * world * r.accum;

    // compute
    const double t_plain = micro_tokens * flops_per_token(s.weights, s.L, s.C, T) / flops_per_s;
    r.t_layer_fwd = micro_tokens * (2.0 * s.layer + 2.0 * s.C * T) / flops_per_s;
    const double extra = recompute == 1 ? 0.02 * t_plain : recompute == 2 ? s.L * r.t_layer_fwd : 0.0;
    r.t_layer_bwd = 2.0 * r.t_layer_fwd + extra / s.L;
    r.t_micro = t_plain + extra;
    r.t_compute = r.accum * r.t_micro;
    r.t_ideal = r.accum * t_plain;

    // communication: bytes and link times
    if (world > 1) {
        const ZeroLayout z = zero_layout((size_t)s.n, stage, 0, world);
        const double part = (world - 1.0) / world, padded = (double)z.padded, bf16 = 2.0;
        const int rings = stage == 0 ? 2 : 1;  // all-reduce = reduce-scatter + all-gather
        r.grad_rounds = stage >= 2 ? r.accum : 1;
        r.t_grad_round = rings * plan_ring_seconds(bf16 * padded, world, k, s.L + 1);
        r.grad_bytes = r.grad_rounds * rings * part * bf16 * padded;
        const int L = s.L, rest = std::max(L - 2, 0);  // rest: the layers a pass finds missing
        if (stage == 3) {
            r.gathers = zero3_layer_gathers_per_step(L, r.accum);
            r.gather_bytes = r.gathers * part * bf16 * s.layer;
            r.t_gather = plan_ring_seconds(bf16 * s.layer, world, k, 1);
            const double front_tail = padded - L * s.layer;
            r.after_bytes = part * bf16 * front_tail;
            r.t_after = plan_ring_seconds(bf16 * front_tail, world, k, 1);
            // the forwards: the first one after the update gathers all L layers, each later
            // one L - 2; the first gather has nothing to hide behind
            const long long forward_gathers = L + (long long)(r.accum - 1) * rest;
            r.exposed_forward = r.t_gather + (forward_gathers - 1) * std::max(0.0, r.t_gather - r.t_layer_fwd);
        } else if (stage >= 1) {
            r.after_bytes = part * bf16 * padded;
            r.t_after = plan_ring_seconds(bf16 * padded, world, k, 1);
        }
        // each backward that reduces: L layers, a layer's share of the hidden gradient traffic
        // each; at ZeRO 3, L - 2 of them also gather the layer below
        const double share = k.overlap * r.t_grad_round / L;
        const int with_gather = stage == 3 ? rest : 0;
        const double per_backward = with_gather * std::max(0.0, r.t_gather + share - r.t_layer_bwd) +
                                    (L - with_gather) * std::max(0.0, share - r.t_layer_bwd) +
                                    (1.0 - k.overlap) * r.t_grad_round;
        r.exposed_backward = r.grad_rounds * per_backward;
        r.exposed_after = r.t_after;
        // the same bytes as the ZeRO layout's own sum
        const double sum = zero_comm_bytes_per_step(z, r.accum, 2, 2, L, (size_t)s.layer);
        CHECK(std::fabs(r.sent() - sum) <= 1e-9 * sum, "plan sends %.0f bytes, zero_comm_bytes_per_step %.0f",
              r.sent(), sum);
    }
    r.step = r.t_compute + r.exposed_forward + r.exposed_backward + r.exposed_after;
    r.tokens_per_s = r.tokens / r.step;
    r.efficiency = r.t_ideal / r.step;
    return r;
}
