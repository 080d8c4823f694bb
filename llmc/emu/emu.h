// emu.h: the emulated GPU. gptrain's CUDA sources (train_gpt.cu, llmc/cuda/*.cuh, dev/cuda,
// test/test_gpt2_debug.cu, generate.cu) compile with a host compiler against this header
// and run on the CPU with CUDA's execution model:
//   - a launch is a grid of blocks of threads; each thread is a fiber with its own stack, so
//     __syncthreads is a real barrier and the threads of a block run up to it in an order
//     chosen by EMU_ORDER (forward, reverse or a seeded shuffle; blocks likewise);
//   - warps of 32 lanes: __shfl_*_sync, votes and __syncwarp meet every lane of their mask
//     (a lane of the mask that has exited is an error, as it is undefined on the GPU); the
//     shuffles pick their source lane as PTX's shfl.sync does, width included; __activemask
//     names the lanes waiting in the same call once the rest of the warp can go no further;
//   - cp.async copies land at some moment between their issue and the cp.async.wait_group that
//     completes them, chosen by EMU_ORDER: at the wait (forward), at the issue (reverse), or
//     per copy at the issue, the thread's next __syncthreads or the wait (shuffle);
//   - __shared__ memory per block (each variable its own allocation, so ASan sees an index
//     past its end), dynamic shared memory limited to 48 KB unless cudaFuncSetAttribute
//     raised it, to the H100's 227 KB at most; new shared and device memory is filled with
//     NaN bytes (0xFF) so a read of something never written shows;
//   - the launch limits of an H100 (1,024 threads a block, 64 in z, grid 2^31-1 x 65535 x
//     65535): a launch that would fail there fails here with the same error;
//   - streams run their work in order on a thread of their own, asynchronously to the host;
//     events, cudaStreamWaitEvent, the legacy default stream's implicit synchronisation, and
//     CUDA graphs (capture records, replay runs the recorded work with the recorded arguments;
//     a capture forks to other streams through events and fails unless they join back);
//   - cudaGetDeviceProperties describes an H100 SXM.
// The launch syntax kernel<<<grid, block, smem, stream>>>(args) is rewritten by
// scripts/cu2cpp.py into ::emu::launch(kernel, grid, block, smem, stream)(args), and
// __shared__ declarations into ::emu::shared_static / ::emu::shared_dynamic: the kernels
// themselves are the same text that nvcc compiles. Inline PTX goes through the named device
// functions of llmc/cuda/ptx.cuh, which this emulator implements (llmc/emu/ptx.h).
//
// Environment:
//   EMU_ORDER=forward|reverse|shuffle[:SEED]  thread and block order (default forward)
//   EMU_RACECHECK=1   the race check (llmc/emu/racecheck.cpp), in a program built with its
//                     instrumentation (emu.mk's build/emu/race/ flavour; any other stops at
//                     once): every load and store of a kernel to global or shared memory, every
//                     cp.async, and every copy, memset, cuBLASLt and NCCL operation is checked
//                     against the earlier accesses to the same bytes. A hazard (two accesses of
//                     which one writes, not ordered by program order, __syncthreads, a warp
//                     operation both lanes took part in, cp.async.wait_group, or between stream
//                     operations by stream order, events and synchronisation) stops the program
//                     with "race: kernel NAME: ...". Streams stay asynchronous.
//   EMU_SYNC=1        every stream operation runs at once on the calling thread
//   EMU_CC=NN         the compute capability the devices report (default 90: an H100); only
//                     cudaGetDeviceProperties changes (train_gpt_fp8's refusal below 89 is tried so)
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#define GPTRAIN_EMU 1

// ---------------------------------------------------------------------------------------
// CUDA's keywords: device code is host code here
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __align__(n) alignas(n)

// ---------------------------------------------------------------------------------------
// vector types

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
typedef dim3 uint3;
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) float2 { float x, y; };
struct alignas(8) int2 { int x, y; };
inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
inline float2 make_float2(float x, float y) { return float2{x, y}; }

// ---------------------------------------------------------------------------------------
// runtime types

enum cudaError_t {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorIllegalState = 401,
    cudaErrorNotReady = 600,
    cudaErrorLaunchOutOfResources = 701,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorStreamCaptureMerge = 902,
    cudaErrorStreamCaptureUnmatched = 903,
    cudaErrorStreamCaptureUnjoined = 904,
    cudaErrorStreamCaptureIsolation = 905,
    cudaErrorStreamCaptureImplicit = 906,
    cudaErrorCapturedEvent = 907,
    cudaErrorUnknown = 999,
};
typedef cudaError_t cudaError;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};

enum cudaStreamCaptureMode {
    cudaStreamCaptureModeGlobal = 0,
    cudaStreamCaptureModeThreadLocal = 1,
    cudaStreamCaptureModeRelaxed = 2,
};
enum cudaStreamCaptureStatus {
    cudaStreamCaptureStatusNone = 0,
    cudaStreamCaptureStatusActive = 1,
    cudaStreamCaptureStatusInvalidated = 2,
};

enum cudaFuncAttribute {
    cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
    cudaFuncAttributePreferredSharedMemoryCarveout = 9,
};

// cuBLAS's data types (library_types.h)
enum cudaDataType_t {
    CUDA_R_16F = 2,
    CUDA_R_32F = 0,
    CUDA_R_64F = 1,
    CUDA_R_16BF = 14,
    CUDA_R_8I = 3,
    CUDA_R_32I = 10,
    CUDA_R_8F_E4M3 = 28,  // cuda_fp8.h's __nv_fp8_e4m3
    CUDA_R_8F_E5M2 = 29,  // __nv_fp8_e5m2
};
typedef cudaDataType_t cudaDataType;

constexpr unsigned cudaStreamDefault = 0x0;
constexpr unsigned cudaStreamNonBlocking = 0x1;
constexpr unsigned cudaEventDefault = 0x0;
constexpr unsigned cudaEventBlockingSync = 0x1;
constexpr unsigned cudaEventDisableTiming = 0x2;
constexpr unsigned cudaHostAllocDefault = 0x0;

namespace emu {
struct Stream;
struct Event;
struct Graph;
struct GraphExec;
}  // namespace emu
typedef emu::Stream* cudaStream_t;
typedef emu::Event* cudaEvent_t;
typedef emu::Graph* cudaGraph_t;
typedef emu::GraphExec* cudaGraphExec_t;
typedef void* cudaGraphNode_t;
// a graph edge's data (driver_types.h): all zeros for the plain dependencies capture makes
struct cudaGraphEdgeData {
    unsigned char from_port, to_port, type, reserved[5];
};

// the fields of cudaDeviceProp the sources read, with an H100 SXM's values
struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    size_t sharedMemPerBlockOptin;
    size_t sharedMemPerMultiprocessor;
    int regsPerBlock;
    int warpSize;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    int maxThreadsPerMultiProcessor;
    int multiProcessorCount;
    int major, minor;
    int clockRate;        // kHz
    int memoryClockRate;  // kHz
    int memoryBusWidth;   // bits
    int l2CacheSize;
    int pciBusID, pciDeviceID, pciDomainID;
};

// ---------------------------------------------------------------------------------------
// runtime API (llmc/emu/emu.cpp)

const char* cudaGetErrorName(cudaError_t e);
const char* cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
cudaError_t cudaGetDeviceCount(int* n);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaGetDevice(int* d);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int d);
cudaError_t cudaDeviceGetPCIBusId(char* bus, int len, int d);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaDeviceReset();
cudaError_t cudaMemGetInfo(size_t* free_b, size_t* total_b);

cudaError_t cudaMalloc(void** p, size_t bytes);
template <typename T> inline cudaError_t cudaMalloc(T** p, size_t bytes) { return cudaMalloc((void**)p, bytes); }
cudaError_t cudaFree(void* p);
cudaError_t cudaMallocHost(void** p, size_t bytes);
template <typename T> inline cudaError_t cudaMallocHost(T** p, size_t bytes) { return cudaMallocHost((void**)p, bytes); }
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned flags);
cudaError_t cudaFreeHost(void* p);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s = nullptr);
cudaError_t cudaMemset(void* p, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t s = nullptr);

cudaError_t cudaStreamCreate(cudaStream_t* s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamQuery(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags = 0);
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* g);
cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* status);

cudaError_t cudaEventCreate(cudaEvent_t* e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t g, unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s);
cudaError_t cudaGraphUpload(cudaGraphExec_t exec, cudaStream_t s);
cudaError_t cudaGraphDestroy(cudaGraph_t g);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);
cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t* nodes, size_t* count);
cudaError_t cudaGraphGetEdges(cudaGraph_t g, cudaGraphNode_t* from, cudaGraphNode_t* to, cudaGraphEdgeData* data,
                              size_t* count);

cudaError_t emu_func_set_attribute(const void* kernel, cudaFuncAttribute attr, int value);
template <typename K> inline cudaError_t cudaFuncSetAttribute(K* kernel, cudaFuncAttribute attr, int value) {
    return emu_func_set_attribute((const void*)kernel, attr, value);
}

namespace emu {

// ---------------------------------------------------------------------------------------
// what the other parts of the emulator (cuBLASLt, NCCL, PTX) build on

typedef std::function<void()> Op;

// Queues op on stream s in stream order (nullptr: the legacy default stream), to run
// asynchronously to the host; while s is being captured, op is recorded into the graph
// instead. what names it in error messages. Returns cudaSuccess or the error the real call
// would give (e.g. s destroyed, the capture invalidated).
cudaError_t stream_enqueue(cudaStream_t s, const char* what, Op op);

// true when [p, p + bytes) lies inside one live cudaMalloc allocation
bool device_range(const void* p, size_t bytes);

// Stops the program with a message naming what failed (a fault inside a kernel, a deadlock,
// a race): on the GPU these would be a sticky error at the next synchronising call.
[[noreturn]] void fatal(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// ---------------------------------------------------------------------------------------
// inside a kernel: the running thread

struct BlockState;
struct RaceBlock;  // the race check's view of a running block (racecheck.cpp)
struct ThreadState {
    dim3 idx;           // threadIdx
    int linear;         // threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)
    BlockState* block;
};
struct BlockState {
    dim3 idx, dim, grid;  // blockIdx, blockDim, gridDim
    RaceBlock* race = nullptr;  // under EMU_RACECHECK=1
};
extern thread_local ThreadState* tls_thread;

inline int lane_id() { return tls_thread->linear & 31; }

// The warp's meeting point: every lane of mask calls it (with the same mask and what) with
// `bytes` (at most 64) of its own at mine; it returns when all have, with every lane's bytes in
// all[lane * bytes] (lanes outside mask: zeros). A lane of mask that exited, or a lane that
// meets another warp operation instead, stops the program with what.
void warp_exchange(unsigned mask, const void* mine, void* all, size_t bytes, const char* what);
// the same, when the lane needs only src_lane's bytes (a shuffle)
void warp_exchange_one(unsigned mask, const void* mine, void* out, size_t bytes, int src_lane, const char* what);
// the same without a copy: lane l's bytes are at the result + 64 * l, readable until the calling
// lane's next warp operation (lanes outside mask: whatever was there)
const unsigned char* warp_exchange_view(unsigned mask, const void* mine, size_t bytes, const char* what);

// __syncthreads: every live thread of the block
void block_barrier();

// __activemask (below): the lanes of the calling warp that wait at the same call site, once
// every live lane of the warp waits somewhere or has exited; the site is the return address
unsigned warp_active_mask() __attribute__((noinline));

// shared memory of the running block: one allocation per declaration site (site: the address
// of a static local the rewritten declaration makes); dynamic: the launch's smem bytes
void* shared_alloc(const void* site, size_t bytes, size_t align);
void* shared_dynamic_ptr();
size_t shared_dynamic_bytes();  // the launch's dynamic shared memory
// whether bytes at p lie wholly inside the running block's shared memory: its dynamic shared
// memory or one __shared__ variable
bool shared_range(const void* p, size_t bytes);
template <typename T, size_t Align = alignof(T)>
inline T& shared_static(const void* site) {
    return *static_cast<T*>(shared_alloc(site, sizeof(T), Align > alignof(T) ? Align : alignof(T)));
}
template <typename T>
inline T* shared_dynamic() {
    return static_cast<T*>(shared_dynamic_ptr());
}

// The race check (EMU_RACECHECK=1, racecheck.cpp), told what the kernels' instrumented code
// does not show it: the bytes a stream operation that is not a kernel reads or writes (a copy,
// a cuBLASLt matmul, an NCCL collective; called while it runs), and the emulated PTX's own
// accesses. Each does nothing while the check is off.
void race_range(const void* p, size_t bytes, bool write);
void race_shared_read(const void* p, size_t bytes);            // ldmatrix's rows
void race_cp_async_issue(void* dst, size_t bytes, const void* src, size_t src_bytes);
void race_cp_async_done(void* dst, size_t bytes);              // its wait_group completed it

// When a cp.async issued now lands, as EMU_ORDER decides (salt tells the copies apart):
// CP_ASYNC_AT_ISSUE, CP_ASYNC_AT_BARRIER (the thread's next __syncthreads, or the wait if that
// comes first) or CP_ASYNC_AT_WAIT
enum CpAsyncLanding { CP_ASYNC_AT_ISSUE, CP_ASYNC_AT_BARRIER, CP_ASYNC_AT_WAIT };
CpAsyncLanding cp_async_landing(uint64_t salt);

// ---------------------------------------------------------------------------------------
// launches

struct LaunchSpec {
    const void* kernel;   // the function, for its attributes
    const char* name;     // for messages (the kernel expression's text)
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
};
// Checks the launch as the runtime would (the error goes to cudaGetLastError) and queues
// body, which runs one thread of the grid each call, on the stream.
void launch_grid(const LaunchSpec& spec, std::function<void()> body);

template <typename... P>
struct Launcher {
    void (*kernel)(P...);
    LaunchSpec spec;
    template <typename... A>
    void operator()(A&&... args) const {
        // the arguments are copied at the launch, as the driver does
        auto argv = std::make_shared<std::tuple<std::decay_t<P>...>>(std::forward<A>(args)...);
        auto k = kernel;
        launch_grid(spec, [k, argv]() { std::apply(k, *argv); });
    }
};

template <typename... P>
inline Launcher<P...> launch_named(const char* name, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem = 0,
                                   cudaStream_t stream = nullptr) {
    return Launcher<P...>{kernel, LaunchSpec{(const void*)kernel, name, grid, block, smem, stream}};
}
#define EMU_LAUNCH(kernel, ...) ::emu::launch_named(#kernel, kernel, __VA_ARGS__)

}  // namespace emu

// ---------------------------------------------------------------------------------------
// built-in variables and device functions

#define threadIdx (::emu::tls_thread->idx)
#define blockIdx (::emu::tls_thread->block->idx)
#define blockDim (::emu::tls_thread->block->dim)
#define gridDim (::emu::tls_thread->block->grid)
constexpr int warpSize = 32;

inline void __syncthreads() { ::emu::block_barrier(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
    char none = 0;
    char all[32];
    ::emu::warp_exchange(mask, &none, all, 1, "__syncwarp");
}

// The shuffles are PTX's shfl.sync (PTX ISA, "Data Movement and Conversion Instructions:
// shfl.sync"), with the operand c that CUDA's __shfl_*_sync(mask, var, b, width) pass
// (sm_30_intrinsics.hpp): c[12:8] = 32 - width, a mask of the lane bits that name the segment,
// and c[4:0] the clamp, 31 (0 for .up). Lane `lane` reads lane j, or its own value when j is
// out of range:
//   .up    j = lane - b[4:0], in range when j >= the first lane of its segment
//   .down  j = lane + b[4:0], in range when j <= the last lane of its segment
//   .bfly  j = lane ^ b[4:0], in range when j <= the last lane of its segment: so a lane may
//          read an earlier segment, never a later one (the Programming Guide, "Warp Shuffle
//          Functions": "each group of width consecutive threads are able to access elements
//          from earlier groups of threads, however if they attempt to access elements from
//          later groups of threads their own value of var will be returned")
//   .idx   j = the first lane of its segment + b[4:0] % width: always its own segment
enum EmuShflMode { EMU_SHFL_UP, EMU_SHFL_DOWN, EMU_SHFL_BFLY, EMU_SHFL_IDX };
inline int emu_shfl_source(EmuShflMode mode, int lane, unsigned b, unsigned c) {
    const int bval = (int)(b & 31u), cval = (int)(c & 31u), segmask = (int)(c >> 8 & 31u);
    const int min_lane = lane & segmask, max_lane = (lane & segmask) | (cval & ~segmask);
    int j = lane;
    bool in_range = false;
    switch (mode) {
        case EMU_SHFL_UP: j = lane - bval, in_range = j >= max_lane; break;
        case EMU_SHFL_DOWN: j = lane + bval, in_range = j <= max_lane; break;
        case EMU_SHFL_BFLY: j = lane ^ bval, in_range = j <= max_lane; break;
        case EMU_SHFL_IDX: j = min_lane | (bval & ~segmask), in_range = j <= max_lane; break;
    }
    return in_range ? j : lane;
}
template <typename T>
inline T emu_shfl(EmuShflMode mode, unsigned mask, T v, unsigned b, int width, const char* what) {
    static_assert(sizeof(T) <= 8, "shuffles move 4 or 8 bytes");
    const unsigned c = ((unsigned)(warpSize - width) << 8) | (mode == EMU_SHFL_UP ? 0u : 0x1fu);
    T out;
    ::emu::warp_exchange_one(mask, &v, &out, sizeof(T), emu_shfl_source(mode, ::emu::lane_id(), b, c), what);
    return out;
}
template <typename T> inline T __shfl_sync(unsigned mask, T v, int src_lane, int width = warpSize) {
    return emu_shfl(EMU_SHFL_IDX, mask, v, (unsigned)src_lane, width, "__shfl_sync");
}
template <typename T> inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = warpSize) {
    return emu_shfl(EMU_SHFL_BFLY, mask, v, (unsigned)lane_mask, width, "__shfl_xor_sync");
}
template <typename T> inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = warpSize) {
    return emu_shfl(EMU_SHFL_DOWN, mask, v, delta, width, "__shfl_down_sync");
}
template <typename T> inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = warpSize) {
    return emu_shfl(EMU_SHFL_UP, mask, v, delta, width, "__shfl_up_sync");
}
inline unsigned __ballot_sync(unsigned mask, int pred) {
    int all[32];
    int p = pred != 0;
    ::emu::warp_exchange(mask, &p, all, sizeof(int), "__ballot_sync");
    unsigned r = 0;
    for (int i = 0; i < 32; i++)
        if ((mask >> i & 1u) && all[i]) r |= 1u << i;
    return r;
}
inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
inline int __all_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) == mask; }
// __activemask (the Programming Guide, "Warp Vote Functions": the mask of the threads of the
// warp that are active when it is called; exited threads never are). Lanes here do not run in
// lockstep, so "active" is decided where it can be seen: the caller waits until every live lane
// of its warp has run as far as it can, and the lanes then waiting in this same __activemask
// (the same call site: the address it returns to) are the active ones. A lane that exited, waits
// at a barrier or warp operation, or waits in another __activemask is not. Lanes that went
// different ways and reach the call later by themselves are reported apart, which a GPU may also
// do (convergence is not guaranteed). always_inline: each call site keeps its own address.
__attribute__((always_inline)) inline unsigned __activemask() { return ::emu::warp_active_mask(); }

// Atomics. The threads of a block are fibers of one host thread and a grid's blocks run one
// after another, so a plain read-modify-write cannot be interrupted; the __atomic builtins
// keep them right should blocks ever run on several host threads.
template <typename T> inline T emu_atomic_rmw(T* p, T (*f)(T, T), T v) {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "atomics on 4 or 8 bytes");
    typedef std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t> U;
    U* up = reinterpret_cast<U*>(p);
    U old_bits = __atomic_load_n(up, __ATOMIC_RELAXED);
    for (;;) {
        T old_v, new_v;
        memcpy(&old_v, &old_bits, sizeof(T));
        new_v = f(old_v, v);
        U new_bits;
        memcpy(&new_bits, &new_v, sizeof(T));
        if (__atomic_compare_exchange_n(up, &old_bits, new_bits, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            return old_v;
    }
}
template <typename T> inline T atomicAdd(T* p, T v) {
    return emu_atomic_rmw<T>(p, [](T a, T b) { return a + b; }, v);
}
// atomicAdd(float2*) (compute capability 9.x, global memory; the Programming Guide's atomicAdd():
// each float is added atomically on its own, not the pair as one access), on an 8-byte aligned
// address as the GPU's vector atomic needs
inline float2 atomicAdd(float2* p, float2 v) {
    if (reinterpret_cast<uintptr_t>(p) % 8 != 0) ::emu::fatal("atomicAdd(float2*) at %p: not 8-byte aligned", (void*)p);
    float* f = reinterpret_cast<float*>(p);
    const float x = atomicAdd(f, v.x), y = atomicAdd(f + 1, v.y);
    return float2{x, y};
}
template <typename T> inline T atomicMax(T* p, T v) {
    return emu_atomic_rmw<T>(p, [](T a, T b) { return a > b ? a : b; }, v);
}
template <typename T> inline T atomicMin(T* p, T v) {
    return emu_atomic_rmw<T>(p, [](T a, T b) { return a < b ? a : b; }, v);
}
template <typename T> inline T atomicExch(T* p, T v) {
    return emu_atomic_rmw<T>(p, [](T, T b) { return b; }, v);
}
template <typename T> inline T atomicCAS(T* p, T cmp, T v) {
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return cmp;
}
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

// cache-hinted loads and stores: plain ones here
template <typename T> inline T __ldg(const T* p) { return *p; }
template <typename T> inline T __ldcs(const T* p) { return *p; }
template <typename T> inline T __ldcg(const T* p) { return *p; }
template <typename T> inline void __stcs(T* p, T v) { *p = v; }
template <typename T> inline void __stcg(T* p, T v) { *p = v; }

// bit casts and fast math
inline unsigned __float_as_uint(float x) { unsigned u; memcpy(&u, &x, 4); return u; }
inline float __uint_as_float(unsigned u) { float x; memcpy(&x, &u, 4); return x; }
inline int __float_as_int(float x) { int u; memcpy(&u, &x, 4); return u; }
inline float __int_as_float(int u) { float x; memcpy(&x, &u, 4); return x; }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
// min and max: the overloads CUDA declares (crt/math_functions.h, __host__ __device__, so host
// code in a .cu sees them too), so a call resolves here as it does under nvcc: float and double
// as fminf/fmin and fmaxf/fmax (CUDA Math API: a NaN argument gives the other argument), the
// integer types without a narrowing, and int mixed with unsigned compared as unsigned ("perform
// integer promotion first": min(-1, 2u) is 2u). A pair with no overload of its own, say int
// with size_t, is ambiguous here as there.
inline int min(int a, int b) { return a < b ? a : b; }
inline unsigned umin(unsigned a, unsigned b) { return a < b ? a : b; }
inline long long llmin(long long a, long long b) { return a < b ? a : b; }
inline unsigned long long ullmin(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return umin(a, b); }
inline unsigned min(int a, unsigned b) { return umin((unsigned)a, b); }
inline unsigned min(unsigned a, int b) { return umin(a, (unsigned)b); }
inline long min(long a, long b) { return a < b ? a : b; }
inline unsigned long min(unsigned long a, unsigned long b) { return a < b ? a : b; }
inline unsigned long min(long a, unsigned long b) { return min((unsigned long)a, b); }
inline unsigned long min(unsigned long a, long b) { return min(a, (unsigned long)b); }
inline long long min(long long a, long long b) { return llmin(a, b); }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return ullmin(a, b); }
inline unsigned long long min(long long a, unsigned long long b) { return ullmin((unsigned long long)a, b); }
inline unsigned long long min(unsigned long long a, long long b) { return ullmin(a, (unsigned long long)b); }
inline float min(float a, float b) { return fminf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double min(float a, double b) { return fmin((double)a, b); }
inline double min(double a, float b) { return fmin(a, (double)b); }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned umax(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long llmax(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long ullmax(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return umax(a, b); }
inline unsigned max(int a, unsigned b) { return umax((unsigned)a, b); }
inline unsigned max(unsigned a, int b) { return umax(a, (unsigned)b); }
inline long max(long a, long b) { return a > b ? a : b; }
inline unsigned long max(unsigned long a, unsigned long b) { return a > b ? a : b; }
inline unsigned long max(long a, unsigned long b) { return max((unsigned long)a, b); }
inline unsigned long max(unsigned long a, long b) { return max(a, (unsigned long)b); }
inline long long max(long long a, long long b) { return llmax(a, b); }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return ullmax(a, b); }
inline unsigned long long max(long long a, unsigned long long b) { return ullmax((unsigned long long)a, b); }
inline unsigned long long max(unsigned long long a, long long b) { return ullmax(a, (unsigned long long)b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
inline double max(float a, double b) { return fmax((double)a, b); }
inline double max(double a, float b) { return fmax(a, (double)b); }
[[noreturn]] inline void __trap() { ::emu::fatal("a kernel executed __trap()"); }
using std::isfinite;
using std::isinf;
using std::isnan;
