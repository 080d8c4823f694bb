// model_parts.h: how the ranks of a run split the model (-tp, -pp, -vp, -pl, -sp), for both
// trainers: the layout and its groups, each rank's part of the parameter vector, and the
// layout-free checkpoints, which rank 0 writes as one process would (so a checkpoint written on
// one layout resumes on any other). The values are host float vectors: the CPU trainer's
// parameters themselves, the GPU trainer's once copied down (and its fp32 master weights).
//
//   the world, -tp 2 -pp 2 on 8 processes: rank = (d pp + s) tp + t
//            stage 0        stage 1
//   replica 0   ranks 0 1      ranks 2 3      t: the tensor-parallel rank (its heads, rows)
//   replica 1   ranks 4 5      ranks 6 7      d: the data-parallel rank (its batches)
//   tp_comm: {0,1} {2,3} {4,5} {6,7}   dp_comm: {0,4} {1,5} {2,6} {3,7}   (the same part)
//   emb_comm: the first and last stage's ranks of the same part, {0,2} {1,3} {4,6} {5,7}
//             (GPT-2's tied wte: its gradient is the first stage's plus the last's)
//
// The ZeRO layout (llmc/zero.h) splits each rank's part over its data-parallel group, so a
// rank's AdamW values are [opt_begin, opt_end) of its part, not of the model file's vector.
// defines: ModelParts, RankPlace, rank_place, model_parts_init, model_parts_set_model, model_parts_free,
//          model_parts_part_of_rank, ModelPartsWhole, model_parts_gather, model_parts_state_header,
//          model_parts_read_state, model_parts_read_params, model_parts_stage_layers
#pragma once
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "utils.h"            // defines: fail, CHECK
#include "args.h"             // defines: TrainConfig
#include "comm.h"             // defines: Comm, comm_split, comm_gather_v_f32, comm_free
#include "families.h"         // defines: ModelConfig, model_part_shard, model_stage, model_tp_problem, model_delete
#include "tensor_parallel.h"  // defines: TpShard, tp_local_to_global, tp_global_to_local
#include "checkpoint.h"       // defines: TrainState, state_read_range, model_load_checkpoint
#include "zero.h"             // defines: ZeroLayout, zero_layout

// The run's layout, the same on every rank but for this rank's place in it.
struct ModelParts {
    int tp = 1, pp = 1, vp = 1;     // -tp, -pp, -vp: tensor-parallel ranks, pipeline stages, virtual stages
    int t_rank = 0, stage = 0;      // this rank's tensor-parallel rank and pipeline stage
    int dp_rank = 0, dp_world = 1;  // its replica (whose data-parallel batches it reads) of dp_world
    int prev = -1, next = -1;       // -pp: the world ranks of the stages before and after (a ring, for -vp)
    bool parts = false;             // tp > 1 or pp > 1: this rank holds a part of the model
    std::vector<int> stage_sizes;   // -pl: each virtual stage's layers (empty: balanced)
    ModelConfig config = {};        // the whole model's (model_parts_set_model)
    Comm* world = nullptr;          // every rank
    Comm tp_comm, dp_comm, emb_comm;  // with parts: the groups drawn above (else unused)
    Comm* dp() { return parts ? &dp_comm : world; }  // the data-parallel group (without parts: the world)
};

// Where world rank k sits in a layout of tp tensor-parallel ranks and pp stages: the
// tensor-parallel ranks innermost (Megatron-LM's order: the tp ranks of stage s of replica d
// share its layers, and the fastest links), then the stages, then the replicas.
struct RankPlace {
    int t_rank, stage, replica;
};
inline RankPlace rank_place(int k, int tp, int pp) { return RankPlace{k % tp, (k / tp) % pp, k / (tp * pp)}; }

// The flags' layout on world, before anything is read: the refusals of layouts that cannot run
// (each one line, naming the flag), this rank's place, and the groups (a collective: every
// rank calls it).
inline void model_parts_init(const TrainConfig& cfg, Comm* world, ModelParts* p) {
    const int tp = cfg.tensor_parallel, pp = cfg.pipeline_parallel, vp = cfg.virtual_stages, n = world->world;
    if (vp > 1 && pp == 1) fail("flag -vp %d: virtual stages interleave a pipeline's stages: give -pp 2 or more", vp);
    if (n % (tp * pp) != 0)
        fail("flag -tp %d -pp %d: %d process%s are not whole replicas of %d (processes = data-parallel x "
             "pipeline-parallel x tensor-parallel ranks)", tp, pp, n, n == 1 ? "" : "es", tp * pp);
    if (cfg.sequence_parallel && cfg.hellaswag)
        fail("flag -sp 1 with -h 1: HellaSwag's rows of any length are not split along T yet");
    if (cfg.sequence_parallel && tp == 1)
        fail("flag -sp 1: sequence parallelism splits the positions over tensor-parallel ranks: give -tp 2 or more");
    if (cfg.sequence_parallel && cfg.T % tp != 0)
        fail("flag -sp 1: -t %d does not split into %d equal parts (one per tensor-parallel rank)", cfg.T, tp);
    const int rank = world->rank;
    const RankPlace at = rank_place(rank, tp, pp);
    p->tp = tp;
    p->pp = pp;
    p->vp = vp;
    p->world = world;
    p->t_rank = at.t_rank;
    p->stage = at.stage;
    p->dp_rank = at.replica;
    p->dp_world = n / (tp * pp);
    p->prev = rank + ((p->stage + pp - 1) % pp - p->stage) * tp;  // -vp: the last stage's next is the first
    p->next = rank + ((p->stage + 1) % pp - p->stage) * tp;
    p->parts = tp > 1 || pp > 1;
    if (!p->parts) return;
    comm_split(world, rank / tp, p->t_rank, &p->tp_comm);           // the stage's tensor-parallel group
    comm_split(world, rank % (tp * pp), p->dp_rank, &p->dp_comm);   // the same part in every replica
    // the first and last stage's ranks of the same part (GPT-2's tied wte; the others alone)
    const bool ends = pp > 1 && (p->stage == 0 || p->stage == pp - 1);
    comm_split(world, ends ? p->dp_rank * tp + p->t_rank : n + rank, p->stage, &p->emb_comm);
    // the backward talks to its tensor-parallel group and the stages beside it: only this
    // thread may be in MPI, so the gradient buckets are reduced on it too
    p->dp_comm.threads_ok = false;
}

// Once the model to start from is known (c: its configuration, the whole model's): the
// refusals of a model the layout cannot split, and -pl's stage sizes, which must cover its layers.
inline void model_parts_set_model(const TrainConfig& cfg, const ModelConfig& c, ModelParts* p) {
    const int tp = p->tp, pp = p->pp, vp = p->vp;
    p->config = c;
    if (p->parts) {
        std::string why = model_tp_problem(c, tp, pp * vp);
        if (!why.empty()) fail("flag -tp %d -pp %d: %s", tp, pp, why.c_str());
    }
    // -pl: the layers of each (virtual) stage, in order
    const char* list = cfg.stage_layers.c_str();
    if (*list == '\0') return;
    if (pp == 1) fail("flag -pl '%s': stage sizes need -pp 2 or more", list);
    const int L = model_config_num_layers(c);
    int sum = 0;
    p->stage_sizes.clear();
    for (const char* s = list; *s != '\0';) {
        char* end = nullptr;
        const long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > L || (*end != ',' && *end != '\0'))
            fail("flag -pl '%s': layer counts of at least 1, comma-separated, e.g. 3,5", list);
        p->stage_sizes.push_back((int)v);
        sum += (int)v;
        s = *end == ',' ? end + 1 : end;
    }
    if ((int)p->stage_sizes.size() != pp * vp || sum != L)
        fail("flag -pl '%s': %zu stages of %d layers, but -pp %d x -vp %d stages of the model's %d layers", list,
             p->stage_sizes.size(), sum, pp, vp, L);
}

inline void model_parts_free(ModelParts* p) {
    if (!p->parts) return;
    comm_free(&p->tp_comm);
    comm_free(&p->dp_comm);
    comm_free(&p->emb_comm);
}

// World rank k's part of the model (its tensor-parallel rank and pipeline stage): its table
// and the runs that map it onto the model file's vector. Any rank can make any rank's.
inline void model_parts_part_of_rank(const ModelParts& p, int k, TpShard* out) {
    std::vector<int> layers;
    const RankPlace at = rank_place(k, p.tp, p.pp);
    std::string why = model_part_shard(p.config, p.tp, at.t_rank, at.stage, p.pp, p.vp, out, &layers,
                                       p.stage_sizes.empty() ? nullptr : &p.stage_sizes);
    CHECK(why.empty(), "rank %d's part: %s", k, why.c_str());
}

// The model's layers that pipeline stage `stage` holds, in the order its part keeps them (-vp: its
// chunks' in turn); every layer without -pp.
inline std::vector<int> model_parts_stage_layers(const ModelParts& p, int stage) {
    std::vector<int> layers, chunks;
    int hold[MAX_PARAM_TENSORS];
    model_stage(p.config, stage, p.pp, p.vp, &layers, &chunks, hold, p.stage_sizes.empty() ? nullptr : &p.stage_sizes);
    return layers;
}

// What one process would hold: the model file's vector, its AdamW moments and (the bf16 GPU
// trainer) its fp32 master weights, global_n values each, on rank 0 (empty elsewhere).
struct ModelPartsWhole {
    std::vector<float> params, m, v, master;
};

// A checkpoint's values put together on rank 0 (a collective over the world). Every rank gives
// its whole part of the parameters (local_n values: ZeRO 3 assembles it first) and its AdamW m
// and v for z's range [opt_begin, opt_end) of that part, and master over the same range where
// the trainer keeps one (every rank, or none: nullptr). Only data-parallel rank 0's parameters
// count (the replicas hold the same), and at ZeRO 0 its AdamW values too (every replica holds
// them all); at ZeRO 1 to 3 each data-parallel rank gives its slice. Rank 0 maps each rank's
// values onto the model file's vector through the rank's part. (It holds the whole model and
// its AdamW state meanwhile.)
inline void model_parts_gather(const ModelParts& p, const ZeroLayout& z, const float* params, const float* m,
                               const float* v, const float* master, ModelPartsWhole* out) {
    const int world = p.world->world;
    const bool root = p.world->rank == 0;
    std::vector<TpShard> shards(world);
    std::vector<size_t> param_counts(world), opt_counts(world), opt_begins(world), zeros(world, 0);
    size_t params_total = 0, opt_total = 0;
    for (int k = 0; k < world; k++) {
        model_parts_part_of_rank(p, k, &shards[k]);
        const size_t nk = shards[k].local_n;
        const int dk = rank_place(k, p.tp, p.pp).replica;
        const ZeroLayout zk = zero_layout(nk, z.stage, dk, z.world);
        param_counts[k] = dk == 0 ? nk : 0;
        opt_begins[k] = zk.opt_begin;
        opt_counts[k] = z.stage == 0 && dk > 0 ? 0 : zk.opt_count();
        params_total += param_counts[k];
        opt_total += opt_counts[k];
    }
    const size_t global_n = shards[0].global_n;
    std::vector<float> all(root ? std::max(params_total, opt_total) : 0);  // every rank's values, in rank order
    // one vector at a time: gathered into all, then mapped into *whole
    auto gather = [&](const float* mine, const size_t* counts, const size_t* begins, std::vector<float>* whole) {
        comm_gather_v_f32(p.world, mine, counts, all.data());
        whole->assign(root ? global_n : 0, 0.0f);
        if (!root) return;
        size_t at = 0;
        for (int k = 0; k < world; k++) {
            tp_local_to_global(shards[k], begins[k], counts[k], all.data() + at, whole->data());
            at += counts[k];
        }
    };
    gather(params, param_counts.data(), zeros.data(), &out->params);
    gather(m, opt_counts.data(), opt_begins.data(), &out->m);
    gather(v, opt_counts.data(), opt_begins.data(), &out->v);
    if (master != nullptr) gather(master, opt_counts.data(), opt_begins.data(), &out->master);
}

// The header of the one state file rank 0 writes from model_parts_gather's values: s (the
// loop's, for this step) as rank 0 of a world of one holding every value, with the data-parallel
// world and ZeRO stage it ran with.
inline TrainState model_parts_state_header(TrainState s, const ZeroLayout& z, size_t global_n) {
    s.rank = 0;
    s.world = 1;  // one file holds every value
    s.data_world = z.world;
    s.range_begin = 0;
    s.range_count = global_n;
    s.zero_stage = z.stage;
    return s;
}

// Resume: the AdamW state of any checkpoint (one file or one per rank, any layout) for this
// rank's part (shard) and ZeRO range (z): the model file's whole vectors are read, then this
// rank's values taken from them into m and v (z.opt_count() values each), and master where
// given (*has_master: whether every file held master weights). Returns "", or the problem.
inline std::string model_parts_read_state(const std::string& dir, int step, const TpShard& shard, const ZeroLayout& z,
                                          TrainState* s, float* m, float* v, float* master = nullptr,
                                          bool* has_master = nullptr) {
    const size_t n = shard.global_n;
    std::vector<float> gm(n), gv(n), gmaster(master != nullptr ? n : 0);
    bool all_master = false;
    std::string err = state_read_range(dir, step, n, 0, n, s, gm.data(), gv.data(),
                                       master != nullptr ? gmaster.data() : nullptr, &all_master);
    if (!err.empty()) return err;
    tp_global_to_local(shard, z.opt_begin, z.opt_count(), gm.data(), m);
    tp_global_to_local(shard, z.opt_begin, z.opt_count(), gv.data(), v);
    if (master != nullptr && all_master) tp_global_to_local(shard, z.opt_begin, z.opt_count(), gmaster.data(), master);
    if (has_master != nullptr) *has_master = all_master;
    return "";
}

// Reload (after faults): the model file at path, the whole model's as one process wrote it
// (checked against family and shard), and this rank's part of its parameters into local
// (shard.local_n values).
inline void model_parts_read_params(const std::string& path, ModelFamily family, const TpShard& shard, float* local) {
    ModelBase* file = model_load_checkpoint(path.c_str());
    CHECK(file->family == family && file->num_parameters == shard.global_n, "%s: %zu vs %zu", path.c_str(),
          file->num_parameters, shard.global_n);
    tp_global_to_local(shard, 0, shard.local_n, file->params, local);
    model_delete(file);
}
