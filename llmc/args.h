// args.h: the trainers' command line: llm.c's flags, every default in one struct, one
// table that drives parsing, range checks and --help. Unknown flags and bad values are
// errors with one line naming the flag.
// defines: TrainConfig, ArgSpec, arg_specs, args_print_table, args_parse_table, args_check_fp8_recipe,
//          args_check_matmul_algo, args_parse, args_print_help
#pragma once
#include <string>
#include <vector>

#include "utils.h"  // defines: fail, parse_int, parse_float

struct TrainConfig {
    std::string train_pattern = "data/bible/bible_train_*.bin";  // -i  train shard glob
    std::string val_pattern = "data/bible/bible_val_*.bin";      // -j  val shard glob
    std::string init = "d12";        // -e  checkpoint file, or descriptor d12 / gpt2:d12 / gpt3:c768 / gpt2:l4c256
    std::string output_dir = "";     // -o  logs and checkpoints go here (none if empty)
    std::string tokenizer = "";      // -tf tokenizer file (empty: gpt2_tokenizer.bin, then data/gpt2_tokenizer.bin)
    int B = 4;                       // -b  micro-batch per process
    int T = 1024;                    // -t  sequence length
    long long total_batch = -1;      // -d  tokens per optimizer step (-1: B*T*processes, no accumulation)
    int max_steps = -1;              // -x  optimizer steps (-1: one epoch of the train data; 0: only evaluate)
    float lr = 3e-4f;                // -l  peak learning rate
    int warmup = 0;                  // -u  warmup steps
    float final_lr_frac = 1.0f;      // -q  final lr as a fraction of the peak
    std::string schedule = "cosine"; // -k  cosine | linear | constant | wsd
    float weight_decay = 0.0f;       // -c  AdamW weight decay on 2-D weights
    int val_every = 20;              // -v  validate every N steps (0: never)
    int val_batches = 20;            // -m  validation batches (-1: the whole val split)
    int sample_every = 20;           // -s  sample text every N steps (0: never)
    int gen_tokens = 64;             // -g  tokens per sample
    float temperature = 1.0f;        // -st sampling temperature (0: greedy)
    int top_k = 0;                   // -sk sample only from the k most likely tokens (0: all)
    int checkpoint_every = 0;        // -n  checkpoint every N steps (0: never)
    int checkpoints_keep = 0;        // -nk keep only the last N checkpoints (0: keep all)
    int checkpoint_major = 0;        // -nm checkpoints at multiples of M are never deleted
    int resume = 0;                  // -y  1: resume from the newest complete checkpoint in -o
    int seed = 42;                   // -sd seed of init, data shuffling and sampling
    int shuffle = 0;                 // -sh 1: shuffle shards and samples every epoch (seeded)
    int zero_stage = 0;              // -z  ZeRO stage: 0 all-reduce, 1 sharded AdamW state, 2 also gradients, 3 also parameters
    int tensor_parallel = 1;         // -tp tensor-parallel ranks sharing each layer (train_gpt_cpu; world = DP x PP x TP, TP innermost)
    int pipeline_parallel = 1;       // -pp pipeline stages, each a run of layers (train_gpt_cpu; 1F1B over the accumulation steps)
    int sequence_parallel = 0;       // -sp 1: with -tp, the residual stream and the norms split along T (train_gpt_cpu)
    int virtual_stages = 1;          // -vp virtual stages a pipeline stage holds, interleaved 1F1B (train_gpt_cpu)
    std::string stage_layers = "";   // -pl layers of each (virtual) stage, comma-separated (empty: balanced by count)
    int recompute = -1;              // -r  activation recompute 0|1|2 (GPT-2: GPU only); -1: the least that fits
    int overfit_batch = 0;           // -a  1: train on the first batch only (debugging)
    int tf32 = 1;                    // -f  TF32 matmuls (GPU)
    int master_weights = 1;          // -w  fp32 master weights (GPU bf16)
    int gelu_fusion = -1;            // -ge GELU in the cuBLASLt epilogue: 0 off, 1 forward, 2 forward and backward (GPU; -1: 2)
    int bias_grad_epilogue = -1;     // -bg bias gradients in cuBLASLt epilogues: 0 off, 1 the weight gradients', 2 fc's in the GELU backward's (GPU; -1: 2)
    std::string matmul_algo = "heuristic"; // -ma cuBLASLt algorithm: heuristic (its first answer) | timed (GPU)
    int attention_kernel = -1;       // -ak attention: 0 CUDA cores, 1 tensor cores (GPU bf16, head size 16..128),
                                     //     2 tensor cores with the one-kernel backward (dq by fp32 atomics: not
                                     //     bitwise reproducible), 3 Hopper's wgmma (bf16, head size 64 or 128,
                                     //     sm_90a build); -1: tensor cores where they apply, else CUDA cores
    int phase_breakdown = 0;         // -pb 1: time per phase of the step (CUDA events; the CPU's clock), printed at the end
    int cuda_graphs = 0;             // -cg 1: a micro-step's forward and backward replayed as CUDA graphs (GPU)
    std::string fp8_recipe = "delayed"; // -fp8r FP8 scaling: delayed (amax history) | current (train_gpt_fp8; others ignore it)
    int fp8_fast_accum = 1;          // -fp8fa FP8 GEMMs with fast accumulation: 0 none, 1 the forward's, 2 every one (train_gpt_fp8)
    int fp8_keep_inputs = 0;         // -fp8kt 1: each FP8 linear keeps its input cast and transposed from the forward (train_gpt_fp8)
    int fp8_keep_weights = 0;        // -fp8kw 1: each FP8 linear keeps its weight cast, W and W^T, for the step (train_gpt_fp8)
    float skip_loss_z = 0.0f;        // -sl skip the update when the loss z-score (last 128 steps) exceeds this (0: off)
    float skip_grad_z = 0.0f;        // -sg skip the update when the grad-norm z-score (last 128 steps) exceeds this (0: off)
    int fault_streak = 5;            // -fk after K consecutive non-finite steps: reload the last checkpoint, or stop
    int hellaswag = 0;               // -h  1: HellaSwag accuracy at every validation (and at the end)
    std::string hellaswag_path = "data/hellaswag/hellaswag_val.bin";  // -hf the eval file (llm.c's format)
    float target_val_loss = 0.0f;    // --target-val-loss stop when the val loss reaches this (0: off)
    int num_processes = 1;           // -pn processes
    int process_rank = 0;            // -pr this process's rank
    int gpus_per_node = 8;           // -pg GPUs per node
    std::string init_method = "mpi"; // -pi multi-process init: mpi | fs | tcp
    std::string fs_path = "";        // -pf shared directory for -pi fs
    std::string server_ip = "";      // -ps rank 0's address HOST[:PORT] for -pi tcp (port 12345 if none)
    float comm_timeout = 600.0f;     // -pt seconds a rank waits for the others before stopping with an error
};

enum ArgKind { ARG_INT, ARG_LLONG, ARG_FLOAT, ARG_STRING };

struct ArgSpec {
    const char* flag;
    ArgKind kind;
    void* field;          // the TrainConfig field it sets
    double lo, hi;        // accepted range for numbers
    const char* help;
};

// The flag table, pointing into one TrainConfig.
inline std::vector<ArgSpec> arg_specs(TrainConfig* c) {
#define ARG(flag, kind, field, lo, hi, help) {flag, kind, &c->field, lo, hi, help}
    return {
    ARG("-i", ARG_STRING, train_pattern, 0, 0, "train data shard glob"),
    ARG("-j", ARG_STRING, val_pattern, 0, 0, "val data shard glob"),
    ARG("-e", ARG_STRING, init, 0, 0,
        "init: model file, or d6|d12|d24|d36|d48, gpt2:dN, gpt3:cN, gpt2:l<L>c<C>[h<NH>], "
        "llama3:l<L>c<C>h<NH>kv<NKV>f<F>[v<V>], llama3.1:8b|70b|405b"),
    ARG("-o", ARG_STRING, output_dir, 0, 0, "output dir for main.log, metrics.jsonl, checkpoints (empty: none)"),
    ARG("-tf", ARG_STRING, tokenizer, 0, 0, "tokenizer file for samples (empty: gpt2_tokenizer.bin, data/gpt2_tokenizer.bin)"),
    ARG("-b", ARG_INT, B, 1, 1 << 20, "micro-batch size per process"),
    ARG("-t", ARG_INT, T, 1, 1 << 20, "sequence length"),
    ARG("-d", ARG_LLONG, total_batch, -1, 1e15, "total batch in tokens per step (-1: B*T*processes)"),
    ARG("-x", ARG_INT, max_steps, -1, 2e9, "optimizer steps (-1: one epoch; 0: only evaluate)"),
    ARG("-l", ARG_FLOAT, lr, 0, 10, "peak learning rate"),
    ARG("-u", ARG_INT, warmup, 0, 2e9, "warmup steps"),
    ARG("-q", ARG_FLOAT, final_lr_frac, 0, 1, "final learning rate fraction"),
    ARG("-k", ARG_STRING, schedule, 0, 0, "lr schedule: cosine | linear | constant | wsd"),
    ARG("-c", ARG_FLOAT, weight_decay, 0, 10, "weight decay (2-D weights only)"),
    ARG("-v", ARG_INT, val_every, 0, 2e9, "validate every N steps (0: never)"),
    ARG("-m", ARG_INT, val_batches, -1, 2e9, "validation batches (-1: whole split)"),
    ARG("-s", ARG_INT, sample_every, 0, 2e9, "sample every N steps (0: never)"),
    ARG("-g", ARG_INT, gen_tokens, 1, 1 << 20, "tokens to generate per sample"),
    ARG("-st", ARG_FLOAT, temperature, 0, 100, "sampling temperature (0: greedy)"),
    ARG("-sk", ARG_INT, top_k, 0, 1 << 24, "sampling top-k (0: off)"),
    ARG("-n", ARG_INT, checkpoint_every, 0, 2e9, "checkpoint every N steps (0: never)"),
    ARG("-nk", ARG_INT, checkpoints_keep, 0, 2e9, "keep the last N checkpoints (0: all)"),
    ARG("-nm", ARG_INT, checkpoint_major, 0, 2e9, "never delete checkpoints at multiples of M (0: none)"),
    ARG("-y", ARG_INT, resume, 0, 1, "1: resume from the newest complete checkpoint in -o"),
    ARG("-sd", ARG_INT, seed, 0, 2147483647, "random seed (init, shuffling, sampling)"),
    ARG("-sh", ARG_INT, shuffle, 0, 1, "1: shuffle train shards and samples each epoch"),
    ARG("-z", ARG_INT, zero_stage, 0, 3, "ZeRO stage: 0 all-reduce, 1 shard AdamW state, 2 also gradients, 3 also parameters"),
    ARG("-tp", ARG_INT, tensor_parallel, 1, 1024, "tensor-parallel ranks sharing each layer, Megatron-style (train_gpt_cpu); ZeRO runs over the data-parallel ranks"),
    ARG("-pp", ARG_INT, pipeline_parallel, 1, 1024, "pipeline stages, consecutive layers each, 1F1B over the micro-batches of a step (train_gpt_cpu)"),
    ARG("-sp", ARG_INT, sequence_parallel, 0, 1, "1: sequence parallelism, with -tp: the residual stream and the norms split along T (train_gpt_cpu)"),
    ARG("-pl", ARG_STRING, stage_layers, 0, 0, "layers of each pipeline stage (with -vp: each virtual stage, in order), comma-separated, e.g. 3,5 (empty: balanced)"),
    ARG("-vp", ARG_INT, virtual_stages, 1, 1024, "virtual stages per pipeline stage, interleaved 1F1B; the micro-batches a multiple of -pp (train_gpt_cpu)"),
    ARG("-r", ARG_INT, recompute, -1, 2, "recompute: 0 none, 1 GELU (Llama: norms+SwiGLU), 2 +LayerNorm (Llama: whole layer); -1: least that fits"),
    ARG("-a", ARG_INT, overfit_batch, 0, 1, "1: overfit a single batch"),
    ARG("-f", ARG_INT, tf32, 0, 1, "TF32 matmuls (GPU)"),
    ARG("-w", ARG_INT, master_weights, 0, 1, "fp32 master weights (GPU)"),
    ARG("-ge", ARG_INT, gelu_fusion, -1, 2, "GELU in the matmul epilogue: 0 off, 1 forward, 2 also backward (GPU); -1: 2"),
    ARG("-bg", ARG_INT, bias_grad_epilogue, -1, 2, "bias gradients in matmul epilogues: 0 off (a pass each), 1 the weight "
        "gradients', 2 fc's in the GELU backward's (with -ge 2; the others a pass each) (GPU); -1: 2"),
    ARG("-ma", ARG_STRING, matmul_algo, 0, 0,
        "cuBLASLt algorithm per matmul shape: heuristic (its first answer) | timed (fastest of up to 16, saved with checkpoints) (GPU)"),
    ARG("-ak", ARG_INT, attention_kernel, -1, 3, "attention: 0 CUDA cores, 1 tensor cores (GPU bf16), 2 tensor cores, "
        "one-kernel backward (dq by atomics), 3 wgmma where it measured faster (Hopper, bf16, head size 64/128); "
        "-1: 3 where it applies, else 1 where it applies"),
    ARG("-pb", ARG_INT, phase_breakdown, 0, 1, "1: time per phase of the step, printed at the end"),
    ARG("-cg", ARG_INT, cuda_graphs, 0, 1, "1: forward and backward replayed as CUDA graphs (GPU; one process, GPT-2)"),
    ARG("-fp8r", ARG_STRING, fp8_recipe, 0, 0,
        "FP8 scaling: delayed (max of 1024 steps' amaxes) | current (the tensor's own) (train_gpt_fp8; others ignore it)"),
    ARG("-fp8fa", ARG_INT, fp8_fast_accum, 0, 2, "FP8 GEMMs with cuBLASLt's fast accumulation: 0 none, 1 the forward's "
        "(Transformer Engine's default), 2 the backward's too (train_gpt_fp8; others ignore it)"),
    ARG("-fp8kt", ARG_INT, fp8_keep_inputs, 0, 1, "1: each FP8 linear keeps its input, cast and transposed, from the "
        "forward for the backward (a byte a value; not with -pp) (train_gpt_fp8; others ignore it)"),
    ARG("-fp8kw", ARG_INT, fp8_keep_weights, 0, 1, "1: each FP8 linear casts its weight, as is and transposed, once a "
        "step, kept for the step's other uses (2 bytes a weight; not with -cg 1) (train_gpt_fp8; others ignore it)"),
    ARG("-sl", ARG_FLOAT, skip_loss_z, 0, 1e9, "skip update if loss z-score (last 128 steps) above this (0: off)"),
    ARG("-sg", ARG_FLOAT, skip_grad_z, 0, 1e9, "skip update if grad-norm z-score (last 128 steps) above this (0: off)"),
    ARG("-fk", ARG_INT, fault_streak, 1, 2e9, "after K non-finite steps in a row: reload last checkpoint, or stop"),
    ARG("-h", ARG_INT, hellaswag, 0, 1, "1: HellaSwag accuracy at every validation and at the end"),
    ARG("-hf", ARG_STRING, hellaswag_path, 0, 0, "HellaSwag eval file (data/prepare_hellaswag.sh writes it)"),
    ARG("--target-val-loss", ARG_FLOAT, target_val_loss, 0, 1e9,
        "stop once the val loss is at or below this; report time, tokens, steps to it (0: off)"),
    ARG("-pn", ARG_INT, num_processes, 1, 1 << 20, "number of processes"),
    ARG("-pr", ARG_INT, process_rank, 0, 1 << 20, "rank of this process"),
    ARG("-pg", ARG_INT, gpus_per_node, 1, 1024, "GPUs per node"),
    ARG("-pi", ARG_STRING, init_method, 0, 0, "multi-process init: mpi | fs | tcp"),
    ARG("-pf", ARG_STRING, fs_path, 0, 0, "shared directory for -pi fs"),
    ARG("-ps", ARG_STRING, server_ip, 0, 0, "rank 0's HOST[:PORT] for -pi tcp (port 12345 if none)"),
    ARG("-pt", ARG_FLOAT, comm_timeout, 1, 1e7, "seconds to wait for other ranks before stopping (hang detection)"),
    };
#undef ARG
}

// One line per flag: the flag, its default (the value the table points at), its help.
inline void args_print_table(const std::vector<ArgSpec>& specs, int value_width) {
    for (const ArgSpec& a : specs) {
        const void* field = a.field;
        char value[64];
        switch (a.kind) {
            case ARG_INT: snprintf(value, sizeof(value), "%d", *(const int*)field); break;
            case ARG_LLONG: snprintf(value, sizeof(value), "%lld", *(const long long*)field); break;
            case ARG_FLOAT: snprintf(value, sizeof(value), "%g", *(const float*)field); break;
            case ARG_STRING: snprintf(value, sizeof(value), "\"%s\"", ((const std::string*)field)->c_str()); break;
        }
        printf("  %-4s %-*s %s\n", a.flag, value_width, value, a.help);
    }
}

inline void args_print_help(const char* prog) {
    TrainConfig def;
    printf("usage: %s [flags]   (llm.c's flags; every flag takes a value)\n", prog);
    args_print_table(arg_specs(&def), 34);
}

// Sets the fields of a flag table from argv: every flag takes a value; unknown flags and
// values out of range are one-line errors naming the flag.
inline void args_parse_table(int argc, char** argv, const std::vector<ArgSpec>& specs) {
    for (int i = 1; i < argc; i += 2) {
        const ArgSpec* spec = nullptr;
        for (const ArgSpec& a : specs)
            if (!strcmp(argv[i], a.flag)) spec = &a;
        if (spec == nullptr) fail("unknown flag '%s' (see --help)", argv[i]);
        if (i + 1 >= argc) fail("flag %s needs a value (see --help)", argv[i]);
        const char* value = argv[i + 1];
        void* field = spec->field;
        long long iv;
        double fv;
        switch (spec->kind) {
            case ARG_INT:
            case ARG_LLONG:
                if (!parse_int(value, (long long)spec->lo, (long long)spec->hi, &iv))
                    fail("flag %s: expected an integer in [%.0f, %.0f], got '%s'", spec->flag, spec->lo, spec->hi, value);
                if (spec->kind == ARG_INT) *(int*)field = (int)iv;
                else *(long long*)field = iv;
                break;
            case ARG_FLOAT:
                if (!parse_float(value, &fv) || fv < spec->lo || fv > spec->hi)
                    fail("flag %s: expected a number in [%g, %g], got '%s'", spec->flag, spec->lo, spec->hi, value);
                *(float*)field = (float)fv;
                break;
            case ARG_STRING:
                *(std::string*)field = value;
                break;
        }
    }
}

// The values of -fp8r and -ma, which the trainers and ./plan both take: a bad one stops the
// program with one line naming the flag.
inline void args_check_fp8_recipe(const std::string& v) {
    if (v != "delayed" && v != "current") fail("flag -fp8r: unknown FP8 scaling '%s' (delayed | current)", v.c_str());
}
inline void args_check_matmul_algo(const std::string& v) {
    if (v != "heuristic" && v != "timed")
        fail("flag -ma: unknown matmul algorithm choice '%s' (heuristic | timed)", v.c_str());
}

// Parses argv into cfg; --help prints the table and exits 0.
inline void args_parse(int argc, char** argv, TrainConfig* cfg) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-help")) {
            args_print_help(argv[0]);
            exit(0);
        }
    }
    args_parse_table(argc, argv, arg_specs(cfg));
}
