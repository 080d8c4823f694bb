// emu.cpp: the emulated GPU's runtime (llmc/emu/emu.h): device memory, streams that run
// their work in order on a host thread each, the legacy default stream's implicit
// synchronisation, events, CUDA graphs, launch checks, and for the race check (racecheck.cpp)
// the clocks that say which stream operations come before which.
//
// Streams: a stream made by cudaStreamCreate* has a worker thread that runs its queue in
// order. The legacy default stream (nullptr) has none: its work waits until every blocking
// stream has drained and then runs on the calling thread, which is what the legacy stream's
// implicit synchronisation amounts to. Copies to or from pageable host memory behave as the
// driver's do: host-to-device takes a copy of the source at the call and returns;
// device-to-host returns when the data is there. Pinned memory (cudaMallocHost) is copied
// when the stream gets there, so reading it before a synchronisation reads old data.
#include "emu_internal.h"
#include "racecheck.h"  // RaceClocks, StreamClock, VClock, race_*: EMU_RACECHECK=1

#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace emu {

[[noreturn]] void fatal(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "emulated GPU: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    fflush(nullptr);
    _exit(1);  // as a fault on the GPU ends the process: no destructors race the stream threads
}

struct Capture;
struct Stream {
    unsigned flags = 0;
    std::deque<std::pair<const char*, Op>> queue;
    bool busy = false, stop = false;
    std::thread worker;
    Capture* capture = nullptr;        // the capture sequence it records into, if any
    std::vector<size_t> capture_deps;  // the nodes its next captured operation depends on
    StreamClock race;  // EMU_RACECHECK=1
};

// A graph's node: the operation and the nodes it depends on (indices of earlier nodes, so the
// order they were captured in is an order that respects every dependency; replay runs them in it)
struct Node {
    const char* what;
    Op op;
    std::vector<size_t> deps;
};
struct Graph {
    std::vector<Node> nodes;
};
struct GraphExec {
    std::shared_ptr<std::vector<Node>> nodes;
};

// A capture sequence (Programming Guide, "CUDA Graphs" > "Creating a Graph Using Stream Capture"):
// begun on the origin stream; a stream that waits on an event recorded in it joins it
// ("Cross-stream Dependencies and Events"), and every stream in it must be joined back into the
// origin stream before cudaStreamEndCapture, which takes them all out of capture mode.
struct Capture {
    uint64_t id;
    Stream* origin;
    Graph* graph;
    cudaStreamCaptureMode mode;
    bool invalid = false;          // an illegal operation happened: ending it gives no graph
    std::vector<Stream*> streams;  // the origin, then the streams that joined
};

struct Event {
    unsigned flags = 0;
    uint64_t recorded = 0, completed = 0;  // how many records were queued, and have run
    double t_ms = 0.0;
    uint64_t capture_id = 0;               // last recorded in this capture sequence (0: outside any)
    std::vector<size_t> capture_deps;      // the recording stream's dependencies then
    VClock race_vc;  // EMU_RACECHECK=1: what its last record comes after
};

// every piece of the runtime's state; made once, never destroyed (stream threads may still
// run while the process exits)
struct Runtime {
    std::mutex mu;
    std::condition_variable cv;
    std::map<uintptr_t, size_t> device;  // base -> bytes
    std::atomic<uint64_t> device_gen{0};  // changes with device (under mu): device_range's memos
    std::map<uintptr_t, size_t> pinned;
    size_t device_bytes = 0;
    std::set<Stream*> streams;
    std::set<Event*> events;
    std::vector<Event*> dead_events;  // destroyed while work was queued: released when all is idle
    std::map<const void*, size_t> kernel_smem;
    Order order{ORDER_FORWARD, 0};
    bool racecheck = false, sync = false, profile = false;
    std::map<std::string, std::pair<double, long>> kernel_ms;  // EMU_PROFILE: time and launches by kernel
    int devices = 1;
    int cc = 90;  // the compute capability the devices report (EMU_CC), major * 10 + minor
    std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
    RaceClocks race;  // EMU_RACECHECK=1: which stream operations come before which
};

void print_profile();

static Runtime* rt() {
    static Runtime* r = [] {
        Runtime* r = new Runtime();
        if (const char* o = getenv("EMU_ORDER")) {
            std::string s = o;
            if (s == "forward") r->order = Order{ORDER_FORWARD, 0};
            else if (s == "reverse") r->order = Order{ORDER_REVERSE, 0};
            else if (s.rfind("shuffle", 0) == 0)
                r->order = Order{ORDER_SHUFFLE, s.size() > 8 ? strtoull(s.c_str() + 8, nullptr, 10) : 1};
            else fatal("EMU_ORDER=%s: expected forward, reverse or shuffle[:SEED]", o);
        }
        const char* rc = getenv("EMU_RACECHECK");
        r->racecheck = rc != nullptr && strcmp(rc, "1") == 0;
        if (r->racecheck) race_enable();
        const char* sy = getenv("EMU_SYNC");
        r->sync = sy != nullptr && strcmp(sy, "1") == 0;
        if (const char* d = getenv("EMU_DEVICES")) r->devices = std::max(1, atoi(d));
        if (const char* cc = getenv("EMU_CC")) {
            r->cc = atoi(cc);
            if (r->cc < 10 || r->cc > 999) fatal("EMU_CC=%s: expected a compute capability such as 80 or 90", cc);
        }
        const char* pr = getenv("EMU_PROFILE");
        r->profile = pr != nullptr && strcmp(pr, "1") == 0;
        if (r->profile) atexit(print_profile);
        return r;
    }();
    return r;
}

static double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - rt()->t0).count();
}

static thread_local cudaError_t tls_last_error = cudaSuccess;
static thread_local int tls_device = 0;

static cudaError_t note(cudaError_t e) {
    if (e != cudaSuccess) tls_last_error = e;
    return e;
}

// ---------------------------------------------------------------------------------------
// errors

const struct {
    cudaError_t e;
    const char *name, *text;
} ERRORS[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorIllegalState, "cudaErrorIllegalState", "the operation cannot be performed in the present state"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorLaunchOutOfResources, "cudaErrorLaunchOutOfResources", "too many resources requested for launch"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
     "operation failed due to a previous error during capture"},
    {cudaErrorStreamCaptureMerge, "cudaErrorStreamCaptureMerge",
     "operation would result in a merge of separate capture sequences"},
    {cudaErrorStreamCaptureUnmatched, "cudaErrorStreamCaptureUnmatched",
     "capture was not initiated in this stream"},
    {cudaErrorStreamCaptureUnjoined, "cudaErrorStreamCaptureUnjoined",
     "capturing stream has unjoined work"},
    {cudaErrorStreamCaptureIsolation, "cudaErrorStreamCaptureIsolation",
     "dependency created on uncaptured work in another stream"},
    {cudaErrorStreamCaptureImplicit, "cudaErrorStreamCaptureImplicit",
     "operation would make the legacy stream depend on a capturing blocking stream"},
    {cudaErrorCapturedEvent, "cudaErrorCapturedEvent",
     "operation not permitted on an event last recorded in a capturing stream"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

}  // namespace emu

using namespace emu;

const char* cudaGetErrorName(cudaError_t e) {
    for (const auto& x : ERRORS)
        if (x.e == e) return x.name;
    return "cudaErrorUnknown";
}
const char* cudaGetErrorString(cudaError_t e) {
    for (const auto& x : ERRORS)
        if (x.e == e) return x.text;
    return "unknown error";
}
cudaError_t cudaGetLastError() {
    cudaError_t e = tls_last_error;
    tls_last_error = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError() { return tls_last_error; }

// ---------------------------------------------------------------------------------------
// the device: an H100 SXM, as many as EMU_DEVICES says (1 unless set); EMU_CC changes only the
// compute capability it reports, so that a program's refusal of an older GPU can be tried

cudaError_t cudaGetDeviceCount(int* n) {
    *n = rt()->devices;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) {
    if (d < 0 || d >= rt()->devices) return note(cudaErrorInvalidDevice);
    tls_device = d;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int* d) {
    *d = tls_device;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int d) {
    if (d < 0 || d >= rt()->devices) return note(cudaErrorInvalidDevice);
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "NVIDIA H100 80GB HBM3 (emulated on the CPU)");
    p->totalGlobalMem = 85520809984ULL;
    p->sharedMemPerBlock = SMEM_DEFAULT_LIMIT;
    p->sharedMemPerBlockOptin = SMEM_OPTIN_LIMIT;
    p->sharedMemPerMultiprocessor = 228 << 10;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = 1024, p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647, p->maxGridSize[1] = 65535, p->maxGridSize[2] = 65535;
    p->maxThreadsPerMultiProcessor = 2048;
    p->multiProcessorCount = 132;
    p->major = rt()->cc / 10, p->minor = rt()->cc % 10;
    p->clockRate = 1980000;
    p->memoryClockRate = 2619000;
    p->memoryBusWidth = 5120;
    p->l2CacheSize = 50 << 20;
    p->pciBusID = 0x18 + d;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetPCIBusId(char* bus, int len, int d) {
    if (d < 0 || d >= rt()->devices) return note(cudaErrorInvalidDevice);
    snprintf(bus, (size_t)len, "0000:%02X:00.0", 0x18 + d);
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t* free_b, size_t* total_b) {
    Runtime* r = rt();
    std::lock_guard<std::mutex> lk(r->mu);
    *total_b = 85520809984ULL;
    *free_b = *total_b - std::min(*total_b, r->device_bytes);
    return cudaSuccess;
}

// ---------------------------------------------------------------------------------------
// streams

namespace emu {

static bool stream_idle(Stream* s) { return s->queue.empty() && !s->busy; }

static void stream_worker(Stream* s) {
    Runtime* r = rt();
    std::unique_lock<std::mutex> lk(r->mu);
    for (;;) {
        r->cv.wait(lk, [&] { return s->stop || !s->queue.empty(); });
        if (s->queue.empty()) return;  // stopping, and drained
        auto item = std::move(s->queue.front());
        s->queue.pop_front();
        s->busy = true;
        lk.unlock();
        item.second();
        lk.lock();
        s->busy = false;
        r->cv.notify_all();
    }
}

// waits (r->mu held) until s, or every blocking stream (s == nullptr), has drained
static void drain_locked(std::unique_lock<std::mutex>& lk, Stream* s, bool all = false) {
    Runtime* r = rt();
    r->cv.wait(lk, [&] {
        if (s != nullptr) return stream_idle(s);
        for (Stream* o : r->streams)
            if ((all || !(o->flags & cudaStreamNonBlocking)) && !stream_idle(o)) return false;
        return true;
    });
}

static bool any_capture_locked(bool blocking_only) {
    for (Stream* o : rt()->streams)
        if (o->capture != nullptr && (!blocking_only || !(o->flags & cudaStreamNonBlocking))) return true;
    return false;
}

static void invalidate_captures_locked(bool blocking_only) {
    for (Stream* o : rt()->streams)
        if (o->capture != nullptr && (!blocking_only || !(o->flags & cudaStreamNonBlocking))) o->capture->invalid = true;
}

// an operation queued on s while it is captured: a node after s's dependencies, which it replaces
static void capture_node_locked(Stream* s, const char* what, Op op) {
    std::vector<Node>& nodes = s->capture->graph->nodes;
    nodes.push_back(Node{what, std::move(op), s->capture_deps});
    s->capture_deps.assign(1, nodes.size() - 1);
}

// EMU_PROFILE=1: the operation timed, under its name
static Op profiled(const char* what, Op op) {
    return [what, op = std::move(op)]() {
        const double t0 = now_ms();
        op();
        Runtime* r = rt();
        std::lock_guard<std::mutex> lk(r->mu);
        auto& p = r->kernel_ms[what];
        p.first += now_ms() - t0;
        p.second++;
    };
}

// EMU_RACECHECK=1: the clock of s's operations (nullptr: the legacy stream's)
static StreamClock* race_clock(Stream* s) { return s != nullptr ? &s->race : &rt()->race.legacy; }

cudaError_t stream_enqueue(cudaStream_t s, const char* what, Op op) {
    Runtime* r = rt();
    if (r->profile) op = profiled(what, std::move(op));
    std::unique_lock<std::mutex> lk(r->mu);
    if (s == nullptr) {
        // the legacy stream: waits for every blocking stream, which a capture forbids
        if (any_capture_locked(true)) {
            invalidate_captures_locked(true);
            return note(cudaErrorStreamCaptureImplicit);
        }
        if (r->racecheck) op = r->race.clocked(race_clock(nullptr), what, std::move(op));
        drain_locked(lk, nullptr);
        lk.unlock();
        op();
        return cudaSuccess;
    }
    if (r->streams.count(s) == 0) return note(cudaErrorInvalidResourceHandle);
    if (s->capture != nullptr) {
        capture_node_locked(s, what, std::move(op));
        return cudaSuccess;
    }
    if (r->racecheck) op = r->race.clocked(race_clock(s), what, std::move(op));
    if (r->sync) {
        drain_locked(lk, s);
        lk.unlock();
        op();
        return cudaSuccess;
    }
    s->queue.emplace_back(what, std::move(op));
    r->cv.notify_all();
    return cudaSuccess;
}

// [p, p + bytes) inside one of the allocations (base -> bytes) of m
static bool in_allocation(const std::map<uintptr_t, size_t>& m, const void* p, size_t bytes) {
    std::lock_guard<std::mutex> lk(rt()->mu);
    uintptr_t a = (uintptr_t)p;
    auto it = m.upper_bound(a);
    if (it == m.begin()) return false;
    --it;
    return a >= it->first && a + bytes <= it->first + it->second;
}

// device_range's last answer on this host thread: the span around the address that is one
// allocation, or a gap between allocations, while no allocation has come or gone (ldmatrix and
// cp.async ask at every lane, which took the runtime's lock and searched the map each time)
struct RangeMemo {
    uint64_t gen = ~0ull;
    uintptr_t lo = 0, hi = 0;
    bool allocation = false;
};
static thread_local RangeMemo tls_range_memo;

bool device_range(const void* p, size_t bytes) {
    Runtime* r = rt();
    if (bytes == 0) return in_allocation(r->device, p, 0);
    const uintptr_t a = (uintptr_t)p;
    RangeMemo& m = tls_range_memo;
    if (m.gen == r->device_gen.load(std::memory_order_acquire) && a >= m.lo && a - m.lo <= m.hi - m.lo &&
        bytes <= m.hi - a)
        return m.allocation;
    std::lock_guard<std::mutex> lk(r->mu);
    m.gen = r->device_gen.load(std::memory_order_relaxed);
    auto it = r->device.upper_bound(a);
    const bool after_one = it != r->device.begin();
    if (after_one && a - std::prev(it)->first < std::prev(it)->second) {
        m.lo = std::prev(it)->first;
        m.hi = m.lo + std::prev(it)->second;
        m.allocation = true;
    } else {
        m.lo = after_one ? std::prev(it)->first + std::prev(it)->second : 0;
        m.hi = it != r->device.end() ? it->first : UINTPTR_MAX;
        m.allocation = false;
    }
    return m.allocation && bytes <= m.hi - a;
}
static bool pinned_range(const void* p, size_t bytes) { return in_allocation(rt()->pinned, p, bytes); }

static Stream* capturing(cudaStream_t s) {
    if (s == nullptr) return nullptr;
    std::lock_guard<std::mutex> lk(rt()->mu);
    return s->capture != nullptr ? s : nullptr;
}

// a synchronising call on s while it is captured: not allowed, and the capture is void
static cudaError_t refuse_in_capture(cudaStream_t s) {
    std::lock_guard<std::mutex> lk(rt()->mu);
    if (s != nullptr && s->capture != nullptr) {
        s->capture->invalid = true;
        return note(cudaErrorStreamCaptureUnsupported);
    }
    if (s == nullptr && any_capture_locked(true)) {
        invalidate_captures_locked(true);
        return note(cudaErrorStreamCaptureImplicit);
    }
    return cudaSuccess;
}

// "potentially unsafe" calls (allocation) are refused while a capture in global mode runs
static cudaError_t refuse_unsafe_in_capture() {
    std::lock_guard<std::mutex> lk(rt()->mu);
    for (Stream* o : rt()->streams)
        if (o->capture != nullptr && o->capture->mode != cudaStreamCaptureModeRelaxed) {
            o->capture->invalid = true;
            return note(cudaErrorStreamCaptureUnsupported);
        }
    return cudaSuccess;
}

// ---------------------------------------------------------------------------------------
// launches

size_t kernel_max_dynamic_smem(const void* kernel) {
    Runtime* r = rt();
    std::lock_guard<std::mutex> lk(r->mu);
    auto it = r->kernel_smem.find(kernel);
    return it == r->kernel_smem.end() ? SMEM_DEFAULT_LIMIT : it->second;
}

void launch_grid(const LaunchSpec& spec, std::function<void()> body) {
    const dim3 b = spec.block, g = spec.grid;
    const uint64_t threads = (uint64_t)b.x * b.y * b.z;
    if (b.x == 0 || b.y == 0 || b.z == 0 || b.x > 1024 || b.y > 1024 || b.z > 64 || threads > 1024 || g.x == 0 ||
        g.y == 0 || g.z == 0 || g.x > 2147483647u || g.y > 65535 || g.z > 65535) {
        note(cudaErrorInvalidConfiguration);
        return;
    }
    if (spec.smem > kernel_max_dynamic_smem(spec.kernel)) {
        note(cudaErrorInvalidValue);
        return;
    }
    LaunchSpec copy = spec;
    Runtime* r = rt();
    stream_enqueue(spec.stream, spec.name, [copy, body = std::move(body), r]() {
        if (r->racecheck) race_run_grid(copy, body, r->order);
        else run_grid(copy, body, r->order);
    });
}

// EMU_PROFILE=1: where the emulator's time went, kernel by kernel, printed at exit
void print_profile() {
    Runtime* r = rt();
    std::lock_guard<std::mutex> lk(r->mu);
    std::vector<std::pair<double, std::string>> rows;
    double total = 0.0;
    for (auto& k : r->kernel_ms) {
        rows.emplace_back(k.second.first, k.first + " (" + std::to_string(k.second.second) + " times)");
        total += k.second.first;
    }
    std::sort(rows.rbegin(), rows.rend());
    fprintf(stderr, "emulated GPU profile: %.0f ms in stream operations\n", total);
    for (auto& row : rows) fprintf(stderr, "  %10.1f ms %5.1f%%  %s\n", row.first, 100.0 * row.first / total, row.second.c_str());
}

}  // namespace emu

cudaError_t emu_func_set_attribute(const void* kernel, cudaFuncAttribute attr, int value) {
    if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) return cudaSuccess;
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 || (size_t)value > SMEM_OPTIN_LIMIT)
        return note(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> lk(rt()->mu);
    rt()->kernel_smem[kernel] = (size_t)value;
    return cudaSuccess;
}

// ---------------------------------------------------------------------------------------
// memory

cudaError_t cudaMalloc(void** p, size_t bytes) {
    if (p == nullptr) return note(cudaErrorInvalidValue);
    if (cudaError_t e = refuse_unsafe_in_capture()) return e;
    Runtime* r = rt();
    const size_t rounded = std::max<size_t>(256, (bytes + 255) / 256 * 256);
    void* m = r->racecheck ? race_device_alloc(rounded) : aligned_alloc(256, rounded);
    if (m == nullptr) return note(cudaErrorMemoryAllocation);
    memset(m, 0xff, rounded);  // never-written device memory reads as NaN
    std::lock_guard<std::mutex> lk(r->mu);
    r->device[(uintptr_t)m] = bytes;
    r->device_gen.fetch_add(1, std::memory_order_release);
    r->device_bytes += rounded;
    *p = m;
    return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
    if (p == nullptr) return cudaSuccess;
    Runtime* r = rt();
    std::unique_lock<std::mutex> lk(r->mu);
    auto it = r->device.find((uintptr_t)p);
    if (it == r->device.end()) return note(cudaErrorInvalidValue);
    drain_locked(lk, nullptr, true);  // cudaFree waits for the device's work
    if (r->racecheck) r->race.host_knows(race_clock(nullptr), true);
    r->device_bytes -= std::max<size_t>(256, (it->second + 255) / 256 * 256);
    r->device.erase(it);
    r->device_gen.fetch_add(1, std::memory_order_release);
    lk.unlock();
    if (r->racecheck) race_device_free(p);
    else free(p);
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void** p, size_t bytes) {
    if (p == nullptr) return note(cudaErrorInvalidValue);
    if (cudaError_t e = refuse_unsafe_in_capture()) return e;
    void* m = aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64));
    if (m == nullptr) return note(cudaErrorMemoryAllocation);
    std::lock_guard<std::mutex> lk(rt()->mu);
    rt()->pinned[(uintptr_t)m] = bytes;
    *p = m;
    return cudaSuccess;
}
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned) { return cudaMallocHost(p, bytes); }

cudaError_t cudaFreeHost(void* p) {
    if (p == nullptr) return cudaSuccess;
    Runtime* r = rt();
    std::unique_lock<std::mutex> lk(r->mu);
    auto it = r->pinned.find((uintptr_t)p);
    if (it == r->pinned.end()) return note(cudaErrorInvalidValue);
    drain_locked(lk, nullptr, true);
    if (r->racecheck) r->race.host_knows(race_clock(nullptr), true);
    r->pinned.erase(it);
    lk.unlock();
    free(p);
    return cudaSuccess;
}

// the direction's device side must be device memory (the host side may be anything)
static cudaError_t check_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return note(cudaErrorInvalidMemcpyDirection);
    const bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (dst_dev && !device_range(dst, bytes)) return note(cudaErrorInvalidValue);
    if (src_dev && !device_range(src, bytes)) return note(cudaErrorInvalidValue);
    return cudaSuccess;
}

// a copy as the race check sees it: a read of src and a write of dst (host memory is not watched)
static void copy_bytes(void* dst, const void* src, size_t bytes) {
    race_range(src, bytes, false);
    race_range(dst, bytes, true);
    memmove(dst, src, bytes);
}

// The Runtime API's "API synchronization behavior": cudaMemcpy to host memory, and
// cudaMemcpyAsync to pageable host memory, return once the copy is complete (so the host is
// ordered after it); other copies need not wait for their DMA
static void race_copy_returned(Stream* s, const void* dst, size_t bytes, bool async) {
    if (!rt()->racecheck || device_range(dst, bytes) || (async && pinned_range(dst, bytes))) return;
    std::lock_guard<std::mutex> lk(rt()->mu);
    rt()->race.host.join(race_clock(s)->vc);
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    if (bytes == 0) return cudaSuccess;
    if (cudaError_t e = check_copy(dst, src, bytes, kind)) return e;
    cudaError_t e = stream_enqueue(nullptr, "cudaMemcpy", [=]() { copy_bytes(dst, src, bytes); });
    if (e == cudaSuccess) race_copy_returned(nullptr, dst, bytes, false);
    return e;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s) {
    if (bytes == 0) return cudaSuccess;
    if (cudaError_t e = check_copy(dst, src, bytes, kind)) return e;
    const bool host_src = !device_range(src, bytes), host_dst = !device_range(dst, bytes);
    if (host_src && !pinned_range(src, bytes) && capturing(s) == nullptr) {
        // pageable source: the driver stages it at the call
        auto staged = std::make_shared<std::vector<unsigned char>>((const unsigned char*)src,
                                                                   (const unsigned char*)src + bytes);
        return stream_enqueue(s, "cudaMemcpyAsync", [=]() { copy_bytes(dst, staged->data(), bytes); });
    }
    cudaError_t e = stream_enqueue(s, "cudaMemcpyAsync", [=]() { copy_bytes(dst, src, bytes); });
    if (e == cudaSuccess && host_dst && !pinned_range(dst, bytes) && capturing(s) == nullptr && s != nullptr) {
        // pageable destination: the call returns when the data is there
        std::unique_lock<std::mutex> lk(rt()->mu);
        drain_locked(lk, s);
    }
    if (e == cudaSuccess && capturing(s) == nullptr) race_copy_returned(s, dst, bytes, true);
    return e;
}

static cudaError_t check_set(void* p, size_t bytes) {
    return device_range(p, bytes) ? cudaSuccess : note(cudaErrorInvalidValue);
}
cudaError_t cudaMemset(void* p, int value, size_t bytes) {
    if (bytes == 0) return cudaSuccess;
    if (cudaError_t e = check_set(p, bytes)) return e;
    return stream_enqueue(nullptr, "cudaMemset", [=]() {
        race_range(p, bytes, true);
        memset(p, value, bytes);
    });
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t s) {
    if (bytes == 0) return cudaSuccess;
    if (cudaError_t e = check_set(p, bytes)) return e;
    return stream_enqueue(s, "cudaMemsetAsync", [=]() {
        race_range(p, bytes, true);
        memset(p, value, bytes);
    });
}

// ---------------------------------------------------------------------------------------
// captures across streams

// every stream of c out of capture mode, c and (unless the caller took it) its graph deleted
static void capture_end_locked(Capture* c) {
    for (Stream* o : c->streams) {
        o->capture = nullptr;
        o->capture_deps.clear();
    }
    delete c->graph;
    delete c;
}

// s, being destroyed, leaves its capture: the origin ends it; another stream leaves it invalid
static void capture_leave_locked(Stream* s) {
    Capture* c = s->capture;
    if (c == nullptr) return;
    if (c->origin == s) return capture_end_locked(c);
    c->streams.erase(std::find(c->streams.begin(), c->streams.end(), s));
    c->invalid = true;
}

// The unjoined check of cudaStreamEndCapture: a node some stream of c would build on next
// must be one the origin's next node depends on, directly or through others (the Runtime API,
// cudaStreamUpdateCaptureDependencies: nodes "unreachable from the stream at
// cudaStreamEndCapture" give cudaErrorStreamCaptureUnjoined).
static bool capture_joined_locked(const Capture* c) {
    const std::vector<Node>& nodes = c->graph->nodes;
    std::vector<char> reached(nodes.size(), 0);
    std::vector<size_t> todo = c->origin->capture_deps;
    while (!todo.empty()) {
        const size_t n = todo.back();
        todo.pop_back();
        if (reached[n]) continue;
        reached[n] = 1;
        for (size_t d : nodes[n].deps) todo.push_back(d);
    }
    for (const Stream* o : c->streams)
        for (size_t n : o->capture_deps)
            if (!reached[n]) return false;
    return true;
}

// ---------------------------------------------------------------------------------------
// streams: the API

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* out, unsigned flags) {
    Stream* s = new Stream();
    s->flags = flags;
    {
        Runtime* r = rt();
        std::lock_guard<std::mutex> lk(r->mu);
        r->streams.insert(s);
        if (r->racecheck) r->race.created(&s->race, !(flags & cudaStreamNonBlocking));
    }
    s->worker = std::thread(stream_worker, s);
    *out = s;
    return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* out) { return cudaStreamCreateWithFlags(out, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t s) {
    Runtime* r = rt();
    {
        std::unique_lock<std::mutex> lk(r->mu);
        if (s == nullptr || r->streams.count(s) == 0) return note(cudaErrorInvalidResourceHandle);
        drain_locked(lk, s);  // the GPU finishes the stream's work before letting it go
        s->stop = true;
        r->cv.notify_all();
    }
    s->worker.join();
    std::lock_guard<std::mutex> lk(r->mu);
    r->streams.erase(s);
    capture_leave_locked(s);
    if (r->racecheck) r->race.destroyed(&s->race);
    delete s;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    if (cudaError_t e = refuse_in_capture(s)) return e;
    Runtime* r = rt();
    std::unique_lock<std::mutex> lk(r->mu);
    if (s != nullptr && r->streams.count(s) == 0) return note(cudaErrorInvalidResourceHandle);
    drain_locked(lk, s);
    if (r->racecheck) r->race.host_knows(race_clock(s));
    return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t s) {
    if (cudaError_t e = refuse_in_capture(s)) return e;
    Runtime* r = rt();
    std::lock_guard<std::mutex> lk(r->mu);
    if (s == nullptr) {
        for (Stream* o : r->streams)
            if (!(o->flags & cudaStreamNonBlocking) && !stream_idle(o)) return cudaErrorNotReady;
    } else {
        if (r->streams.count(s) == 0) return note(cudaErrorInvalidResourceHandle);
        if (!stream_idle(s)) return cudaErrorNotReady;
    }
    if (r->racecheck) r->race.host_knows(race_clock(s));
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
    Runtime* r = rt();
    std::unique_lock<std::mutex> lk(r->mu);
    if (any_capture_locked(false)) {
        invalidate_captures_locked(false);
        return note(cudaErrorStreamCaptureUnsupported);
    }
    drain_locked(lk, nullptr, true);
    if (r->racecheck) r->race.host_knows(race_clock(nullptr), true);
    return cudaSuccess;
}
cudaError_t cudaDeviceReset() { return cudaDeviceSynchronize(); }

// ---------------------------------------------------------------------------------------
// events

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags) {
    Event* ev = new Event();
    ev->flags = flags;
    std::lock_guard<std::mutex> lk(rt()->mu);
    rt()->events.insert(ev);
    *e = ev;
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }

cudaError_t cudaEventDestroy(cudaEvent_t e) {
    Runtime* r = rt();
    std::lock_guard<std::mutex> lk(r->mu);
    if (r->events.erase(e) == 0) return note(cudaErrorInvalidResourceHandle);
    // queued work may still complete it: then it is released later, as the real runtime does
    bool idle = true;
    for (Stream* o : r->streams) idle = idle && stream_idle(o);
    if (idle) {
        for (Event* d : r->dead_events) delete d;
        r->dead_events.clear();
        delete e;
    } else {
        r->dead_events.push_back(e);
    }
    return cudaSuccess;
}

// Recorded in a captured stream, the event holds that stream's dependencies and becomes no node
// (Programming Guide, "Cross-stream Dependencies and Events": "A captured event represents a
// set of nodes in a capture graph"); a stream that waits on it depends on them.
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    Runtime* r = rt();
    uint64_t gen;
    {
        std::lock_guard<std::mutex> lk(r->mu);
        if (r->events.count(e) == 0) return note(cudaErrorInvalidResourceHandle);
        if (s != nullptr && r->streams.count(s) != 0 && s->capture != nullptr) {
            e->capture_id = s->capture->id;
            e->capture_deps = s->capture_deps;
            return cudaSuccess;
        }
        e->capture_id = 0;
        e->capture_deps.clear();
        gen = ++e->recorded;
        // the race check: a wait for it comes after what s had queued
        if (r->racecheck && (s == nullptr || r->streams.count(s) != 0)) e->race_vc = r->race.before(race_clock(s));
    }
    return stream_enqueue(s, "cudaEventRecord", [e, gen, r]() {
        std::lock_guard<std::mutex> lk(r->mu);
        e->completed = std::max(e->completed, gen);
        e->t_ms = now_ms();
        r->cv.notify_all();
    });
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    Runtime* r = rt();
    std::unique_lock<std::mutex> lk(r->mu);
    if (r->events.count(e) == 0) return note(cudaErrorInvalidResourceHandle);
    const uint64_t target = e->recorded;
    r->cv.wait(lk, [&] { return e->completed >= target; });
    if (r->racecheck) r->race.host.join(e->race_vc);
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e) {
    Runtime* r = rt();
    std::lock_guard<std::mutex> lk(r->mu);
    if (r->events.count(e) == 0) return note(cudaErrorInvalidResourceHandle);
    if (e->completed < e->recorded) return cudaErrorNotReady;
    if (r->racecheck) r->race.host.join(e->race_vc);
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
    std::lock_guard<std::mutex> lk(rt()->mu);
    if (rt()->events.count(a) == 0 || rt()->events.count(b) == 0) return note(cudaErrorInvalidResourceHandle);
    if ((a->flags | b->flags) & cudaEventDisableTiming) return note(cudaErrorInvalidResourceHandle);
    if (a->recorded == 0 || b->recorded == 0) return note(cudaErrorInvalidResourceHandle);
    if (a->completed < a->recorded || b->completed < b->recorded) return note(cudaErrorNotReady);
    *ms = (float)(b->t_ms - a->t_ms);
    return cudaSuccess;
}

// the capture sequence with this id, if it has not ended
static Capture* live_capture_locked(uint64_t id) {
    for (Stream* o : rt()->streams)
        if (o->capture != nullptr && o->capture->id == id) return o->capture;
    return nullptr;
}

// A wait on an event recorded in capture sequence c (a captured event) puts s into c, its next
// node depending on the event's nodes; a stream already in another capture cannot join (the
// Programming Guide: merging two capture graphs is invalid; both are invalidated).
static cudaError_t capture_wait_locked(Stream* s, Capture* c, const Event* e) {
    if (s->capture != nullptr && s->capture != c) {
        s->capture->invalid = c->invalid = true;
        return note(cudaErrorStreamCaptureMerge);
    }
    if (s->capture == nullptr) {
        s->capture = c;
        s->capture_deps.clear();
        c->streams.push_back(s);
    }
    for (size_t n : e->capture_deps)
        if (std::find(s->capture_deps.begin(), s->capture_deps.end(), n) == s->capture_deps.end())
            s->capture_deps.push_back(n);
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned) {
    Runtime* r = rt();
    uint64_t target;
    {
        std::lock_guard<std::mutex> lk(r->mu);
        if (r->events.count(e) == 0) return note(cudaErrorInvalidResourceHandle);
        if (s != nullptr && r->streams.count(s) == 0) return note(cudaErrorInvalidResourceHandle);
        if (s != nullptr && e->capture_id != 0) {
            if (Capture* c = live_capture_locked(e->capture_id)) return capture_wait_locked(s, c, e);
            // recorded in a capture that has ended: the wait is for its last record outside one
            e->capture_id = 0;
            e->capture_deps.clear();
        }
        target = e->recorded;
        // the race check: what s queues from now on comes after what e's record came after
        if (r->racecheck && (s == nullptr || r->streams.count(s) != 0)) race_clock(s)->vc.join(e->race_vc);
    }
    if (target == 0) return cudaSuccess;  // never recorded: nothing to wait for
    return stream_enqueue(s, "cudaStreamWaitEvent", [e, target, r]() {
        std::unique_lock<std::mutex> lk(r->mu);
        r->cv.wait(lk, [&] { return e->completed >= target; });
    });
}

// ---------------------------------------------------------------------------------------
// graphs

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode) {
    static uint64_t next_id = 0;
    std::lock_guard<std::mutex> lk(rt()->mu);
    if (s == nullptr) return note(cudaErrorStreamCaptureUnsupported);  // the legacy stream cannot be captured
    if (rt()->streams.count(s) == 0) return note(cudaErrorInvalidResourceHandle);
    if (s->capture != nullptr) return note(cudaErrorIllegalState);
    s->capture = new Capture{++next_id, s, new Graph(), mode, false, {s}};
    s->capture_deps.clear();
    return cudaSuccess;
}

// Ends the capture on its origin stream and takes every stream of it out of capture mode: the
// graph, or nullptr and the error when the capture was invalidated or a stream that joined it
// was not joined back ("Failure to rejoin to the origin stream will result in failure of the
// overall capture operation"). Called on another stream of the capture: cudaErrorStreamCaptureUnmatched
// ("The capture was not initiated in this stream"), and the capture is invalid.
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* g) {
    std::lock_guard<std::mutex> lk(rt()->mu);
    if (s == nullptr || rt()->streams.count(s) == 0) return note(cudaErrorInvalidResourceHandle);
    if (s->capture == nullptr) return note(cudaErrorIllegalState);
    Capture* c = s->capture;
    if (c->origin != s) {
        c->invalid = true;
        if (g != nullptr) *g = nullptr;
        return note(cudaErrorStreamCaptureUnmatched);
    }
    const cudaError_t e = c->invalid                  ? cudaErrorStreamCaptureInvalidated
                          : !capture_joined_locked(c) ? cudaErrorStreamCaptureUnjoined
                                                      : cudaSuccess;
    if (e == cudaSuccess) {
        *g = c->graph;
        c->graph = nullptr;
    } else if (g != nullptr) {
        *g = nullptr;
    }
    capture_end_locked(c);
    return note(e);
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus* status) {
    std::lock_guard<std::mutex> lk(rt()->mu);
    if (s == nullptr) {
        *status = cudaStreamCaptureStatusNone;
        return any_capture_locked(true) ? note(cudaErrorStreamCaptureImplicit) : cudaSuccess;
    }
    *status = s->capture == nullptr ? cudaStreamCaptureStatusNone
              : s->capture->invalid ? cudaStreamCaptureStatusInvalidated
                                    : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}

cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t* nodes, size_t* count) {
    if (g == nullptr || count == nullptr) return note(cudaErrorInvalidValue);
    if (nodes != nullptr)
        for (size_t i = 0; i < std::min(*count, g->nodes.size()); i++) nodes[i] = &g->nodes[i];
    *count = g->nodes.size();
    return cudaSuccess;
}

// every dependency of g's nodes as an edge: to[i] depends on from[i], with default (zero) data.
// Without arrays, the number of edges; with them, at most *count edges, the rest of the arrays
// nullptr and *count the number filled in
cudaError_t cudaGraphGetEdges(cudaGraph_t g, cudaGraphNode_t* from, cudaGraphNode_t* to, cudaGraphEdgeData* data,
                              size_t* count) {
    if (g == nullptr || count == nullptr || (from == nullptr) != (to == nullptr) || (data != nullptr && from == nullptr))
        return note(cudaErrorInvalidValue);
    size_t n = 0;
    for (size_t i = 0; i < g->nodes.size(); i++)
        for (size_t d : g->nodes[i].deps) {
            if (from != nullptr && n < *count) {
                from[n] = &g->nodes[d];
                to[n] = &g->nodes[i];
                if (data != nullptr) data[n] = cudaGraphEdgeData{};
            }
            n++;
        }
    if (from != nullptr) {
        for (size_t i = n; i < *count; i++) from[i] = to[i] = nullptr;
        n = std::min(n, *count);
    }
    *count = n;
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t g, unsigned long long) {
    if (g == nullptr || exec == nullptr) return note(cudaErrorInvalidValue);
    GraphExec* x = new GraphExec();
    x->nodes = std::make_shared<std::vector<Node>>(g->nodes);
    *exec = x;
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
    if (exec == nullptr) return note(cudaErrorInvalidResourceHandle);
    auto nodes = exec->nodes;
    return stream_enqueue(s, "cudaGraphLaunch", [nodes]() {
        for (const Node& n : *nodes) n.op();
    });
}

cudaError_t cudaGraphUpload(cudaGraphExec_t exec, cudaStream_t) {
    return exec == nullptr ? note(cudaErrorInvalidResourceHandle) : cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t g) {
    if (g == nullptr) return note(cudaErrorInvalidValue);
    delete g;
    return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
    if (exec == nullptr) return note(cudaErrorInvalidValue);
    delete exec;
    return cudaSuccess;
}
