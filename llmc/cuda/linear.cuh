// linear.cuh: the linear layers of the models' blocks, one call whatever the binary: in
// train_gpt_fp8 (ENABLE_FP8) FP8 GEMMs with the layer's slot of the model's FP8 state
// (fp8_linear.cuh), in train_gpt_fp32 and train_gpt_bf16 matmul.cuh's GEMMs, the state empty and
// the step's hooks doing nothing. The embeddings and the classifier never come here: as in
// Transformer Engine's recipe they stay in bf16 (the logits' GEMM is the most sensitive one).
// defines: ModelLinears, LinearSlot, linear_slot, linear_forward, linear_forward_add,
//          linear_backward, linear_act_in_cast, linears_act_in_cast_planned, linear_rows_fp8, linears_device_bytes,
//          linears_allocated_bytes, linears_init,
//          linears_free, linears_dims_problem, linears_step_begin, linears_step_end,
//          fp8_state_download, fp8_state_map_layers, fp8_state_write,
//          linears_write_state, linears_write_state_parts, fp8_state_read, linears_load_state
#pragma once
#include <algorithm>
#include <string>
#include <vector>
#include "common.cuh"        // defines: CudaContext, floatX
#include "matmul.cuh"        // defines: matmul_forward, matmul_backward, matmul_cublaslt
#include "comm_gpu.cuh"      // defines: GpuComm
#include "../side_files.h"   // defines: linears_state_path, fp8_state_file_floats, fp8_state_file_write,
                             //          fp8_state_file_read
#include "../families.h"     // defines: ModelConfig, FAMILY_LLAMA3 (gpt2_dims, llama_dims)
#include "../comm.h"         // defines: Comm, comm_gather_v_f32 (-pp: the stages' FP8 states to rank 0)
#include "../gpu_scratch.h"  // defines: LINEARS_PER_LAYER, block_linears, linears_shape, LinearsFp8Options, linears_fp8_bytes,
                             //          fp8_linears_bytes, fp8_scaling_floats
#ifdef ENABLE_FP8
#include "fp8_linear.cuh"  // defines: Fp8Linears, fp8_linear, fp8_linear_forward, fp8_linear_backward, ...
typedef Fp8Linears ModelLinears;
#else
struct ModelLinears {};  // the bf16 and fp32 builds' linears keep no state
#endif

// which state a linear layer uses: linear k (of LINEARS_PER_LAYER: GPT-2's qkv, attproj, fc,
// fcproj; Llama 3's qkv, attproj, gate/up, down) of the model's layer l (the model's own
// numbering, the stage's layers under -pp)
struct LinearSlot {
#ifdef ENABLE_FP8
    Fp8Linear fp8;
#endif
};

inline LinearSlot linear_slot(const ModelLinears& m, int l, int k) {
#ifdef ENABLE_FP8
    return LinearSlot{fp8_linear(m, l * LINEARS_PER_LAYER + k)};
#else
    (void)m, (void)l, (void)k;
    return LinearSlot{};
#endif
}

// FP8 GEMMs take rows in multiples of 16 only (their layouts: fp8.cuh). A training step's B*T is
// checked at start-up (linears_dims_problem), but the sample the trainer prints runs a context of
// any length, one row at a time as it grows (B=1, T=ctx): such a forward, which nothing is learned
// from, runs its GEMM in bf16 (the weights are bf16 anyway), and records no amax.
inline bool linear_rows_fp8(int BT) {
#ifdef ENABLE_FP8
    return BT % 16 == 0;
#else
    (void)BT;
    return false;
#endif
}

// matmul_forward's and matmul_backward's arguments after the slot. inp_act (only where
// linear_act_in_cast says so): the layer's input is that activation, made in its cast (inp unread).
inline void linear_forward(const CudaContext& ctx, LinearSlot s, floatX* out, floatX* pre_gelu, const floatX* inp,
                           const floatX* weight, const floatX* bias, int BT, int C, int OC, Act inp_act = Act{}) {
#ifdef ENABLE_FP8
    if (linear_rows_fp8(BT))
        return fp8_linear_forward(ctx, s.fp8, out, pre_gelu, inp, weight, bias, BT, C, OC, false, inp_act);
#endif
    (void)s;
    CHECK(inp_act.kind == ACT_NONE, "an activation made in the cast is train_gpt_fp8's, at rows a multiple of 16");
    matmul_forward(ctx, out, pre_gelu, inp, weight, bias, BT, C, OC);
}

// out (BT,OC) += inp (BT,C) @ weight (OC,C)^T: a projection added into what out holds (Llama's
// residual stream), one GEMM with beta 1 (the sum in fp32, rounded once), no buffer for the
// product and no add kernel. In FP8 the same (fp8_linear_forward's accumulate).
inline void linear_forward_add(const CudaContext& ctx, LinearSlot s, floatX* out, const floatX* inp,
                               const floatX* weight, int BT, int C, int OC, Act inp_act = Act{}) {
#ifdef ENABLE_FP8
    if (linear_rows_fp8(BT))
        return fp8_linear_forward(ctx, s.fp8, out, nullptr, inp, weight, nullptr, BT, C, OC, true, inp_act);
#endif
    (void)s;
    CHECK(inp_act.kind == ACT_NONE, "an activation made in the cast is train_gpt_fp8's, at rows a multiple of 16");
    bool ok = matmul_cublaslt(ctx, out, weight, inp, nullptr, nullptr, OC, BT, C, true, false, true);
    CHECK(ok, "cuBLASLt has no algorithm for the accumulating matmul BT=%d C=%d OC=%d", BT, C, OC);
}

// pre_gelu: dinp through the GELU before this layer too (matmul_backward's). dout_act, inp_act
// (only where linear_act_in_cast says so): dout is still to go back through the activation after
// this layer; the layer's input is an activation, made in its cast (fp8_linear_backward's).
// dbias_pre (with pre_gelu): the bias gradient of the layer before the GELU, GPT-2's fc, which
// matmul_backward takes (in the GELU backward's epilogue under -bg 2); returns whether it was
// taken, else (-bg 1; train_gpt_fp8, whose fc makes its own in its cast) that layer's backward
// adds it.
inline bool linear_backward(const CudaContext& ctx, LinearSlot s, floatX* dinp, floatX* dweight, floatX* dbias,
                            const floatX* dout, const floatX* inp, const floatX* weight, int BT, int C, int OC,
                            bool accumulate_dinp, const floatX* pre_gelu = nullptr, Act dout_act = Act{},
                            Act inp_act = Act{}, floatX* dbias_pre = nullptr) {
#ifdef ENABLE_FP8
    (void)dbias_pre;
    fp8_linear_backward(ctx, s.fp8, dinp, dweight, dbias, dout, inp, weight, BT, C, OC, accumulate_dinp, pre_gelu,
                        dout_act, inp_act);
    return false;
#else
    (void)s;
    CHECK(dout_act.kind == ACT_NONE && inp_act.kind == ACT_NONE, "an activation made in the cast is train_gpt_fp8's");
    return matmul_backward(ctx, dinp, dweight, dbias, dout, inp, weight, BT, C, OC, accumulate_dinp, pre_gelu,
                           dbias_pre);
#endif
}

// Where the MLPs make their activation (GPT-2's GELU, Llama's SwiGLU) at BT rows, and take it
// back: false, in passes of their own (forward: gelu_forward or cuBLASLt's GELU epilogue,
// swiglu_forward, and again in the backward under -r 1; backward: cuBLASLt's DGELU epilogue with
// -ge 2 or gelu_backward, swiglu_backward), the activation a bf16 tensor; true, in the casts of
// train_gpt_fp8 with delayed scaling at rows FP8 takes: the projection after the activation casts
// its input from the pre-activation (inp_act, forward and backward), the linear before it takes
// its output gradient back through the activation in that gradient's cast (dout_act; Transformer
// Engine's cast_transpose_dbias_dgelu). No pass, no bf16 activation or activation gradient is
// written or read, and the numbers are those passes' to the bit.
inline bool linear_act_in_cast(const ModelLinears& m, int BT) {
#ifdef ENABLE_FP8
    return fp8_act_in_cast(m.e5m2.recipe != FP8_RECIPE_DELAYED, (size_t)BT);
#else
    (void)m, (void)BT;
    return false;
#endif
}

// The same, before the linears exist, for the activations' allocation and the memory plan: at
// training's B*T rows with options o, true only in train_gpt_fp8
inline bool linears_act_in_cast_planned(const LinearsFp8Options& o, size_t BT) {
#ifdef ENABLE_FP8
    return fp8_act_in_cast(o.current_scaling, BT);
#else
    (void)o, (void)BT;
    return false;
#endif
}

// The device bytes linears_init takes for num_layers layers at BT rows: linears_fp8_bytes
// (llmc/gpu_scratch.h) in train_gpt_fp8, 0 elsewhere (the memory plan adds them before anything
// is allocated)
inline size_t linears_device_bytes(const ModelConfig& mc, int num_layers, size_t BT, const LinearsFp8Options& o,
                                   int tp = 1) {
#ifdef ENABLE_FP8
    return linears_fp8_bytes(mc, num_layers, BT, o, tp);
#else
    (void)mc, (void)num_layers, (void)BT, (void)o, (void)tp;
    return 0;
#endif
}

// What linears_init allocated for m (the start-up memory line): 0 but in train_gpt_fp8
inline size_t linears_allocated_bytes(const ModelLinears& m) {
#ifdef ENABLE_FP8
    if (m.num_linears == 0) return 0;
    return fp8_linears_bytes(m.num_linears, m.e4m3.recipe, m.act_capacity, m.weight_capacity, m.e4m3.history_len) +
           m.kept_inputs.bytes + m.kept_weights.bytes;
#else
    (void)m;
    return 0;
#endif
}

// num_layers layers of LINEARS_PER_LAYER linears of a model of configuration mc, at BT rows (the
// scratch: linears_shape; -tp: a rank's part), with options o (fp8_linear.cuh): -fp8r current
// (each tensor's scale from its own amax; else delayed scaling), -fp8kt 1 (each linear keeps its
// input from the forward, cast and transposed, for the backward: fp8_linears_keep_inputs),
// -fp8kw 1 (each keeps its weight cast for the step: fp8_linears_keep_weights). fast_accum
// (-fp8fa): which GEMMs take cuBLASLt's FAST_ACCUM, 0 none, 1 the forward's, 2 the backward's too.
inline void linears_init(ModelLinears* m, const ModelConfig& mc, int num_layers, size_t BT,
                         const LinearsFp8Options& o = LinearsFp8Options{}, int tp = 1, int fast_accum = 1) {
#ifdef ENABLE_FP8
    const LinearsShape shape = linears_shape(mc, tp);
    fp8_linears_init(m, num_layers * LINEARS_PER_LAYER, o.current_scaling ? FP8_RECIPE_CURRENT : FP8_RECIPE_DELAYED,
                     BT * shape.widest, shape.largest_weight);
    m->fast_accum_forward = fast_accum >= 1;
    m->fast_accum_backward = fast_accum >= 2;
    const std::vector<BlockLinear> block = block_linears(mc, tp);
    std::vector<size_t> inputs, weights;
    for (int l = 0; l < num_layers; l++)
        for (const BlockLinear& b : block) inputs.push_back(BT * b.K), weights.push_back(2 * b.K * b.OC);
    if (o.keep_inputs) fp8_linears_keep_inputs(m, inputs.data());
    if (o.keep_weights) fp8_linears_keep_weights(m, weights.data());
#else
    (void)m, (void)mc, (void)num_layers, (void)BT, (void)o, (void)tp, (void)fast_accum;
#endif
}

// What train_gpt_fp8's GEMMs cannot take in a model of configuration mc at BT rows (-tp: a
// rank's part of it), as a sentence naming the flag and the dimension, or "". cuBLASLt's FP8
// GEMMs need every dimension a multiple of 16 (fp8_matmul_refusal); a shard may break that where
// the whole model does not (C 96 at -tp 4: 24 attention channels a rank), and a start-up line
// beats a stop in the first step. -sp does not change them: the GEMMs run on the gathered rows.
inline std::string linears_dims_problem(const ModelConfig& mc, int tp, size_t BT) {
    char why[256];
    if (BT % 16 != 0) {
        snprintf(why, sizeof(why), "flag -b/-t: train_gpt_fp8's FP8 GEMMs need every dimension a multiple of 16, and "
                 "B*T is %zu", BT);
        return why;
    }
    for (const BlockLinear& l : block_linears(mc, tp)) {
        for (int side = 0; side < 2; side++) {
            const size_t value = side == 0 ? l.K : l.OC;
            if (value % 16 == 0) continue;
            const char* name = side == 0 ? l.K_name : l.OC_name;
            if (tp > 1)
                snprintf(why, sizeof(why), "flag -tp %d: train_gpt_fp8's FP8 GEMMs need every dimension a multiple "
                         "of 16, and a rank's %s is %zu: use a -tp that keeps them so, or train_gpt_bf16", tp, name,
                         value);
            else
                snprintf(why, sizeof(why), "flag -e: train_gpt_fp8's FP8 GEMMs need every dimension a multiple of "
                         "16, and the model's %s is %zu: use train_gpt_bf16", name, value);
            return why;
        }
    }
    return "";
}

inline void linears_free(ModelLinears* m) {
#ifdef ENABLE_FP8
    fp8_linears_free(m);
#else
    (void)m;
#endif
}

// A step's first micro-step: what the forwards since the last update measured (validation,
// sampling) is forgotten, so that only the step's own tensors set the next scales.
// The weights kept cast (-fp8kw 1) are cast again by the step's first calls, which record their amaxes.
inline void linears_step_begin(const CudaContext& ctx, const ModelLinears& m) {
#ifdef ENABLE_FP8
    fp8_linears_discard_amax(ctx, m);
    fp8_linears_forget_weights(m);
#else
    (void)ctx, (void)m;
#endif
}

// After a step's update (not after a skipped step: the next step_begin forgets its amaxes): the
// amaxes max-reduced over the data-parallel ranks (gc) and the tensor-parallel group (tp, nullptr
// without -tp: each rank's shards make up the whole tensors), then the scales from their histories.
// -pp: both groups are the stage's, whose layers' linears no other stage runs.
// The weights kept cast (-fp8kw 1) are the old weights' now: forgotten, so that a validation's
// forward casts the new ones.
inline void linears_step_end(GpuComm* gc, GpuComm* tp, const CudaContext& ctx, const ModelLinears& m) {
#ifdef ENABLE_FP8
    fp8_linears_all_reduce_amax(gc, tp, ctx, m);
    fp8_linears_update(ctx, m);
    fp8_linears_forget_weights(m);
#else
    (void)gc, (void)tp, (void)ctx, (void)m;
#endif
}

// ---------------------------------------------------------------------------------------
// The FP8 state in a checkpoint: state_%08d_fp8.bin beside the state files (checkpoint_prune
// takes it with them), always as one process holds it: linear k of the model's layer g is
// linear g LINEARS_PER_LAYER + k, whatever the layout that wrote it. After the step's max-reduce
// the data-parallel replicas and (-tp) the tensor-parallel group's ranks hold the same amaxes,
// scales and histories, each linear's whole tensors' as one process has them; a pipeline stage
// (-pp) holds its own layers' only, so every stage's are put together on rank 0
// (linears_write_state_parts), which writes the one file, and each stage takes its layers' back
// (linears_load_state with its layers): a checkpoint resumes under any -tp, -pp, -vp and process
// count, and without it a resumed run would start its scales again from 1 and part from the run
// that never stopped. The file's format, writer and reader: llmc/side_files.h.

#ifdef ENABLE_FP8
// state i of m (0: E4M3, 1: E5M2; its tensors a linear: fp8_state_tensors_per_linear)
inline const Fp8Scaling& fp8_state(const ModelLinears& m, int i) { return i == 0 ? m.e4m3 : m.e5m2; }

// The floats of state i's buffer for num_linears linears (fp8_scaling_floats)
inline size_t fp8_state_floats(const ModelLinears& m, int i, size_t num_linears) {
    return fp8_state_file_floats(i, num_linears, (size_t)fp8_state(m, i).history_len);
}

// m's two buffers, as the device holds them, into host[0] (E4M3) and host[1] (E5M2)
inline void fp8_state_download(const CudaContext& ctx, const ModelLinears& m, std::vector<float> host[2]) {
    for (int i = 0; i < 2; i++) {
        host[i].resize(fp8_state(m, i).buffer_floats);
        CHECK_CUDA(cudaMemcpyAsync(host[i].data(), fp8_state(m, i).buffer, host[i].size() * sizeof(float),
                                   cudaMemcpyDeviceToHost, ctx.stream));
    }
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
}

// -pp: a stage's state buffers (stage[i], its layers' linears) to the model's (whole[i], the
// model's num_linears) or, from_whole, back. layers: the model's number of each of the stage's
// layers, in the stage's order (-vp: its chunks' in turn). Layer j's tensors of a state are a run
// of P = per linear x LINEARS_PER_LAYER in each section of the buffer, the model's layer g's
// likewise: each section moves layer by layer (the history H floats a tensor).
inline void fp8_state_map_layers(const ModelLinears& m, const std::vector<int>& layers, size_t num_linears,
                                 std::vector<float> stage[2], std::vector<float> whole[2], bool from_whole) {
    for (int i = 0; i < 2; i++) {
        const size_t P = fp8_state_tensors_per_linear(i) * LINEARS_PER_LAYER, H = fp8_state(m, i).history_len;
        const size_t Ts = P * layers.size(), Tw = fp8_state_tensors_per_linear(i) * num_linears;
        CHECK(stage[i].size() == Ts * (3 + H) && whole[i].size() == Tw * (3 + H), "FP8 state %d: %zu and %zu floats",
              i, stage[i].size(), whole[i].size());
        for (size_t j = 0; j < layers.size(); j++) {
            const size_t g = (size_t)layers[j];
            CHECK((g + 1) * P <= Tw, "layer %zu of a model of %zu linears", g, num_linears);
            // where the amax, scale, scale_inv and history sections begin (one float a tensor, H in
            // the history)
            const size_t sec_s[4] = {0, Ts, 2 * Ts, 3 * Ts}, sec_w[4] = {0, Tw, 2 * Tw, 3 * Tw};
            for (int sec = 0; sec < 4; sec++) {
                const size_t per = sec == 3 ? H : 1;
                float* a = stage[i].data() + sec_s[sec] + j * P * per;
                float* b = whole[i].data() + sec_w[sec] + g * P * per;
                if (from_whole) std::copy(b, b + P * per, a);
                else std::copy(a, a + P * per, b);
            }
        }
    }
}

// Writes host (the two buffers of num_linears linears) as the FP8 state of the checkpoint at
// `step` into dir, durable on disk.
inline void fp8_state_write(const ModelLinears& m, size_t num_linears, const std::vector<float> host[2],
                            const std::string& dir, int step) {
    fp8_state_file_write(dir, step, m.e4m3.recipe == FP8_RECIPE_CURRENT, (size_t)m.e4m3.history_len, num_linears, host);
}
#endif

// Writes the FP8 state of the checkpoint at `step` into dir (rank 0 alone, m every linear of the
// model: one process, or data-parallel replicas). Nothing in the fp32 and bf16 builds.
inline void linears_write_state(const CudaContext& ctx, const ModelLinears& m, const std::string& dir, int step) {
#ifdef ENABLE_FP8
    std::vector<float> host[2];
    fp8_state_download(ctx, m, host);
    fp8_state_write(m, (size_t)m.num_linears, host, dir, step);
#else
    (void)ctx, (void)m, (void)dir, (void)step;
#endif
}

// -tp, -pp: the same from every stage's linears, a collective over world (model_parts_gather's
// group, its gather): rank_layers[r], the model's layers of world rank r's linears in its stage's
// order, or none where another rank gives the same (one rank a stage does: after the step's
// max-reduce its data-parallel replicas and tensor-parallel group hold what it holds). Rank 0
// puts them in the model's order and writes the one file, as one process would.
inline void linears_write_state_parts(const CudaContext& ctx, const ModelLinears& m, Comm* world,
                                      const std::vector<std::vector<int>>& rank_layers, int model_layers,
                                      const std::string& dir, int step) {
#ifdef ENABLE_FP8
    const size_t num_linears = (size_t)model_layers * LINEARS_PER_LAYER;
    auto floats = [&](size_t layers) {  // both states' floats for `layers` layers
        return fp8_state_floats(m, 0, layers * LINEARS_PER_LAYER) + fp8_state_floats(m, 1, layers * LINEARS_PER_LAYER);
    };
    std::vector<size_t> counts(world->world);
    size_t total = 0;
    for (int r = 0; r < world->world; r++) total += counts[r] = floats(rank_layers[r].size());
    std::vector<float> mine, host[2];
    if (!rank_layers[world->rank].empty()) {
        CHECK(rank_layers[world->rank].size() * LINEARS_PER_LAYER == (size_t)m.num_linears,
              "rank %d gives %zu layers of FP8 state, holds %d linears", world->rank, rank_layers[world->rank].size(),
              m.num_linears);
        fp8_state_download(ctx, m, host);
        mine = host[0];
        mine.insert(mine.end(), host[1].begin(), host[1].end());
    }
    const bool root = world->rank == 0;
    std::vector<float> all(root ? total : 0);
    comm_gather_v_f32(world, mine.data(), counts.data(), all.data());
    if (!root) return;
    std::vector<float> whole[2] = {std::vector<float>(fp8_state_floats(m, 0, num_linears)),
                                   std::vector<float>(fp8_state_floats(m, 1, num_linears))};
    std::vector<char> covered(model_layers, 0);
    size_t at = 0;
    for (int r = 0; r < world->world; r++) {
        const std::vector<int>& layers = rank_layers[r];
        if (layers.empty()) continue;
        const size_t n4 = fp8_state_floats(m, 0, layers.size() * LINEARS_PER_LAYER);
        std::vector<float> stage[2] = {std::vector<float>(all.begin() + at, all.begin() + at + n4),
                                       std::vector<float>(all.begin() + at + n4, all.begin() + at + counts[r])};
        fp8_state_map_layers(m, layers, num_linears, stage, whole, false);
        for (int g : layers) covered[g]++;
        at += counts[r];
    }
    for (int g = 0; g < model_layers; g++)
        CHECK(covered[g] == 1, "the FP8 state of layer %d came from %d ranks", g, covered[g]);
    fp8_state_write(m, num_linears, whole, dir, step);
#else
    (void)ctx, (void)m, (void)world, (void)rank_layers, (void)model_layers, (void)dir, (void)step;
#endif
}

#ifdef ENABLE_FP8
// The problem with the FP8 state file at path for m's recipe and history with num_linears
// linears at `step` ("" if sound); when sound, its two buffers in host[0], host[1].
inline std::string fp8_state_read(const std::string& path, const ModelLinears& m, size_t num_linears, int step,
                                  std::vector<float> host[2]) {
    return fp8_state_file_read(path, m.e4m3.recipe == FP8_RECIPE_CURRENT, (size_t)m.e4m3.history_len, num_linears,
                               step, host);
}
#endif

// Restores the FP8 state of the checkpoint at `step` (every rank reads rank 0's file); a missing
// or unsound file stops the run with one line naming it. layers (-pp; nullptr: m holds every
// linear of the model): the model's number of each layer whose linears m holds, in m's order, of
// the model's model_layers; m takes their slice of the file. Nothing in the fp32 and bf16 builds.
inline void linears_load_state(const CudaContext& ctx, const ModelLinears& m, const std::string& dir, int step,
                               const std::vector<int>* layers = nullptr, int model_layers = 0) {
#ifdef ENABLE_FP8
    const std::string path = linears_state_path(dir, step);
    const size_t num_linears = layers != nullptr ? (size_t)model_layers * LINEARS_PER_LAYER : (size_t)m.num_linears;
    std::vector<float> host[2];
    const std::string err = fp8_state_read(path, m, num_linears, step, host);
    if (!err.empty())
        fail("%s: %s: train_gpt_fp8 resumes its scales and amax histories from this file, which its checkpoints "
             "write (train_gpt_bf16's have none: resume those with train_gpt_bf16)",
             path.c_str(), err.c_str());
    if (layers != nullptr) {  // this stage's layers of the model's
        CHECK(layers->size() * LINEARS_PER_LAYER == (size_t)m.num_linears, "%zu layers of FP8 state for %d linears",
              layers->size(), m.num_linears);
        std::vector<float> stage[2] = {std::vector<float>(fp8_state(m, 0).buffer_floats),
                                       std::vector<float>(fp8_state(m, 1).buffer_floats)};
        fp8_state_map_layers(m, *layers, num_linears, stage, host, true);
        host[0].swap(stage[0]);
        host[1].swap(stage[1]);
    }
    for (int i = 0; i < 2; i++) {
        CHECK_CUDA(cudaMemcpyAsync(fp8_state(m, i).buffer, host[i].data(), host[i].size() * sizeof(float),
                                   cudaMemcpyHostToDevice, ctx.stream));
        fp8_scaling_copy_gemm(ctx, fp8_state(m, i));
    }
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));  // host[] goes out of scope
#else
    (void)ctx, (void)m, (void)dir, (void)step, (void)layers, (void)model_layers;
#endif
}
