// train_gpt.cpp: the CPU reference trainer (fp32, OpenMP), for every model family (GPT-2,
// Llama 3: llmc/families.h). Same flags and files as the GPU trainer and llm.c. Reading
// order: main() parses flags, builds the model and the data loaders, prints the plan, then
// hands a CpuBackend to the loop both trainers share (llmc/train_loop.h: validate, sample,
// checkpoint, one training step, log, faults).
#include <string>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "llmc/utils.h"       // defines: fail, CHECK
#include "llmc/args.h"        // defines: TrainConfig, args_parse
#include "llmc/families.h"    // defines: ModelBase, model_forward, model_backward, model_logits, ...
#include "llmc/checkpoint.h"  // defines: model_load_checkpoint, checkpoint_write_model_and_state, state_read_range, ...
#include "llmc/dataloader.h"  // defines: DataLoader (inside TrainData)
#include "llmc/schedule.h"    // defines: LRSchedule, lr_schedule_parse
#include "llmc/logger.h"      // defines: Logger (the loop logs)
#include "llmc/tokenizer.h"   // defines: Tokenizer, tokenizer_init, tokenizer_decode
#include "llmc/train_common.h" // defines: train_prepare_output_dir, train_load_model, TrainData, ...
#include "llmc/faults.h"      // defines: preempt_install_handlers, FaultInject, fault_inject_from_env
#include "llmc/comm.h"        // defines: Comm, comm_init, comm_all_gather, comm_free
#include "llmc/zero.h"        // defines: ZeroLayout, zero_layout, zero_segments, zero_comm_bytes_per_step
#include "llmc/grad_sync.h"   // defines: GradSync, grad_sync_init, grad_sync_wait, grad_sync_report
#include "llmc/cpu/adamw.h"   // defines: adamw_update
#include "llmc/cpu/omp_wait.h" // defines: omp_wait_setup
#include "llmc/train_loop.h"  // defines: train_loop

// The loop's Backend (llmc/train_loop.h) for a model in host memory, one of comm->world
// ranks that split the parameter vector as llmc/zero.h lays it out. With one process the
// ZeRO layout is the whole vector and every collective is a no-op.
struct CpuBackend {
    ModelBase* model;
    Comm* comm;
    ZeroLayout z;
    std::vector<ZeroSegment> segments;  // the tensors' pieces of [opt_begin, opt_end): what AdamW updates
    float* grad_shard = nullptr;        // ZeRO 2: the owned slice's gradient, summed over ranks and micro-steps
    double flops_per_token;             // for the step line's GFLOP/s
    GradSync* gsync = nullptr;          // several ranks: reduces each layer's gradients as the backward finishes it
    size_t grads_len = 0;               // the length of model->grads
    bool step_open = false;             // a step's first micro-step ran and its step_done has not (-pb 1)

    // gradient i of the values AdamW updates (parameter opt_begin + i), once reduced
    const float* opt_grads() const { return z.stage == 2 ? grad_shard : model->grads + z.opt_begin; }

    // forward + backward; the backward hands each finished layer to the reduction (ZeRO 2:
    // every micro-step; else the last), which runs alongside the layers below
    float micro_step(const int* inputs, const int* targets, int B, int T, float dloss, bool last_micro) {
        if (!step_open) phase_clock_step_begin(model->phases);  // -pb 1 times the step from here
        step_open = true;
        model_forward(model, inputs, targets, B, T);
        if (gsync != nullptr) gsync->communicate = z.stage == 2 || last_micro;
        model_backward(model, inputs, targets, dloss, gsync);
        return model->mean_loss;
    }
    void reduce_grads(bool last_micro) {
        if (gsync == nullptr) return;
        phase_clock_mark(model->phases, PHASE_COMM);
        grad_sync_wait(gsync);
        phase_clock_mark(model->phases, PHASE_OTHER);
    }
    float eval_loss(const int* inputs, const int* targets, int B, int T) {
        model_forward(model, inputs, targets, B, T);
        return model->mean_loss;
    }
    const float* token_losses(const int* inputs, const int* targets, int B, int T) {
        model_forward(model, inputs, targets, B, T);
        return model_losses(model);
    }
    const float* last_logits(const int* tokens, int ctx) {
        model_forward(model, tokens, nullptr, 1, ctx);
        return model_logits(model) + (size_t)(ctx - 1) * model->padded_vocab_size;
    }
    float grad_norm() {
        phase_clock_mark(model->phases, PHASE_OPTIMIZER);
        double sum = grad_sum_squares(opt_grads(), z.opt_count());
        if (z.stage > 0) sum = comm_sum(comm, sum);  // each rank holds a slice
        return (float)std::sqrt(sum);
    }
    void update(float lr, float weight_decay, float clip_scale, int t) {
        const float* g = opt_grads();
        for (const ZeroSegment& seg : segments) {
            const ParamTensor& pt = model->tensors[seg.tensor];
            size_t o = seg.begin - z.opt_begin;
            adamw_update(model->params + seg.begin, g + o, model->m + o, model->v + o, seg.end - seg.begin, lr, 0.9f,
                         0.95f, 1e-8f, pt.decays ? weight_decay : 0.0f, clip_scale, t);
        }
        if (z.stage > 0) {
            phase_clock_mark(model->phases, PHASE_COMM);
            comm_all_gather(comm, model->params, z.shard, sizeof(float));
        }
    }
    void zero_grad() {
        phase_clock_mark(model->phases, PHASE_OTHER);
        memset(model->grads, 0, grads_len * sizeof(float));
        if (grad_shard != nullptr) memset(grad_shard, 0, z.shard * sizeof(float));
    }
    void sync() {}
    void poison_grad() { (z.stage == 2 ? grad_shard : model->grads + z.own_begin)[0] = NAN; }
    void poison_weight() { model->params[0] = NAN; }
    // the model file (rank 0) and the AdamW state of this rank's slice
    void write_checkpoint(const std::string& dir, int step, TrainState s) {
        train_check_weights_finite(model->params, model->num_parameters, model->tensors, model->num_tensors, step, dir);
        zero_state_slice(&s, z);
        size_t o = z.own_begin - z.opt_begin;
        checkpoint_write_model_and_state(dir, step, z.rank == 0 ? model : nullptr, s, model->m + o, model->v + o);
    }
    void load_state(const std::string& dir, int step, TrainState* s) {
        std::string err = state_read_range(dir, step, z.n, z.opt_begin, z.opt_end, s, model->m, model->v);
        if (!err.empty()) fail("%s", err.c_str());
    }
    // reload after faults: the weights of a checkpoint's model file into the allocated model
    void load_weights(const std::string& path) {
        ModelBase* file = model_load_checkpoint(path.c_str());
        CHECK(file->family == model->family && file->num_parameters == model->num_parameters, "%s: %zu vs %zu",
              path.c_str(), file->num_parameters, model->num_parameters);
        memcpy(model->params, file->params, model->num_parameters * sizeof(float));
        model_delete(file);
    }
    void step_done(int step) {
        if (step_open) phase_clock_step_end(model->phases, step > 0);
        step_open = false;
    }
    std::string step_column(double tok_s) {
        char buf[32];
        snprintf(buf, sizeof(buf), "%.1f GFLOP/s", tok_s * flops_per_token / 1e9);
        return buf;
    }
    std::string summary_extras(double tok_s) { return ""; }
    std::string step_metrics(double tok_s) { return ""; }
    double energy_joules() { return -1.0; }
    int vocab_size() const { return model->vocab_size; }
    size_t num_parameters() const { return model->num_parameters; }
};

// Re-sizes the buffers model_alloc_state made for one process to the ZeRO layout: parameters
// and gradients padded to world*shard (zero tail), AdamW m and v for the values this rank
// updates, and ZeRO 2's slice accumulator. Returns that accumulator (nullptr below stage 2).
static float* cpu_apply_zero_layout(ModelBase* model, const ZeroLayout& z) {
    size_t n = model->num_parameters;
    auto grow = [&](float* old) {
        float* p = (float*)xmalloc(z.padded * sizeof(float));
        memcpy(p, old, n * sizeof(float));
        memset(p + n, 0, (z.padded - n) * sizeof(float));
        free(old);
        return p;
    };
    model->params = grow(model->params);
    model->grads = grow(model->grads);
    model_bind_views(model);
    if (z.opt_count() != n) {
        free(model->m);
        free(model->v);
        model->m = xcalloc_floats(z.opt_count());
        model->v = xcalloc_floats(z.opt_count());
    }
    if (z.stage < 2) return nullptr;
    return xcalloc_floats(z.shard);
}

// Bytes of memory this machine has available now (MemAvailable), or its physical memory.
static double available_memory_bytes() {
    FILE* f = fopen("/proc/meminfo", "r");
    char line[256];
    long long kb = -1;
    while (f != nullptr && fgets(line, sizeof(line), f) != nullptr)
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
    if (f != nullptr) fclose(f);
    if (kb > 0) return kb * 1024.0;
    return (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
}

// Before anything is allocated: the model's size and what each process will hold, and a
// clear refusal when the processes of this machine cannot hold it (a Llama 3.1 8B needs some
// 130 GiB to train in fp32 on one process: weights, gradients, AdamW's two moments).
static void cpu_check_memory(const ModelConfig& mc, const TrainConfig& cfg, int world) {
    const int stage = world > 1 ? cfg.zero_stage : 0;
    MemoryPlan p = model_memory_plan(mc, cfg.B, cfg.T, world, stage);
    const double GiB = 1073741824.0, have = available_memory_bytes();
    // the processes of one machine share its memory (under mpirun they may be spread over several)
    const char* local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    const int here = local != nullptr && atoi(local) > 0 ? atoi(local) : world;
    if (p.total() * here <= have) return;
    fail("%s (%s, %zu parameters) does not fit: %.1f GiB per process (params %.1f, grads %.1f, AdamW %.1f, "
         "activations %.1f at B=%d T=%d; %d process%s, ZeRO %d) x %d on this machine = %.1f GiB, and %.1f GiB is "
         "available (more processes with -z 1 or 2 shard AdamW and the gradients; -b and -t shrink the activations)",
         cfg.init.c_str(), model_family_name(mc.family), model_config_num_parameters(mc), p.total() / GiB,
         p.params / GiB, p.grads / GiB, p.adamw / GiB, p.activations / GiB, cfg.B, cfg.T, world,
         world == 1 ? "" : "es", stage, here, p.total() * here / GiB, have / GiB);
}

int main(int argc, char** argv) {
    omp_wait_setup(argv);  // may start the program again, with a short OpenMP spin
    TrainConfig cfg;
    args_parse(argc, argv, &cfg);
    train_check_flags(cfg);
    LRScheduleKind schedule_kind;
    if (!lr_schedule_parse(cfg.schedule.c_str(), &schedule_kind))
        fail("flag -k: unknown schedule '%s' (cosine | linear | constant | wsd)", cfg.schedule.c_str());
    // the CPU's collectives are MPI's: the sockets of -pi fs|tcp only bootstrap the GPU's NCCL
    if ((cfg.init_method == "fs" || cfg.init_method == "tcp") && cfg.num_processes > 1)
        fail("flag -pi %s: train_gpt_cpu's processes share their work through MPI: start them with mpirun -np %d "
             "(-pi fs and -pi tcp start the GPU trainers, whose collectives are NCCL's)",
             cfg.init_method.c_str(), cfg.num_processes);
    Comm comm;
    comm_init(&comm, cfg, &argc, &argv);
    const int rank = comm.rank, world = comm.world;
    preempt_install_handlers();
    FaultInject inject = fault_inject_from_env();

    // --- where training starts: a checkpoint in -o (resume), a model file, or random init
    int resume_step = train_prepare_output_dir(cfg, &comm);
    cpu_check_memory(train_model_config(cfg, resume_step), cfg, world);
    ModelBase* model = train_load_model(cfg, resume_step);

    // --- batch arithmetic and data
    TrainData data;
    train_data_init(&data, &cfg, model->vocab_size, rank, world);
    int B = cfg.B, T = cfg.T;

    Tokenizer tokenizer;
    train_tokenizer_init(cfg, &tokenizer);

    model_alloc_state(model, B, T);
    ZeroLayout z = train_zero_layout(cfg, model->num_parameters, rank, world);
    float* grad_shard = cpu_apply_zero_layout(model, z);
    LRSchedule sched = {schedule_kind, cfg.lr, cfg.warmup, data.num_steps, cfg.final_lr_frac};

    // --- the plan
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    size_t n = model->num_parameters;
    double flops = model_flops_per_token(model, T);
    train_print_plan(model_describe(model), n, cfg, data, resume_step, world);
    const double MiB = 1048576.0;
    if (world > 1)
        printf("processes: %d (MPI), %s, %zu parameters per rank's slice\n", world, zero_stage_name(z.stage), z.shard);
    // several ranks: each layer's gradients are reduced while the backward runs the layers below
    GradSync sync;
    if (world > 1) grad_sync_init(&sync, model, &comm, z, grad_shard);
    size_t grads_len = world > 1 ? grad_sync_grads_len(&sync) : z.padded;
    size_t grad_floats = world > 1 ? grad_sync_grad_floats(&sync) : z.padded;
    printf("memory per process: params %.1f MiB, grads %.1f MiB%s, AdamW %.1f MiB, activations %.1f MiB; %d threads%s%s\n",
           z.padded * 4 / MiB, (grad_floats + (grad_shard ? z.shard : 0)) * 4 / MiB,
           grad_shard ? " (the owned slice, wte/wpe/lnf, and two layer buckets in flight)" : "",
           z.opt_count() * 8 / MiB, model->acts_floats * 4 / MiB, threads,
           getenv("GOMP_SPINCOUNT") ? ", GOMP_SPINCOUNT=" : "", getenv("GOMP_SPINCOUNT") ? getenv("GOMP_SPINCOUNT") : "");
    if (world > 1)
        printf("communication per step and process: %.1f MiB sent\n",
               zero_comm_bytes_per_step(z, data.grad_accum, 4, 4) / MiB);

    PhaseClock phase_clock;  // -pb 1
    if (cfg.phase_breakdown) model->phases = &phase_clock;
    CpuBackend be = {model, &comm, z, zero_segments(model->tensors, model->num_tensors, z.opt_begin, z.opt_end),
                     grad_shard, flops, world > 1 ? &sync : nullptr, grads_len};
    int status = train_loop(be, cfg, data, &tokenizer, sched, &inject, resume_step, &comm);
    if (cfg.phase_breakdown && rank == 0) phase_clock_report(phase_clock);
    if (world > 1) {
        grad_sync_report(&sync);
        grad_sync_free(&sync);
    }
    train_data_free(&data);
    if (tokenizer.ok) tokenizer_free(&tokenizer);
    model_delete(model);
    free(grad_shard);
    comm_free(&comm);
    return status;
}
