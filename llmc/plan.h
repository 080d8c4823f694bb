// plan.h: the planner's model of a large run (./plan, plan.cpp): what one GPU holds at a ZeRO
// stage and recompute level, and a PREDICTED step time on N GPUs from a compute rate and a
// bandwidth/latency model of NCCL's rings (dev/SCALING.md, its "ZeRO 3" section); and the same
// for tensor and pipeline parallelism, which the trainers do not have yet (issue 25): a PLAN
// (dev/SCALING.md, "Tensor and pipeline parallelism"). Host only: the shapes come from
// llmc/families.h, the ZeRO sums from llmc/zero.h, the scratch from llmc/gpu_scratch.h (the
// trainers' own arithmetic); no CUDA header is included, so it builds without nvcc. Nothing here
// is measured: every time is a prediction.
// defines: PLAN_VALUE_BYTES, PLAN_WORKSPACE_BYTES, PlanLayout, plan_layout_problem, plan_stage_layers,
//          plan_in_flight, PlanActivations, plan_activation_bytes, PlanSlice, plan_slice, plan_zero_memory,
//          PlanTrainer, PlanScratch, plan_scratch, plan_memory, PlanGpu, PLAN_GPUS, plan_gpu_by_flag,
//          PlanShape, plan_shape, PlanLinks, plan_ring_seconds, PlanStep, plan_data_parallel, plan_step
//
// Glossary (as llmc/gpt2.h and llmc/llama3.h): B micro-batch, T sequence length, N = B*T
// positions, C channels, NH heads, hs = C/NH, L layers, Vp padded vocabulary; Llama: NKV
// key/value heads, QKV = (NH + 2 NKV) hs, F the MLP's hidden size. W GPUs (processes); a
// layout's TP tensor-parallel ranks, PP pipeline stages, VP virtual stages a rank, DP replicas.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "utils.h"        // defines: CHECK
#include "families.h"     // defines: ModelConfig, model_config_table, MemoryPlan, model_memory_plan, ValueBytes
#include "zero.h"         // defines: zero_layout, zero3_layer_gathers_per_step, zero_comm_bytes_per_step
#include "gpu_scratch.h"  // defines: encoder_buckets_device_bytes, linears_fp8_bytes, model_matmul_timing_scratch_bytes

// The GPU trainer in bf16 with fp32 master weights (-w 1): parameters and gradients 2 bytes a
// value, the master copy 4; AdamW's m and v are fp32 whatever the build (model_memory_plan).
const ValueBytes PLAN_VALUE_BYTES = {2, 2, 4};
// cuBLASLt's workspace and the bias-gradient epilogue's output, allocated once per GPU
// (llmc/cuda/common.cuh: CUDA_WORKSPACE_BYTES + CUDA_BIAS_GRAD_BYTES, cuda_context_bytes)
constexpr double PLAN_WORKSPACE_BYTES = 32.0 * 1048576.0 + 256.0 * 1024.0;

// ---------------------------------------------------------------------------------------
// Tensor and pipeline parallelism, Megatron-LM's way (Shoeybi et al. 2019, arXiv:1909.08053;
// Narayanan et al. 2021, arXiv:2104.04473; Korthikanti et al. 2022, arXiv:2205.05198). A PLAN:
// the trainers have neither yet (issue 25), so whatever ./plan says of a layout is PREDICTED.
//   world = DP x PP x TP: TP innermost (the ranks of a TP group sit in one node, on NVLink),
//   then PP, DP outermost; ZeRO shards over the DP group (the ranks holding the same slice).
//   TP splits each layer: qkvw and fcw column-parallel (their output rows, and GPT's qkvb and
//   fcb with them), attprojw and fcprojw row-parallel (their input columns), so the heads and
//   the MLP's hidden units split across the ranks; the embedding and the head (and the
//   cross-entropy after it) vocabulary-parallel (their rows). Llama's key/value heads split when
//   NKV divides by TP; when TP is a multiple of NKV each rank keeps the one head its query heads
//   share (replicated TP/NKV times). Whole on every TP rank: the norms' weights, GPT's
//   row-parallel biases (attprojb, fcprojb, added after the reduction) and its wpe.
//   Sequence parallelism (-sp 1) shards what TP leaves whole, the norms and the residual stream,
//   along T: all-gather and reduce-scatter in place of each all-reduce.
//   PP deals the layers to PP stages (plan_stage_layers): the embedding on the first, the final
//   norm and the head on the last; the micro-batches are the gradient-accumulation steps, run
//   1F1B, or interleaved 1F1B with VP virtual stages (chunks of layers) a rank.
struct PlanLayout {
    int tp = 1;       // tensor-parallel ranks
    int pp = 1;       // pipeline stages (ranks)
    int vp = 1;       // virtual stages a pipeline rank (1: plain 1F1B)
    bool sp = false;  // sequence parallelism
    int dp = 1;       // data-parallel replicas: W / (TP x PP)
};

// Why `p` cannot run on `gpus` GPUs in nodes of `per_node` (one line), or "" when it can.
inline std::string plan_layout_problem(const ModelConfig& c, const PlanLayout& p, int gpus, int per_node) {
    const bool llama = c.family == FAMILY_LLAMA3;
    const int L = llama ? c.llama.num_layers : c.gpt2.num_layers;
    const int NH = llama ? c.llama.num_heads : c.gpt2.num_heads, NKV = llama ? c.llama.num_kv_heads : NH;
    char why[320] = "";
    if (gpus % (p.tp * p.pp) != 0)
        snprintf(why, sizeof(why), "%d GPUs are not DP x PP x TP: PP %d x TP %d = %d does not divide them", gpus,
                 p.pp, p.tp, p.pp * p.tp);
    else if (p.tp > per_node)
        snprintf(why, sizeof(why), "-tp %d: tensor parallelism stays inside a node, and a node has %d GPUs (-pg)",
                 p.tp, per_node);
    else if (NH % p.tp != 0)
        snprintf(why, sizeof(why), "-tp %d: the model's %d attention heads do not split evenly over %d ranks", p.tp,
                 NH, p.tp);
    else if (NKV % p.tp != 0 && p.tp % NKV != 0)
        snprintf(why, sizeof(why), "-tp %d: the model's %d key/value heads neither split over %d ranks nor "
                 "replicate evenly (TP a multiple of NKV)", p.tp, NKV, p.tp);
    else if (p.sp && p.tp == 1)
        snprintf(why, sizeof(why), "-sp 1: sequence parallelism shards along T over the TP group; it needs -tp > 1");
    else if (p.vp > 1 && p.pp == 1)
        snprintf(why, sizeof(why), "-vp %d: virtual stages interleave a pipeline; they need -pp > 1", p.vp);
    else if (p.pp * p.vp > L)
        snprintf(why, sizeof(why), "-pp %d -vp %d: %d stages, more than the model's %d layers", p.pp, p.vp,
                 p.pp * p.vp, L);
    else if (p.vp > 1 && L % (p.pp * p.vp) != 0 && (L + 2) % (p.pp * p.vp) != 0)
        snprintf(why, sizeof(why), "-pp %d -vp %d: %d layers do not split into %d virtual stages, nor do %d (the "
                 "embedding and the loss counted as a layer each)", p.pp, p.vp, L, p.pp * p.vp, L + 2);
    return why;
}

// The layers pipeline rank `rank` (0..PP-1) holds, all its virtual stages together.
//   L / PP each when PP (and PP x VP, interleaved) divides L.
//   Interleaved, when only L + 2 divides by PP x VP: Megatron's split that counts the embedding
//   and the loss as a layer each (--account-for-embedding-in-pipeline-split and
//   --account-for-loss-in-pipeline-split): (L + 2) / PP a rank, one layer fewer on the first and
//   on the last rank. It is what puts Llama 3.1 405B's 126 layers in 8 x 8 virtual stages.
//   Otherwise (PP does not divide L): balanced by layer count, ceil or floor of L / PP a stage;
//   the lighter stages are the last, the first (they also hold the head and the embedding), then
//   those just before the last. A fuller stage sets the pipeline's pace (plan_step).
inline int plan_stage_layers(int L, const PlanLayout& p, int rank) {
    if (p.vp > 1 && L % (p.pp * p.vp) != 0) return (L + 2) / p.pp - (rank == 0 || rank == p.pp - 1 ? 1 : 0);
    const int q = L / p.pp, fuller = L % p.pp;
    const int order = rank == p.pp - 1 ? 0 : rank == 0 ? 1 : p.pp - rank;  // which lighter stage it would be
    return fuller == 0 || order < p.pp - fuller ? q : q + 1;
}

// The micro-batches (interleaved: the virtual stages of micro-batches) whose activations pipeline
// rank `rank` holds at once, at its peak, with `micro` micro-batches a step: Megatron-LM's
// schedules (megatron/core/pipeline_parallel/schedules.py) run num_warmup_microbatches forwards
// before the first backward, then one more forward before each backward:
//   1F1B:        warm-up PP - rank - 1, so PP - rank in flight (the first stage PP of them)
//   interleaved: warm-up 2 (PP - rank - 1) + (VP - 1) PP virtual stages, so one more in flight;
//                on the first rank PP VP + PP - 1 chunks of L / (PP VP) layers: L (1 + (PP-1)/(PP VP))
//                layers' activations, Korthikanti et al.'s count for the interleaved schedule
// never more than the step has. Without PP: one micro-batch at a time.
inline int plan_in_flight(const PlanLayout& p, int rank, int micro) {
    if (p.pp == 1) return 1;
    if (p.vp == 1) return std::min(p.pp - rank, micro);
    return std::min(2 * (p.pp - rank - 1) + (p.vp - 1) * p.pp + 1, micro * p.vp);
}

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
//   train_gpt_fp8 (delayed scaling, B*T a multiple of 16): GELU is made in the casts, fch_gelu
//     never written in training: one layer deep too (act_in_cast; Llama's fch_swiglu likewise)
//   -r 2: also the two LayerNorm outputs, from the kept input, mean and rstd: ln1, ln2 one layer
//
// Llama 3, as llama_cuda_activation_plan allocates them (test_offsets checks all three levels):
//   per layer, L deep: rms1, rms2 (N,C); their rstd (N) fp32; qkv (N,QKV) after RoPE; atty
//     (N,C); att_lse (B,NH,T) fp32; residual2, residual3 (N,C); fch (N,2F) [gate | up];
//     fch_swiglu (N,F)
//   once: encoded, rmsf (N,C); rmsf's rstd (N) fp32; logits (N,Vp); losses (N) fp32; the
//     backward's scratch dres, dtmp (N,C), dqkv (N,QKV), dfch (N,2F), dfch_swiglu (N,F); RoPE's
//     cos and sin (T, hs/2) fp32; inputs and targets (N) int32 (the attention kernels read the
//     shared key/value heads in place: no repeated copy)
//   -r 1: RMSNorm's outputs (from the layer's input or residual2 and the kept rstd) and
//     SwiGLU's output (from fch) are recomputed in the backward: rms1, rms2, fch_swiglu one layer
//   -r 2: the whole layer is recomputed from its input in the backward: only the residual
//     stream between the layers stays L deep (encoded is layer 0's input, residual3 of layer l
//     the input of layer l+1, the last one the final RMSNorm's), every other per-layer buffer
//     is one layer's
//
// One GPU of a layout (a PLAN: PlanActivations; the default is the whole model on one GPU, the
// trainers' buffers above byte for byte). With TP every buffer split by heads or hidden units is
// 1/TP (qkv, atty, att_lse, fch, fch_gelu / fch_swiglu, logits, their gradients); the
// norms and the residual stream stay whole on every TP rank, or with -sp 1 are 1/TP along T, and
// then one whole (N,C) buffer is added for the all-gathered norm output the column-parallel
// matmuls read; the scratch that takes a row-parallel matmul's partial sums (proj, dtmp) stays
// whole. Under PP the L-deep buffers hold the stage's layers of every micro-batch in flight
// (`deep` of them, plan_in_flight), encoded one input a micro-batch (or virtual stage) in
// flight, and only the last stage has the final norm, the logits and the losses.
struct PlanActivations {
    int tp = 1;         // tensor-parallel ranks
    bool sp = false;    // sequence parallelism
    int deep = -1;      // layers x micro-batches kept for the backward (-1: the model's L, one micro-batch)
    int inputs = 1;     // stage inputs kept: micro-batches (or virtual stages) in flight
    bool head = true;   // the final norm, logits and losses are here (the last stage)
    bool act_in_cast = false;  // train_gpt_fp8 makes GELU / SwiGLU in its casts: their outputs one layer deep
};

inline double plan_activation_bytes(const ModelConfig& c, int B, int T, int recompute, double value_bytes = 2,
                                    const PlanActivations& a = PlanActivations()) {
    double total = 0;
    auto add = [&](size_t count, double elem) { total += std::ceil((double)count * elem / 256.0) * 256.0; };
    const size_t H = a.tp, S = a.sp ? a.tp : 1;  // the divisors: split by heads, split along T
    auto part = [](size_t count, size_t by) { return (count + by - 1) / by; };
    const double X = value_bytes, FL = 4, I = 4;
    const size_t N = (size_t)B * T, gathered = a.sp && a.tp > 1 ? N : 0, inputs = a.inputs;
    if (c.family == FAMILY_LLAMA3) {
        const LlamaConfig& m = c.llama;
        const size_t L = a.deep < 0 ? m.num_layers : a.deep;
        const size_t C = m.channels, NH = m.num_heads, Vp = m.padded_vocab_size, F = part(m.ffn_hidden, H);
        const size_t kv = m.num_kv_heads % a.tp == 0 ? m.num_kv_heads / a.tp : 1;  // a GPU's key/value heads
        const size_t hs = C / NH, QKV = (NH / H + 2 * kv) * hs;
        const size_t kept = recompute >= 2 ? 1 : L;    // layers of what the layer's recompute rebuilds
        const size_t norms = recompute >= 1 ? 1 : L;   // layers of rms1, rms2 (and fch_swiglu)
        const size_t swiglu = recompute >= 1 || a.act_in_cast ? 1 : L;
        add(inputs * part(N * C, S), X);                             // encoded
        add(norms * part(N * C, S), X);  add(kept * part(N, S), FL); // rms1, rms1_rstd
        add(kept * N * QKV, X);                                      // qkv
        add(kept * N * C / H, X);    add(kept * B * NH / H * T, FL); // atty, att_lse
        add(kept * part(N * C, S), X);                               // residual2
        add(norms * part(N * C, S), X);  add(kept * part(N, S), FL); // rms2, rms2_rstd
        add(kept * N * 2 * F, X);    add(swiglu * N * F, X);         // fch, fch_swiglu
        add(L * part(N * C, S), X);                                  // residual3: always L deep
        if (a.head) {
            add(part(N * C, S), X);  add(part(N, S), FL);            // rmsf, rmsf_rstd
            add(N * part(Vp, H), X); add(N, FL);                     // logits, losses
        }
        add(part(N * C, S), X);      add(N * C, X);                  // dres, dtmp
        add(N * QKV, X);                                             // dqkv
        add(N * 2 * F, X);           add(N * F, X);                  // dfch, dfch_swiglu
        add(T * hs / 2, FL);         add(T * hs / 2, FL);            // rope_cos, rope_sin
        add(N, I);                   add(N, I);                      // inputs, targets
        add(gathered * C, X);                                        // -sp 1: a norm's output, all-gathered
        return total;
    }
    const GPT2Config& m = c.gpt2;
    const size_t L = a.deep < 0 ? m.num_layers : a.deep;
    const size_t C = m.channels, NH = m.num_heads, Vp = m.padded_vocab_size;
    const size_t ln = recompute >= 2 ? 1 : L, gelu = recompute >= 1 || a.act_in_cast ? 1 : L;
    const size_t NS = part(N, S), NCS = part(N * C, S);
    add(inputs * NCS, X);                                            // encoded
    add(ln * NCS, X);            add(L * NS, FL);  add(L * NS, FL);  // ln1, its mean and rstd
    add(L * N * 3 * C / H, X);   add(L * N * C / H, X);              // qkv, atty
    add(L * B * NH / H * T, FL); add(L * NCS, X);                    // att_lse, residual2
    add(ln * NCS, X);            add(L * NS, FL);  add(L * NS, FL);  // ln2, its mean and rstd
    add(L * N * 4 * C / H, X);   add(gelu * N * 4 * C / H, X);       // fch, fch_gelu
    add(L * NCS, X);                                                 // residual3
    if (a.head) {
        add(NCS, X);             add(NS, FL);      add(NS, FL);      // lnf, its mean and rstd
        add(N * part(Vp, H), X); add(N, FL);                         // logits, losses
    }
    add(N * C, X);               add(NCS, X);      add(N * C, X);    // proj, dres, dtmp
    add(N * 3 * C / H, X);       add(N * 4 * C / H, X);              // dqkv, dfch
    add(N, I);                   add(N, I);                          // inputs, targets
    add(gathered * C, X);                                            // -sp 1: a norm's output, all-gathered
    return total;
}

// ---------------------------------------------------------------------------------------
// What one GPU of a layout holds of the model's values (PlanLayout's comment: which tensors TP
// splits). The vocabulary-parallel rows and the MLP's hidden units are split rounded up.
struct PlanSlice {
    size_t layer = 0;  // one layer's values
    size_t front = 0;  // the first stage's: wte's 1/TP rows (GPT: and wpe, whole)
    size_t tail = 0;   // the last stage's: the final norm, whole, and the head's 1/TP rows (GPT's head
                       // is wte: with PP > 1 the last stage keeps a copy of its rows, as Megatron does)
};

inline PlanSlice plan_slice(const ModelConfig& c, const PlanLayout& p) {
    static const char* const SPLIT[] = {"wte", "lmheadw", "qkvw", "qkvb", "attprojw", "fcw", "fcb", "fcprojw"};
    ParamTensor table[MAX_PARAM_TENSORS];
    ParamLayout t;
    model_config_table(c, table, &t);
    const size_t tp = p.tp;
    PlanSlice s;
    for (int i = 0; i < t.count; i++) {
        const bool layer = t.per_layer(i);
        size_t v = layer ? table[i].numel / t.L : table[i].numel;
        for (const char* name : SPLIT)
            if (strcmp(table[i].name, name) == 0) v = (v + tp - 1) / tp;
        if (c.family == FAMILY_LLAMA3 && strcmp(table[i].name, "qkvw") == 0) {  // NH/TP query heads, and kv
            const LlamaConfig& m = c.llama;
            const size_t kv = m.num_kv_heads % p.tp == 0 ? m.num_kv_heads / p.tp : 1, hs = m.channels / m.num_heads;
            v = (m.num_heads / tp + 2 * kv) * hs * m.channels;
        }
        if (layer) s.layer += v;
        else if (i < t.first_layer) s.front += v;
        else s.tail += v;
    }
    if (c.family == FAMILY_GPT2 && p.pp > 1) s.tail += (table[0].numel + tp - 1) / tp;  // the tied head's copy
    return s;
}

// What one GPU keeps of `n` values on `world` data-parallel ranks at ZeRO `stage`: `layer` one
// layer's values (ZeRO 3's two slots), `front_tail` the rows ZeRO 3 keeps whole. The sums of
// model_memory_plan (families.h), in PLAN_VALUE_BYTES; no activations.
inline MemoryPlan plan_zero_memory(double n, double layer, double front_tail, int world, int stage) {
    if (world == 1) stage = 0;
    const ValueBytes& b = PLAN_VALUE_BYTES;
    const double shard = std::ceil(n / world / 64) * 64, padded = shard * world;  // zero.h's ZERO_ALIGN
    const double updated = stage == 0 ? n : shard;  // the values this GPU's AdamW updates
    MemoryPlan m;
    m.params = b.param * (stage == 3 ? front_tail + 2 * layer + shard : padded);
    m.grads = stage >= 2 ? b.grad * (front_tail + 2 * layer + shard) : b.grad * (padded + (world > 1 ? 2 * layer : 0));
    m.adamw = 8 * updated;
    m.master = b.master * updated;
    return m;
}

// The trainer's flags beyond the layout that change what a GPU holds: which binary (train_gpt_bf16,
// or train_gpt_fp8 and its -fp8r, -fp8kt and -fp8kw), -ma and -ak. They change only the scratch.
struct PlanTrainer {
    bool fp8 = false;          // train_gpt_fp8: its FP8 copies and scales
    bool fp8_current = false;  // -fp8r current (else delayed: FP8_AMAX_HISTORY_DEFAULT steps of amaxes)
    bool fp8_keep_inputs = false;  // -fp8kt 1: the linears' inputs kept in fp8 for the backward (not under -pp)
    bool fp8_keep_weights = false; // -fp8kw 1: the linears' weights kept cast in fp8 for the step
    bool timed = false;        // -ma timed: the largest product's scratch outputs, while it is timed
    bool attention_fused = false;  // -ak 2: the one-kernel attention backward's fp32 dq
};

// Pipeline rank `rank`'s scratch beside the model's buffers, as the trainer's memory plan counts it
// (train_gpt.cu's gpu_check_memory, from llmc/gpu_scratch.h): cuBLASLt's workspace, the encoder
// backward's buckets (every rank allocates them), train_gpt_fp8's FP8 copies and scales of its
// stage's layers (-tp: its part), and under -ma timed the largest product's scratch outputs (its
// part; the head on the last stage), at the trainer's default epilogues (-ge 2: GELU's aux with
// GPT-2's fc; -bg 2: fc's bias gradient from fcproj's dinp), and -ak 2's fp32 dq (its heads).
struct PlanScratch {
    double workspace = 0, encoder = 0, fp8 = 0, timing = 0, attention = 0;
    double total() const { return workspace + encoder + fp8 + timing + attention; }
};

inline PlanScratch plan_scratch(const ModelConfig& c, const PlanLayout& p, int rank, int B, int T,
                                const PlanTrainer& t) {
    const size_t N = (size_t)B * T;
    PlanScratch s;
    s.workspace = PLAN_WORKSPACE_BYTES;
    s.encoder = (double)encoder_buckets_device_bytes(N, model_config_channels(c));
    if (t.fp8) {
        LinearsFp8Options o;
        o.current_scaling = t.fp8_current;
        o.keep_inputs = t.fp8_keep_inputs && p.pp == 1;  // as the trainer: not under -pp
        o.keep_weights = t.fp8_keep_weights;
        s.fp8 = (double)linears_fp8_bytes(c, plan_stage_layers(model_config_num_layers(c), p, rank), N, o, p.tp);
    }
    if (t.timed)
        s.timing = (double)model_matmul_timing_scratch_bytes(c, N, p.tp, rank == p.pp - 1, true, 2,
                                                             (size_t)PLAN_VALUE_BYTES.param);
    if (t.attention_fused) s.attention = (double)attention_dq_bytes(c, N, p.tp);
    return s;
}

// What one GPU holds under layout `p` (DP from it) at micro-batch B x T, ZeRO `stage` over the
// DP group and recompute level `recompute`, with `micro` micro-batches a step, run by `trainer`:
// its stage's values (plan_slice, plan_stage_layers) sharded by ZeRO, the activations of the
// micro-batches in flight (plan_in_flight), its scratch (plan_scratch). Every pipeline rank is
// summed; the largest is returned, its rank in *heaviest. At TP = PP = 1 it is the trainers' own plan.
inline MemoryPlan plan_memory(const ModelConfig& c, const PlanLayout& p, int B, int T, int stage, int recompute,
                              int micro, const PlanTrainer& trainer = PlanTrainer(), int* heaviest = nullptr) {
    const PlanSlice s = plan_slice(c, p);
    const int L = model_config_num_layers(c);
    MemoryPlan worst;
    for (int rank = 0; rank < p.pp; rank++) {
        const int layers = plan_stage_layers(L, p, rank), flight = plan_in_flight(p, rank, micro);
        const double held = (rank == 0 ? (double)s.front : 0.0) + (rank == p.pp - 1 ? (double)s.tail : 0.0);
        MemoryPlan m = plan_zero_memory((double)layers * s.layer + held, (double)s.layer, held, p.dp, stage);
        PlanActivations a;
        a.tp = p.tp;
        a.sp = p.sp;
        a.deep = (int)std::ceil((double)flight * layers / p.vp);  // a virtual stage holds layers / VP
        a.inputs = flight;
        a.head = rank == p.pp - 1;
        a.act_in_cast = trainer.fp8 && fp8_act_in_cast(trainer.fp8_current, (size_t)B * T);
        m.activations = plan_activation_bytes(c, B, T, recompute, PLAN_VALUE_BYTES.param, a);
        m.scratch = plan_scratch(c, p, rank, B, T, trainer).total();
        if (rank == 0 || m.total() > worst.total()) {
            worst = m;
            if (heaviest != nullptr) *heaviest = rank;
        }
    }
    if (p.tp == 1 && p.pp == 1) {  // the trainers' layout: the sums must be model_memory_plan's
        const MemoryPlan t = model_memory_plan(c, B, T, p.dp, stage, PLAN_VALUE_BYTES);
        const double want = t.params + t.grads + t.adamw + t.master;
        const double got = worst.params + worst.grads + worst.adamw + worst.master;
        CHECK(std::fabs(got - want) <= 1e-12 * want, "plan_memory %.0f bytes, model_memory_plan %.0f", got, want);
    }
    return worst;
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
    s.C = model_config_channels(c);
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

// One optimizer step, PREDICTED. Times in seconds, bytes what one GPU sends. Under a layout the
// compute, TP and PP parts are the slowest pipeline rank's, the data-parallel ones those of the
// rank whose gradient traffic shows the most.
struct PlanStep {
    int accum = 1;              // micro-steps per optimizer step (under PP: the pipeline's micro-batches)
    double tokens = 0;          // tokens per step: DP x B x T x accum (-d rounded up to that)
    double t_micro = 0;         // one micro-step's compute, recompute included
    double t_compute = 0;       // accum x t_micro
    double t_ideal = 0;         // the step's compute without recompute, spread evenly: the 1-GPU-equivalent
    double t_layer_fwd = 0, t_layer_bwd = 0;  // one layer's forward, and its backward (+ recompute)
    double dp_values = 0, dp_layer = 0;  // what the DP group reduces: a GPU's values, and one layer's
    int dp_layers = 0;          // its layers (L + 1 gradient buckets)
    double grad_bytes = 0, gather_bytes = 0, after_bytes = 0;
    double t_grad_round = 0;    // one micro-step's gradient collective(s), on the links
    int grad_rounds = 0;        // micro-steps that reduce gradients (1, or accum at ZeRO 2 and 3)
    long long gathers = 0;      // ZeRO 3 layer gathers per step (zero3_layer_gathers_per_step)
    double t_gather = 0;        // one layer's gather
    double t_after = 0;         // what follows the update: the parameters (ZeRO 1, 2) or the front and tail rows (3)
    double exposed_forward = 0, exposed_backward = 0, exposed_after = 0;
    // tensor and pipeline parallelism: a PLAN (the trainers have neither yet)
    int slowest = 0;            // the pipeline rank that sets the pace
    int tp_collectives = 0;     // its TP all-reduces (or all-gather + reduce-scatter pairs) a micro-batch
    double t_collective = 0;    // one of them, on NVLink
    int pp_sends = 0;           // its sends to a neighbouring stage a micro-batch
    double send_bytes = 0, t_send = 0;  // one send: B x T x C values / TP, on NVLink or across nodes
    double tp_bytes = 0, t_tp = 0;      // a step's TP traffic, and its time (all of it exposed)
    double pp_bytes = 0, t_pp = 0;      // a step's sends, and their time (all of it exposed)
    double bubble = 0;          // the pipeline's idle share of the step: (PP-1) / (VP accum + PP-1)
    double t_bubble = 0;        // its seconds
    double step = 0, tokens_per_s = 0, efficiency = 0;
    double dp_sent() const { return grad_bytes + gather_bytes + after_bytes; }
    double sent() const { return dp_sent() + tp_bytes + pp_bytes; }
    double link_seconds() const { return grad_rounds * t_grad_round + gathers * t_gather + t_after; }
    double exposed_dp() const { return exposed_forward + exposed_backward + exposed_after; }
};

// The data-parallel traffic of one GPU holding `n` values (`L` layers of `layer` values each, the
// rest its front and tail rows) on `world` data-parallel ranks at ZeRO `stage`, with `accum`
// micro-steps, a layer's forward `t_fwd` and backward `t_bwd`: fills r's gradient, gather and
// after-the-update fields and what of them is exposed (plan_step's comment).
inline void plan_data_parallel(PlanStep& r, double n, int L, double layer, int world, int stage, int accum,
                               double t_fwd, double t_bwd, const PlanLinks& k) {
    r.dp_values = n;
    r.dp_layer = layer;
    r.dp_layers = L;
    if (world == 1) return;
    const ZeroLayout z = zero_layout((size_t)n, stage, 0, world);
    const double part = (world - 1.0) / world, padded = (double)z.padded, bf16 = 2.0;
    const int rings = stage == 0 ? 2 : 1;  // all-reduce = reduce-scatter + all-gather
    r.grad_rounds = stage >= 2 ? accum : 1;
    r.t_grad_round = rings * plan_ring_seconds(bf16 * padded, world, k, L + 1);
    r.grad_bytes = r.grad_rounds * rings * part * bf16 * padded;
    const int rest = std::max(L - 2, 0);  // rest: the layers a pass finds missing
    if (stage == 3) {
        r.gathers = zero3_layer_gathers_per_step(L, accum);
        r.gather_bytes = r.gathers * part * bf16 * layer;
        r.t_gather = plan_ring_seconds(bf16 * layer, world, k, 1);
        const double front_tail = padded - L * layer;
        r.after_bytes = part * bf16 * front_tail;
        r.t_after = plan_ring_seconds(bf16 * front_tail, world, k, 1);
        // the forwards: the first one after the update gathers all L layers, each later
        // one L - 2; the first gather has nothing to hide behind
        const long long forward_gathers = L + (long long)(accum - 1) * rest;
        r.exposed_forward = r.t_gather + (forward_gathers - 1) * std::max(0.0, r.t_gather - t_fwd);
    } else if (stage >= 1) {
        r.after_bytes = part * bf16 * padded;
        r.t_after = plan_ring_seconds(bf16 * padded, world, k, 1);
    }
    // each backward that reduces: L layers, a layer's share of the hidden gradient traffic
    // each; at ZeRO 3, L - 2 of them also gather the layer below
    const double share = k.overlap * r.t_grad_round / L;
    const int with_gather = stage == 3 ? rest : 0;
    const double per_backward = with_gather * std::max(0.0, r.t_gather + share - t_bwd) +
                                (L - with_gather) * std::max(0.0, share - t_bwd) +
                                (1.0 - k.overlap) * r.t_grad_round;
    r.exposed_backward = r.grad_rounds * per_backward;
    r.exposed_after = r.t_after;
    // the same bytes as the ZeRO layout's own sum
    const double sum = zero_comm_bytes_per_step(z, accum, 2, 2, L, (size_t)layer);
    CHECK(std::fabs(r.dp_sent() - sum) <= 1e-9 * sum, "plan sends %.0f bytes, zero_comm_bytes_per_step %.0f",
          r.dp_sent(), sum);
}

// The step of `batch_tokens` tokens (rounded up to whole micro-steps) under layout `p` at ZeRO
// `stage` (over the DP group) and recompute level `recompute`, each GPU computing at `flops_per_s`.
//   compute: flops_per_token (6 x weights + 6 L C T) per token; recompute adds work to the
//     backward: -r 1 about 2% of the step (the elementwise parts: GELU, or RMSNorm and SwiGLU),
//     -r 2 one more forward of every layer (1/3 of the layers' 6 x layer weights + 6 C T).
//     Under a layout a GPU computes 1/TP of each of its stage's layers; the head's share (6 x
//     the weights outside the layers) falls on the last stage.
//   gradients: ZeRO 0 an all-reduce (2 rings) and ZeRO 1 a reduce-scatter, both after the last
//     micro-step's backward only; ZeRO 2 and 3 a reduce-scatter after every micro-step. L+1
//     buckets each (llmc/grad_sync.h). While the backward runs layer by layer, `overlap` of it
//     goes out a layer's share at a time, hidden where that layer's backward is longer; the
//     rest (the last bucket: the front and tail rows, finished last) waits in full.
//   ZeRO 3 gathers (zero3_layer_gathers_per_step): the first layer's after each update waits in
//     full; every other one is prefetched behind the layer before it, so only what it takes
//     beyond that layer's compute shows; in the backward it shares the links with the layer's
//     gradient share. (Under PP counted as if each micro-batch's forward and backward ran back
//     to back; 1F1B interleaves them, which would gather more.)
//   after the update, waiting in full: ZeRO 1 and 2 all-gather the parameters, ZeRO 3 the front
//     and tail rows (its layers are gathered as the next forward reaches them).
//   The data-parallel ring runs over DP GPUs, DP / nodes of them in a node (plan_ring_seconds).
//   TP (a PLAN): a micro-batch's forward all-reduces (B,T,C) twice a layer (after the attention
//     projection and the MLP's), its backward twice (the column-parallel inputs' gradients),
//     -r 2's extra forward twice more, plus one after the embedding and one for the head's input
//     gradient. With -sp 1 each is an all-gather and a reduce-scatter of the same bytes: the
//     same ring time. Inside a node, on NVLink, on the critical path: all exposed (Megatron can
//     overlap some with the matmuls; not assumed). The loss's all-reduces of N values are left out.
//   PP (a PLAN): a micro-batch's activations go forward and their gradients back across each
//     stage boundary, B x T x C values, each of the TP ranks sending its 1/TP (Megatron's
//     scatter/gather; with -sp 1 the tensor is split anyway): a rank sends 2 VP times a
//     micro-batch (one fewer on the first and on the last), across nodes on the GPU's own NIC
//     when the PP x TP ranks of a replica span nodes, else on NVLink; all exposed. GPT's tied
//     head: the all-reduce of wte's gradient between the first and last stage (once a step,
//     a few ms) is left out.
//   bubble: with p stages, m micro-batches and v virtual stages the pipeline idles (p-1)/v
//     micro-batch times beside m of work (Narayanan et al. 2021, sec. 2.2), so the idle share
//     is (p-1) / (v m + p - 1): (p-1)/(m+p-1) for 1F1B, and (p-1)/(m+p-1)/v to first order in
//     (p-1)/m when interleaved (the form). The slowest stage's micro-batch time (its
//     compute, TP and PP time) sets the pace of every slot.
//   step = (compute + TP + PP) / (1 - bubble) + the exposed data-parallel time.
//   AdamW's own time, the loss and norm reductions and stragglers are left out.
inline PlanStep plan_step(const ModelConfig& c, const PlanLayout& p, int B, int T, int stage, int recompute,
                          double batch_tokens, double flops_per_s, const PlanLinks& k) {
    const PlanShape s = plan_shape(c);
    const PlanSlice slice = plan_slice(c, p);
    PlanStep r;
    const double micro_tokens = (double)B * T;
    r.accum = std::max(1, (int)std::ceil(batch_tokens / (micro_tokens * p.dp)));
    r.tokens = micro_tokens * p.dp * r.accum;

    // each pipeline rank's micro-batch: compute, TP collectives, sends; the slowest sets the pace
    const double t_fwd = micro_tokens * (2.0 * s.layer + 2.0 * s.C * T) / p.tp / flops_per_s;
    const double t_head = micro_tokens * 6.0 * (s.weights - s.L * s.layer) / p.tp / flops_per_s;
    const double activation = 2.0 * micro_tokens * s.C;  // one (B,T,C) tensor in bf16
    r.t_collective = p.tp > 1 ? 2 * plan_ring_seconds(activation, p.tp, k, 1) : 0.0;
    const double collective_bytes = 2 * (p.tp - 1.0) / p.tp * activation;
    const bool across = p.tp * p.pp > k.gpus_per_node;
    r.send_bytes = p.pp > 1 ? activation / p.tp : 0.0;
    r.t_send = p.pp > 1 ? r.send_bytes / ((across ? k.ib_gbs : k.nvlink_gbs) * 1e9) + k.latency_us * 1e-6 : 0.0;
    double slowest = -1, most = -1;
    int dp_rank = 0;
    std::vector<double> t_bwd(p.pp);
    for (int rank = 0; rank < p.pp; rank++) {
        const int layers = plan_stage_layers(s.L, p, rank);
        const bool first = rank == 0, last = rank == p.pp - 1;
        const double plain = layers * 3.0 * t_fwd + (last ? t_head : 0.0);
        const double extra = recompute == 1 ? 0.02 * plain : recompute == 2 ? layers * t_fwd : 0.0;
        t_bwd[rank] = 2.0 * t_fwd + extra / layers;
        const int collectives = p.tp > 1 ? layers * (recompute == 2 ? 6 : 4) + first + last : 0;
        const int sends = p.pp > 1 ? 2 * p.vp - first - last : 0;
        const double slot = plain + extra + collectives * r.t_collective + sends * r.t_send;
        if (slot > slowest) {
            slowest = slot;
            r.slowest = rank;
            r.t_micro = plain + extra;
            r.tp_collectives = collectives;
            r.pp_sends = sends;
        }
    }
    r.t_layer_fwd = t_fwd;
    r.t_layer_bwd = t_bwd[r.slowest];
    r.t_compute = r.accum * r.t_micro;
    r.t_ideal = r.accum * micro_tokens * flops_per_token(s.weights, s.L, s.C, T) / (p.tp * p.pp) / flops_per_s;
    r.tp_bytes = r.accum * r.tp_collectives * collective_bytes;
    r.t_tp = r.accum * r.tp_collectives * r.t_collective;
    r.pp_bytes = r.accum * r.pp_sends * r.send_bytes;
    r.t_pp = r.accum * r.pp_sends * r.t_send;
    r.bubble = p.pp > 1 ? (p.pp - 1.0) / ((double)p.vp * r.accum + p.pp - 1.0) : 0.0;

    // data parallel: each rank's DP group holds its slice; a group has DP / nodes GPUs in a node
    PlanLinks dpk = k;
    dpk.gpus_per_node = std::max(1, k.gpus_per_node / (p.tp * p.pp));
    auto data_parallel = [&](PlanStep& q, int rank) {
        const int layers = plan_stage_layers(s.L, p, rank);
        const double held = (rank == 0 ? (double)slice.front : 0.0) + (rank == p.pp - 1 ? (double)slice.tail : 0.0);
        plan_data_parallel(q, (double)layers * slice.layer + held, layers, (double)slice.layer, p.dp, stage, r.accum,
                           t_fwd, t_bwd[rank], dpk);
    };
    for (int rank = 0; rank < p.pp; rank++) {
        PlanStep q;
        data_parallel(q, rank);
        if (q.exposed_dp() > most) {
            most = q.exposed_dp();
            dp_rank = rank;
        }
    }
    data_parallel(r, dp_rank);

    const double piped = r.t_compute + r.t_tp + r.t_pp;  // what every pipeline slot holds
    r.step = piped / (1.0 - r.bubble) + r.exposed_dp();
    r.t_bubble = piped * r.bubble / (1.0 - r.bubble);
    r.tokens_per_s = r.tokens / r.step;
    r.efficiency = r.t_ideal / r.step;
    return r;
}
