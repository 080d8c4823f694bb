// plan.cpp: ./plan, the planner of a large run. For a model and a GPU (H100 80 GB, H200 141 GB;
// nodes of 8) it says what one GPU holds at a ZeRO stage and recompute level, the smallest
// GPU count that fits with 10% of the GPU's memory spare, and a PREDICTED step time, tokens/s
// and scaling efficiency there (llmc/plan.h; the model and its inputs: dev/SCALING.md). With
// -tp, -pp, -vp and -sp it plans tensor and pipeline parallelism, which the trainers do not have
// yet (issue 25): a layout's memory per GPU, bubble, exposed communication and PREDICTED step,
// the fastest layout that fits on a given GPU count, and MLPerf's layout beside it.
//   ./plan                                          the tables: 4 models x 2 GPUs, ZeRO alone, then layouts
//   ./plan -e llama3.1:70b -gpu h100                the planner's pick for one model, in detail
//   ./plan -e llama3.1:70b -gpu h100 -n 64 -z 3 -r 2 -b 1 -t 8192   one configuration in detail
//   ./plan -e llama3.1:405b -gpu h100 -tp -1 -pp -1 -vp -1 -sp -1   the best layout on 512 GPUs, and MLPerf's
//   ./plan -e llama3.1:405b -gpu h100 -n 512 -tp 8 -pp 8 -vp 8 -sp 1 -z 1 -r 2   one layout in detail
// Nothing is allocated or run: every time printed is a prediction, and says so.
#include <cstdio>
#include <string>
#include <vector>

#include "llmc/args.h"      // defines: ArgSpec, args_parse_table, args_print_table, args_check_fp8_recipe,
                             //          args_check_matmul_algo
#include "llmc/utils.h"     // defines: fail
#include "llmc/families.h"  // defines: ModelConfig, model_config_from_descriptor, model_config_problem
#include "llmc/plan.h"      // defines: plan_memory, plan_step, PlanStep, PlanLinks, PLAN_GPUS, plan_gpu_by_flag,
                            //          PlanLayout, plan_layout_problem, plan_stage_layers, plan_in_flight

struct PlanConfig {
    std::string model = "";    // -e   model descriptor (empty: the table of the four models below)
    std::string gpu = "";      // -gpu h100 | h200 (empty: both)
    int gpus = -1;             // -n   GPUs (-1: the smallest count that fits)
    int zero = -1;             // -z   ZeRO stage 0..3 (-1: the fastest that fits)
    int recompute = -1;        // -r   recompute level 0..2 (-1: the fastest that fits)
    int B = 1;                 // -b   micro-batch per GPU
    int T = -1;                // -t   sequence length (-1: 8192 for Llama, 2048 for GPT)
    long long batch = -1;      // -d   tokens per optimizer step (-1: 4,194,304 for Llama, 2,097,152 for GPT)
    float mfu = 0.42f;         // -mfu model FLOP utilization (the H200's measured 42.6%, rounded down)
    float peak = 989.0f;       // -pk  dense bf16 TFLOP/s of one GPU (H100 and H200 SXM)
    float nvlink = 450.0f;     // -nv  NVLink GB/s per GPU inside a node
    float ib = 50.0f;          // -ib  InfiniBand GB/s per GPU across nodes (one 400 Gb/s NIC a GPU)
    float latency = 5.0f;      // -lat microseconds per ring hop
    float overlap = 0.8f;      // -ov  share of the gradient traffic that can hide behind the backward
    int per_node = 8;          // -pg  GPUs per node
    float spare = 0.1f;        // -spare share of the GPU's memory left spare
    // the trainer's binary and flags that change its scratch (llmc/gpu_scratch.h)
    std::string prec = "bf16";       // -prec bf16 (train_gpt_bf16) | fp8 (train_gpt_fp8: FP8 copies and scales)
    std::string fp8_recipe = "delayed";  // -fp8r delayed | current: train_gpt_fp8's scaling
    int fp8_keep_inputs = 0;         // -fp8kt 1: train_gpt_fp8's linears keep their inputs cast for the backward
    int fp8_keep_weights = 0;        // -fp8kw 1: train_gpt_fp8's linears keep their weights cast for the step
    std::string matmul_algo = "heuristic";  // -ma heuristic | timed: timed's largest product's scratch outputs
    int attention_kernel = -1;       // -ak the trainer's: 2 adds the one-kernel backward's fp32 dq
    // tensor and pipeline parallelism: a PLAN, the trainers have neither yet (-1: search)
    int tp = 1;                // -tp  tensor-parallel ranks, inside a node (-1: 1, 2, 4, 8)
    int pp = 1;                // -pp  pipeline stages (-1: every count that divides the GPUs)
    int vp = 1;                // -vp  virtual stages a pipeline rank, interleaved 1F1B (-1: every whole split)
    int sp = 0;                // -sp  1: sequence parallelism (-1: both)
};

static std::vector<ArgSpec> plan_arg_specs(PlanConfig* c) {
#define ARG(flag, kind, field, lo, hi, help) {flag, kind, &c->field, lo, hi, help}
    return {
    ARG("-e", ARG_STRING, model, 0, 0, "model: llama3.1:8b|70b|405b, gpt3:c12288, any trainer -e descriptor (empty: the table)"),
    ARG("-gpu", ARG_STRING, gpu, 0, 0, "h100 | h200 (empty: both)"),
    ARG("-n", ARG_INT, gpus, -1, 1 << 20, "GPUs (-1: the smallest count that fits: 1, 2, 4, 8, then whole nodes)"),
    ARG("-z", ARG_INT, zero, -1, 3, "ZeRO stage (-1: the fastest PREDICTED that fits)"),
    ARG("-r", ARG_INT, recompute, -1, 2, "recompute: 0 none, 1 elementwise, 2 whole layers (-1: the fastest that fits)"),
    ARG("-b", ARG_INT, B, 1, 1 << 20, "micro-batch per GPU"),
    ARG("-t", ARG_INT, T, -1, 1 << 20, "sequence length (-1: 8192 Llama, 2048 GPT)"),
    ARG("-d", ARG_LLONG, batch, -1, 1e15, "tokens per optimizer step (-1: 4194304 Llama, 2097152 GPT)"),
    ARG("-mfu", ARG_FLOAT, mfu, 0.001, 1, "model FLOP utilization of each GPU"),
    ARG("-pk", ARG_FLOAT, peak, 1, 1e6, "peak dense bf16 TFLOP/s of one GPU"),
    ARG("-nv", ARG_FLOAT, nvlink, 0.001, 1e6, "NVLink GB/s per GPU inside a node"),
    ARG("-ib", ARG_FLOAT, ib, 0.001, 1e6, "network GB/s per GPU across nodes"),
    ARG("-lat", ARG_FLOAT, latency, 0, 1e6, "latency of one ring hop, microseconds"),
    ARG("-ov", ARG_FLOAT, overlap, 0, 1, "share of the gradient traffic that can hide behind the backward"),
    ARG("-pg", ARG_INT, per_node, 1, 1024, "GPUs per node"),
    ARG("-spare", ARG_FLOAT, spare, 0, 0.99, "share of the GPU's memory to leave spare"),
    ARG("-prec", ARG_STRING, prec, 0, 0, "bf16 (train_gpt_bf16) | fp8 (train_gpt_fp8: plus its FP8 scratch)"),
    ARG("-fp8r", ARG_STRING, fp8_recipe, 0, 0, "train_gpt_fp8's scaling: delayed | current (its amax history)"),
    ARG("-fp8kt", ARG_INT, fp8_keep_inputs, 0, 1, "train_gpt_fp8's -fp8kt: 1 adds its linears' inputs kept in fp8 (not with -pp)"),
    ARG("-fp8kw", ARG_INT, fp8_keep_weights, 0, 1, "train_gpt_fp8's -fp8kw: 1 adds its linears' weights kept in fp8, W and W^T"),
    ARG("-ma", ARG_STRING, matmul_algo, 0, 0, "the trainer's -ma: heuristic | timed (plus its scratch outputs)"),
    ARG("-ak", ARG_INT, attention_kernel, -1, 3, "the trainer's -ak: 2 adds its one-kernel attention backward's dq"),
    ARG("-tp", ARG_INT, tp, -1, 1024, "tensor-parallel ranks, inside a node (a PLAN; -1: search 1, 2, 4, 8)"),
    ARG("-pp", ARG_INT, pp, -1, 1 << 16, "pipeline stages (a PLAN; -1: search)"),
    ARG("-vp", ARG_INT, vp, -1, 1 << 16, "virtual stages a pipeline rank, interleaved 1F1B (a PLAN; -1: search)"),
    ARG("-sp", ARG_INT, sp, -1, 1, "1: sequence parallelism (a PLAN; -1: search)"),
    };
#undef ARG
}

static void plan_print_help(const char* prog) {
    PlanConfig def;
    printf("usage: %s [flags]   (every flag takes a value)\n", prog);
    printf("PREDICTED memory per GPU, smallest GPU count and step time of a bf16 (or -prec fp8) run (dev/SCALING.md)\n");
    args_print_table(plan_arg_specs(&def), 8);
    printf("example: %s -e llama3.1:70b -gpu h100 -n 64 -z 3 -r 2 -b 1 -t 8192\n", prog);
    printf("example: %s -e llama3.1:405b -gpu h100 -n 512 -tp 8 -pp 8 -vp 8 -sp 1   (a layout: PREDICTED)\n", prog);
}

static const char* TABLE_MODELS[] = {"llama3.1:8b", "llama3.1:70b", "llama3.1:405b", "gpt3:c12288"};
static const double MiB = 1048576.0, GiB = 1073741824.0;
static const int MAX_GPUS = 1 << 16;  // where the search for a count that fits gives up

// One model on one kind of GPU, with the run's B, T, batch and the cost model's inputs.
struct Setup {
    std::string name;
    ModelConfig model;
    const PlanGpu* gpu;
    int B, T;
    double batch, mfu, peak_tflops, flops_per_s;
    double spare, limit;  // the share of the GPU's memory kept spare, and the bytes the run may use
    PlanLinks links;
    PlanTrainer trainer;  // -prec, -fp8r, -ma
};

// A configuration with its memory (its heaviest pipeline rank's) and PREDICTED step.
struct Choice {
    int n = 0, z = 0, r = 0;
    PlanLayout lay;  // TP = PP = 1, DP = n: ZeRO alone, as the trainers run
    int heavy = 0;   // the pipeline rank whose memory is shown
    MemoryPlan mem;
    PlanStep step;
    bool fits = false;
    bool layout() const { return lay.tp > 1 || lay.pp > 1; }
};

// n GPUs as DP x PP x TP
static PlanLayout make_layout(int n, int tp, int pp, int vp, bool sp) {
    PlanLayout lay;
    lay.tp = tp; lay.pp = pp; lay.vp = vp; lay.sp = sp;
    lay.dp = n / (tp * pp);
    return lay;
}

static Choice evaluate(const Setup& s, const PlanLayout& lay, int z, int r) {
    Choice c;
    c.lay = lay;
    c.n = lay.dp * lay.tp * lay.pp;
    c.z = lay.dp == 1 ? 0 : z;  // one replica has nothing to shard
    c.r = r;
    c.step = plan_step(s.model, lay, s.B, s.T, c.z, r, s.batch, s.flops_per_s, s.links);
    c.mem = plan_memory(s.model, lay, s.B, s.T, c.z, r, c.step.accum, s.trainer, &c.heavy);
    c.fits = c.mem.total() <= s.limit;
    return c;
}

// Keeps the better of *best and c: the faster that fits, or while none fits the smaller.
static bool keep_better(const Choice& c, bool found, Choice* best) {
    const bool better = found ? c.fits && c.step.step < best->step.step
                              : c.fits || best->n == 0 || c.mem.total() < best->mem.total();
    if (better) *best = c;
    return found || c.fits;
}

// Among the stages and levels the flags leave open (-1: all) on n GPUs: the one with the
// shortest PREDICTED step that fits (*best), or, if none fits, the smallest (*best too).
// One GPU has ZeRO 0 only.
static bool best_at(const Setup& s, int n, int zero, int recompute, Choice* best) {
    bool found = false;
    for (int z = 0; z <= (n == 1 ? 0 : 3); z++) {
        for (int r = 0; r <= 2; r++) {
            if ((zero >= 0 && z != zero) || (recompute >= 0 && r != recompute)) continue;
            found = keep_better(evaluate(s, make_layout(n, 1, 1, 1, false), z, r), found, best);
        }
    }
    return found;
}

// The GPU counts tried: 1, 2, 4, ... up to a node, then whole nodes.
static int next_count(int n, int per_node) { return n < per_node ? std::min(2 * n, per_node) : n + per_node; }

// What every GPU holds however many there are: ZeRO 3 at -r 2 on MAX_GPUS, the floor.
static void print_floor(const Setup& s) {
    const Choice f = evaluate(s, make_layout(MAX_GPUS, 1, 1, 1, false), 3, 2);
    printf("DOES NOT FIT on any GPU count: even on %d GPUs at -z 3 -r 2 each holds %.1f GiB (params %.1f: the front "
           "and tail rows and two layer slots; grads %.1f; activations %.1f), over the limit of %.1f GiB\n",
           MAX_GPUS, f.mem.total() / GiB, f.mem.params / GiB, f.mem.grads / GiB, f.mem.activations / GiB,
           s.limit / GiB);
}

// The smallest count that fits (and its best_at choice); false if none up to MAX_GPUS does.
static bool smallest_fit(const Setup& s, int zero, int recompute, Choice* best) {
    for (int n = zero > 0 ? 2 : 1; n <= MAX_GPUS; n = next_count(n, s.links.gpus_per_node)) {
        Choice c;
        if (best_at(s, n, zero, recompute, &c)) {
            *best = c;
            return true;
        }
    }
    return false;
}

static const char* recompute_what(const Setup& s, int r) {
    const bool llama = s.model.family == FAMILY_LLAMA3;
    if (r == 0) return "every activation kept";
    if (r == 1) return llama ? "RMSNorm and SwiGLU outputs one layer deep"
                             : "GELU's output one layer deep";
    return llama ? "the layers' inputs kept, all else one layer"
                 : "GELU's and the LayerNorms' outputs one layer deep";
}

// 4194304 -> "4,194,304" (v >= 0)
static std::string with_commas(double v) {
    char digits[64], out[96];
    snprintf(digits, sizeof(digits), "%.0f", v);
    int len = (int)strlen(digits), o = 0;
    for (int i = 0; i < len; i++) {
        if (i > 0 && (len - i) % 3 == 0) out[o++] = ',';
        out[o++] = digits[i];
    }
    out[o] = '\0';
    return out;
}

// The shape in one line (model_describe's, from the configuration alone).
static std::string describe(const ModelConfig& c) {
    if (c.family == FAMILY_GPT2) return "GPT-2/3 " + gpt2_describe(c.gpt2);
    const LlamaConfig& m = c.llama;
    char buf[160];
    snprintf(buf, sizeof(buf), "Llama 3 L=%d C=%d NH=%d NKV=%d F=%d V=%d (Vp %d)", m.num_layers, m.channels,
             m.num_heads, m.num_kv_heads, m.ffn_hidden, m.vocab_size, m.padded_vocab_size);
    return buf;
}

// "TP8 PP8 VP8 SP"
static std::string layout_name(const PlanLayout& l) {
    char buf[80];
    snprintf(buf, sizeof(buf), "TP%d PP%d%s%s", l.tp, l.pp, l.vp > 1 ? (" VP" + std::to_string(l.vp)).c_str() : "",
             l.sp ? " SP" : "");
    return buf;
}

// The layers of each pipeline rank, repeats counted: "15, 16 (x6), 15"
static std::string stage_layers(const Setup& s, const PlanLayout& l) {
    std::string out;
    for (int rank = 0; rank < l.pp;) {
        const int layers = plan_stage_layers(model_config_num_layers(s.model), l, rank);
        int run = 1;
        while (rank + run < l.pp && plan_stage_layers(model_config_num_layers(s.model), l, rank + run) == layers) run++;
        out += (out.empty() ? "" : ", ") + std::to_string(layers) + (run > 1 ? " (x" + std::to_string(run) + ")" : "");
        rank += run;
    }
    return out;
}

// A layout's own lines: how the GPUs and the model are cut (PlanLayout's comment in llmc/plan.h)
static void print_layout(const Setup& s, const Choice& c) {
    const PlanLayout& l = c.lay;
    const PlanStep& p = c.step;
    const int L = model_config_num_layers(s.model);
    const bool llama = s.model.family == FAMILY_LLAMA3;
    printf("layout: %d GPUs = DP %d x PP %d x TP %d (TP inside a node, DP outermost), %s%s; -z %d over the DP group, "
           "-r %d; B=%d T=%d, %d micro-batches of %d x %d x %d tokens = %s tokens per step\n",
           c.n, l.dp, l.pp, l.tp, l.pp == 1 ? "no pipeline" : l.vp > 1 ? "interleaved 1F1B" : "1F1B",
           l.sp ? ", sequence parallel" : "", c.z, c.r, s.B, s.T, p.accum, l.dp, s.B, s.T,
           with_commas(p.tokens).c_str());
    printf("  a PLAN: the trainers have no tensor or pipeline parallelism yet (issue 25); every time below is "
           "PREDICTED\n");
    if (l.pp > 1) {
        const char* split = l.vp > 1 && L % (l.pp * l.vp) != 0
                                ? "Megatron's split counting the embedding and the loss as a layer each"
                                : L % l.pp != 0 ? "PP does not divide L: balanced by layer count, the fuller stages set "
                                                  "the time"
                                                : "PP divides L";
        printf("  stages: %d layers over %d pipeline ranks: %s (%s)%s; the embedding on the first, the final norm "
               "and head on the last\n", L, l.pp, stage_layers(s, l).c_str(), split,
               l.vp > 1 ? (", each rank's in " + std::to_string(l.vp) + " virtual stages").c_str() : "");
    }
    if (l.tp > 1) {
        const int NKV = llama ? s.model.llama.num_kv_heads : 0;
        char kv[120] = "";
        if (llama)
            snprintf(kv, sizeof(kv), "; key/value heads: %d a rank (%s)", NKV % l.tp == 0 ? NKV / l.tp : 1,
                     NKV % l.tp == 0 ? "split" : "replicated: TP is a multiple of NKV");
        printf("  TP splits (Megatron): qkvw%s and fcw%s by output rows (column-parallel), attprojw and fcprojw by "
               "input columns (row-parallel), %s by vocabulary rows; whole on every TP rank: %s%s\n",
               llama ? "" : ", qkvb", llama ? "" : ", fcb", llama ? "wte and lmheadw" : "wte (the head too)",
               llama ? "rms1w, rms2w, rmsfw" : "ln1, ln2, lnf, attprojb, fcprojb, wpe", kv);
    }
}

static void print_detail(const Setup& s, const Choice& c) {
    const PlanShape shape = plan_shape(s.model);
    const PlanStep& p = c.step;
    const PlanLayout& l = c.lay;
    const bool lay = c.layout();
    const int nodes = (c.n + s.links.gpus_per_node - 1) / s.links.gpus_per_node;
    printf("%s on %s: %s; %s parameters, %s a layer\n", s.name.c_str(), s.gpu->name,
           describe(s.model).c_str(), with_commas(shape.n).c_str(), with_commas(shape.layer).c_str());
    if (lay)
        print_layout(s, c);
    else
        printf("configuration: %d GPU%s (%d node%s of %d), -z %d -r %d, B=%d T=%d, %d micro-step%s of %d x %d x %d "
               "tokens = %s tokens per step\n",
               c.n, c.n == 1 ? "" : "s", nodes, nodes == 1 ? "" : "s", s.links.gpus_per_node, c.z, c.r, s.B, s.T,
               p.accum, p.accum == 1 ? "" : "s", c.n, s.B, s.T, with_commas(p.tokens).c_str());
    if (lay)
        printf("memory per GPU on pipeline rank %d of %d, the heaviest (its stage's values, 1/TP of those TP splits; "
               "bf16 parameters and gradients, fp32 master weights and AdamW m, v), PREDICTED:\n", c.heavy, l.pp);
    else
        printf("memory per GPU (bf16 parameters and gradients, fp32 master weights and AdamW m, v):\n");
    const char* held = c.z == 3 ? "the front and tail rows, two layer slots and the owned slice"
                                : "all of them, padded to the ZeRO layout";
    const char* grads = c.z >= 2 ? "the front and tail rows, two layer buckets and the owned slice"
                                 : l.dp > 1 ? "all of them, and two layer buckets" : "all of them";
    printf("  params       %12.1f MiB  %s\n", c.mem.params / MiB, held);
    printf("  grads        %12.1f MiB  %s\n", c.mem.grads / MiB, grads);
    printf("  adamw        %12.1f MiB  m and v, fp32, of %s\n", c.mem.adamw / MiB,
           c.z == 0 ? "every parameter" : "the owned slice");
    printf("  master       %12.1f MiB  fp32, of %s\n", c.mem.master / MiB, c.z == 0 ? "every parameter" : "the owned slice");
    if (lay) {
        const int flight = plan_in_flight(l, c.heavy, p.accum);
        printf("  activations  %12.1f MiB  -r %d: %s; %d %s in flight%s\n", c.mem.activations / MiB, c.r,
               recompute_what(s, c.r), flight, l.vp > 1 ? "virtual stages of micro-batches" : "micro-batches",
               l.sp ? ", norms and residual stream 1/TP along T" : l.tp > 1 ? ", norms and residual stream whole" : "");
    } else {
        printf("  activations  %12.1f MiB  -r %d: %s\n", c.mem.activations / MiB, c.r, recompute_what(s, c.r));
    }
    const PlanScratch scratch = plan_scratch(s.model, l, c.heavy, s.B, s.T, s.trainer);
    printf("  workspace    %12.1f MiB  cuBLASLt's, and the bias-gradient epilogue's output\n", scratch.workspace / MiB);
    printf("  encoder      %12.1f MiB  the encoder backward's buckets and partial sums of B x T positions\n",
           scratch.encoder / MiB);
    if (s.trainer.fp8)
        printf("  fp8          %12.1f MiB  train_gpt_fp8's FP8 copies and scales (-fp8r %s%s%s)\n", scratch.fp8 / MiB,
               s.trainer.fp8_current ? "current" : "delayed",
               s.trainer.fp8_keep_inputs && l.pp == 1 ? "; -fp8kt 1: the linears' inputs kept" : "",
               s.trainer.fp8_keep_weights ? "; -fp8kw 1: their weights kept cast" : "");
    if (s.trainer.timed)
        printf("  -ma timed    %12.1f MiB  the largest product's scratch outputs, while it is timed\n",
               scratch.timing / MiB);
    if (s.trainer.attention_fused)
        printf("  attention dq %12.1f MiB  -ak 2: the one-kernel attention backward's fp32 dq of B x T positions\n",
               scratch.attention / MiB);
    printf("  total        %12.1f MiB  = %.2f GiB of the GPU's %.2f GiB; with %.0f%% spare the limit is %.2f GiB: %s\n",
           c.mem.total() / MiB, c.mem.total() / GiB, s.gpu->memory_mib / 1024, 100.0 * s.spare, s.limit / GiB,
           c.fits ? "fits" : "DOES NOT FIT");
    const double ms = 1e3, GB = 1e9;
    if (c.n > 1) {
        printf("communication per GPU per optimizer step (bf16; a ring sends (W-1)/W of a buffer), PREDICTED link times:\n");
        const bool across = l.tp * l.pp > s.links.gpus_per_node;
        if (l.tp > 1)
            printf("  tensor par.  %12.4f GB   %d x %d all-reduce%s of (B,T,C) in the TP group of %d a micro-batch "
                   "(pipeline rank %d), %.4f ms each on NVLink\n", p.tp_bytes / GB, p.accum, p.tp_collectives,
                   l.sp ? "-equivalents (all-gather + reduce-scatter)" : "s", l.tp, p.slowest, p.t_collective * ms);
        if (l.pp > 1)
            printf("  pipeline     %12.4f GB   %d x %d sends of %s bytes (B x T x C / TP, activations forward, "
                   "gradients back) a micro-batch, %.4f ms each on %s\n", p.pp_bytes / GB, p.accum, p.pp_sends,
                   with_commas(p.send_bytes).c_str(), p.t_send * ms, across ? "the GPU's NIC" : "NVLink");
        if (l.dp > 1)
            printf("  gradients    %12.4f GB   %d x %s of %.4f GB (%d buckets), %.2f ms each on the links%s\n",
                   p.grad_bytes / GB, p.grad_rounds, c.z == 0 ? "all-reduce" : "reduce-scatter", 2 * p.dp_values / GB,
                   p.dp_layers + 1, p.t_grad_round * ms, lay ? ", over the DP group" : "");
        if (c.z == 3 && l.dp > 1)
            printf("  gathers      %12.4f GB   %lld layer all-gathers of %.4f GB, %.2f ms each on the links\n",
                   p.gather_bytes / GB, p.gathers, 2 * p.dp_layer / GB, p.t_gather * ms);
        if (c.z >= 1 && l.dp > 1)
            printf("  after update %12.4f GB   all-gather of %s, %.2f ms on the links\n", p.after_bytes / GB,
                   c.z == 3 ? "the front and tail rows" : "the parameters", p.t_after * ms);
        if (lay)
            printf("  sent         %12.4f GB   per GPU per step: TP, PP and data parallel (the last "
                   "zero_comm_bytes_per_step's sum)\n", p.sent() / GB);
        else
            printf("  sent         %12.4f GB   per GPU per step (llmc/zero.h: zero_comm_bytes_per_step), %.3f s on the links\n",
                   p.sent() / GB, p.link_seconds());
    } else {
        printf("communication: none (one GPU)\n");
    }
    if (!c.fits) {
        printf("no step time: this configuration does not fit\n\n");
        return;
    }
    printf("time per optimizer step at %.0f%% MFU of %.0f TFLOP/s, PREDICTED:\n", 100 * s.mfu, s.peak_tflops);
    printf("  one layer    %12.2f ms   forward; backward %.2f ms (recompute included)%s, PREDICTED\n", p.t_layer_fwd * ms,
           p.t_layer_bwd * ms, l.tp > 1 ? ", each GPU 1/TP of it" : "");
    if (lay) {
        printf("  compute      %12.3f s    %d micro-batches of %.3f s on pipeline rank %d, the slowest (recompute "
               "included), PREDICTED\n", p.t_compute, p.accum, p.t_micro, p.slowest);
        printf("  bubble       %12.3f s    %.4f%% of the step idle = (PP-1)/(VP m + PP-1) = %d/%d, PREDICTED\n",
               p.t_bubble, 100 * p.bubble, l.pp - 1, l.vp * p.accum + l.pp - 1);
        printf("  exposed      %12.3f s    tensor parallel %.3f, pipeline sends %.3f, data parallel %.3f (forward "
               "gathers %.3f, backward %.3f, after the update %.3f), PREDICTED\n",
               p.t_tp + p.t_pp + p.exposed_dp(), p.t_tp, p.t_pp, p.exposed_dp(), p.exposed_forward, p.exposed_backward,
               p.exposed_after);
        printf("  step         %12.3f s    (compute + TP + PP) / (1 - bubble) + data parallel, PREDICTED\n", p.step);
    } else {
        printf("  compute      %12.3f s    %d micro-step%s of %.3f s (recompute included), PREDICTED\n", p.t_compute,
               p.accum, p.accum == 1 ? "" : "s", p.t_micro);
        printf("  exposed      %12.3f s    forward gathers %.3f, backward %.3f, after the update %.3f, PREDICTED\n",
               p.exposed_dp(), p.exposed_forward, p.exposed_backward, p.exposed_after);
        printf("  step         %12.3f s    PREDICTED\n", p.step);
    }
    printf("  tokens/s     %12.0f      PREDICTED (%.0f per GPU)\n", p.tokens_per_s, p.tokens_per_s / c.n);
    printf("  efficiency   %12.1f %%    PREDICTED: the step's compute without recompute%s / the step\n\n",
           100 * p.efficiency, lay ? ", spread evenly over the GPUs," : "");
}

// ---------------------------------------------------------------------------------------
// Tensor and pipeline parallelism: a PLAN (the trainers have neither yet, issue 25)

// The layouts -tp, -pp, -vp and -sp leave open (-1: every one that can be) on n GPUs, each at the
// ZeRO stages (-z, else 1 and 3 over the DP group) and recompute levels (-r, else 0..2) the flags
// leave open: the fastest PREDICTED that fits (*best), or, if none fits, the smallest. Searched:
// TP 1, 2, 4, 8; PP every count up to L that divides the GPUs with TP; VP every count that
// plan_layout_problem allows. *tried counts the layouts; *why says why the first refused one was.
static bool best_layout(const Setup& s, const PlanConfig& cfg, int n, Choice* best, int* tried, std::string* why) {
    const int L = model_config_num_layers(s.model);
    auto given_or = [](int flag, std::vector<int> all) { return flag > 0 ? std::vector<int>{flag} : all; };
    std::vector<int> counts;  // 1..L
    for (int i = 1; i <= L; i++) counts.push_back(i);
    bool found = false;
    *tried = 0;
    for (int tp : given_or(cfg.tp, {1, 2, 4, 8})) {
        for (int pp : given_or(cfg.pp, counts)) {
            if (cfg.pp < 0 && n % (tp * pp) != 0) continue;
            for (int vp : given_or(cfg.vp, counts)) {
                if (cfg.vp < 0 && vp > 1 && (pp == 1 || pp * vp > L)) continue;
                for (int sp = 0; sp <= 1; sp++) {
                    if (cfg.sp >= 0 ? sp != cfg.sp : sp == 1 && tp == 1) continue;
                    const PlanLayout lay = make_layout(n, tp, pp, vp, sp == 1);
                    const std::string problem = plan_layout_problem(s.model, lay, n, s.links.gpus_per_node);
                    if (!problem.empty()) {
                        if (why->empty()) *why = problem;
                        continue;
                    }
                    ++*tried;
                    for (int z : {0, 1, 2, 3}) {
                        if (cfg.zero >= 0 ? z != cfg.zero : lay.dp == 1 ? z != 0 : z != 1 && z != 3) continue;
                        for (int r = 0; r <= 2; r++)
                            if (cfg.recompute < 0 || r == cfg.recompute)
                                found = keep_better(evaluate(s, lay, z, r), found, best);
                    }
                }
            }
        }
    }
    return found;
}

// MLPerf Training's layouts of the two largest models, as issue 25 gives them
struct Reference {
    const char* model;
    int tp, pp, vp, gpus;
};
static const Reference MLPERF[] = {{"llama3.1:405b", 8, 8, 8, 512}, {"gpt3:c12288", 4, 8, 4, 512}};

static const Reference* mlperf_of(const std::string& model) {
    for (const Reference& m : MLPERF)
        if (model == m.model) return &m;
    return nullptr;
}

// MLPerf's TP, PP and VP on its GPU count, with -sp, -z and -r the planner's fastest for it
static Choice mlperf_choice(const Setup& s, const PlanConfig& cfg, const Reference& m) {
    PlanConfig fixed = cfg;
    fixed.tp = m.tp; fixed.pp = m.pp; fixed.vp = m.vp; fixed.sp = -1; fixed.zero = -1; fixed.recompute = -1;
    Choice c;
    int tried = 0;
    std::string why;
    best_layout(s, fixed, m.gpus, &c, &tried, &why);
    CHECK(tried > 0, "MLPerf's layout of %s cannot be: %s", m.model, why.c_str());
    return c;
}

// The GPU count a layout search runs on: -n; else 512 for models of 100B parameters and more
// (MLPerf's count for 405B and GPT-3 175B), else the smallest count ZeRO alone fits on (the
// table's), or 512 where none does.
static int layout_gpus(const PlanConfig& cfg, const Setup& s) {
    if (cfg.gpus > 0) return cfg.gpus;
    Choice c;
    if (plan_shape(s.model).n >= 1e11 || !smallest_fit(s, -1, -1, &c)) return 512;
    return c.n;
}

static bool layout_flags(const PlanConfig& cfg) { return cfg.tp != 1 || cfg.pp != 1 || cfg.vp != 1 || cfg.sp != 0; }

// One row of the layout table
static void print_layout_row(const Setup& s, const char* label, const Choice& c) {
    char flags[32];
    snprintf(flags, sizeof(flags), "-z %d -r %d", c.z, c.r);
    printf("%-15s %-5s %5d  %-15s %-10s %7.1f %5.0f%% %6d %7.2f%% %9.1f %9.1f %9.0f %9.1f%%%s\n", label,
           s.gpu->flag, c.n, layout_name(c.lay).c_str(), flags, c.mem.total() / GiB,
           100.0 * c.mem.total() / (s.gpu->memory_mib * MiB), c.step.accum, 100 * c.step.bubble,
           c.step.t_tp + c.step.t_pp + c.step.exposed_dp(), c.step.step, c.step.tokens_per_s, 100 * c.step.efficiency,
           c.fits ? "" : "  DOES NOT FIT");
}

// The setup of one model on one GPU; a model name, -t or -d that cannot be is a one-line error.
static Setup make_setup(const PlanConfig& cfg, const std::string& name, const PlanGpu* gpu) {
    Setup s;
    s.name = name;
    if (!model_config_from_descriptor(name.c_str(), &s.model))
        fail("flag -e: unknown model '%s' (llama3.1:8b, llama3.1:70b, llama3.1:405b, gpt3:c12288, or a trainer -e "
             "descriptor)", name.c_str());
    const bool llama = s.model.family == FAMILY_LLAMA3;
    const int maxT = llama ? s.model.llama.max_seq_len : s.model.gpt2.max_seq_len;
    s.gpu = gpu;
    s.B = cfg.B;
    s.T = cfg.T > 0 ? cfg.T : std::min(llama ? 8192 : 2048, maxT);
    if (s.T > maxT) fail("flag -t: %s has %d positions, -t %d is longer", name.c_str(), maxT, s.T);
    s.batch = cfg.batch > 0 ? (double)cfg.batch : llama ? 4194304.0 : 2097152.0;
    s.mfu = cfg.mfu;
    s.peak_tflops = cfg.peak;
    s.flops_per_s = (double)cfg.mfu * cfg.peak * 1e12;
    s.spare = cfg.spare;
    s.limit = (1.0 - cfg.spare) * gpu->memory_mib * MiB;
    s.links.nvlink_gbs = cfg.nvlink;
    s.links.ib_gbs = cfg.ib;
    s.links.latency_us = cfg.latency;
    s.links.overlap = cfg.overlap;
    s.links.gpus_per_node = cfg.per_node;
    s.trainer.fp8 = cfg.prec == "fp8";
    s.trainer.fp8_current = cfg.fp8_recipe == "current";
    s.trainer.fp8_keep_inputs = cfg.fp8_keep_inputs == 1;
    s.trainer.fp8_keep_weights = cfg.fp8_keep_weights == 1;
    s.trainer.timed = cfg.matmul_algo == "timed";
    s.trainer.attention_fused = cfg.attention_kernel == 2;
    return s;
}

static void print_assumptions(const PlanConfig& cfg) {
    char T[64], d[64];
    if (cfg.T > 0) snprintf(T, sizeof(T), "%d", cfg.T);
    else snprintf(T, sizeof(T), "8192 (Llama) / 2048 (GPT-3)");
    if (cfg.batch > 0) snprintf(d, sizeof(d), "%s", with_commas((double)cfg.batch).c_str());
    else snprintf(d, sizeof(d), "4,194,304 (Llama) / 2,097,152 (GPT-3)");
    printf("PREDICTED: a cost model (llmc/plan.h, dev/SCALING.md), not a measurement; nothing here has run on more than "
           "one GPU\n");
    printf("  bf16 parameters and gradients, fp32 master weights and AdamW m, v (16 bytes a parameter before sharding); "
           "B=%d, T=%s; %.0f%% of each GPU's memory spare\n", cfg.B, T, 100.0 * cfg.spare);
    std::string fp8_flags;  // train_gpt_fp8's flags that change its scratch
    if (cfg.prec == "fp8") {
        fp8_flags = " -fp8r " + cfg.fp8_recipe;
        if (cfg.fp8_keep_inputs) fp8_flags += " -fp8kt 1";
        if (cfg.fp8_keep_weights) fp8_flags += " -fp8kw 1";
    }
    printf("  the trainer: train_gpt_%s%s -ma %s%s (its scratch: cuBLASLt's workspace, the encoder's buckets%s%s%s)\n",
           cfg.prec.c_str(), fp8_flags.c_str(), cfg.matmul_algo.c_str(),
           cfg.attention_kernel == 2 ? " -ak 2" : "", cfg.prec == "fp8" ? ", the FP8 copies and scales" : "",
           cfg.matmul_algo == "timed" ? ", the largest product's timing outputs" : "",
           cfg.attention_kernel == 2 ? ", attention's fp32 dq" : "");
    printf("  compute: %.0f%% MFU of %.0f TFLOP/s dense bf16 on both GPUs (d12 B=64 T=1024 ran at 42.6%% on an H200: "
           "dev/results/2026-11-26_gpu_h200_speed_defaults.txt; ASSUMED for these shapes and for the H100)\n",
           100.0 * cfg.mfu, cfg.peak);
    printf("  links: NVLink %g GB/s per GPU in a node, network %g GB/s per GPU across nodes (%d GPUs a node), %g us a "
           "ring hop, %.0f%% of the gradient traffic can hide behind the backward\n",
           cfg.nvlink, cfg.ib, cfg.per_node, cfg.latency, 100.0 * cfg.overlap);
    printf("  tokens per optimizer step: %s, rounded up to whole micro-steps on every GPU\n", d);
}

// ./plan without -e: the smallest count that fits, for each model on each GPU
static void print_table(const PlanConfig& cfg, const std::vector<const PlanGpu*>& gpus) {
    print_assumptions(cfg);
    printf("  GPUs: the smallest count that fits (1, 2, 4, 8, then whole nodes); flags: there the ZeRO stage (-z) and "
           "recompute level (-r) with the shortest PREDICTED step\n\n");
    printf("%-15s %-5s %6s  %-10s %8s %6s %6s %12s %12s %10s\n", "model", "GPU", "GPUs", "flags", "GiB/GPU", "of GPU",
           "micro", "step s", "tokens/s", "efficiency");
    printf("%-15s %-5s %6s  %-10s %8s %6s %6s %12s %12s %10s\n", "", "", "", "", "", "", "steps", "PREDICTED",
           "PREDICTED", "PREDICTED");
    std::vector<Setup> unfit;
    for (const char* name : TABLE_MODELS) {
        for (const PlanGpu* gpu : gpus) {
            const Setup s = make_setup(cfg, name, gpu);
            Choice c;
            if (!smallest_fit(s, -1, -1, &c)) {
                printf("%-15s %-5s %6s  does not fit at any count (below)\n", name, gpu->flag, "-");
                unfit.push_back(s);
                continue;
            }
            char flags[32];
            snprintf(flags, sizeof(flags), "-z %d -r %d", c.z, c.r);
            printf("%-15s %-5s %6d  %-10s %8.1f %5.0f%% %6d %12.1f %12.0f %9.1f%%\n", name, gpu->flag, c.n, flags,
                   c.mem.total() / GiB, 100.0 * c.mem.total() / (gpu->memory_mib * MiB), c.step.accum, c.step.step,
                   c.step.tokens_per_s, 100.0 * c.step.efficiency);
        }
    }
    printf("\n");
    for (const Setup& s : unfit) {
        printf("%s on %s: ", s.name.c_str(), s.gpu->name);
        print_floor(s);
    }
    printf("ZeRO 3 and Llama's recompute run on train_gpt_cpu and, so far executed on the emulated GPU only, on the "
           "GPU trainers: the rows above are plans, their times PREDICTED\n");
}

// ./plan without -e, after the table above: the fastest layout for each model on each GPU, and MLPerf's
static void print_layout_table(const PlanConfig& cfg, const std::vector<const PlanGpu*>& gpus) {
    PlanConfig search = cfg;
    search.tp = search.pp = search.vp = search.sp = -1;
    printf("\nTensor and pipeline parallelism: a PLAN, the trainers have neither yet (issue 25); every figure below is "
           "PREDICTED\n");
    printf("  GPUs: 512 for 405B and GPT-3 175B, else the count above; searched there: TP 1, 2, 4, 8 (inside a node, "
           "dividing the heads), PP (dividing the GPUs; where it does not divide L, the fuller stages set the pace), VP "
           "(whole virtual stages), -sp 0 and 1, -z 1 and 3 over the DP group, -r 0..2: the fastest PREDICTED step "
           "that fits. Below it MLPerf's layout (TP, PP, VP as issue 25 gives them) with the planner's best -sp, -z "
           "and -r for it. GiB/GPU: the heaviest pipeline rank's; bubble: (PP-1)/(VP m + PP-1), m the micro-batches; "
           "exposed: the communication the step waits for (TP, PP and data parallel)\n\n");
    printf("%-15s %-5s %5s  %-15s %-10s %7s %6s %6s %8s %9s %9s %9s %10s\n", "model", "GPU", "GPUs", "layout", "flags",
           "GiB/GPU", "of GPU", "micro", "bubble", "exposed s", "step s", "tokens/s", "efficiency");
    printf("%-15s %-5s %5s  %-15s %-10s %7s %6s %6s %8s %9s %9s %9s %10s\n", "", "", "", "", "", "", "", "batch",
           "PREDICTED", "PREDICTED", "PREDICTED", "PREDICTED", "PREDICTED");
    for (const char* name : TABLE_MODELS) {
        for (const PlanGpu* gpu : gpus) {
            const Setup s = make_setup(cfg, name, gpu);
            Choice c;
            int tried = 0;
            std::string why;
            best_layout(s, search, layout_gpus(search, s), &c, &tried, &why);
            print_layout_row(s, name, c);
            if (const Reference* m = mlperf_of(name)) print_layout_row(s, "  MLPerf's", mlperf_choice(s, search, *m));
        }
    }
}

// ./plan -e M with -tp, -pp, -vp or -sp: one layout, or the fastest of those the flags leave open
// (and MLPerf's beside it). A layout that cannot be is refused in one line before anything else.
static int plan_layouts(const PlanConfig& cfg, const std::vector<const PlanGpu*>& gpus) {
    const bool one = cfg.tp > 0 && cfg.pp > 0 && cfg.vp > 0 && cfg.sp >= 0;
    std::vector<Setup> setups;
    std::vector<Choice> choices;
    std::vector<int> counts;
    for (const PlanGpu* gpu : gpus) {
        const Setup s = make_setup(cfg, cfg.model, gpu);
        const int n = layout_gpus(cfg, s);
        Choice c;
        int tried = 0;
        std::string why;
        best_layout(s, cfg, n, &c, &tried, &why);
        if (tried == 0) fail("%s%s", one ? "" : "no layout these flags allow can be: ", why.c_str());
        setups.push_back(s);
        choices.push_back(c);
        counts.push_back(tried);
    }
    print_assumptions(cfg);
    printf("  tensor and pipeline parallelism: a PLAN, the trainers have neither yet (issue 25)\n\n");
    for (size_t i = 0; i < setups.size(); i++) {
        const Setup& s = setups[i];
        const Choice& c = choices[i];
        if (!one)
            printf("%s on %d GPUs: the fastest PREDICTED of %d layouts these flags allow (each at the -z and -r they "
                   "allow)%s\n", s.name.c_str(), c.n, counts[i], c.fits ? "" : ": NONE FITS, the smallest of them");
        else if (!c.fits)
            printf("DOES NOT FIT at any ZeRO stage and recompute level these flags allow; the smallest of them:\n");
        print_detail(s, c);
        const Reference* m = mlperf_of(s.name);
        if (!one && m != nullptr) {
            printf("beside it, MLPerf's layout (as issue 25 gives it): TP%d PP%d VP%d on %d GPUs, with the planner's "
                   "best -sp, -z and -r for it\n", m->tp, m->pp, m->vp, m->gpus);
            print_detail(s, mlperf_choice(s, cfg, *m));
        }
    }
    return 0;
}

int main(int argc, char** argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-help") || !strcmp(argv[i], "-h")) {
            plan_print_help(argv[0]);
            return 0;
        }
    }
    PlanConfig cfg;
    args_parse_table(argc, argv, plan_arg_specs(&cfg));
    if (cfg.gpus == 0) fail("flag -n: expected -1 (the smallest that fits) or a GPU count, got 0");
    if (cfg.T == 0) fail("flag -t: expected -1 (the family's default) or a length, got 0");
    if (cfg.batch == 0) fail("flag -d: expected -1 (the family's default) or a token count, got 0");
    if (cfg.gpus == 1 && cfg.zero > 0) fail("flag -z %d: one GPU has nothing to shard (ZeRO 0 only)", cfg.zero);
    if (cfg.tp == 0 || cfg.pp == 0 || cfg.vp == 0) fail("flags -tp, -pp, -vp: expected -1 (search) or a count, got 0");
    if (cfg.prec != "bf16" && cfg.prec != "fp8") fail("flag -prec: unknown precision '%s' (bf16 | fp8)", cfg.prec.c_str());
    args_check_fp8_recipe(cfg.fp8_recipe);  // as the trainers check them
    args_check_matmul_algo(cfg.matmul_algo);
    if (cfg.model.empty() && (cfg.gpus > 0 || cfg.zero >= 0 || cfg.recompute >= 0 || layout_flags(cfg)))
        fail("flags -n, -z, -r, -tp, -pp, -vp and -sp describe one configuration: give the model with -e too");
    std::vector<const PlanGpu*> gpus;  // -gpu's, or both
    if (!cfg.gpu.empty()) {
        const PlanGpu* g = plan_gpu_by_flag(cfg.gpu.c_str());
        if (g == nullptr) fail("flag -gpu: unknown GPU '%s' (h100 or h200)", cfg.gpu.c_str());
        gpus.push_back(g);
    } else {
        for (const PlanGpu& g : PLAN_GPUS) gpus.push_back(&g);
    }

    if (cfg.model.empty()) {
        print_table(cfg, gpus);
        print_layout_table(cfg, gpus);
        return 0;
    }
    if (layout_flags(cfg)) return plan_layouts(cfg, gpus);
    print_assumptions(cfg);
    printf("\n");
    for (const PlanGpu* gpu : gpus) {
        const Setup s = make_setup(cfg, cfg.model, gpu);
        Choice c;
        if (cfg.gpus < 0) {
            if (!smallest_fit(s, cfg.zero, cfg.recompute, &c)) {
                printf("%s on %s: ", s.name.c_str(), gpu->name);
                print_floor(s);
                printf("\n");
                continue;
            }
            printf("the smallest GPU count that fits: %d\n", c.n);
        } else if (!best_at(s, cfg.gpus, cfg.zero, cfg.recompute, &c)) {
            printf("DOES NOT FIT: %s on %d x %s at any ZeRO stage and recompute level these flags allow; the smallest "
                   "of them:\n", s.name.c_str(), cfg.gpus, gpu->name);
        }
        print_detail(s, c);
    }
    return 0;
}
