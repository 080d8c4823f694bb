// racecheck.cpp: the emulated GPU's race check (EMU_RACECHECK=1), a hazard detector in the
// manner of compute-sanitizer's racecheck, extended to global memory and to streams. It finds a
// race whatever order the threads, blocks and streams happened to run in, because it checks the
// order CUDA guarantees, not the values one run produced.
//
// What it sees. emu.mk builds a race-check flavour of each program (build/emu/race/) whose own
// files are compiled with GCC's -fsanitize=thread, without libtsan: every load and store calls
// __tsan_readN / __tsan_writeN and every __atomic builtin a __tsan_atomic* function, which
// race_tsan.cpp defines and sends here when the address is device or shared memory and an
// emulated thread runs (emu.h's atomics are __atomic builtins, so atomicAdd is seen as one).
// The emulator's own files are not instrumented; what they do for a kernel (cp.async,
// ldmatrix: ptx.h) or as a stream operation (copies and memsets: emu.cpp; cuBLASLt, NCCL) they
// report themselves (emu.h: race_range, race_cp_async_*, race_shared_read).
//
// Shadow memory. While the check is on, device memory (cudaMalloc) and the blocks' shared memory
// come from one arena, and every byte of it has a Cell at a fixed place: the last write(s) and
// the reads since, each as (execution, thread, time). Per byte, so neighbouring threads' bf16
// never meet. An execution is one run of a kernel or of another stream operation.
//
// Order inside a grid (CUDA C++ Programming Guide, "Synchronization Functions": __syncthreads
// makes the block's global and shared memory accesses before it visible to all its threads;
// "Warp Shuffle Functions", "Warp Vote Functions", __syncwarp: the lanes of a mask meet). A
// thread's accesses are in program order; __syncthreads orders every access of its block before
// it against every one after; a warp operation (__syncwarp, a shuffle or vote, mma, ldmatrix)
// orders the accesses of the lanes that took part; nothing orders two blocks of a grid. A block
// keeps a clock that advances at each barrier and warp operation and stamps every access; an
// access at time t is ordered before the running thread when a barrier released after t, or a
// warp operation after t had both lanes in its mask.
//
// Hazards: two accesses to a byte by different threads, at least one a write, neither ordered
// before the other (read-after-write, write-after-read, write-after-write). Atomics conflict only
// with plain accesses ("Atomic Functions"). A cp.async writes its destination at some moment
// between its issue and the cp.async.wait_group of its thread that completes it (PTX ISA,
// "cp.async"): the issue is checked as a write, and until that wait any access to the bytes is a
// hazard, the issuing thread's own included.
//
// Order between stream operations (CUDA Runtime API, "Stream synchronization behavior"; the
// Programming Guide's "Streams", "Events", "Explicit Synchronization", "Implicit
// Synchronization"): vector clocks, which emu.cpp keeps at each call (racecheck.h's OpClock), so
// they follow the program's calls, not the timing of the stream threads. An operation comes
// after another on its stream, after what an event it waited for had recorded, after what the
// host had synchronised with when it was queued, and legacy-stream work after (and before) the
// blocking streams' work. A byte a kernel reads that another execution wrote, or writes that
// another read or wrote, must have been touched by an operation ordered before it, else it is a
// hazard between streams. The streams run as asynchronously as without the check.
//
// What it does not see: host code touching pinned memory while a copy from or to it is queued
// (host memory has no shadow); a record of an event inside a CUDA graph, at each replay (a wait
// for it orders nothing here, so a hazard may be reported that the replay's record would have
// ordered); a kernel's reads of a byte that another stream's operation reads at the same time
// (one reader of another execution is remembered, so a later write of this kernel to it is
// checked against that one); warp operations of partial masks order a set of several readers
// only when the whole warp met. A grid may have at most 2^27 threads, a program 16 GB of device
// memory under the check.
//
// A hazard stops the program (emu::fatal) with "race: kernel NAME: <kind> hazard on <memory>:
// <who did what>", so a test can grep it. A kernel runs once, in EMU_ORDER's order, its blocks
// on the stream's host thread alone. (The earlier check ran each kernel twice, forward and
// reverse, on all streams serialised, and compared the bytes. A kernel without hazards and
// atomics cannot depend on the order of its threads, so that second run is gone; order-dependent
// sums of float atomics, which are no race, show in the trainers' runs across EMU_ORDER.)
#include "racecheck.h"

#include <sys/mman.h>
#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace emu {

bool race_instrumented = false;
uintptr_t race_base = 0;
size_t race_size = 0;

void VClock::join(const VClock& o) {
    if (o.t.size() > t.size()) t.resize(o.t.size(), 0);
    for (size_t i = 0; i < o.t.size(); i++) t[i] = std::max(t[i], o.t[i]);
}
uint32_t VClock::tick(uint32_t slot) {
    if (slot >= t.size()) t.resize(slot + 1, 0);
    return ++t[slot];
}

// A stream made now comes after what the host knows of; a blocking one also after the legacy
// stream's work so far (the Runtime API's "Stream synchronization behavior": an action in the
// legacy stream first waits on all blocking streams, then all blocking streams wait on it)
void RaceClocks::created(StreamClock* s, bool blocking) {
    s->slot = slots++;
    s->blocking = blocking;
    s->vc = host;
    if (blocking) s->vc.join(legacy.vc);
    streams.push_back(s);
}
void RaceClocks::destroyed(StreamClock* s) {
    auto it = std::find(streams.begin(), streams.end(), s);
    if (it != streams.end()) streams.erase(it);
}

Op RaceClocks::clocked(StreamClock* s, const char* what, Op op) {
    auto c = std::make_shared<OpClock>();
    s->vc.join(host);
    if (s == &legacy)
        for (const StreamClock* o : streams)
            if (o->blocking) s->vc.join(o->vc);
    c->slot = s->slot;
    c->seq = s->vc.tick(s->slot);
    c->vc = s->vc;
    if (s == &legacy)
        for (StreamClock* o : streams)
            if (o->blocking) o->vc.join(s->vc);
    return [c, what, op = std::move(op)]() {
        race_op_begin(c.get(), what);
        op();
        race_op_end();
    };
}

VClock RaceClocks::before(const StreamClock* s) const {
    VClock c = s->vc;
    c.join(host);
    if (s == &legacy)
        for (const StreamClock* o : streams)
            if (o->blocking) c.join(o->vc);
    return c;
}

void RaceClocks::host_knows(const StreamClock* s, bool all) {
    host.join(s->vc);
    if (s == &legacy)
        for (const StreamClock* o : streams)
            if (all || o->blocking) host.join(o->vc);
}

// ---------------------------------------------------------------------------------------
// the shadow

// Who: a thread's index in its grid (blockIdx linear * threads a block + threadIdx linear) and
// flags. A set of several threads keeps one of them and F_MANY; F_WARPS, F_BLOCKS: they span
// several warps, blocks. A write's flags say it was atomic, or a cp.async still in flight.
constexpr uint32_t F_ATOMIC = 1u << 31, F_ASYNC = 1u << 30, F_MANY = 1u << 29, F_WARPS = 1u << 28,
                   F_BLOCKS = 1u << 27;
constexpr uint32_t ID_MASK = (1u << 27) - 1;
constexpr uint32_t NO_THREAD = ID_MASK;  // an operation that is not a kernel

struct Cell {
    uint32_t w_exec, w_who, w_time;  // the last write (or atomic writes): 0 = none
    uint32_t r_exec, r_who, r_time;  // the reads since, of one execution (time: the latest)
};

constexpr size_t DEVICE_ARENA = 16ull << 30;  // device memory a checked program may allocate
constexpr size_t REGION = 512 << 10;          // one host thread's shared memory, for its blocks
constexpr size_t SHARED_ARENA = 256 * REGION;
constexpr size_t MAX_EXECS = 1 << 26;

struct ExecInfo {
    uint32_t slot, seq;  // the stream operation it ran in
    const char* name;
    bool kernel;
};

// the check's state, made by race_enable and never destroyed (stream threads may run at exit)
struct RaceState {
    Cell* shadow = nullptr;
    ExecInfo* execs = nullptr;
    std::atomic<uint32_t> next_exec{1};
    std::mutex mu;  // the arena's bookkeeping
    std::map<uintptr_t, size_t> live, free_ranges;
    uintptr_t top = 0;                 // device memory never handed out starts here
    std::vector<char*> free_regions;
    size_t regions_used = 0;
};
static RaceState* g = nullptr;

static void* reserve(size_t bytes, const char* what) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        fatal("EMU_RACECHECK=1: cannot reserve %zu GB of address space for %s (ulimit -v?)", bytes >> 30, what);
    return p;
}

void race_enable() {
    if (!race_instrumented)
        fatal("EMU_RACECHECK=1: this program was built without the race check's instrumentation; run its race-check "
              "build (emu.mk: build/emu/race/...)");
    g = new RaceState();
    race_base = (uintptr_t)reserve(DEVICE_ARENA + SHARED_ARENA, "device and shared memory");
    g->shadow = (Cell*)reserve((DEVICE_ARENA + SHARED_ARENA) * sizeof(Cell), "the shadow memory");
    g->execs = (ExecInfo*)reserve(MAX_EXECS * sizeof(ExecInfo), "the executions' table");
    g->top = race_base;
    race_size = DEVICE_ARENA + SHARED_ARENA;
}

// the pages wholly inside [p, p + bytes) back to the kernel (they read as zeros again)
static void release(void* p, size_t bytes) {
    const uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095, b = ((uintptr_t)p + bytes) & ~(uintptr_t)4095;
    if (b > a) madvise((void*)a, b - a, MADV_DONTNEED);
}

void* race_device_alloc(size_t bytes) {
    std::lock_guard<std::mutex> lk(g->mu);
    uintptr_t p = 0;
    for (auto it = g->free_ranges.begin(); it != g->free_ranges.end(); ++it)
        if (it->second >= bytes) {
            p = it->first;
            if (it->second > bytes) g->free_ranges[p + bytes] = it->second - bytes;
            g->free_ranges.erase(it);
            break;
        }
    if (p == 0) {
        if (g->top + bytes > race_base + DEVICE_ARENA) return nullptr;
        p = g->top;
        g->top += bytes;
    }
    g->live[p] = bytes;
    return (void*)p;
}

void race_device_free(void* p) {
    std::lock_guard<std::mutex> lk(g->mu);
    auto it = g->live.find((uintptr_t)p);
    if (it == g->live.end()) return;
    uintptr_t a = it->first;
    size_t n = it->second;
    g->live.erase(it);
    // forget every access to it: what is allocated there next starts clean
    Cell* c = g->shadow + (a - race_base);
    release(c, n * sizeof(Cell));
    const uintptr_t lo = ((uintptr_t)c + 4095) & ~(uintptr_t)4095, hi = ((uintptr_t)(c + n)) & ~(uintptr_t)4095;
    if (hi > lo) {
        memset(c, 0, lo - (uintptr_t)c);
        memset((void*)hi, 0, (uintptr_t)(c + n) - hi);
    } else {
        memset(c, 0, n * sizeof(Cell));
    }
    release(p, n);
    // back to the free ranges, joined with its neighbours
    auto next = g->free_ranges.lower_bound(a);
    if (next != g->free_ranges.end() && next->first == a + n) {
        n += next->second;
        g->free_ranges.erase(next);
    }
    auto prev = g->free_ranges.lower_bound(a);
    if (prev != g->free_ranges.begin() && (--prev)->first + prev->second == a) {
        a = prev->first;
        n += prev->second;
    }
    g->free_ranges[a] = n;
}

// The shared memory of the blocks a host thread runs: one region, reused block after block (a
// cell left by an earlier block is recognised as such: its thread is not of the running block)
struct SharedRegion {
    char* base = nullptr;
    size_t used = 0;
    ~SharedRegion() {
        if (base == nullptr || g == nullptr) return;
        std::lock_guard<std::mutex> lk(g->mu);
        g->free_regions.push_back(base);
    }
};
static thread_local SharedRegion tls_region;

void* race_shared_alloc(size_t bytes, size_t align) {
    SharedRegion& s = tls_region;
    if (s.base == nullptr) {
        std::lock_guard<std::mutex> lk(g->mu);
        if (!g->free_regions.empty()) {
            s.base = g->free_regions.back();
            g->free_regions.pop_back();
        } else if (g->regions_used < SHARED_ARENA / REGION) {
            s.base = (char*)race_base + DEVICE_ARENA + REGION * g->regions_used++;
        } else {
            fatal("EMU_RACECHECK=1: more than %zu host threads run blocks at once", SHARED_ARENA / REGION);
        }
    }
    const size_t at = (s.used + align - 1) / align * align;
    if (at + bytes > REGION) fatal("EMU_RACECHECK=1: a block's shared memory exceeds %zu bytes", REGION);
    s.used = at + (bytes + 15) / 16 * 16;
    return s.base + at;
}

// ---------------------------------------------------------------------------------------
// executions and the order between them

struct OpRun {
    const OpClock* clock = nullptr;  // the stream operation running on this host thread
    const char* what = nullptr;
    uint32_t exec = 0;               // its execution, when it is not a kernel (made at its first report)
    uint32_t memo_exec[2] = {0, 0};  // hb's last answers
    bool memo_hb[2] = {false, false};
};
static thread_local OpRun tls_op;

struct GridRun {
    const LaunchSpec* spec;
    uint32_t exec;
    uint32_t nthreads;  // a block's
};
static thread_local GridRun* tls_grid = nullptr;

static uint32_t new_exec(const char* name, bool kernel) {
    const uint32_t id = g->next_exec.fetch_add(1);
    if (id >= MAX_EXECS) fatal("EMU_RACECHECK=1: more than %zu kernels and stream operations", MAX_EXECS);
    const OpClock* c = tls_op.clock;
    g->execs[id] = ExecInfo{c != nullptr ? c->slot : 0, c != nullptr ? c->seq : 0, name, kernel};
    return id;
}

// does execution x come before the running operation (same operation: yes, its parts run in order)?
static bool hb(uint32_t x) {
    OpRun& op = tls_op;
    if (op.memo_exec[0] == x) return op.memo_hb[0];
    if (op.memo_exec[1] == x) return op.memo_hb[1];
    const ExecInfo& e = g->execs[x];
    bool before = true;
    if (op.clock != nullptr) before = e.slot < op.clock->vc.t.size() && op.clock->vc.t[e.slot] >= e.seq;
    op.memo_exec[1] = op.memo_exec[0], op.memo_hb[1] = op.memo_hb[0];
    op.memo_exec[0] = x, op.memo_hb[0] = before;
    return before;
}

void race_op_begin(const OpClock* clock, const char* what) {
    tls_op = OpRun();
    tls_op.clock = clock;
    tls_op.what = what;
}
void race_op_end() { tls_op = OpRun(); }

// ---------------------------------------------------------------------------------------
// blocks, warps, clocks

struct RaceWarp {
    uint32_t full = 0;                  // the time the last operation of all its lanes completed
    std::unique_ptr<uint32_t[]> pair;   // [a * 32 + b]: the last one with lanes a and b (partial masks)
};
struct RaceBlock {
    uint32_t first = 0, nthreads = 0;  // its threads' indices in the grid: first..first+nthreads-1
    uint32_t clock = 1;                // advances at every barrier and warp operation
    uint32_t barrier = 0;              // the clock when the last __syncthreads released
    std::vector<RaceWarp> warps;
};

RaceBlock* race_block_begin(uint64_t block_linear, int nthreads) {
    if (tls_grid == nullptr) return nullptr;
    RaceBlock* b = new RaceBlock();
    b->first = (uint32_t)(block_linear * (uint64_t)nthreads);
    b->nthreads = (uint32_t)nthreads;
    b->warps.resize((nthreads + 31) / 32);
    tls_region.used = 0;
    return b;
}
void race_block_end(RaceBlock* b) { delete b; }

void race_barrier(RaceBlock* b) { b->barrier = ++b->clock; }

void race_warp_op(RaceBlock* b, int warp, unsigned mask) {
    const uint32_t now = ++b->clock;
    const int lanes = std::min<int>(32, (int)b->nthreads - 32 * warp);
    const unsigned all = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
    RaceWarp& w = b->warps[warp];
    if ((mask & all) == all) {
        w.full = now;
        return;
    }
    if (!w.pair) w.pair.reset(new uint32_t[(size_t)32 * 32]());
    for (int i = 0; i < 32; i++)
        if (mask >> i & 1u)
            for (int j = 0; j < 32; j++)
                if (mask >> j & 1u) w.pair[i * 32 + j] = now;
}

// the running thread's access
struct Me {
    uint32_t exec, id, time, linear;
    RaceBlock* b;
    bool shared;
    uintptr_t off;  // of the access's first byte in the arena
};

static bool in_block(const RaceBlock* b, uint32_t who) { return (who & ID_MASK) - b->first < b->nthreads; }

// is the access (or set of accesses) who made at time ordered before the running thread's now?
static bool ordered(const Me& me, uint32_t who, uint32_t time) {
    const RaceBlock* b = me.b;
    const uint32_t lin = (who & ID_MASK) - b->first;
    if (lin >= b->nthreads || (who & F_BLOCKS)) return false;  // another block: nothing orders them
    if (b->barrier > time) return true;
    if (lin / 32 != me.linear / 32 || (who & F_WARPS)) return false;  // another warp: only a barrier
    const RaceWarp& w = b->warps[me.linear / 32];
    if (who & F_MANY) return w.full > time;
    if (lin == me.linear || w.full > time) return true;
    return w.pair && w.pair[lin % 32 * 32 + me.linear % 32] > time;
}

// adds the running thread to the set (who, time) of one execution's reads or atomic writes
static void join_set(const Me& me, uint32_t& who, uint32_t& time, uint32_t flag) {
    if (ordered(me, who, time)) {  // all of them come before this one, so it stands for them
        who = me.id | flag;
        time = me.time;
        return;
    }
    const uint32_t lin = (who & ID_MASK) - me.b->first;
    who |= F_MANY;
    if (lin >= me.b->nthreads) {
        who |= F_BLOCKS;
        return;
    }
    if (lin / 32 != me.linear / 32) who |= F_WARPS;
    time = std::max(time, me.time);
}

// ---------------------------------------------------------------------------------------
// reports

static std::string thread_name(uint32_t who) {
    const LaunchSpec* s = tls_grid->spec;
    const uint32_t id = who & ID_MASK, n = tls_grid->nthreads;
    const uint64_t b = id / n, t = id % n;
    char buf[160];
    snprintf(buf, sizeof(buf), "thread (%u,%u,%u) of block (%u,%u,%u)", (unsigned)(t % s->block.x),
             (unsigned)(t / s->block.x % s->block.y), (unsigned)(t / ((uint64_t)s->block.x * s->block.y)),
             (unsigned)(b % s->grid.x), (unsigned)(b / s->grid.x % s->grid.y),
             (unsigned)(b / ((uint64_t)s->grid.x * s->grid.y)));
    std::string r = buf;
    if (who & F_MANY) r += (who & F_BLOCKS) ? " and threads of other blocks" : " and other threads";
    return r;
}

static std::string memory_name(uintptr_t off) {
    char buf[200];
    if (off >= DEVICE_ARENA) {
        snprintf(buf, sizeof(buf), "shared memory (byte %zu of the block's)", (size_t)((off - DEVICE_ARENA) % REGION));
        return buf;
    }
    const uintptr_t a = race_base + off;
    std::lock_guard<std::mutex> lk(g->mu);
    auto it = g->live.upper_bound(a);
    if (it != g->live.begin() && (--it)->first + it->second > a)
        snprintf(buf, sizeof(buf), "global memory at %p (byte %zu of the %zu-byte allocation at %p)", (void*)a,
                 (size_t)(a - it->first), it->second, (void*)it->first);
    else
        snprintf(buf, sizeof(buf), "global memory at %p", (void*)a);
    return buf;
}

static const char* verb(RaceKind k) {
    switch (k) {
        case RACE_READ: return "reads";
        case RACE_WRITE: return "writes";
        case RACE_ATOMIC: return "updates atomically";
        case RACE_ATOMIC_LOAD: return "reads atomically";
        default: return "issues a cp.async to";
    }
}

static std::string op_name(uint32_t exec) {
    const ExecInfo& e = g->execs[exec];
    std::string r = e.kernel ? std::string("kernel ") + e.name : std::string(e.name);
    return r + (e.slot == 0 ? " (legacy default stream)" : " (stream #" + std::to_string(e.slot) + ")");
}

static bool is_read(RaceKind k) { return k == RACE_READ || k == RACE_ATOMIC_LOAD; }

// a hazard between two threads of the running grid
[[noreturn]] static void report(const Me& me, RaceKind k, bool with_write, uint32_t who) {
    const char* kind = !with_write ? "write-after-read" : is_read(k) ? "read-after-write" : "write-after-write";
    std::string other = thread_name(who), what;
    if (!with_write) what = other + " read it";
    else if (who & F_ASYNC)
        what = "a cp.async of " + other + " writes it, not yet completed by its cp.async.wait_group";
    else if (who & F_ATOMIC) what = other + " updated it atomically";
    else what = other + " wrote it";
    const char* order = "no __syncthreads (nor a warp operation both lanes took part in) orders the two";
    if (!in_block(me.b, who) || (who & F_BLOCKS)) order = "threads of different blocks of a grid are never ordered";
    else if ((who & F_ASYNC) && (who & ID_MASK) == me.id) order = "only its cp.async.wait_group would order them";
    else if (who & F_ASYNC) order = "only that thread's cp.async.wait_group, then a barrier, would order them";
    fatal("race: kernel %s: %s hazard on %s: %s %s it, and %s; %s", tls_grid->spec->name, kind,
          memory_name(me.off).c_str(), thread_name(me.id).c_str(), verb(k), what.c_str(), order);
}

// a hazard between the running operation and another (the bytes at off)
[[noreturn]] static void report_cross(uintptr_t off, RaceKind k, bool with_write, uint32_t other) {
    const char* kind = !with_write ? "write-after-read" : is_read(k) ? "read-after-write" : "write-after-write";
    const OpClock* c = tls_op.clock;
    std::string me = tls_grid != nullptr ? std::string("kernel ") + tls_grid->spec->name : std::string(tls_op.what);
    me += c == nullptr || c->slot == 0 ? " (legacy default stream)" : " (stream #" + std::to_string(c->slot) + ")";
    fatal("race: %s %s %s, which %s %s, and nothing orders the two (the same stream, cudaEventRecord then "
          "cudaStreamWaitEvent, or a synchronisation between): a %s hazard between streams",
          me.c_str(), is_read(k) ? "reads" : "writes", memory_name(off).c_str(), op_name(other).c_str(),
          with_write ? "wrote" : "read", kind);
}

// ---------------------------------------------------------------------------------------
// the check of one byte

static void check(const Me& me, Cell& c, RaceKind k) {
    if (me.shared) {  // shared memory lives as long as its block: anything else there is an earlier block's
        if (c.w_exec != me.exec || !in_block(me.b, c.w_who)) c.w_exec = 0;
        if (c.r_exec != me.exec || !in_block(me.b, c.r_who)) c.r_exec = 0;
    }
    if (k == RACE_ASYNC_DONE) {  // the copy is complete: from now on a plain write at this time
        if (c.w_exec == me.exec && c.w_who == (me.id | F_ASYNC)) c.w_who = me.id, c.w_time = me.time;
        return;
    }
    const bool atomic = k == RACE_ATOMIC || k == RACE_ATOMIC_LOAD;
    if (c.w_exec == me.exec) {
        if ((c.w_who & F_ASYNC) || (!(atomic && (c.w_who & F_ATOMIC)) && !ordered(me, c.w_who, c.w_time)))
            report(me, k, true, c.w_who);
    } else if (c.w_exec != 0 && !hb(c.w_exec)) {
        report_cross(me.off, k, true, c.w_exec);
    }
    if (is_read(k)) {
        if (k == RACE_ATOMIC_LOAD) return;
        if (c.r_exec == me.exec) {
            join_set(me, c.r_who, c.r_time, 0);
        } else if (c.r_exec == 0 || hb(c.r_exec)) {
            c.r_exec = me.exec, c.r_who = me.id, c.r_time = me.time;
        }  // else another stream's operation reads it at the same time (allowed): it stays remembered
        return;
    }
    if (c.r_exec == me.exec) {
        if (!ordered(me, c.r_who, c.r_time)) report(me, k, false, c.r_who);
    } else if (c.r_exec != 0 && !hb(c.r_exec)) {
        report_cross(me.off, k, false, c.r_exec);
    }
    if (k == RACE_ATOMIC && c.w_exec == me.exec && (c.w_who & F_ATOMIC)) {
        join_set(me, c.w_who, c.w_time, F_ATOMIC);
    } else {
        c.w_exec = me.exec;
        c.w_who = me.id | (k == RACE_ATOMIC ? F_ATOMIC : k == RACE_ASYNC ? F_ASYNC : 0);
        c.w_time = me.time;
    }
    c.r_exec = 0;  // the reads before are ordered before this write, so before any write ordered after it
}

void race_kernel_access(uintptr_t off, size_t bytes, RaceKind kind) {
    const ThreadState* t = tls_thread;
    RaceBlock* b = t->block->race;
    if (b == nullptr || tls_grid == nullptr) return;  // a kernel that runs without the check
    bytes = std::min<size_t>(bytes, race_size - off);
    Me me{tls_grid->exec, b->first + (uint32_t)t->linear, b->clock, (uint32_t)t->linear, b, off >= DEVICE_ARENA, off};
    Cell* c = g->shadow + off;
    if (bytes == 0) return;
    // A byte whose cell held what the first byte's held ends as the first byte's did: check is
    // a function of the cell, the thread and the kind (and a hazard there would have stopped the
    // program at the first byte). The bytes of one load or store mostly share their history.
    const Cell first = c[0];
    check(me, c[0], kind);
    for (size_t i = 1; i < bytes; i++) {
        me.off++;
        if (memcmp(&c[i], &first, sizeof(Cell)) == 0) c[i] = c[0];
        else check(me, c[i], kind);
    }
}

void race_run_grid(const LaunchSpec& spec, const std::function<void()>& body, Order order) {
    const uint64_t threads = (uint64_t)spec.block.x * spec.block.y * spec.block.z;
    const uint64_t total = threads * spec.grid.x * spec.grid.y * spec.grid.z;
    if (total >= NO_THREAD)
        fatal("EMU_RACECHECK=1: kernel %s has %llu threads; the race check tells at most %u apart", spec.name,
              (unsigned long long)total, NO_THREAD - 1);
    GridRun run{&spec, new_exec(spec.name, true), (uint32_t)threads};
    GridRun* saved = tls_grid;
    tls_grid = &run;
    run_grid(spec, body, order, true);  // blocks on this host thread: the check's state is its own
    tls_grid = saved;
}

// ---------------------------------------------------------------------------------------
// what the emulator's own code reports

void race_range(const void* p, size_t bytes, bool write) {
    const uintptr_t off0 = (uintptr_t)p - race_base;
    if (off0 >= DEVICE_ARENA || tls_op.clock == nullptr || race_size == 0) return;
    bytes = std::min<size_t>(bytes, DEVICE_ARENA - off0);
    if (tls_op.exec == 0) tls_op.exec = new_exec(tls_op.what, false);
    const uint32_t me = tls_op.exec;
    Cell* c = g->shadow + off0;
    for (size_t i = 0; i < bytes; i++) {
        Cell& x = c[i];
        if (x.w_exec != me && x.w_exec != 0 && !hb(x.w_exec))
            report_cross(off0 + i, write ? RACE_WRITE : RACE_READ, true, x.w_exec);
        if (write) {
            if (x.r_exec != me && x.r_exec != 0 && !hb(x.r_exec)) report_cross(off0 + i, RACE_WRITE, false, x.r_exec);
            x = Cell{me, NO_THREAD, 0, 0, 0, 0};
        } else if (x.r_exec != me && (x.r_exec == 0 || hb(x.r_exec))) {
            x.r_exec = me, x.r_who = NO_THREAD, x.r_time = 0;
        }
    }
}

void race_shared_read(const void* p, size_t bytes) { race_access(p, bytes, RACE_READ); }

void race_cp_async_issue(void* dst, size_t bytes, const void* src, size_t src_bytes) {
    if (src_bytes > 0) race_access(src, src_bytes, RACE_READ);
    race_access(dst, bytes, RACE_ASYNC);
}
void race_cp_async_done(void* dst, size_t bytes) { race_access(dst, bytes, RACE_ASYNC_DONE); }

}  // namespace emu
