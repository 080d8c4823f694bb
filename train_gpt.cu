// train_gpt.cu: the GPU trainer. One source, three binaries: train_gpt_fp32, train_gpt_bf16
// (-DENABLE_BF16: bf16 weights and activations, fp32 AdamW state and master weights), and
// train_gpt_fp8 (-DENABLE_BF16 -DENABLE_FP8: bf16 with FP8 linear layers, sm_89 and later).
// Same flags, files, logs and loop as the CPU trainer train_gpt.cpp; only the model lives on the
// GPU (llmc/gpt2_cuda.cuh for GPT-2, llmc/llama_cuda.cuh for Llama 3; what
// they share is llmc/model_cuda.cuh's). Reading order: main() parses flags, builds the model and
// the data loaders, prints the plan, then hands a GpuBackend (llmc/gpu_backend.cuh) to the loop
// both trainers share (llmc/train_loop.h: validate, sample, checkpoint, one training step, log,
// faults).
#if defined(ENABLE_FP8) && !defined(ENABLE_BF16)
#error "train_gpt_fp8 is the bf16 trainer with FP8 linear layers: -DENABLE_FP8 needs -DENABLE_BF16"
#endif
#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "llmc/utils.h"         // defines: fail, CHECK
#include "llmc/args.h"          // defines: TrainConfig, args_parse
#include "llmc/gpt2.h"          // defines: GPT2 (the host model: init, random init, loading), grad_clip_scale
#include "llmc/families.h"      // defines: ModelBase, model_describe, model_flops_per_token, model_delete
#include "llmc/checkpoint.h"    // defines: model_load_checkpoint, TrainState
#include "llmc/dataloader.h"    // defines: DataLoader (inside TrainData)
#include "llmc/schedule.h"      // defines: LRSchedule, lr_schedule_parse
#include "llmc/logger.h"        // defines: Logger (the loop logs)
#include "llmc/tokenizer.h"     // defines: Tokenizer, tokenizer_init, tokenizer_decode
#include "llmc/train_common.h"  // defines: train_prepare_output_dir, train_load_model, TrainData, ...
#include "llmc/cuda/common.cuh" // defines: CudaContext, cuda_context_init, floatX, PRECISION_NAME
#include "llmc/gpt2_cuda.cuh"   // defines: GPT2Cuda, gpt2_cuda_forward, gpt2_cuda_backward, gpt2_cuda_update, ...
#include "llmc/llama_cuda.cuh"  // defines: LlamaCuda, llama_cuda_forward, llama_cuda_backward, ...
#include "llmc/model_cuda.cuh"  // defines: cuda_model_update, cuda_model_loss, cuda_model_load_state, ... (either family)
#include "llmc/gpu_scratch.h"   // defines: encoder_buckets_device_bytes, attention_dq_bytes, ...
#include "llmc/faults.h"        // defines: preempt_install_handlers, FaultInject, fault_inject_from_env
#include "llmc/comm.h"          // defines: Comm, comm_init, comm_sum, comm_free
#include "llmc/zero.h"          // defines: ZeroLayout, zero_layout, zero_comm_bytes_per_step, zero_stage_name
#include "llmc/cuda/comm_gpu.cuh" // defines: GpuComm, gpu_comm_init, gpu_comm_single_hook, gpu_all_gather, ...
#include "llmc/cuda/grad_sync_gpu.cuh" // defines: GpuGradSync, gpu_grad_sync_init, gpu_grad_sync_wait, gpu_grad_sync_free
#include "llmc/energy.h"        // defines: EnergyMeter, energy_meter_init, energy_meter_read, energy_meter_free
#include "llmc/train_loop.h"    // defines: train_loop
#include "llmc/gpu_backend.cuh" // defines: GpuBackend, gpu_model_* (the families' overloads), device_memory_used_mib
#include "llmc/tensor_parallel.h" // defines: TpShard, TpRun, tp_global_to_local
#include "llmc/model_parts.h"   // defines: ModelParts, model_parts_init, model_parts_stage_layers, model_parts_gather, ...
#include "llmc/pipeline.h"      // defines: pipeline_check_micro_batches, pipeline_rounds, pipeline_round_sets

// Dense peak TFLOP/s of the GPUs we know, for MFU: bf16 tensor cores, TF32 tensor cores,
// plain fp32. Longest names first where one contains another. Unknown devices get no MFU.
struct GpuPeak { const char* name; double bf16, tf32, fp32; };
static const GpuPeak GPU_PEAKS[] = {
    {"H100 PCIe", 756.0, 378.0, 51.2},
    {"H100 NVL", 835.0, 418.0, 60.0},
    {"H100", 989.4, 494.7, 66.9},  // SXM ("NVIDIA H100 80GB HBM3")
    {"H200", 989.4, 494.7, 66.9},
    {"GH200", 989.4, 494.7, 66.9},
    {"A100", 312.0, 156.0, 19.5},
    {"L40S", 362.0, 183.0, 91.6},
    {"L4", 121.0, 60.0, 30.3},
    {"RTX 4090", 165.2, 82.6, 82.6},
    {"A10", 125.0, 62.5, 31.2},
};

// Peak TFLOP/s of this device for the precision the matmuls run in, or -1.
static double device_peak_tflops(const cudaDeviceProp& props, bool tf32) {
    for (const GpuPeak& g : GPU_PEAKS) {
        if (strstr(props.name, g.name) != nullptr) {
            if (sizeof(floatX) == 2) return g.bf16;
            return tf32 ? g.tf32 : g.fp32;
        }
    }
    return -1.0;
}


// train_gpt_fp8's options for its linears (llmc/cuda/linear.cuh) from the flags: -fp8r, -fp8kt
// (not under -pp, whose 1F1B runs a micro-batch's forward before the one before it has gone
// back, while a linear keeps one input), -fp8kw (not with -cg 1, whose graphs would replay a
// step's first cast of the weights, or its absence, in every step). why: the flags left off, and why.
static LinearsFp8Options fp8_options(const TrainConfig& cfg, int pp, std::string* why = nullptr) {
    LinearsFp8Options o;
    o.current_scaling = cfg.fp8_recipe == "current";
    o.keep_inputs = cfg.fp8_keep_inputs == 1 && pp == 1;
    o.keep_weights = cfg.fp8_keep_weights == 1 && cfg.cuda_graphs != 1;
    if (why != nullptr) {
        if (cfg.fp8_keep_inputs == 1 && !o.keep_inputs) *why += "-fp8kt 1: off under -pp (1F1B keeps several micro-batches)\n";
        if (cfg.fp8_keep_weights == 1 && !o.keep_weights) *why += "-fp8kw 1: off with -cg 1 (graphs replay a step's casts)\n";
    }
    return o;
}

// Before the host model is built (Llama 3.1 8B is 32 GB of fp32 there): what this process's GPU
// will hold at ZeRO `stage`, from the configuration alone (llmc/families.h's model_memory_plan
// with floatX values and master weights, the family's activation plan, cuBLASLt's workspace),
// against what the device has free. Refuses with one line when it does not fit, saying how many
// such GPUs ZeRO 2 would need, if any number would. Returns the recompute level (-r) to run:
// the one asked for, or with -r -1 (the default) the least that fits with 10% of the free memory
// to spare (the plan came within 2.3% of the measured peak on an H200, and allocations
// fragment): keeping every activation (-r 0) saves the GELU recompute, about 2.5% of a d12
// step there. Ranks that share a GPU see each other's free memory, so there -r -1 is -r 1.
// Llama 3's levels recompute RMSNorm and SwiGLU (1) or the whole layer (2): llmc/llama_cuda.cuh.
// -tp: world is the data-parallel ranks; each holds about 1/tp of the model (the norms are whole
// on every rank, a rounding here) and its heads' activations. stage_layers: the layers this
// rank's pipeline stage holds (every layer without -pp). -ma timed: the largest product's
// scratch outputs too (ctx.matmul_timing->scratch_plan), allocated while the product is timed.
#ifdef ENABLE_FP8
#define SCRATCH_NAME "workspace, encoder and FP8 scratch"
#else
#define SCRATCH_NAME "workspace and encoder scratch"
#endif
static int gpu_check_memory(const ModelConfig& mc, const TrainConfig& cfg, int world, int stage, bool master,
                            bool shared_gpu, const CudaContext& ctx, int tp, int pp, int stage_layers) {
    const bool sp = cfg.sequence_parallel != 0;
    // -pp: a stage holds about 1/pp of the layers and, 1F1B, up to pp micro-batches of their
    // activations (the first stage): about the whole model's worth of one micro-batch's
    const ValueBytes bytes = {(double)sizeof(floatX), (double)sizeof(floatX), master ? 4.0 : 0.0};
    const double timing = ctx.matmul_timing != nullptr ? (double)ctx.matmul_timing->scratch_plan : 0.0;
    auto plan = [&](int w, int z, int recompute) {
        MemoryPlan p = model_memory_plan(mc, cfg.B, cfg.T, w, z, bytes);
        for (double* part : {&p.params, &p.grads, &p.adamw, &p.master}) *part /= tp * pp;
        // (train_gpt_fp8: one layer of the MLP's activation where the casts make it)
        const bool in_cast = linears_act_in_cast_planned(fp8_options(cfg, pp), (size_t)cfg.B * cfg.T);
        p.activations = mc.family == FAMILY_LLAMA3
                            ? llama_cuda_activation_bytes(mc.llama, cfg.B, cfg.T, recompute, tp, sp, -1, in_cast)
                            : gpt2_cuda_activation_bytes(mc.gpt2, cfg.B, cfg.T, recompute, tp, sp, -1, in_cast);
        // cuBLASLt's workspace (and -bg 1's output), the encoder backward's buckets and partial
        // sums, train_gpt_fp8's FP8 copies and scales (-tp: of a rank's part; -pp: the scales of its
        // stage's layers), -ma timed's scratch outputs and -ak 2's fp32 dq
        p.scratch = cuda_context_bytes(ctx) +
                    (double)encoder_buckets_device_bytes((size_t)cfg.B * cfg.T, model_config_channels(mc)) +
                    (double)linears_device_bytes(mc, stage_layers, (size_t)cfg.B * cfg.T, fp8_options(cfg, pp), tp) +
                    timing +
                    (cfg.attention_kernel == 2 ? (double)attention_dq_bytes(mc, (size_t)cfg.B * cfg.T, tp) : 0.0);
        return p;
    };
    size_t free_b = 0, total_b = 0;
    CHECK_CUDA(cudaMemGetInfo(&free_b, &total_b));
    int recompute = cfg.recompute;
    if (recompute == -1 && shared_gpu) recompute = 1;
    if (recompute == -1) {
        recompute = 2;
        for (int r = 1; r >= 0; r--)
            if (plan(world, stage, r).total() <= 0.9 * (double)free_b) recompute = r;
    }
    const MemoryPlan p = plan(world, stage, recompute);
    if (p.total() <= free_b) return recompute;
    // ZeRO 2 shards everything but the parameters and the activations over the processes, ZeRO 3
    // the parameters too (two layers in flight); the least stage, then the fewest GPUs, that fit
    int enough = 0, enough_stage = 2;
    for (int z = 2; z <= 3 && enough == 0; z++)
        for (int w = 2; w <= 65536 && enough == 0; w++)
            if (plan(w, z, recompute).total() <= free_b) enough = w, enough_stage = z;
    const double GiB = 1073741824.0;
    char help[256];
    if (enough > 0)
        snprintf(help, sizeof(help), "-z %d over %d or more such GPUs would fit it; -b and -t shrink the activations%s%s",
                 enough_stage, enough, recompute < 2 ? ", -r 2 too" : "", master ? ", -w 0 drops the master weights" : "");
    else
        snprintf(help, sizeof(help), "even -z 3 over 65536 GPUs holds more than that: the activations and two layers "
                 "in flight do not shrink with the GPU count (-b, -t, -r 2 shrink the activations)");
    char timed[64] = "";
    if (timing > 0) snprintf(timed, sizeof(timed), ", -ma timed's largest product %.2f", timing / GiB);
    fail("%s (%s, %zu parameters) does not fit on the GPU: %.1f GiB per GPU (params %.1f %s, grads %.1f, AdamW "
         "%.1f, master weights %.1f, activations %.1f at B=%d T=%d -r %d, %s %.2f%s; %d process%s, ZeRO %d), "
         "and %s has %.1f GiB free (%s)",
         cfg.init.c_str(), model_family_name(mc.family), model_config_num_parameters(mc), p.total() / GiB,
         p.params / GiB, PRECISION_NAME, p.grads / GiB, p.adamw / GiB, p.master / GiB, p.activations / GiB, cfg.B,
         cfg.T, recompute, SCRATCH_NAME, (p.scratch - timing) / GiB, timed, world, world == 1 ? "" : "es", stage,
         ctx.props.name, free_b / GiB, help);
}

int main(int argc, char** argv) {
    TrainConfig cfg;
    args_parse(argc, argv, &cfg);
    train_check_flags(cfg);
    LRScheduleKind schedule_kind;
    if (!lr_schedule_parse(cfg.schedule.c_str(), &schedule_kind))
        fail("flag -k: unknown schedule '%s' (cosine | linear | constant | wsd)", cfg.schedule.c_str());
    Comm comm;
    comm_init(&comm, cfg, &argc, &argv);
    const int rank = comm.rank, world = comm.world;
    // -tp, -pp: the world is data-parallel x pipeline-parallel x tensor-parallel ranks, the
    // tensor-parallel innermost (Megatron-LM's order, a group inside a node): rank = (d pp + s) tp
    // + t (llmc/model_parts.h)
    ModelParts parts;
    model_parts_init(cfg, &comm, &parts);
    const int tp = parts.tp, pp = parts.pp, t_rank = parts.t_rank, dp_rank = parts.dp_rank, dp_world = parts.dp_world;
    // -pp: the pipeline that passes this rank's micro-batches on, one rank a stage (the same
    // tensor-parallel rank of every stage of its replica), by stage
    Comm pp_comm;
    if (pp > 1) comm_split(&comm, dp_rank * tp + t_rank, parts.stage, &pp_comm);
    preempt_install_handlers();
    FaultInject inject = fault_inject_from_env();

    // --- the device: local rank i drives GPU i; more ranks than GPUs on a node share them,
    // and then their collectives go through the host and MPI (NCCL refuses two ranks on one GPU)
    int device_count = 0;
    CHECK_CUDA(cudaGetDeviceCount(&device_count));
    if (device_count == 0) fail("no CUDA device found");
    const char shares = comm.local_rank >= device_count;
    std::vector<char> shared(world);
    comm_exchange(&comm, &shares, 1, shared.data());
    const bool sharing = std::find(shared.begin(), shared.end(), 1) != shared.end();
    if (world > 1 && comm.transport == COMM_TRANSPORT_SOCKET) {
        // the sockets only bootstrap NCCL: every collective after that is NCCL's
        if (sharing)
            fail("rank %d: -pi %s: more ranks than GPUs on a node (local rank %d, %d GPU%s here): NCCL needs a GPU "
                 "per rank; start ranks that share GPUs with mpirun (their collectives then go through the host)",
                 rank, cfg.init_method.c_str(), comm.local_rank, device_count, device_count == 1 ? "" : "s");
#ifndef USE_NCCL
        fail("rank %d: -pi %s: this binary was built without NCCL, whose collectives the sockets bootstrap; "
             "build with NCCL, or start the ranks with mpirun", rank, cfg.init_method.c_str());
#endif
    }
    if (parts.parts) {
        if (sharing)
            fail("flag -tp %d -pp %d: rank %d: more ranks than GPUs on a node (local rank %d, %d GPU%s here): tensor "
                 "and pipeline parallelism's collectives are NCCL's, which needs a GPU per rank", tp, pp, rank,
                 comm.local_rank, device_count, device_count == 1 ? "" : "s");
#ifndef USE_NCCL
        fail("flag -tp %d -pp %d: this binary was built without NCCL, which tensor and pipeline parallelism need", tp,
             pp);
#endif
    }
    Comm* dpc = parts.dp();
    CudaContext ctx;
    cuda_context_init(&ctx, comm.local_rank % device_count);
#ifdef ENABLE_FP8
    // train_gpt_fp8's linear layers are cuBLASLt FP8 GEMMs, which need FP8 tensor cores
    if (ctx.props.major * 10 + ctx.props.minor < 89)
        fail("train_gpt_fp8 needs a GPU with FP8 tensor cores (compute capability 8.9 or later: Ada, Hopper); %s is "
             "sm_%d%d: use train_gpt_bf16 there", ctx.props.name, ctx.props.major, ctx.props.minor);
#endif
    ctx.tf32 = cfg.tf32 != 0;
    // -1 (the default): forward and backward, each where cuBLASLt offers the epilogue (an H200
    // passed PyTorch's debug states with it, and it saves GELU's backward pass)
    ctx.gelu_fusion = cfg.gelu_fusion == -1 ? 2 : cfg.gelu_fusion;
    // -1 (the default): fc's bias gradient in the GELU backward's epilogue, which reads what the
    // bias-gradient pass would (PREDICTED to save that pass over fc's (B*T, 4C) output gradient;
    // not measured yet); each where cuBLASLt offers the epilogue
    ctx.bias_grad_epilogue = cfg.bias_grad_epilogue == -1 ? 2 : cfg.bias_grad_epilogue;
    // -ma timed: each matmul shape's algorithm the fastest of cuBLASLt's candidates, timed at
    // first use; off by default until a GPU shows that it pays (llmc/cuda/matmul_algos.cuh). The
    // layout goes into the choices' files (a resume under another one times again); the scratch
    // bound into the memory plan, once the model is known
    MatmulTiming matmul_timing;
    matmul_timing.layout = {world, tp, pp, parts.vp};
    if (cfg.matmul_algo == "timed") ctx.matmul_timing = &matmul_timing;
    PhaseTimer phase_timer;  // -pb 1
    if (cfg.phase_breakdown) ctx.phases = &phase_timer;
    bool use_master = sizeof(floatX) == 2 && cfg.master_weights != 0;
    // NCCL first: from here on every collective is NCCL's (unless the ranks share a GPU)
    // the data-parallel group's (its gradients, ZeRO's gathers); -tp: the tensor-parallel
    // group's; -pp: the pipeline's and (GPT-2) the tied wte's, the first and the last stage
    GpuComm gc, tp_gc, pp_gc, emb_gc;
    gpu_comm_init(&gc, dpc, &ctx, !sharing);
    if (tp > 1) gpu_comm_init(&tp_gc, &parts.tp_comm, &ctx, true);
    if (pp > 1) {
        gpu_comm_init(&pp_gc, &pp_comm, &ctx, true);
        gpu_comm_init(&emb_gc, &parts.emb_comm, &ctx, true);  // a group of one elsewhere: no NCCL
    }

    // --- where training starts: a checkpoint in -o (resume), a model file, or random init;
    // built on the host (bit-identical to the CPU trainer's), then uploaded
    int resume_step = train_prepare_output_dir(cfg, &comm);
    const ModelConfig start_config = train_model_config(cfg, resume_step);
    const size_t num_parameters = model_config_num_parameters(start_config);
    // -tp, -pp: this rank's part of the model (llmc/tensor_parallel.h: its heads, its stage's
    // layers), its table and values
    TpShard shard;
    ModelBase* part = nullptr;
    model_parts_set_model(cfg, start_config, &parts);  // refuses heads that do not split, more stages than layers
    if (parts.parts) {
        std::string why;
        const char* kernels = start_config.family == FAMILY_LLAMA3 ? llama_cuda_config_problem(start_config.llama, tp)
                                                                   : gpt2_cuda_config_problem(start_config.gpt2, tp);
        if (kernels != nullptr) why = kernels;
        if (why.empty())
            part = model_new_part(start_config, nullptr, tp, t_rank, parts.stage, pp, parts.vp, &shard, &why,
                                  parts.stage_sizes.empty() ? nullptr : &parts.stage_sizes);
        if (part == nullptr) fail("flag -tp %d -pp %d: %s", tp, pp, why.c_str());
    }
#ifdef ENABLE_FP8
    {  // every FP8 GEMM's dimensions multiples of 16, a rank's part's too (-tp)
        const std::string why = linears_dims_problem(start_config, tp, (size_t)cfg.B * cfg.T);
        if (!why.empty()) fail("%s", why.c_str());
    }
#endif
    const size_t local_n = parts.parts ? part->num_parameters : num_parameters;
    // TEST HOOK (gpu_comm_single_hook): one process keeps its -z, so a single GPU runs the
    // bucketed NCCL path of every ZeRO stage
    const ZeroLayout z = world == 1 && gpu_comm_single_hook() ? zero_layout(num_parameters, cfg.zero_stage, 0, 1)
                                                              : train_zero_layout(cfg, local_n, dp_rank, dp_world);
    // -ma timed: the scratch outputs of the largest product this rank times (its part; the head
    // on the last stage), with the GELU and bias-gradient epilogues where they run
    matmul_timing.scratch_plan =
        model_matmul_timing_scratch_bytes(start_config, (size_t)cfg.B * cfg.T, tp, parts.stage == pp - 1,
                                          ctx.gelu_fusion >= 1, ctx.bias_grad_epilogue, sizeof(floatX));
    const int recompute = gpu_check_memory(start_config, cfg, dp_world, z.stage, use_master, sharing, ctx, tp, pp,
                                           (int)model_parts_stage_layers(parts, parts.stage).size());
    float* host_shard = nullptr;  // ZeRO 3: this rank's slice of the parameters (the host model keeps the rest's ends)
    ModelBase* host = part;
    if (parts.parts) {  // the whole model is read (or drawn), and this rank keeps its part
        ModelBase* whole = train_load_model(cfg, resume_step);
        CHECK(whole->num_parameters == num_parameters, "%zu vs %zu", whole->num_parameters, num_parameters);
        tp_global_to_local(shard, 0, shard.local_n, whole->params, part->params);
        model_delete(whole);
        // ZeRO 3 over the data-parallel ranks: the part's slice, and its front and tail rows
        if (z.stage == 3) host_shard = train_keep_zero3(part, z);
    } else {
        host = z.stage == 3 ? train_load_model_zero3(cfg, resume_step, start_config, z, &host_shard)
                            : train_load_model(cfg, resume_step);
    }
    CHECK(host->num_parameters == local_n, "model has %zu parameters, its configuration %zu", host->num_parameters,
          local_n);
    const std::string description = model_describe(host);
    const double flops = model_flops_per_token(host, cfg.T);
    TrainData data;
    Tokenizer tokenizer;
    int status = 0;
    // the rest once per family: model is a GPT2Cuda or a LlamaCuda
    auto train = [&](auto& model) {
        using M = std::decay_t<decltype(model)>;
        constexpr bool gpt2 = std::is_same<M, GPT2Cuda>::value;
        gpu_model_init(&model, &ctx, host, use_master, z, host_shard, tp > 1 ? &tp_gc : nullptr);
        model_delete(host);
        free(host_shard);
        const auto& mc = model.config;
        // -ak -1 (the default): the tensor-core attention wherever it applies (bf16, its head sizes),
        // on a Hopper with sm_90a code -ak 3's wgmma where it measured faster;
        // -ak 2 also allocates the one-kernel backward's fp32 dq, which the memory plan counted
        const int head_size = mc.channels / mc.num_heads;
        const char* mma_problem = attention_select(&ctx, cfg.attention_kernel, head_size,
                                                   attention_dq_bytes(start_config, (size_t)cfg.B * cfg.T, tp));
        if (mma_problem != nullptr)
            fail("flag -ak %d: %s (head size %d here); the default, -ak -1, takes what applies", cfg.attention_kernel,
                 mma_problem, head_size);

        // --- batch arithmetic and data
        train_data_init(&data, &cfg, mc.vocab_size, dp_rank, dp_world);  // a tensor-parallel group reads the same
        int B = cfg.B, T = cfg.T;

        train_tokenizer_init(cfg, &tokenizer);

        model.sp = cfg.sequence_parallel != 0;  // -sp: the activations of this rank's positions
        // -pp: the schedule keeps some micro-batches' activations at once (1F1B: pp - s on stage s;
        // a set holds all of this stage's chunks)
        const int vp = parts.vp, m = data.grad_accum;
        if (pp > 1) pipeline_check_micro_batches(pp, vp, m);
        const int sets = pp > 1 ? pipeline_round_sets(pipeline_rounds(pp, vp, parts.stage, m), m) : 1;
        gpu_model_alloc_state(&model, B, T, recompute, sets,
                              linears_act_in_cast_planned(fp8_options(cfg, pp), (size_t)B * T));
#ifdef ENABLE_FP8
        // the FP8 state and scratch of the blocks' linear layers (llmc/cuda/linear.cuh). -tp: a rank's
        // linears are shards of the model's, whose amaxes the step's max over the group makes the
        // whole tensors'; -pp: a stage's are its own layers', the amaxes reduced over its replicas
        // and tensor-parallel group only (no other stage runs them), and a checkpoint's one FP8
        // state file is every stage's put together in the model's order, so any layout resumes it
        std::string off;
        const LinearsFp8Options o = fp8_options(cfg, pp, &off);
        printf("%s", off.c_str());
        linears_init(&model.linears, start_config, model.num_layers, (size_t)B * T, o, tp, cfg.fp8_fast_accum);
        char scaling[64];
        if (o.current_scaling) snprintf(scaling, sizeof(scaling), "current scaling: each tensor's own amax");
        else snprintf(scaling, sizeof(scaling), "delayed scaling: the max of %d steps' amaxes", FP8_AMAX_HISTORY_DEFAULT);
        static const char* const fast_accum[3] = {"no GEMM", "the forward GEMMs", "every GEMM"};
        printf("fp8: the blocks' linear layers as FP8 GEMMs (E4M3 forward, E5M2 gradients, %s; fast accumulation in "
               "%s; scratch and scales %.1f MiB%s%s); embeddings, classifier, norms, attention in bf16\n",
               scaling, fast_accum[cfg.fp8_fast_accum],
               linears_device_bytes(start_config, model.num_layers, (size_t)B * T, o, tp) / 1048576.0,
               o.keep_inputs ? ", the inputs kept for the backward among them" : "",
               o.keep_weights ? ", the weights kept cast for the step among them" : "");
#endif
        GpuGradSync gsync;  // several ranks (or the NCCL test hook): bucketed reduction during the backward
        bool bucketed = dp_world > 1 || gc.nccl;
        if (bucketed) {
            // where each row's gradient lives (ZeRO 2, 3 move them), and its parameters (ZeRO 3)
            floatX *grad_views[MAX_PARAM_TENSORS], *param_views[MAX_PARAM_TENSORS];
            gpu_grad_sync_init(&gsync, &model, gpu_model_layout(&model), &gc, grad_views, param_views);
            gpu_model_bind_grads(&model, grad_views);
            gpu_model_bind_params(&model, param_views);
        }
        if constexpr (gpt2) {
            // -cg 1: graphs replay fixed launches; -pb 1 times each launch and the buckets hand
            // layers to another stream mid-backward, so either keeps the launches one by one
            model.graphs.enabled = cfg.cuda_graphs == 1 && !cfg.phase_breakdown && !bucketed && !parts.parts;
            if (cfg.cuda_graphs == 1 && !model.graphs.enabled)
                printf("-cg 1: CUDA graphs off (%s)\n", cfg.phase_breakdown ? "-pb 1 times every launch"
                                                         : parts.parts ? "-tp, -pp: the layers talk to other ranks"
                                                                       : "gradients are reduced during the backward");
        } else if (cfg.cuda_graphs == 1) {
            printf("-cg 1: CUDA graphs off (Llama 3 launches one by one)\n");
        }
        LRSchedule sched = {schedule_kind, cfg.lr, cfg.warmup, data.num_steps, cfg.final_lr_frac};

        // --- the plan
        size_t n = model.num_parameters;
        double peak_tflops = device_peak_tflops(ctx.props, ctx.tf32);
        printf("device: %s (sm_%d%d, %d SMs, %.1f GiB), %s, TF32 %s, GELU fusion %s, bias gradients %s, attention on %s, "
               "peak %s TFLOP/s\n",
               ctx.props.name, ctx.props.major, ctx.props.minor, ctx.props.multiProcessorCount,
               ctx.props.totalGlobalMem / 1073741824.0, PRECISION_NAME,
               sizeof(floatX) == 2 ? "n/a" : (ctx.tf32 ? "on" : "off"),
               ctx.gelu_fusion == 0 ? "off" : (ctx.gelu_fusion == 1 ? "forward" : "forward and backward"),
               ctx.bias_grad_epilogue == 1   ? "in the weight gradients' matmul epilogue"
               : ctx.bias_grad_epilogue == 0 ? "by their own pass"
               : ctx.gelu_fusion == 2        ? "fc's in the GELU backward's epilogue, the others by their own pass"
                                             : "by their own pass (fc's in the GELU backward's epilogue needs -ge 2)",
               ctx.attention_dq != nullptr ? "tensor cores, one-kernel backward" :
               ctx.attention_wgmma ? "tensor cores, wgmma" : ctx.attention_mma ? "tensor cores" : "CUDA cores",
               peak_tflops > 0 ? std::to_string((int)peak_tflops).c_str() : "unknown (no MFU)");
        train_print_plan(description, num_parameters, cfg, data, resume_step, dp_world);
        if (tp > 1)
            printf("tensor parallelism: %d data-parallel x %d tensor-parallel ranks (NCCL); each holds %zu of the %zu "
                   "parameters (its heads, MLP units and vocabulary rows; the norms whole)\n", dp_world, tp, n,
                   num_parameters);
        if (world == 1 && gc.nccl)
            printf("GPTRAIN_NCCL_SINGLE=1: gradients reduced bucket by bucket through NCCL over one rank, %s (test hook)\n",
                   zero_stage_name(z.stage));
        if (dp_world > 1)
            printf("processes: %d (%s), collectives through %s, %s; %zu parameters per rank's slice; "
                   "%.1f MiB sent per step and process\n",
                   world, comm.transport == COMM_TRANSPORT_MPI ? "MPI" : "sockets",
                   gc.nccl ? "NCCL" : (sharing ? "the host (ranks share a GPU)" : "the host (built without NCCL)"),
                   zero_stage_name(z.stage), z.shard,
                   zero_comm_bytes_per_step(z, data.grad_accum, sizeof(floatX), sizeof(floatX), mc.num_layers,
                                            gsync.layer_n) / 1048576.0);
        gpu_model_print_memory(&model);

        EnergyMeter energy;
        int device = 0;
        char bus_id[32];
        CHECK_CUDA(cudaGetDevice(&device));
        CHECK_CUDA(cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), device));
        energy_meter_init(&energy, bus_id);
        if (energy.ok) printf("energy: measured through NVML (the board's energy counter)\n");
        else printf("energy: not measured (%s)\n", energy.why.c_str());
        GpuBackend<M> be(&model, &comm, &gc, bucketed ? &gsync : nullptr, flops, peak_tflops, &energy);
        if (parts.parts) be.set_parts(&parts, &shard);
        if (pp > 1) {
            be.ppc = &pp_gc;
            be.embc = &emb_gc;
            be.pp = pp;
            be.vp = vp;
            be.stage = parts.stage;
            int hold[MAX_PARAM_TENSORS];
            std::vector<int> layers;
            model_stage(start_config, parts.stage, pp, vp, &layers, &be.chunks, hold,
                        parts.stage_sizes.empty() ? nullptr : &parts.stage_sizes);
            printf("pipeline parallelism: %d stages x %d virtual (this rank's: %d layers in %d chunk%s%s%s), %s over %d "
                   "micro-batches a step: bubble (pp-1)/(vp m+pp-1) = %.1f%%; %d micro-batches' activations kept here "
                   "(NCCL)\n", pp, vp, model.num_layers, vp, vp == 1 ? "" : "s", model.pp_first ? ", the embedding" : "",
                   model.pp_last ? ", the head" : "", vp > 1 ? "interleaved 1F1B" : "1F1B", m,
                   100.0 * (pp - 1) / (vp * m + pp - 1), sets);
        }
        status = train_loop(be, cfg, data, &tokenizer, sched, &inject, resume_step, &comm);
        if (z.stage == 3)
            printf("parameter gathers (ZeRO 3): %lld layers, %lld of them queued while the layer before ran\n",
                   gsync.gathers, gsync.gathers_ahead);
        gpu_grad_sync_free(&gsync);
        linears_free(&model.linears);
        gpu_model_free(&model);
        energy_meter_free(&energy);
    };
    if (host->family == FAMILY_LLAMA3) {
        LlamaCuda model;
        train(model);
    } else {
        GPT2Cuda model;
        train(model);
    }
    if (cfg.phase_breakdown && rank == 0) phase_report(phase_timer);
    train_data_free(&data);
    if (tokenizer.ok) tokenizer_free(&tokenizer);
    gpu_comm_free(&gc);
    if (tp > 1) gpu_comm_free(&tp_gc);
    if (pp > 1) {
        gpu_comm_free(&pp_gc);
        gpu_comm_free(&emb_gc);
        comm_free(&pp_comm);
    }
    model_parts_free(&parts);
    phase_timer_free(&phase_timer);
    cuda_context_free(&ctx);
    comm_free(&comm);
    return status;
}
