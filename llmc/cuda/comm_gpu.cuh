// comm_gpu.cuh: the ZeRO collectives on device buffers (llmc/zero.h's layout), two ways:
//   NCCL         each rank drives its own GPU (production): the parameters' in-place
//                ncclAllGather on the trainer's stream; the gradients go bucket by bucket
//                on a stream of their own (llmc/cuda/grad_sync_gpu.cuh)
//   host-staged  the buffers go through host memory and llmc/comm.h's collectives (MPI or
//                sockets): for several ranks sharing one GPU (NCCL refuses two ranks on one
//                device), and for builds without NCCL. Slow, and exact in the same sense.
// Both give every rank the same bits, and both leave the owned slice where ZeRO expects it.
// defines: GpuComm, gpu_comm_init, gpu_comm_single_hook, gpu_comm_free, gpu_all_gather, gpu_comm_wait,
//          shard_accumulate, nccl_type_floatx, CHECK_NCCL
//
// No wait is unbounded: gpu_comm_wait polls the stream, NCCL's asynchronous error state and
// the clock; a collective that has not finished within -pt seconds (a rank hung or died)
// aborts the NCCL communicator and stops this process with an error.
#pragma once
#include <vector>
#ifdef USE_NCCL
#include <nccl.h>
#endif

#include "common.cuh"     // defines: CudaContext, floatX, CHECK_CUDA, to_float, from_float
#include "../comm.h"      // defines: Comm, comm_all_gather, comm_clock_

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
    bool nccl = false;                // false: host-staged
#ifdef USE_NCCL
    ncclComm_t nccl_comm = nullptr;
#endif
    std::vector<floatX> staging_x;    // host-staged: the buffer as the device holds it
};

// TEST HOOK: GPTRAIN_NCCL_SINGLE=1 asks one process to go through NCCL anyway (and to keep
// its -z, train_gpt.cu), so a single GPU can run the NCCL path: over one rank it must change
// nothing.
inline bool gpu_comm_single_hook() {
    const char* single = getenv("GPTRAIN_NCCL_SINGLE");
    return single != nullptr && strcmp(single, "1") == 0;
}

// want_nccl: the ranks each have their own GPU (the caller decides; all ranks must agree).
// One process needs no communicator, unless gpu_comm_single_hook() asks for one.
inline void gpu_comm_init(GpuComm* gc, Comm* host, bool want_nccl) {
    gc->host = host;
    gc->nccl = false;
    if ((host->world == 1 && !gpu_comm_single_hook()) || !want_nccl) return;
#ifdef USE_NCCL
    ncclUniqueId id;
    if (host->rank == 0) CHECK_NCCL(ncclGetUniqueId(&id));
    comm_broadcast(host, &id, sizeof(id), 0);  // NCCL's bootstrap address, through MPI or the sockets
    CHECK_NCCL(ncclCommInitRank(&gc->nccl_comm, host->world, id, host->rank));
    gc->nccl = true;
#endif
}

inline void gpu_comm_free(GpuComm* gc) {
#ifdef USE_NCCL
    if (gc->nccl) CHECK_NCCL(ncclCommDestroy(gc->nccl_comm));
#endif
    gc->nccl = false;
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

// ZeRO 2: acc[i] += src[i] (the owned slice of one micro-step's reduced gradient), in fp32.
__global__ void shard_accumulate_kernel(floatX* acc, const floatX* src, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) acc[i] = from_float<floatX>(to_float(acc[i]) + to_float(src[i]));
}

// On the given stream: the gradient reduction's (llmc/cuda/grad_sync_gpu.cuh), not always ctx's.
inline void shard_accumulate(cudaStream_t stream, floatX* acc, const floatX* src, size_t n) {
    if (n == 0) return;
    const int block = 256;
    shard_accumulate_kernel<<<(unsigned)ceil_div(n, block), block, 0, stream>>>(acc, src, n);
    CHECK_LAUNCH();
}
