// grad_sync.h: the CPU trainer's gradient reduction across ranks, bucket by bucket while the
// backward goes on (data parallelism with overlap, as PyTorch's DDP and llm.c do it).
// defines: GradSync, grad_sync_init, grad_sync_wait, grad_sync_report, grad_sync_free,
//          grad_sync_grads_len, grad_sync_grad_floats, grad_sync_param_floats
//
// The backward finishes the layers from the last to the first (llmc/model.h: the backward
// tells its GradSink, whatever the family), then the front and tail rows together (GPT-2's
// wte, wpe, lnfw, lnfb; Llama's wte, rmsfw, lmheadw). So the buckets are: bucket l is layer
// l's slices of the per-layer rows, bucket L is the rest. As soon as a bucket is complete it goes to
// a worker thread, which reduces it (llmc/comm.h, MPI or sockets) while the main thread runs
// the backward of the layers below; the loop waits for the last bucket before the norm.
//
// A bucket's tensor slices are pieces of the flat vector, stored back to back in a slot (a
// run). ZeRO (llmc/zero.h) cuts the flat vector into consecutive rank slices and the pieces
// are in flat order, so the run is consecutive parts owned by rank 0, 1, ... (a layer's
// pieces mostly lie in one or two slices): one reduce-scatter with those part sizes hands
// each owner the sum of its part, as the one big reduce-scatter over the vector would, in one
// collective per bucket.
//   ZeRO 0  the parts are all-gathered back, and the run copied back into model->grads
//   ZeRO 1  the owner copies its sums back into model->grads; the rest of it is scratch
//   ZeRO 2  every micro-step, the owner adds its sums into the slice accumulator; the layer
//           gradients never exist in full: the backward writes layer l straight into one of
//           the two slots (the other is being reduced), and model->grads holds only the rest
//   ZeRO 3  as ZeRO 2, and the layers' parameters never exist in full either: each rank keeps
//           its slice of them (param_shard, what its AdamW updates) and the model only the
//           front and tail rows (all-gathered after each update). The forward and the backward
//           ask for each layer (the model's ParamSource): its pieces are all-gathered into one
//           of two parameter slots, the next layer's into the other while this one runs, on the
//           same worker and queue as the reductions. A slot keeps its layer until it is
//           needed for another, so the backward starts with the forward's last two layers and
//           the next micro-step's forward with the backward's last two: 2L - 2 gathers per
//           micro-step, each one layer's parameters, each sent once by its owners.
// Every collective runs in the same order on every rank (the order the main thread queues
// them, which is the program's), so the ranks pair up, and the sums come out in the same bits
// on every run; a gather copies values, so ZeRO 3 trains in ZeRO 2's bits whatever the timing.
#pragma once
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "families.h"  // defines: ModelBase, GradSink, ParamLayout, layer_slices, layer_slices_packed, model_bind_grads
#include "zero.h"  // defines: ZeroLayout, ZeroPiece, zero_bucket_pieces, zero_flat_runs, zero_run_counts
#include "comm.h"  // defines: Comm, comm_reduce_scatter_v_f32, comm_all_gather_v, comm_clock_

struct GradSync final : GradSink, ParamSource {
    ModelBase* model = nullptr;
    Comm* comm = nullptr;
    ZeroLayout z;
    float* grad_shard = nullptr;  // ZeRO 2, 3: the owned slice's gradient, summed over ranks and micro-steps
    bool communicate = false;     // this micro-step's gradients go out (ZeRO 2, 3: every one; else the last)
    // two slots of one layer's layer_n values; ZeRO 2's backward writes layer slot_layer[s]
    // into slot s (-1: free), and model->grads holds only the front rows then the tail rows
    size_t layer_n = 0, front_n = 0, tail_n = 0;
    float* slots[2] = {nullptr, nullptr};
    int slot_layer[2] = {-1, -1};
    // ZeRO 3: the owned slice of the parameters (shard values, padded), and two slots of one
    // layer's values; pslot_layer[s]: the layer slot s holds, or will once its gathers are done
    // (pslot_pending[s] of them queued; -1: nothing valid)
    float* param_shard = nullptr;
    float* pslots[2] = {nullptr, nullptr};
    int pslot_layer[2] = {-1, -1};
    int pslot_pending[2] = {0, 0};
    // the worker: jobs waiting (bucket b >= 0 to reduce, or a layer to gather into a slot), and
    // how many were handed over and are not done
    struct Job {
        int bucket;      // -1: a gather
        int layer, slot;
    };
    bool threaded = false;
    std::thread worker;
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Job> queue;
    int pending = 0;
    bool stop = false;
    bool in_backward = false;      // between the first layer_done and backward_done of a micro-step
    long long buckets_reduced = 0, started_in_backward = 0;  // for grad_sync_report
    long long gathers = 0, gathers_ahead = 0;  // ZeRO 3: layer gathers, and those queued before the layer was asked for

    // Bucket b across ranks (on the worker, or inline without one): a layer bucket packed in
    // its slot (ZeRO 0 and 1 copy it there from model->grads; ZeRO 2's backward wrote it
    // there), the rest in model->grads (packed at ZeRO 2; else the front and the tail where
    // the vector has them). One collective per run of pieces stored back to back.
    void reduce_bucket(int b) {
        const int L = model->num_layers;
        std::vector<ZeroPiece> pieces = zero_bucket_pieces(model->layout(), b);
        if (b < L) {
            float* slot = slots[b % 2];
            bool copied = z.stage < 2;
            if (copied)
                for (const ZeroPiece& p : pieces)
                    memcpy(slot + p.packed, model->grads + p.begin, (p.end - p.begin) * sizeof(float));
            reduce_run(slot, pieces, copied);
        } else if (z.stage >= 2) {
            reduce_run(model->grads, pieces, false);
        } else {
            for (const std::vector<ZeroPiece>& run : zero_flat_runs(pieces))
                reduce_run(model->grads + run.front().begin, run, false);
        }
    }

    // One run: buf holds its pieces at their packed places; copied: a copy of model->grads,
    // where the sums go back. Afterwards ZeRO 0 has every sum, ZeRO 1 the owned ones in
    // model->grads, ZeRO 2 the owned ones added into the slice accumulator and buf zeroed.
    void reduce_run(float* buf, const std::vector<ZeroPiece>& run, bool copied) {
        std::vector<size_t> counts = zero_run_counts(z, run);
        comm_reduce_scatter_v_f32(comm, buf, counts.data());
        if (z.stage == 0) comm_all_gather_v(comm, buf, counts.data(), sizeof(float));
        size_t own_begin = (size_t)z.rank * z.shard, own_end = own_begin + z.shard;
        for (const ZeroPiece& p : run) {
            if (z.stage == 0) {
                if (copied) memcpy(model->grads + p.begin, buf + p.packed, (p.end - p.begin) * sizeof(float));
                continue;
            }
            size_t b0 = std::max(p.begin, own_begin), e0 = std::min(p.end, own_end);
            if (b0 >= e0) continue;
            const float* own = buf + p.packed + (b0 - p.begin);
            if (z.stage == 1 && copied) memcpy(model->grads + b0, own, (e0 - b0) * sizeof(float));
            if (z.stage >= 2)
                for (size_t x = b0; x < e0; x++) grad_shard[x - own_begin] += own[x - b0];
        }
        if (z.stage >= 2) memset(buf, 0, zero_run_len(run) * sizeof(float));  // scratch for the next micro-step
    }

    // ZeRO 3: layer l's parameters into slot s: this rank's part of each piece from its slice,
    // then one all-gather of the run (its parts are in rank order, as reduce_run's are)
    void gather_layer(int l, int s) {
        std::vector<ZeroPiece> pieces = zero_bucket_pieces(model->layout(), l);
        size_t own_begin = (size_t)z.rank * z.shard, own_end = own_begin + z.shard;
        for (const ZeroPiece& p : pieces) {
            size_t b0 = std::max(p.begin, own_begin), e0 = std::min(p.end, own_end);
            if (b0 < e0) memcpy(pslots[s] + p.packed + (b0 - p.begin), param_shard + (b0 - own_begin), (e0 - b0) * sizeof(float));
        }
        std::vector<size_t> counts = zero_run_counts(z, pieces);
        comm_all_gather_v(comm, pslots[s], counts.data(), sizeof(float));
    }

    void run_job(const Job& j) {
        if (j.bucket >= 0) reduce_bucket(j.bucket);
        else gather_layer(j.layer, j.slot);
    }

    void worker_run() {
        std::unique_lock<std::mutex> lock(mu);
        for (;;) {
            cv.wait(lock, [&] { return stop || !queue.empty(); });
            if (stop) return;
            Job j = queue.front();
            queue.pop_front();
            if (in_backward && j.bucket >= 0) started_in_backward++;
            lock.unlock();
            run_job(j);
            lock.lock();
            job_done(j);
            pending--;
            cv.notify_all();
        }
    }

    // a job is done: a bucket counted and its ZeRO 2/3 slot free again, a gather's slot one
    // step nearer ready (the caller holds mu, or there is no worker)
    void job_done(const Job& j) {
        if (j.bucket < 0) {
            if (threaded) pslot_pending[j.slot]--;
            return;
        }
        buckets_reduced++;
        if (z.stage >= 2 && j.bucket < model->num_layers) slot_layer[j.bucket % 2] = -1;
    }

    void launch(const Job& j) {
        if (!threaded) {
            run_job(j);
            job_done(j);
            return;
        }
        std::lock_guard<std::mutex> lock(mu);
        queue.push_back(j);
        pending++;
        if (j.bucket < 0) pslot_pending[j.slot]++;
        cv.notify_all();
    }
    void launch(int b) { launch(Job{b, -1, -1}); }

    // ZeRO 3 (the model's ParamSource): layer l in a slot, and next queued into the other.
    // Only this (main) thread sets pslot_layer, so it reads it without the lock.
    void layer_params(int l, int next, float** slices) override {
        int s = pslot_layer[0] == l ? 0 : pslot_layer[1] == l ? 1 : -1;
        if (s < 0) {
            s = pslot_layer[0] == next ? 1 : 0;  // keep a slot that already holds the next layer
            pslot_layer[s] = l;
            gathers++;
            launch(Job{-1, l, s});
        }
        if (next >= 0 && pslot_layer[1 - s] != next) {
            pslot_layer[1 - s] = next;
            gathers++;
            gathers_ahead++;
            launch(Job{-1, next, 1 - s});
        }
        if (threaded) {
            std::unique_lock<std::mutex> lock(mu);
            cv.wait(lock, [&] { return pslot_pending[s] == 0; });
        }
        layer_slices_packed(pslots[s], model->layout(), slices);
    }

    // waits until every job handed over so far is done
    void wait_idle() {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return pending == 0; });
    }

    // ZeRO 3: the parameters changed (an update, a reload): what the slots hold is stale
    void params_changed() {
        wait_idle();
        pslot_layer[0] = pslot_layer[1] = -1;
    }

    // ZeRO 3, after an update of param_shard: the front and tail rows in the model again, each
    // run all-gathered from the owners' slices (the main thread, with the worker idle)
    void gather_front_and_tail() {
        const ParamLayout table = model->layout();
        size_t own_begin = (size_t)z.rank * z.shard, own_end = own_begin + z.shard;
        for (const std::vector<ZeroPiece>& run : zero_flat_runs(zero_bucket_pieces(table, model->num_layers))) {
            size_t begin = run.front().begin, len = zero_run_len(run);
            float* buf = model->params + (begin < front_n ? begin : front_n + begin - table.tail_begin());
            size_t b0 = std::max(begin, own_begin), e0 = std::min(begin + len, own_end);
            if (b0 < e0) memcpy(buf + (b0 - begin), param_shard + (b0 - own_begin), (e0 - b0) * sizeof(float));
            std::vector<size_t> counts = zero_run_counts(z, run);
            comm_all_gather_v(comm, buf, counts.data(), sizeof(float));
        }
        params_changed();
    }

    void layer_grads(int l, float** slices) override {
        if (z.stage < 2) return layer_slices(model->grads, model->layout(), l, slices);
        // the slot's previous layer (l + 2) must be reduced and the slot zeroed before it is reused
        int s = l % 2;
        {
            std::unique_lock<std::mutex> lock(mu);
            cv.wait(lock, [&] { return slot_layer[s] < 0; });
            slot_layer[s] = l;
        }
        layer_slices_packed(slots[s], model->layout(), slices);
    }
    void layer_done(int l) override {
        if (!communicate) return;
        {
            std::lock_guard<std::mutex> lock(mu);
            in_backward = true;
        }
        launch(l);
    }
    void backward_done() override {
        {
            std::lock_guard<std::mutex> lock(mu);
            in_backward = false;
        }
        if (communicate) launch(model->num_layers);
    }
};

// Sets up the reduction for z (world > 1) over the model's gradient buffer (z.padded floats;
// ZeRO 2 and 3: none, it makes one for the front and tail rows only, beside the two layer
// slots). ZeRO 3: the model's parameter buffer holds the front rows then the tail rows, and
// param_shard (z.shard floats) this rank's slice (train_load_model_ranges loads them so); the
// model reads its layers from gs from then on.
inline void grad_sync_init(GradSync* gs, ModelBase* model, Comm* comm, const ZeroLayout& z, float* grad_shard,
                           float* param_shard = nullptr) {
    gs->model = model;
    gs->comm = comm;
    gs->z = z;
    gs->grad_shard = grad_shard;
    gs->param_shard = param_shard;
    const ParamLayout table = model->layout();
    gs->layer_n = zero_run_len(zero_bucket_pieces(table, 0));  // one layer's values
    gs->front_n = table.front_len();
    gs->tail_n = model->num_parameters - table.tail_begin();
    // the layer buckets' two slots (ZeRO 0 and 1 pack a finished layer there to send it)
    for (float*& s : gs->slots) {
        s = (float*)xmalloc(gs->layer_n * sizeof(float));
        memset(s, 0, gs->layer_n * sizeof(float));
    }
    // the front rows where they were, the tail rows right after them; no layer rows
    auto front_and_tail_views = [&](float* buf, float** views) {
        for (int i = 0; i < table.count; i++) {
            const size_t o = table.tensors[i].offset;
            views[i] = table.per_layer(i) ? nullptr : buf + (o < gs->front_n ? o : gs->front_n + o - table.tail_begin());
        }
    };
    if (z.stage >= 2) {
        free(model->grads);
        model->grads = xcalloc_floats(gs->front_n + gs->tail_n);
        float* views[MAX_PARAM_TENSORS] = {};
        front_and_tail_views(model->grads, views);
        model_bind_grads(model, views);
    }
    if (z.stage == 3) {
        float* views[MAX_PARAM_TENSORS] = {};
        front_and_tail_views(model->params, views);
        model_bind_params(model, views);
        for (float*& s : gs->pslots) s = xcalloc_floats(gs->layer_n);
        model->param_source = gs;
    }
    gs->threaded = comm->threads_ok;
    if (gs->threaded) gs->worker = std::thread(&GradSync::worker_run, gs);
}

// The length of model->grads: the whole padded vector, or at ZeRO 2 and 3 the front and tail rows.
inline size_t grad_sync_grads_len(const GradSync* gs) {
    return gs->z.stage >= 2 ? gs->front_n + gs->tail_n : gs->z.padded;
}

// Values held for parameters: the whole padded vector, or at ZeRO 3 the front and tail rows,
// the two layer slots and the owned slice.
inline size_t grad_sync_param_floats(const GradSync* gs) {
    return gs->z.stage == 3 ? gs->front_n + gs->tail_n + 2 * gs->layer_n + gs->z.shard : gs->z.padded;
}

// Values held for gradients besides ZeRO 2's slice accumulator: model->grads and the slots.
inline size_t grad_sync_grad_floats(const GradSync* gs) { return grad_sync_grads_len(gs) + 2 * gs->layer_n; }

// Waits until every bucket handed over so far is reduced.
inline void grad_sync_wait(GradSync* gs) { gs->wait_idle(); }

// One line on the overlap: how many bucket reductions started while the backward still ran.
inline void grad_sync_report(GradSync* gs) {
    if (gs->buckets_reduced == 0) return;
    printf("gradient buckets: %lld reduced, %lld of them started while the backward was still running%s\n",
           gs->buckets_reduced, gs->started_in_backward, gs->threaded ? "" : " (no worker thread: MPI is not threaded)");
    if (gs->z.stage == 3)
        printf("parameter gathers (ZeRO 3): %lld layers, %lld of them queued while the layer before ran\n", gs->gathers,
               gs->gathers_ahead);
}

inline void grad_sync_free(GradSync* gs) {
    if (gs->worker.joinable()) {
        {
            std::lock_guard<std::mutex> lock(gs->mu);
            gs->stop = true;
        }
        gs->cv.notify_all();
        gs->worker.join();
    }
    for (float*& s : gs->slots) {
        free(s);
        s = nullptr;
    }
    for (float*& s : gs->pslots) {
        free(s);
        s = nullptr;
    }
    if (gs->model != nullptr && gs->model->param_source == gs) gs->model->param_source = nullptr;
}
