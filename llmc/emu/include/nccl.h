// nccl.h (emulated): the part of NCCL's API gptrain uses, with NCCL 2.x's names, signatures
// and enum values, so llmc/cuda/comm_gpu.cuh and grad_sync_gpu.cuh compile unchanged against
// the emulated GPU (llmc/emu/emu.h). llmc/emu/nccl.cpp and nccl_p2p.cpp implement it for
// the processes of one machine, over POSIX shared memory, as NCCL's own SHM transport does
// within a node:
//   - ncclGetUniqueId names a fresh shared memory segment; ncclCommInitRank meets the other
//     ranks there, blocking until all nranks arrived (at most 120 s, or EMU_NCCL_TIMEOUT_S);
//     the segment's name is unlinked once all have, so nothing is left in /dev/shm;
//   - each collective is queued on its stream (emu::stream_enqueue) and, when the stream runs
//     it, meets the other ranks' collective of the same sequence number; they must agree on
//     the operation, count, type, reduction and root, else the communicator's asynchronous
//     error becomes ncclInvalidUsage. Buffers must be cudaMalloc memory (ncclInvalidArgument);
//   - reductions of floating point types are computed in fp32 (fp64 for ncclFloat64) in rank
//     order 0..n-1 and rounded once to the buffer's type, so every rank gets the same bits;
//     NCCL's own order and precision differ (a ring, in the buffer's type): the emulation is
//     exact in its own sense, not bit-equal to real NCCL;
//   - buffers go through staging in the segment, per rank two halves of EMU_NCCL_CHUNK_BYTES
//     (default 4 MiB; the first rank halves it until the segment fits in half of /dev/shm's
//     free space), so memory stays bounded whatever the count;
//   - ncclSend and ncclRecv: the k-th send from rank s to rank r matches the k-th receive on r
//     from s (counted per pair, in the order issued, as NCCL matches them). Both must give
//     the same count and type, else both sides' asynchronous error becomes ncclInvalidUsage
//     before any data moves. A send completes only once its receive is posted (NCCL does
//     not promise to buffer one either), so two ungrouped sends that each wait for the other
//     rank's later receive wait until the timeout below instead of passing by luck; messages
//     go through two slots per ordered pair in the segment, each 1/(2 nranks) of a staging
//     half and at least 4 KiB;
//   - ncclGroupStart/End: collectives inside a group are queued at once, in the order issued.
//     All ranks issue them in the same order, so running them one after another is correct
//     (and the group's ncclReduce per root cannot deadlock). The group's sends and receives
//     are queued at the outermost ncclGroupEnd, one stream operation per communicator and
//     stream, which progresses them together (a send to the next rank and a receive from the
//     previous, both ways with one peer, sends before receives: none deadlocks); within one
//     peer and direction they run in the order issued. A send to self needs its receive from
//     self in the same group (else ncclInvalidUsage; NCCL would hang). Not emulated: a group
//     whose collectives and sends must progress together (the collectives run first, and
//     only a timeout ends such a wait), and one group's sends over several streams, which
//     run as one batch per stream;
//   - no wait is unbounded: an operation whose peer process died, or which waited longer than
//     EMU_NCCL_TIMEOUT_S (default 900 s, above the trainer's -pt), or whose communicator or a
//     peer's was aborted, gives up and sets the asynchronous error (ncclRemoteError,
//     ncclSystemError); the communicator's later operations do nothing.
// One communicator's operations match across ranks in the order they run: queue them on
// one stream, or order the streams with events (as the trainer does), not concurrently.
// With EMU_SYNC=1 a collective runs on the calling thread and blocks it until its peers come.
#pragma once
#ifndef NCCL_H_
#define NCCL_H_

#include <stddef.h>
#include "cuda_runtime.h"  // cudaStream_t (llmc/emu/emu.h, normally force-included already)
#include "cuda_bf16.h"     // as the real nccl.h, which brings it in too

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_SUFFIX ""
#define NCCL_VERSION_CODE 22809
#define NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))
#define NCCL_EMULATED 1

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ncclComm* ncclComm_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
    ncclNumResults = 8
} ncclResult_t;

typedef enum {
    ncclSum = 0,
    ncclProd = 1,
    ncclMax = 2,
    ncclMin = 3,
    ncclAvg = 4,
    ncclNumOps = 5,
    ncclMaxRedOp = 0x7fffffff
} ncclRedOp_t;

typedef enum {
    ncclInt8 = 0,
    ncclChar = 0,
    ncclUint8 = 1,
    ncclInt32 = 2,
    ncclInt = 2,
    ncclUint32 = 3,
    ncclInt64 = 4,
    ncclUint64 = 5,
    ncclFloat16 = 6,
    ncclHalf = 6,
    ncclFloat32 = 7,
    ncclFloat = 7,
    ncclFloat64 = 8,
    ncclDouble = 8,
    ncclBfloat16 = 9,
    ncclFloat8e4m3 = 10,  // declared as in NCCL; the emulation refuses them (ncclInvalidArgument)
    ncclFloat8e5m2 = 11,
    ncclNumTypes = 12
} ncclDataType_t;

ncclResult_t ncclGetVersion(int* version);
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
const char* ncclGetErrorString(ncclResult_t result);
const char* ncclGetLastError(ncclComm_t comm);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream);

// point to point (since NCCL 2.7): rank `peer` calls the other one with the same count and type
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);

ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // NCCL_H_
