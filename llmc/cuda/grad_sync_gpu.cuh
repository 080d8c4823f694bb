// grad_sync_gpu.cuh: the GPU trainer's gradient reduction across ranks, bucket by bucket on a
// communication stream while the backward goes on, for any model family: it sees the family's
// table through its ParamLayout (llmc/model.h) and the buffers every family's GPU model has
// (llmc/model_cuda.cuh: CudaModelState). The CPU trainer's llmc/grad_sync.h explains the
// buckets (one per layer, then the front and tail rows: GPT-2's wte/wpe/lnf, Llama's
// wte/rmsfw/lmheadw) and how ZeRO cuts them into parts per owner; the pieces, runs and part sizes
// here are the same (llmc/zero.h: zero_bucket_pieces, zero_run_counts).
// defines: GpuGradSync, gpu_grad_sync_init, gpu_grad_sync_download_params, gpu_grad_sync_wait, gpu_grad_sync_free
//
// NCCL: when the backward has finished a bucket, the main stream records an event, the
// communication stream waits for it and runs the bucket's work, and the main stream goes on
// with the layer below at once. A layer bucket is packed into one of two slots (ZeRO 2's
// backward writes it there directly), then one collective per bucket: ZeRO 0 ncclAllReduce;
// ZeRO 1 and 2 one ncclReduce per owner's part, root = the owner, in one group (NCCL has no
// reduce-scatter with parts of different sizes; a chain reduce moves about the same bytes
// per rank). Then the sums go back to model->grads (ZeRO 0: all; 1: the owned ones), or ZeRO
// 2 adds the owned ones into the slice accumulator and zeroes the slot; its backward writes
// layer l into slot l % 2 only after the communication stream is done with layer l + 2 there
// (an event per slot). gpu_grad_sync_wait makes the main stream wait for the last bucket,
// then waits for the main stream with NCCL's error polling and -pt (gpu_comm_wait).
// Host-staged (ranks sharing one GPU, or no NCCL): each bucket goes through host memory and
// llmc/comm.h's collectives when it is finished, synchronously: the same sums, no overlap.
// Nothing on the communication stream touches ctx.workspace, the main stream's scratch.
//
// ZeRO 3 (llmc/grad_sync.h tells the CPU's version): the gradients go as at ZeRO 2, and the
// parameters too are a slice per rank (model->param_shard) plus the front and tail rows in
// model->params; the forward and backward ask for each layer (the model's ParamSource). Its
// pieces are gathered into one of two parameter slots on the communication stream: when the
// main stream has passed the point where the caller is done with the slot's old layer (event
// pslot_free), the owner's parts are copied in from param_shard and each owner broadcasts its
// part to the others (one group; NCCL has no all-gather with parts of different sizes), then
// event pslot_ready, which the main stream waits for before the layer's first kernel. The next
// layer is queued into the other slot at once, so its gather runs while this layer computes.
// A slot keeps its layer until another is needed: 2L - 2 gathers a micro-step, as on the CPU.
// Host-staged, a gather goes through host memory synchronously, as the buckets do.
#pragma once
#include <vector>

#include "common.cuh"      // defines: CudaContext, floatX, CHECK_CUDA, to_float, from_float
#include "comm_gpu.cuh"    // defines: GpuComm, gpu_comm_wait, CHECK_NCCL, nccl_type_floatx
#include "../zero.h"       // defines: ZeroLayout, ZeroPiece, zero_bucket_pieces, zero_flat_runs, zero_run_counts
#include "../model.h"      // defines: ParamLayout, GradSinkOf, ParamSourceOf, layer_slices, layer_slices_packed, MAX_PARAM_TENSORS
#include "../model_cuda.cuh" // defines: CudaModelState, cuda_malloc_or_fail
#include "phases.cuh"      // defines: phase_mark (-pb 1)

struct GpuGradSync final : GradSinkOf<floatX>, ParamSourceOf<floatX> {
    CudaModelState* model = nullptr;
    ParamLayout table;                 // the family's table (in the model) and its layout
    GpuComm* gc = nullptr;
    ZeroLayout z;
    bool communicate = false;          // this micro-step's gradients go out (ZeRO 2, 3: every one; else the last)
    bool launched = false;             // a bucket went out since the last gpu_grad_sync_wait
    cudaStream_t stream = nullptr;     // the communication stream (NCCL)
    cudaEvent_t ready = nullptr;       // main stream: the bucket is finished
    cudaEvent_t done = nullptr;        // communication stream: every bucket so far is reduced
    cudaEvent_t slot_free[2] = {nullptr, nullptr};  // ZeRO 2: the slot is reduced and zeroed
    floatX* slots[2] = {nullptr, nullptr};          // one layer's gradients each, packed
    size_t layer_n = 0;                // values of one layer
    std::vector<float> staging;        // host-staged: a run widened to fp32 (as a floatX
                                       // run it goes through gc->staging_x)
    // ZeRO 3: two slots of one layer's parameters; pslot_layer[s]: the layer slot s holds or is
    // being gathered into it (-1: nothing valid); the events above
    floatX* pslots[2] = {nullptr, nullptr};
    int pslot_layer[2] = {-1, -1};
    cudaEvent_t pslot_free[2] = {nullptr, nullptr};
    cudaEvent_t pslot_ready[2] = {nullptr, nullptr};
    size_t front_n = 0, tail_n = 0;    // the front rows' values, the tail rows'
    bool skip_ready_wait = false;      // TEST HOOK (GPTRAIN_TEST_ZERO3_NO_WAIT=1): the main stream does not wait
                                       // for a gather; the race check must catch it (test_emu.sh)
    long long gathers = 0, gathers_ahead = 0;  // layer gathers, and those queued before the layer was asked for

    // Host-staged: the run summed over ranks through host memory, each part rounded to floatX
    // by its owner (ZeRO 0: then all-gathered, so every rank has the same bits); the owned
    // part (ZeRO 0: every part) is written back to buf.
    void reduce_run_host(floatX* buf, size_t n, const std::vector<size_t>& counts) {
        const CudaContext& ctx = *model->ctx;
        size_t own = 0;
        for (int r = 0; r < z.rank; r++) own += counts[r];
        gc->staging_x.resize(n);
        staging.resize(n);
        CHECK_CUDA(
            cudaMemcpyAsync(gc->staging_x.data(), buf, n * sizeof(floatX), cudaMemcpyDeviceToHost, ctx.stream));
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        for (size_t i = 0; i < n; i++) staging[i] = to_float(gc->staging_x[i]);
        comm_reduce_scatter_v_f32(gc->host, staging.data(), counts.data());
        for (size_t i = own; i < own + counts[z.rank]; i++) gc->staging_x[i] = from_float<floatX>(staging[i]);
        size_t from = own, count = counts[z.rank];
        if (z.stage == 0) {
            comm_all_gather_v(gc->host, gc->staging_x.data(), counts.data(), sizeof(floatX));
            from = 0;
            count = n;
        }
        CHECK_CUDA(cudaMemcpyAsync(buf + from, gc->staging_x.data() + from, count * sizeof(floatX),
                                   cudaMemcpyHostToDevice, ctx.stream));
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    }

    // One run on stream s: buf holds its pieces at their packed places; copied: a copy of
    // model->grads, where the sums go back. Afterwards ZeRO 0 has every sum, ZeRO 1 the owned
    // ones in model->grads, ZeRO 2 the owned ones added into the slice accumulator and buf zeroed.
    void reduce_run(floatX* buf, const std::vector<ZeroPiece>& run, bool copied, cudaStream_t s) {
        std::vector<size_t> counts = zero_run_counts(z, run);
        size_t n = zero_run_len(run);
        if (gc->nccl) {
#ifdef USE_NCCL
            if (z.stage == 0) {
                CHECK_NCCL(ncclAllReduce(buf, buf, n, nccl_type_floatx(), ncclSum, gc->nccl_comm, s));
            } else {
                // each owner's part to its owner, one group
                CHECK_NCCL(ncclGroupStart());
                size_t at = 0;
                for (int r = 0; r < z.world; r++) {
                    if (counts[r] > 0)
                        CHECK_NCCL(ncclReduce(buf + at, buf + at, counts[r], nccl_type_floatx(), ncclSum, r,
                                              gc->nccl_comm, s));
                    at += counts[r];
                }
                CHECK_NCCL(ncclGroupEnd());
            }
#endif
        } else {
            reduce_run_host(buf, n, counts);
        }
        size_t own_begin = (size_t)z.rank * z.shard, own_end = own_begin + z.shard;
        for (const ZeroPiece& p : run) {
            if (z.stage == 0) {
                if (copied)
                    CHECK_CUDA(cudaMemcpyAsync(model->grads + p.begin, buf + p.packed, (p.end - p.begin) * sizeof(floatX),
                                               cudaMemcpyDeviceToDevice, s));
                continue;
            }
            size_t b0 = std::max(p.begin, own_begin), e0 = std::min(p.end, own_end);
            if (b0 >= e0) continue;
            const floatX* own = buf + p.packed + (b0 - p.begin);
            if (z.stage == 1 && copied)
                CHECK_CUDA(cudaMemcpyAsync(model->grads + b0, own, (e0 - b0) * sizeof(floatX), cudaMemcpyDeviceToDevice, s));
            if (z.stage >= 2) accumulate(s, model->grad_shard + (b0 - own_begin), own, e0 - b0);
        }
        if (z.stage >= 2) CHECK_CUDA(cudaMemsetAsync(buf, 0, n * sizeof(floatX), s));  // scratch for the next micro-step
    }

    // ZeRO 3: buf holds the parts of counts[] back to back (this rank's filled in); afterwards
    // every rank holds every part. On stream s (NCCL), or through the host.
    void gather_run(floatX* buf, const std::vector<size_t>& counts, cudaStream_t s) {
        size_t n = 0, own = 0;
        for (int r = 0; r < z.world; r++) {
            if (r < z.rank) own += counts[r];
            n += counts[r];
        }
        if (gc->nccl) {
#ifdef USE_NCCL
            CHECK_NCCL(ncclGroupStart());
            size_t at = 0;
            for (int r = 0; r < z.world; r++) {
                if (counts[r] > 0)
                    CHECK_NCCL(ncclBroadcast(buf + at, buf + at, counts[r], nccl_type_floatx(), r, gc->nccl_comm, s));
                at += counts[r];
            }
            CHECK_NCCL(ncclGroupEnd());
#endif
            return;
        }
        gc->staging_x.resize(n);
        CHECK_CUDA(cudaMemcpyAsync(gc->staging_x.data() + own, buf + own, counts[z.rank] * sizeof(floatX),
                                   cudaMemcpyDeviceToHost, s));
        CHECK_CUDA(cudaStreamSynchronize(s));
        comm_all_gather_v(gc->host, gc->staging_x.data(), counts.data(), sizeof(floatX));
        CHECK_CUDA(cudaMemcpyAsync(buf, gc->staging_x.data(), n * sizeof(floatX), cudaMemcpyHostToDevice, s));
        CHECK_CUDA(cudaStreamSynchronize(s));
    }

    // ZeRO 3: this rank's part of [begin, begin + len) of the flat vector, from its slice into
    // dst (dst[0] is value `begin`), on stream s
    void copy_own_part(floatX* dst, size_t begin, size_t len, cudaStream_t s) {
        size_t own_begin = (size_t)z.rank * z.shard, own_end = own_begin + z.shard;
        size_t b0 = std::max(begin, own_begin), e0 = std::min(begin + len, own_end);
        if (b0 < e0)
            CHECK_CUDA(cudaMemcpyAsync(dst + (b0 - begin), model->param_shard + (b0 - own_begin),
                                       (e0 - b0) * sizeof(floatX), cudaMemcpyDeviceToDevice, s));
    }

    // ZeRO 3: layer l's parameters into slot s, once the main stream is past its old layer
    void gather_layer(int l, int s) {
        const CudaContext& ctx = *model->ctx;
        cudaStream_t cs = gc->nccl ? stream : ctx.stream;
        if (gc->nccl) {
            CHECK_CUDA(cudaEventRecord(pslot_free[s], ctx.stream));
            CHECK_CUDA(cudaStreamWaitEvent(stream, pslot_free[s], 0));
        }
        std::vector<ZeroPiece> pieces = zero_bucket_pieces(table, l);
        for (const ZeroPiece& p : pieces) copy_own_part(pslots[s] + p.packed, p.begin, p.end - p.begin, cs);
        gather_run(pslots[s], zero_run_counts(z, pieces), cs);
        CHECK_CUDA(cudaEventRecord(pslot_ready[s], cs));
        gathers++;
        launched = true;  // gpu_grad_sync_wait waits for it too
    }

    // ZeRO 3 (the model's ParamSource): layer l in a slot, next queued into the other
    void layer_params(int l, int next, floatX** slices) override {
        int s = pslot_layer[0] == l ? 0 : pslot_layer[1] == l ? 1 : -1;
        if (s < 0) {
            s = pslot_layer[0] == next ? 1 : 0;  // keep a slot that already holds the next layer
            pslot_layer[s] = l;
            gather_layer(l, s);
        }
        if (next >= 0 && pslot_layer[1 - s] != next) {
            pslot_layer[1 - s] = next;
            gather_layer(next, 1 - s);
            gathers_ahead++;
        }
        if (!skip_ready_wait) CHECK_CUDA(cudaStreamWaitEvent(model->ctx->stream, pslot_ready[s], 0));
        layer_slices_packed(pslots[s], table, slices);
    }

    // ZeRO 3: the parameters changed (an update, a reload): what the slots hold is stale
    void params_changed() { pslot_layer[0] = pslot_layer[1] = -1; }

    // ZeRO 3, after an update of param_shard (the main stream, with nothing else in flight):
    // the front and tail rows in model->params again, each run gathered from the owners' slices
    void gather_front_and_tail() {
        const CudaContext& ctx = *model->ctx;
        for (const std::vector<ZeroPiece>& run : zero_flat_runs(zero_bucket_pieces(table, table.L))) {
            size_t begin = run.front().begin, len = zero_run_len(run);
            floatX* buf = model->params + (begin < front_n ? begin : front_n + begin - table.tail_begin());
            copy_own_part(buf, begin, len, ctx.stream);
            gather_run(buf, zero_run_counts(z, run), ctx.stream);
        }
        params_changed();
    }

    // Bucket b across ranks: queued on the communication stream (NCCL), or done now through
    // the host. A layer bucket is packed in its slot (ZeRO 0 and 1 copy it there from
    // model->grads; ZeRO 2's backward wrote it there), the rest is in model->grads (packed
    // at ZeRO 2; else the front and the tail rows where the vector has them).
    void launch(int b) {
        const CudaContext& ctx = *model->ctx;
        const int L = table.L;
        std::vector<ZeroPiece> pieces = zero_bucket_pieces(table, b);
        cudaStream_t s = ctx.stream;
        if (gc->nccl) {
            s = stream;
            CHECK_CUDA(cudaEventRecord(ready, ctx.stream));
            CHECK_CUDA(cudaStreamWaitEvent(stream, ready, 0));
        }
        if (b < L) {
            floatX* slot = slots[b % 2];
            bool copied = z.stage < 2;
            if (copied)
                for (const ZeroPiece& p : pieces)
                    CHECK_CUDA(cudaMemcpyAsync(slot + p.packed, model->grads + p.begin, (p.end - p.begin) * sizeof(floatX),
                                               cudaMemcpyDeviceToDevice, s));
            reduce_run(slot, pieces, copied, s);
            // ZeRO 2's backward writes layer b - 2 here next; ZeRO 0 and 1 reuse it on this stream only
            CHECK_CUDA(cudaEventRecord(slot_free[b % 2], s));
        } else if (z.stage >= 2) {
            reduce_run(model->grads, pieces, false, s);
        } else {
            for (const std::vector<ZeroPiece>& run : zero_flat_runs(pieces))
                reduce_run(model->grads + run.front().begin, run, false, s);
        }
        launched = true;
    }

    void layer_grads(int l, floatX** slices) override {
        if (z.stage < 2) return layer_slices(model->grads, table, l, slices);
        // the slot's previous layer (l + 2) must be reduced and the slot zeroed first
        CHECK_CUDA(cudaStreamWaitEvent(model->ctx->stream, slot_free[l % 2], 0));
        layer_slices_packed(slots[l % 2], table, slices);
    }
    void layer_done(int l) override {
        if (communicate) launch(l);
    }
    void backward_done() override {
        if (communicate) launch(table.L);
    }
};

// Sets up the reduction for the model's ZeRO layout (several ranks, or the single-rank NCCL
// test hook) over its family's table: two bucket slots of one layer each. At ZeRO 2 and 3
// model->grads is the front rows, then the tail rows, so no rank holds a full gradient.
// grad_views[i] is where row i's gradient lives from now on, for the family's named views (at
// ZeRO 2 and 3 a per-layer row has none: the sink places the layers). ZeRO 3: model->params
// holds the front and tail rows the same way (cuda_model_init_params), param_views[i] says
// where, two parameter slots hold the gathered layers, and the model reads its layers from gs.
inline void gpu_grad_sync_init(GpuGradSync* gs, CudaModelState* model, const ParamLayout& table, GpuComm* gc,
                               floatX* grad_views[MAX_PARAM_TENSORS], floatX* param_views[MAX_PARAM_TENSORS]) {
    gs->model = model;
    gs->table = table;
    gs->gc = gc;
    gs->z = model->z;
    gs->layer_n = zero_run_len(zero_bucket_pieces(table, 0));  // one layer's values
    CHECK_CUDA(cudaStreamCreateWithFlags(&gs->stream, cudaStreamNonBlocking));
    for (cudaEvent_t* e : {&gs->ready, &gs->done, &gs->slot_free[0], &gs->slot_free[1]})
        CHECK_CUDA(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
    // the layer buckets' two slots (ZeRO 0 and 1 pack a finished layer there to send it)
    for (floatX*& s : gs->slots) {
        s = (floatX*)cuda_malloc_or_fail(gs->layer_n * sizeof(floatX), "gradient bucket slot");
        CHECK_CUDA(cudaMemset(s, 0, gs->layer_n * sizeof(floatX)));
    }
    model->grad_slots_len = 2 * gs->layer_n;
    const size_t front_n = table.front_len(), tail_n = model->num_parameters - table.tail_begin();
    gs->front_n = front_n;
    gs->tail_n = tail_n;
    // the front rows where they were, the tail rows right after them; no layer rows
    auto front_and_tail_views = [&](floatX* buf, floatX** views) {
        for (int i = 0; i < table.count; i++) {
            const size_t o = table.tensors[i].offset;
            views[i] = table.per_layer(i) ? nullptr : buf + (o < front_n ? o : front_n + o - table.tail_begin());
        }
    };
    for (int i = 0; i < table.count; i++) {
        grad_views[i] = model->grads == nullptr ? nullptr : model->grads + table.tensors[i].offset;
        param_views[i] = model->params + table.tensors[i].offset;
    }
    if (gs->z.stage >= 2) {
        if (model->grads != nullptr) CHECK_CUDA(cudaFree(model->grads));
        model->grads_len = front_n + tail_n;
        model->grads =
            (floatX*)cuda_malloc_or_fail(model->grads_len * sizeof(floatX), "gradients (front and tail rows)");
        CHECK_CUDA(cudaMemset(model->grads, 0, model->grads_len * sizeof(floatX)));
        front_and_tail_views(model->grads, grad_views);
    }
    if (gs->z.stage == 3) {
        CHECK(model->params_len == front_n + tail_n, "ZeRO 3 params: %zu values, the front and tail rows are %zu",
              model->params_len, front_n + tail_n);
        front_and_tail_views(model->params, param_views);
        for (floatX*& s : gs->pslots) {
            s = (floatX*)cuda_malloc_or_fail(gs->layer_n * sizeof(floatX), "parameter slot");
            CHECK_CUDA(cudaMemset(s, 0, gs->layer_n * sizeof(floatX)));
        }
        for (int s = 0; s < 2; s++) {
            CHECK_CUDA(cudaEventCreateWithFlags(&gs->pslot_free[s], cudaEventDisableTiming));
            CHECK_CUDA(cudaEventCreateWithFlags(&gs->pslot_ready[s], cudaEventDisableTiming));
        }
        model->param_slots_len = 2 * gs->layer_n;
        model->param_source = gs;
        gs->skip_ready_wait = getenv("GPTRAIN_TEST_ZERO3_NO_WAIT") != nullptr;
    }
}

// ZeRO 3: the whole parameter vector (n values, as the table lays them out) into out on the
// host, layer by layer through the slots: a collective (every rank gathers each layer; out may
// be nullptr on the ranks that want no copy, the others' pieces are copied in).
inline void gpu_grad_sync_download_params(GpuGradSync* gs, floatX* out) {
    const CudaContext& ctx = *gs->model->ctx;
    const ParamLayout& t = gs->table;
    std::vector<floatX> slot(out != nullptr ? gs->layer_n : 0);
    for (int l = 0; l < t.L; l++) {
        floatX* slices[MAX_PARAM_TENSORS];
        gs->layer_params(l, l + 1 < t.L ? l + 1 : -1, slices);
        if (out == nullptr) continue;
        CHECK_CUDA(cudaMemcpyAsync(slot.data(), slices[0], gs->layer_n * sizeof(floatX), cudaMemcpyDeviceToHost,
                                   ctx.stream));
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        for (const ZeroPiece& p : zero_bucket_pieces(t, l))
            std::copy(slot.begin() + p.packed, slot.begin() + p.packed + (p.end - p.begin), out + p.begin);
    }
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    if (out == nullptr) return;
    CHECK_CUDA(cudaMemcpy(out, gs->model->params, gs->front_n * sizeof(floatX), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(out + t.tail_begin(), gs->model->params + gs->front_n, gs->tail_n * sizeof(floatX),
                          cudaMemcpyDeviceToHost));
}

// After a micro-step: the main stream waits for every bucket handed out, and this host
// thread for the main stream (bounded by -pt, NCCL errors abort).
inline void gpu_grad_sync_wait(GpuGradSync* gs) {
    if (!gs->launched) return;
    const CudaContext& ctx = *gs->model->ctx;
    phase_mark(ctx, PHASE_COMM);
    if (gs->gc->nccl) {
        CHECK_CUDA(cudaEventRecord(gs->done, gs->stream));
        CHECK_CUDA(cudaStreamWaitEvent(ctx.stream, gs->done, 0));
    }
    gpu_comm_wait(gs->gc, ctx, "the gradient reduction");
    gs->launched = false;
}

inline void gpu_grad_sync_free(GpuGradSync* gs) {
    if (gs->stream == nullptr) return;
    CHECK_CUDA(cudaStreamSynchronize(gs->stream));
    for (floatX*& s : gs->slots) {
        if (s != nullptr) CHECK_CUDA(cudaFree(s));
        s = nullptr;
    }
    for (floatX*& s : gs->pslots) {
        if (s != nullptr) CHECK_CUDA(cudaFree(s));
        s = nullptr;
    }
    for (cudaEvent_t e : {gs->ready, gs->done, gs->slot_free[0], gs->slot_free[1], gs->pslot_free[0], gs->pslot_free[1],
                          gs->pslot_ready[0], gs->pslot_ready[1]})
        if (e != nullptr) CHECK_CUDA(cudaEventDestroy(e));
    if (gs->model->param_source == gs) gs->model->param_source = nullptr;
    CHECK_CUDA(cudaStreamDestroy(gs->stream));
    gs->stream = nullptr;
}
