// grad_sync_gpu.cuh: the GPU trainer's gradient reduction across ranks, bucket by bucket on a
// communication stream while the backward goes on, for any model family: it sees the family's
// table through its ParamLayout (llmc/model.h) and the buffers every family's GPU model has
// (llmc/model_cuda.cuh: CudaModelState). The CPU trainer's llmc/grad_sync.h explains the
// buckets (one per layer, then the front and tail rows: GPT-2's wte/wpe/lnf, Llama's
// wte/rmsfw/lmheadw) and how ZeRO cuts them into parts per owner; the pieces, runs and part sizes
// here are the same (llmc/zero.h: zero_bucket_pieces, zero_run_counts).
// defines: GpuGradSync, gpu_grad_sync_init, gpu_grad_sync_wait, gpu_grad_sync_free
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
#pragma once
#include <vector>

#include "common.cuh"      // defines: CudaContext, floatX, CHECK_CUDA, to_float, from_float
#include "comm_gpu.cuh"    // defines: GpuComm, gpu_comm_wait, CHECK_NCCL, nccl_type_floatx
#include "../zero.h"       // defines: ZeroLayout, ZeroPiece, zero_bucket_pieces, zero_flat_runs, zero_run_counts
#include "../model.h"      // defines: ParamLayout, GradSinkOf, layer_slices, layer_slices_packed, MAX_PARAM_TENSORS
#include "../model_cuda.cuh" // defines: CudaModelState, cuda_malloc_or_fail
#include "phases.cuh"      // defines: phase_mark (-pb 1)

struct GpuGradSync final : GradSinkOf<floatX> {
    CudaModelState* model = nullptr;
    ParamLayout table;                 // the family's table (in the model) and its layout
    GpuComm* gc = nullptr;
    ZeroLayout z;
    bool communicate = false;          // this micro-step's gradients go out (ZeRO 2: every one; else the last)
    bool launched = false;             // a bucket went out since the last gpu_grad_sync_wait
    cudaStream_t stream = nullptr;     // the communication stream (NCCL)
    cudaEvent_t ready = nullptr;       // main stream: the bucket is finished
    cudaEvent_t done = nullptr;        // communication stream: every bucket so far is reduced
    cudaEvent_t slot_free[2] = {nullptr, nullptr};  // ZeRO 2: the slot is reduced and zeroed
    floatX* slots[2] = {nullptr, nullptr};          // one layer's gradients each, packed
    size_t layer_n = 0;                // values of one layer
    std::vector<float> staging;        // host-staged: a run widened to fp32 (as a floatX
                                       // run it goes through gc->staging_x)

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
            if (z.stage == 2) accumulate(s, model->grad_shard + (b0 - own_begin), own, e0 - b0);
        }
        if (z.stage == 2) CHECK_CUDA(cudaMemsetAsync(buf, 0, n * sizeof(floatX), s));  // scratch for the next micro-step
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
            bool copied = z.stage != 2;
            if (copied)
                for (const ZeroPiece& p : pieces)
                    CHECK_CUDA(cudaMemcpyAsync(slot + p.packed, model->grads + p.begin, (p.end - p.begin) * sizeof(floatX),
                                               cudaMemcpyDeviceToDevice, s));
            reduce_run(slot, pieces, copied, s);
            // ZeRO 2's backward writes layer b - 2 here next; ZeRO 0 and 1 reuse it on this stream only
            CHECK_CUDA(cudaEventRecord(slot_free[b % 2], s));
        } else if (z.stage == 2) {
            reduce_run(model->grads, pieces, false, s);
        } else {
            for (const std::vector<ZeroPiece>& run : zero_flat_runs(pieces))
                reduce_run(model->grads + run.front().begin, run, false, s);
        }
        launched = true;
    }

    void layer_grads(int l, floatX** slices) override {
        if (z.stage != 2) return layer_slices(model->grads, table, l, slices);
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
// test hook) over its family's table: two bucket slots of one layer each. At ZeRO 2
// model->grads shrinks to the front rows, then the tail rows, so no rank holds a full gradient.
// grad_views[i] is where row i's gradient lives from now on, for the family's named views (at
// ZeRO 2 a per-layer row has none: the sink places the layers).
inline void gpu_grad_sync_init(GpuGradSync* gs, CudaModelState* model, const ParamLayout& table, GpuComm* gc,
                               floatX* grad_views[MAX_PARAM_TENSORS]) {
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
    for (int i = 0; i < table.count; i++) grad_views[i] = model->grads + table.tensors[i].offset;
    if (gs->z.stage == 2) {
        const size_t front_n = table.front_len(), tail_n = model->num_parameters - table.tail_begin();
        CHECK_CUDA(cudaFree(model->grads));
        model->grads_len = front_n + tail_n;
        model->grads =
            (floatX*)cuda_malloc_or_fail(model->grads_len * sizeof(floatX), "gradients (front and tail rows)");
        CHECK_CUDA(cudaMemset(model->grads, 0, model->grads_len * sizeof(floatX)));
        // the front rows where they were, the tail rows right after them; no layer rows
        for (int i = 0; i < table.count; i++) {
            const size_t o = table.tensors[i].offset;
            grad_views[i] =
                table.per_layer(i) ? nullptr : model->grads + (o < front_n ? o : front_n + o - table.tail_begin());
        }
    }
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
    for (cudaEvent_t e : {gs->ready, gs->done, gs->slot_free[0], gs->slot_free[1]}) CHECK_CUDA(cudaEventDestroy(e));
    CHECK_CUDA(cudaStreamDestroy(gs->stream));
    gs->stream = nullptr;
}
