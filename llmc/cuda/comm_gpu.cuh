// comm_gpu.cuh: the GPU trainer's collectives, two ways:
//   NCCL         each rank drives its own GPU (production): the parameters' in-place
//                ncclAllGather on the trainer's stream; the gradients go bucket by bucket
//                on a stream of their own (llmc/cuda/grad_sync_gpu.cuh); and llmc/comm.h's
//                host collectives (the loss and norm sums, broadcasts, barriers) become
//                NCCL's too, through a small device buffer (comm_set_engine): NCCL is the
//                GPU's one collective engine, whether MPI or the sockets started it
//   host-staged  the buffers go through host memory and MPI's collectives (llmc/comm.h):
//                for several ranks sharing one GPU (NCCL refuses two ranks on one device),
//                and for builds without NCCL; so only under mpirun. Slow, and exact in the
//                same sense.
// Both give every rank the same bits, and both leave the owned slice where ZeRO expects it.
// defines: GpuComm, gpu_comm_init, gpu_comm_single_hook, gpu_comm_free, gpu_all_gather, gpu_comm_wait,
//          nccl_type_floatx, CHECK_NCCL, gpu_all_reduce_sum, gpu_all_reduce_max_u32 (fp8's amaxes),
//          gpu_all_gather_f32 (-tp), gpu_all_gather_x,
//          gpu_reduce_scatter_sum (-sp), gpu_send, gpu_recv, gpu_group_begin, gpu_group_end (-pp)
//
// No wait is unbounded: gpu_comm_wait polls the stream, NCCL's asynchronous error state and
// the clock; a collective that has not finished within -pt seconds (a rank hung or died)
// aborts the NCCL communicator and stops this process with an error.
#pragma once
#include <algorithm>
#include <vector>
#ifdef USE_NCCL
#include <nccl.h>
#endif

#include "common.cuh"     // defines: CudaContext, floatX, CHECK_CUDA, to_float, from_float
#include "../comm.h"      // defines: Comm, CommEngine, comm_set_engine, comm_exchange, comm_all_gather, comm_clock_

#ifdef USE_NCCL
#define CHECK_NCCL(call)                                                                          \
    do {                                                                                          \
        ncclResult_t nccl_result_ = (call);                                                       \
        if (nccl_result_ != ncclSuccess) {                                                        \
            fprintf(stderr, "%s:%d: NCCL error in %s: %s\n", __FILE__, __LINE__, #call,           \
                    ncclGetErrorString(nccl_result_));                                            \
            exit(EXIT_FAILURE);                                                                   \
        }                                                                                         \
    } while (0)
#endif

struct GpuComm {
    Comm* host = nullptr;
    const CudaContext* ctx = nullptr; // its stream runs the host collectives' NCCL calls
    bool nccl = false;                // false: host-staged
#ifdef USE_NCCL
    ncclComm_t nccl_comm = nullptr;
#endif
    std::vector<floatX> staging_x;    // host-staged: the buffer as the device holds it
    char* device_bytes = nullptr;     // NCCL: where llmc/comm.h's host collectives go through
    size_t device_bytes_size = 0;
};

// TEST HOOK: GPTRAIN_NCCL_SINGLE=1 asks one process to go through NCCL anyway (and to keep
// its -z, train_gpt.cu), so a single GPU can run the NCCL path: over one rank it must change
// nothing.
inline bool gpu_comm_single_hook() {
    const char* single = getenv("GPTRAIN_NCCL_SINGLE");
    return single != nullptr && strcmp(single, "1") == 0;
}

#ifdef USE_NCCL
inline ncclDataType_t nccl_type_floatx() { return sizeof(floatX) == 2 ? ncclBfloat16 : ncclFloat; }
#endif

// Waits for the stream's queued work (the collectives among it). With NCCL: gives up after
// -pt seconds, or at once on an asynchronous NCCL error, aborting the communicator.
inline void gpu_comm_wait(GpuComm* gc, const CudaContext& ctx, const char* what) {
    if (!gc->nccl) {
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        return;
    }
#ifdef USE_NCCL
    double start = comm_clock_();
    for (;;) {
        cudaError_t q = cudaStreamQuery(ctx.stream);
        if (q == cudaSuccess) return;
        if (q != cudaErrorNotReady) CHECK_CUDA(q);
        ncclResult_t async_err = ncclSuccess;
        CHECK_NCCL(ncclCommGetAsyncError(gc->nccl_comm, &async_err));
        if (async_err != ncclSuccess) {
            ncclCommAbort(gc->nccl_comm);
            fail("rank %d: NCCL failed during %s (%s): another rank died or the network failed; stopping",
                 gc->host->rank, what, ncclGetErrorString(async_err));
        }
        if (comm_clock_() - start > gc->host->timeout_s) {
            ncclCommAbort(gc->nccl_comm);
            fail("rank %d: %s did not complete within -pt %.0f s: another rank hung or died; stopping",
                 gc->host->rank, what, gc->host->timeout_s);
        }
        usleep(100);
    }
#endif
}

#ifdef USE_NCCL
// llmc/comm.h's host collectives through NCCL (CommEngine): the host bytes go to a device
// buffer, NCCL runs on the trainer's stream, and the bytes come back once gpu_comm_wait saw
// it finish (waiting with -pt and NCCL's error polling, not in a blocking copy).
inline char* gpu_comm_device_bytes_(GpuComm* gc, size_t bytes) {
    if (bytes > gc->device_bytes_size) {
        if (gc->device_bytes != nullptr) CHECK_CUDA(cudaFree(gc->device_bytes));
        CHECK_CUDA(cudaMalloc(&gc->device_bytes, bytes));
        gc->device_bytes_size = bytes;
    }
    return gc->device_bytes;
}

inline void gpu_comm_host_all_gather_(void* self, void* buf, size_t bytes) {
    GpuComm* gc = (GpuComm*)self;
    const int rank = gc->host->rank;
    const size_t total = bytes * gc->host->world;
    cudaStream_t stream = gc->ctx->stream;
    char* d = gpu_comm_device_bytes_(gc, total);
    char* h = (char*)buf;
    CHECK_CUDA(cudaMemcpyAsync(d + rank * bytes, h + rank * bytes, bytes, cudaMemcpyHostToDevice, stream));
    CHECK_NCCL(ncclAllGather(d + rank * bytes, d, bytes, ncclUint8, gc->nccl_comm, stream));
    gpu_comm_wait(gc, *gc->ctx, "an all-gather of host values");
    CHECK_CUDA(cudaMemcpyAsync(h, d, total, cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
}

inline void gpu_comm_host_broadcast_(void* self, void* buf, size_t bytes, int root) {
    GpuComm* gc = (GpuComm*)self;
    if (bytes == 0) return;
    cudaStream_t stream = gc->ctx->stream;
    char* d = gpu_comm_device_bytes_(gc, bytes);
    if (gc->host->rank == root) CHECK_CUDA(cudaMemcpyAsync(d, buf, bytes, cudaMemcpyHostToDevice, stream));
    CHECK_NCCL(ncclBroadcast(d, d, bytes, ncclUint8, root, gc->nccl_comm, stream));
    gpu_comm_wait(gc, *gc->ctx, "a broadcast of host values");
    CHECK_CUDA(cudaMemcpyAsync(buf, d, bytes, cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
}
#endif

// want_nccl: the ranks each have their own GPU (the caller decides; all ranks must agree).
// One process needs no communicator, unless gpu_comm_single_hook() asks for one. With NCCL up,
// llmc/comm.h's collectives run on it from here on.
inline void gpu_comm_init(GpuComm* gc, Comm* host, const CudaContext* ctx, bool want_nccl) {
    gc->host = host;
    gc->ctx = ctx;
    gc->nccl = false;
    if ((host->world == 1 && !gpu_comm_single_hook()) || !want_nccl) return;
#ifdef USE_NCCL
    // NCCL's bootstrap address, rank 0's, to every rank: through MPI or the sockets
    ncclUniqueId id;
    memset(&id, 0, sizeof(id));
    if (host->rank == 0) CHECK_NCCL(ncclGetUniqueId(&id));
    std::vector<ncclUniqueId> ids(host->world);
    comm_exchange(host, &id, sizeof(id), ids.data());
    CHECK_NCCL(ncclCommInitRank(&gc->nccl_comm, host->world, ids[0], host->rank));
    gc->nccl = true;
    CommEngine e;
    e.name = "NCCL";
    e.self = gc;
    e.all_gather = gpu_comm_host_all_gather_;
    e.broadcast = gpu_comm_host_broadcast_;
    comm_set_engine(host, e);
#endif
}

inline void gpu_comm_free(GpuComm* gc) {
    if (gc->host != nullptr && gc->nccl) comm_set_engine(gc->host, CommEngine());
#ifdef USE_NCCL
    if (gc->nccl) CHECK_NCCL(ncclCommDestroy(gc->nccl_comm));
#endif
    if (gc->device_bytes != nullptr) CHECK_CUDA(cudaFree(gc->device_bytes));
    gc->device_bytes = nullptr;
    gc->device_bytes_size = 0;
    gc->nccl = false;
}

// In place: every rank's slice of buf (world*shard values) to every rank.
inline void gpu_all_gather(GpuComm* gc, const CudaContext& ctx, floatX* buf, size_t shard) {
    Comm* c = gc->host;
    if (c->world == 1 && !gc->nccl) return;
    if (gc->nccl) {
#ifdef USE_NCCL
        CHECK_NCCL(ncclAllGather(buf + (size_t)c->rank * shard, buf, shard, nccl_type_floatx(), gc->nccl_comm,
                                 ctx.stream));
#endif
        return;
    }
    size_t total = shard * c->world, o = (size_t)c->rank * shard;
    gc->staging_x.resize(total);
    CHECK_CUDA(cudaMemcpyAsync(gc->staging_x.data() + o, buf + o, shard * sizeof(floatX), cudaMemcpyDeviceToHost,
                               ctx.stream));
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    comm_all_gather(c, gc->staging_x.data(), shard, sizeof(floatX));
    CHECK_CUDA(cudaMemcpyAsync(buf, gc->staging_x.data(), total * sizeof(floatX), cudaMemcpyHostToDevice, ctx.stream));
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
}

// -tp: x (n floatX, device) := the sum over the group's ranks, in place, queued on the stream
// (NCCL: every rank gets the same bits). A tensor-parallel group always has NCCL (train_gpt.cu).
inline void gpu_all_reduce_sum(GpuComm* gc, const CudaContext& ctx, floatX* x, size_t n) {
    CHECK(gc->nccl, "a tensor-parallel all-reduce needs NCCL");
#ifdef USE_NCCL
    CHECK_NCCL(ncclAllReduce(x, x, n, nccl_type_floatx(), ncclSum, gc->nccl_comm, ctx.stream));
#endif
}

// x (n uint32, device) := the elementwise maximum over the ranks, in place. For train_gpt_fp8's
// amaxes, sent as the bits of non-negative floats: their order as integers is the floats' order,
// with every NaN above infinity, so the maximum is exact, the same whatever the order of the
// ranks, and a NaN on any rank reaches every rank (a float max may drop it). NCCL: queued on the
// stream; host-staged: through the host, returning when done. One rank without NCCL: nothing.
inline void gpu_all_reduce_max_u32(GpuComm* gc, const CudaContext& ctx, uint32_t* x, size_t n) {
    Comm* c = gc->host;
    if ((c->world == 1 && !gc->nccl) || n == 0) return;
    if (gc->nccl) {
#ifdef USE_NCCL
        CHECK_NCCL(ncclAllReduce(x, x, n, ncclUint32, ncclMax, gc->nccl_comm, ctx.stream));
#endif
        return;
    }
    std::vector<uint32_t> all(n * c->world);
    CHECK_CUDA(cudaMemcpyAsync(all.data() + (size_t)c->rank * n, x, n * sizeof(uint32_t), cudaMemcpyDeviceToHost,
                               ctx.stream));
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    comm_all_gather(c, all.data(), n, sizeof(uint32_t));
    for (int r = 1; r < c->world; r++)
        for (size_t i = 0; i < n; i++) all[i] = std::max(all[i], all[(size_t)r * n + i]);
    CHECK_CUDA(cudaMemcpyAsync(x, all.data(), n * sizeof(uint32_t), cudaMemcpyHostToDevice, ctx.stream));
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
}

// -tp: all (world x n floats, device) := every rank's n floats, rank r's at all + r n (each rank's
// own already there: in place), queued on the stream
inline void gpu_all_gather_f32(GpuComm* gc, const CudaContext& ctx, float* all, size_t n) {
    CHECK(gc->nccl, "a tensor-parallel all-gather needs NCCL");
#ifdef USE_NCCL
    CHECK_NCCL(ncclAllGather(all + (size_t)gc->host->rank * n, all, n, ncclFloat, gc->nccl_comm, ctx.stream));
#endif
}

// -sp: all (world x n floatX, device) := every rank's mine (n values), in rank order; and the
// other way, mine (n) := the group's sum of part `rank` of every rank's all (world x n). Queued
// on the stream.
inline void gpu_all_gather_x(GpuComm* gc, const CudaContext& ctx, const floatX* mine, floatX* all, size_t n) {
    CHECK(gc->nccl, "a sequence-parallel all-gather needs NCCL");
#ifdef USE_NCCL
    CHECK_NCCL(ncclAllGather(mine, all, n, nccl_type_floatx(), gc->nccl_comm, ctx.stream));
#endif
}
inline void gpu_reduce_scatter_sum(GpuComm* gc, const CudaContext& ctx, const floatX* all, floatX* mine, size_t n) {
    CHECK(gc->nccl, "a sequence-parallel reduce-scatter needs NCCL");
#ifdef USE_NCCL
    CHECK_NCCL(ncclReduceScatter(all, mine, n, nccl_type_floatx(), ncclSum, gc->nccl_comm, ctx.stream));
#endif
}

// -pp: a stage's activations to the next stage, their gradients back: NCCL's point-to-point
// calls, queued on the stream. A send completes only when its peer's receive is posted, so the
// trainer puts the sends and receives of one round of its schedule in one group
// (gpu_group_begin/end; llmc/pipeline.h: pipeline_rounds): two stages each sending to the other
// first would otherwise wait for ever.
inline void gpu_send(GpuComm* gc, const CudaContext& ctx, const floatX* x, size_t n, int peer) {
    CHECK(gc->nccl, "a pipeline send needs NCCL");
#ifdef USE_NCCL
    CHECK_NCCL(ncclSend(x, n, nccl_type_floatx(), peer, gc->nccl_comm, ctx.stream));
#endif
}
inline void gpu_recv(GpuComm* gc, const CudaContext& ctx, floatX* x, size_t n, int peer) {
    CHECK(gc->nccl, "a pipeline receive needs NCCL");
#ifdef USE_NCCL
    CHECK_NCCL(ncclRecv(x, n, nccl_type_floatx(), peer, gc->nccl_comm, ctx.stream));
#endif
}
inline void gpu_group_begin() {
#ifdef USE_NCCL
    CHECK_NCCL(ncclGroupStart());
#endif
}
inline void gpu_group_end() {
#ifdef USE_NCCL
    CHECK_NCCL(ncclGroupEnd());
#endif
}
