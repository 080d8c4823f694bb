// emu_exec.cpp: how the emulated GPU runs a kernel (llmc/emu/emu.h): a grid of blocks, each
// block's threads fibers of one host thread, switched at every barrier and warp operation.
//
// A block runs in rounds. A round runs, in the order EMU_ORDER asks, every thread that was
// ready when it began, each until it blocks (at __syncthreads or a warp operation) or ends.
// The last thread to reach a barrier releases the others for the next round. A round with
// nobody ready while threads still wait is a deadlock, reported with who waits where.
#include "emu_internal.h"
#include "ptx.h"        // ptx_thread_exit, ptx_thread_barrier: cp.async copies at a thread's end, barrier
#include "racecheck.h"  // race_block_begin, race_barrier, race_warp_op, race_shared_alloc: EMU_RACECHECK=1

#include <sys/mman.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <random>
#include <memory>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_ASAN 1
#endif
#endif
#ifdef EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

thread_local emu::ThreadState* emu::tls_thread = nullptr;

namespace emu {

// ---------------------------------------------------------------------------------------
// fibers: a stack and a saved stack pointer; emu_ctx_switch saves the callee-saved registers
// on the current stack, stores the stack pointer in *from and continues on to's stack. The
// floating-point control words (rounding mode) are shared: no kernel changes them, and
// saving them made a switch a quarter slower.

#if !defined(__x86_64__)
#error "the emulated GPU's fibers are written for x86-64"
#endif

extern "C" void emu_ctx_switch(void** from, void* to);
asm(R"(
    .text
    .globl emu_ctx_switch
    .type emu_ctx_switch, @function
emu_ctx_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_ctx_switch, .-emu_ctx_switch
)");

#ifdef EMU_ASAN
constexpr size_t FIBER_STACK = 512 << 10;  // ASan's redzones make frames several times larger
#else
constexpr size_t FIBER_STACK = 128 << 10;
#endif

enum FiberState { FIBER_NEW, FIBER_READY, FIBER_READY_NEXT, FIBER_BLOCKED, FIBER_DONE };

struct Fiber {
    ThreadState ts;
    void* sp = nullptr;
    char* stack = nullptr;  // lowest address of its stack (guard page below)
    FiberState state = FIBER_NEW;
    const char* waits_at = nullptr;  // what it is blocked in
    bool at_barrier = false;         // blocked in __syncthreads
    const void* active_site = nullptr;  // blocked in the __activemask called from here
    unsigned active_mask = 0;           // what that __activemask returns
};

struct Warp {
    unsigned arrived = 0;  // lanes at the current operation
    unsigned mask = 0;
    const char* what = nullptr;
    unsigned gen = 0;
    size_t bytes = 0;
    unsigned char buf[2][32][64];  // by generation parity: a lane cannot be two operations ahead
                                   // (left uninitialised: a block has up to 32 warps)
};

struct SharedVar {
    const void* site;
    void* ptr;
    size_t bytes;
};

// the block running on this host thread
struct BlockRun {
    const LaunchSpec* spec;
    Order order;
    const std::function<void()>* body;
    BlockState bs;
    std::vector<Fiber> fibers;
    std::unique_ptr<Warp[]> warps;
    int live = 0;             // threads not yet ended
    int barrier_arrived = 0;  // at __syncthreads
    int active_waiting = 0;   // threads in __activemask
    std::vector<SharedVar> shared;
    size_t shared_static_bytes = 0;
    void* dynamic_smem = nullptr;
    void* sched_sp = nullptr;  // the scheduler's saved stack pointer
    Fiber* current = nullptr;
    void* asan_fake = nullptr;
    const void* sched_stack_bottom = nullptr;
    size_t sched_stack_size = 0;
};
static thread_local BlockRun* tls_block = nullptr;
static thread_local std::vector<char*> tls_free_stacks;

static char* stack_get() {
    if (!tls_free_stacks.empty()) {
        char* s = tls_free_stacks.back();
        tls_free_stacks.pop_back();
        return s;
    }
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void* m = mmap(nullptr, FIBER_STACK + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (m == MAP_FAILED) fatal("emulated GPU: no memory for a thread's stack");
    mprotect(m, page, PROT_NONE);  // a guard page: a stack overflow faults instead of corrupting
    return (char*)m + page;
}

// switching between the scheduler and a fiber, with ASan told about the stacks
static void switch_to_fiber(BlockRun* r, Fiber* f) {
#ifdef EMU_ASAN
    __sanitizer_start_switch_fiber(&r->asan_fake, f->stack, FIBER_STACK);
#endif
    r->current = f;
    tls_thread = &f->ts;
    emu_ctx_switch(&r->sched_sp, f->sp);
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(r->asan_fake, nullptr, nullptr);
#endif
    r->current = nullptr;
    tls_thread = nullptr;
}

static void switch_to_scheduler(BlockRun* r, Fiber* f, bool ending) {
#ifdef EMU_ASAN
    void* fake = nullptr;
    __sanitizer_start_switch_fiber(ending ? nullptr : &fake, r->sched_stack_bottom, r->sched_stack_size);
    emu_ctx_switch(&f->sp, r->sched_sp);
    __sanitizer_finish_switch_fiber(fake, &r->sched_stack_bottom, &r->sched_stack_size);
#else
    (void)ending;
    emu_ctx_switch(&f->sp, r->sched_sp);
#endif
}

// every thread waiting at __syncthreads goes on in the next round
static void release_barrier(BlockRun* r) {
    r->barrier_arrived = 0;
    if (r->bs.race != nullptr) race_barrier(r->bs.race);
    for (Fiber& o : r->fibers)
        if (o.state == FIBER_BLOCKED && o.at_barrier) o.state = FIBER_READY_NEXT;
}

static void fiber_entry() {
    BlockRun* r = tls_block;
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &r->sched_stack_bottom, &r->sched_stack_size);
#endif
    Fiber* f = r->current;
    (*r->body)();
    ptx_thread_exit();
    // the thread ended: an exited thread counts as arrived at __syncthreads; a warp
    // operation that still waits for it can never complete
    f->state = FIBER_DONE;
    r->live--;
    const int w = f->ts.linear / 32;
    Warp& wp = r->warps[w];
    if (wp.arrived != 0 && (wp.mask >> (f->ts.linear & 31) & 1u))
        fatal("kernel %s, block (%u,%u,%u): thread %d exited while lanes of its warp wait for it in %s (mask 0x%08x)",
              r->spec->name, r->bs.idx.x, r->bs.idx.y, r->bs.idx.z, f->ts.linear, wp.what, wp.mask);
    if (r->barrier_arrived > 0 && r->barrier_arrived == r->live) release_barrier(r);
    switch_to_scheduler(r, f, true);
    __builtin_unreachable();
}

static void fiber_start(Fiber* f) {
    f->stack = stack_get();
#ifdef EMU_ASAN
    // A reused stack still carries the redzones of the frames that were live when its thread
    // ended: fiber_entry's and the switch's, at the top (every deeper frame had returned and
    // unpoisoned its own)
    __asan_unpoison_memory_region(f->stack + FIBER_STACK - (16 << 10), 16 << 10);
#endif
    // the initial frame emu_ctx_switch pops: six registers, then fiber_entry as the return
    // address at a 16-byte aligned slot (so fiber_entry starts as a called function would)
    uintptr_t top = ((uintptr_t)(f->stack + FIBER_STACK)) & ~(uintptr_t)15;
    uint64_t* entry = (uint64_t*)(top - 16);
    entry[0] = (uint64_t)(uintptr_t)&fiber_entry;
    entry[1] = 0;
    uint64_t* sp = entry - 6;
    memset(sp, 0, 6 * sizeof(uint64_t));
    f->sp = sp;
    f->state = FIBER_READY;
}

// the running fiber waits; the scheduler resumes it when it is released
static void block_here(BlockRun* r, const char* what, bool barrier) {
    Fiber* f = r->current;
    f->state = FIBER_BLOCKED;
    f->waits_at = what;
    f->at_barrier = barrier;
    switch_to_scheduler(r, f, false);
    f->waits_at = nullptr;
    f->at_barrier = false;
}

void block_barrier() {
    BlockRun* r = tls_block;
    if (r == nullptr || r->current == nullptr) fatal("__syncthreads called outside a kernel");
    ptx_thread_barrier();  // its cp.async copies due by its next barrier land
    r->barrier_arrived++;
    if (r->barrier_arrived == r->live) {
        release_barrier(r);
        // the last one yields too, so the next phase starts in the order asked for
        r->current->state = FIBER_READY_NEXT;
        switch_to_scheduler(r, r->current, false);
        return;
    }
    block_here(r, "__syncthreads", true);
}

// __activemask: the caller waits until release_active_masks finds every live lane of its warp
// waiting (anywhere) or exited; then the lanes waiting in the same call are the active ones.
unsigned warp_active_mask() {
    const void* site = __builtin_return_address(0);  // in the kernel: __activemask is always_inline
    BlockRun* r = tls_block;
    if (r == nullptr || r->current == nullptr) fatal("__activemask called outside a kernel");
    Fiber* f = r->current;
    f->active_site = site;
    r->active_waiting++;
    block_here(r, "__activemask", false);
    return f->active_mask;
}

// After a round: in every warp whose live lanes all wait (none ready or yet to start) and some
// of them in __activemask, each of those learns which lanes wait at its call site and goes on
// in the next round. Returns whether any did.
static bool release_active_masks(BlockRun* r) {
    if (r->active_waiting == 0) return false;
    bool released = false;
    const int n = (int)r->fibers.size();
    for (int w0 = 0; w0 < n; w0 += 32) {
        const int w1 = std::min(n, w0 + 32);
        bool waiting = false, can_run = false;
        for (int t = w0; t < w1; t++) {
            const Fiber& f = r->fibers[t];
            waiting |= f.active_site != nullptr;
            can_run |= f.state == FIBER_NEW || f.state == FIBER_READY || f.state == FIBER_READY_NEXT;
        }
        if (!waiting || can_run) continue;
        for (int t = w0; t < w1; t++) {
            Fiber& f = r->fibers[t];
            if (f.active_site == nullptr) continue;
            unsigned m = 0;
            for (int o = w0; o < w1; o++)
                if (r->fibers[o].active_site == f.active_site) m |= 1u << (o - w0);
            f.active_mask = m;
        }
        for (int t = w0; t < w1; t++) {
            Fiber& f = r->fibers[t];
            if (f.active_site == nullptr) continue;
            f.active_site = nullptr;
            f.state = FIBER_READY_NEXT;
            r->active_waiting--;
        }
        released = true;
    }
    return released;
}

// The meeting of a warp operation: returns the 32 slots of this generation, every lane of mask
// having written its bytes; valid until the calling lane's next warp operation (the slots of
// generation g are rewritten at g + 2, which no lane reaches before this one has met g + 1).
static const unsigned char (*warp_meet(unsigned mask, const void* mine, size_t bytes, const char* what))[64] {
    BlockRun* r = tls_block;
    if (r == nullptr || r->current == nullptr) fatal("%s called outside a kernel", what);
    if (bytes > 64) fatal("warp_exchange: %zu bytes (at most 64)", bytes);
    Fiber* f = r->current;
    const int lane = f->ts.linear & 31, w = f->ts.linear / 32;
    const char* where = r->spec->name;
    Warp& wp = r->warps[w];
    if (wp.arrived == 0) {
        // the first lane here checks the mask for all
        if (!(mask >> lane & 1u))
            fatal("kernel %s: thread %d calls %s with mask 0x%08x, which leaves its own lane %d out", where,
                  f->ts.linear, what, mask, lane);
        const int nthreads = (int)r->fibers.size();
        for (int l = 0; l < 32; l++) {
            if (!(mask >> l & 1u)) continue;
            if (w * 32 + l >= nthreads)
                fatal("kernel %s: %s with mask 0x%08x names lane %d, which the block (%d threads) does not have",
                      where, what, mask, l, nthreads);
            if (r->fibers[w * 32 + l].state == FIBER_DONE)
                fatal("kernel %s: thread %d calls %s with mask 0x%08x, but lane %d of its warp has exited", where,
                      f->ts.linear, what, mask, l);
        }
        wp.mask = mask;
        wp.what = what;
        wp.bytes = bytes;
    } else if (wp.mask != mask || wp.bytes != bytes || (wp.what != what && strcmp(wp.what, what) != 0)) {
        fatal("kernel %s, block (%u,%u,%u): warp %d: thread %d meets %s (mask 0x%08x) while lanes 0x%08x wait in %s "
              "(mask 0x%08x)",
              where, r->bs.idx.x, r->bs.idx.y, r->bs.idx.z, w, f->ts.linear, what, mask, wp.arrived, wp.what, wp.mask);
    }
    const unsigned gen = wp.gen;
    memcpy(wp.buf[gen & 1][lane], mine, bytes);
    wp.arrived |= 1u << lane;
    if (wp.arrived == mask) {
        if (r->bs.race != nullptr) race_warp_op(r->bs.race, w, mask);
        for (int l = 0; l < 32; l++) {
            if (!(mask >> l & 1u)) continue;
            Fiber& o = r->fibers[w * 32 + l];
            if (o.state == FIBER_BLOCKED) o.state = FIBER_READY_NEXT;
        }
        wp.arrived = 0;
        wp.gen++;
        f->state = FIBER_READY_NEXT;
        switch_to_scheduler(r, f, false);
    } else {
        block_here(r, what, false);
    }
    return wp.buf[gen & 1];
}

void warp_exchange(unsigned mask, const void* mine, void* all, size_t bytes, const char* what) {
    const unsigned char(*slots)[64] = warp_meet(mask, mine, bytes, what);
    unsigned char* out = (unsigned char*)all;
    for (int l = 0; l < 32; l++) {
        if (mask >> l & 1u) memcpy(out + l * bytes, slots[l], bytes);
        else memset(out + l * bytes, 0, bytes);
    }
}

const unsigned char* warp_exchange_view(unsigned mask, const void* mine, size_t bytes, const char* what) {
    return warp_meet(mask, mine, bytes, what)[0];
}

void warp_exchange_one(unsigned mask, const void* mine, void* out, size_t bytes, int src_lane, const char* what) {
    const unsigned char(*slots)[64] = warp_meet(mask, mine, bytes, what);
    if (mask >> src_lane & 1u) memcpy(out, slots[src_lane], bytes);
    else memset(out, 0, bytes);  // undefined on the GPU; zeros here
}

// A cp.async lands at its wait in forward order, at its issue in reverse, and when shuffled
// at a moment a hash of the seed and the copy picks (emu.h)
CpAsyncLanding cp_async_landing(uint64_t salt) {
    const Order o = tls_block != nullptr ? tls_block->order : Order{ORDER_FORWARD, 0};
    if (o.kind != ORDER_SHUFFLE) return o.kind == ORDER_FORWARD ? CP_ASYNC_AT_WAIT : CP_ASYNC_AT_ISSUE;
    uint64_t x = salt + o.seed * 0x9e3779b97f4a7c15ULL;  // splitmix64's finaliser
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return (CpAsyncLanding)((x ^ (x >> 31)) % 3);
}

// ---------------------------------------------------------------------------------------
// shared memory

void* shared_alloc(const void* site, size_t bytes, size_t align) {
    BlockRun* r = tls_block;
    if (r == nullptr) fatal("__shared__ memory used outside a kernel");
    for (const SharedVar& v : r->shared)
        if (v.site == site) return v.ptr;
    r->shared_static_bytes += bytes;
    const size_t limit = std::max<size_t>(SMEM_DEFAULT_LIMIT, kernel_max_dynamic_smem(r->spec->kernel));
    if (r->shared_static_bytes + r->spec->smem > limit)
        fatal("kernel %s: %zu bytes of static and %zu of dynamic shared memory: too many resources requested for "
              "launch (at most %zu)",
              r->spec->name, r->shared_static_bytes, r->spec->smem, limit);
    void* p = r->bs.race != nullptr ? race_shared_alloc(bytes, std::max<size_t>(align, 16))
                                    : aligned_alloc(std::max<size_t>(align, 16), (bytes + 15) / 16 * 16);
    memset(p, 0xff, bytes);  // uninitialised shared memory reads as NaN
    r->shared.push_back(SharedVar{site, p, bytes});
    return p;
}

void* shared_dynamic_ptr() {
    BlockRun* r = tls_block;
    if (r == nullptr) fatal("extern __shared__ memory used outside a kernel");
    return r->dynamic_smem;
}

size_t shared_dynamic_bytes() {
    BlockRun* r = tls_block;
    if (r == nullptr) fatal("extern __shared__ memory used outside a kernel");
    return r->spec->smem;
}

bool shared_range(const void* p, size_t bytes) {
    const BlockRun* r = tls_block;
    if (r == nullptr) return false;
    const char* q = static_cast<const char*>(p);
    auto inside = [&](const void* base, size_t n) {
        const char* b = static_cast<const char*>(base);
        return b != nullptr && q >= b && q + bytes <= b + n;
    };
    if (inside(r->dynamic_smem, r->spec->smem)) return true;
    for (const SharedVar& v : r->shared)
        if (inside(v.ptr, v.bytes)) return true;
    return false;
}

// ---------------------------------------------------------------------------------------
// a block, a grid

static std::vector<int> order_of(int n, Order order, uint64_t seed) {
    std::vector<int> idx(n);
    for (int i = 0; i < n; i++) idx[i] = order.kind == ORDER_REVERSE ? n - 1 - i : i;
    if (order.kind == ORDER_SHUFFLE) {
        std::mt19937_64 rng(order.seed * 0x9e3779b97f4a7c15ULL ^ seed);
        std::shuffle(idx.begin(), idx.end(), rng);
    }
    return idx;
}

static void run_block(const LaunchSpec& spec, const std::function<void()>& body, dim3 bidx, Order order,
                      uint64_t block_linear) {
    BlockRun r;
    r.spec = &spec;
    r.order = order;
    r.body = &body;
    r.bs.idx = bidx;
    r.bs.dim = spec.block;
    r.bs.grid = spec.grid;
    const int n = (int)(spec.block.x * spec.block.y * spec.block.z);
    r.fibers.resize(n);
    r.warps.reset(new Warp[(n + 31) / 32]);
    r.live = n;
    for (int i = 0; i < n; i++) {
        Fiber& f = r.fibers[i];
        f.ts.linear = i;
        f.ts.idx = dim3(i % spec.block.x, (i / spec.block.x) % spec.block.y, i / (spec.block.x * spec.block.y));
        f.ts.block = &r.bs;
    }
    r.bs.race = race_block_begin(block_linear, n);
    if (spec.smem > 0) {
        r.dynamic_smem = r.bs.race != nullptr ? race_shared_alloc(spec.smem, 128)
                                              : aligned_alloc(128, (spec.smem + 127) / 128 * 128);
        memset(r.dynamic_smem, 0xff, spec.smem);
    }
    BlockRun* saved = tls_block;
    ThreadState* saved_thread = tls_thread;
    tls_block = &r;
    std::vector<int> ids = order_of(n, order, block_linear * 1000003ULL);
    for (uint64_t round = 0;; round++) {
        for (Fiber& f : r.fibers)
            if (f.state == FIBER_READY_NEXT) f.state = FIBER_READY;
        if (order.kind == ORDER_SHUFFLE && round > 0) ids = order_of(n, order, block_linear * 1000003ULL + round);
        bool ran = false;
        for (int i : ids) {
            Fiber& f = r.fibers[i];
            if (f.state == FIBER_NEW) fiber_start(&f);
            if (f.state != FIBER_READY) continue;
            ran = true;
            switch_to_fiber(&r, &f);
            if (f.state == FIBER_DONE && f.stack != nullptr) {
                tls_free_stacks.push_back(f.stack);
                f.stack = nullptr;
            }
        }
        if (r.live == 0) break;
        const bool released = release_active_masks(&r);
        if (!ran && !released) {
            std::string who;
            for (const Fiber& f : r.fibers)
                if (f.state == FIBER_BLOCKED && who.size() < 400)
                    who += " thread " + std::to_string(f.ts.linear) + " in " + f.waits_at + ";";
            fatal("kernel %s, block (%u,%u,%u): deadlock: %d threads wait and none can go on:%s", spec.name, bidx.x,
                  bidx.y, bidx.z, r.live, who.c_str());
        }
    }
    tls_block = saved;
    tls_thread = saved_thread;
    if (r.bs.race != nullptr) {
        race_block_end(r.bs.race);  // its shared memory is the host thread's region, used again
        return;
    }
    for (SharedVar& v : r.shared) free(v.ptr);
    free(r.dynamic_smem);
}

// Blocks run on a team of host threads (EMU_THREADS, default the machine's cores, at most 8):
// the caller and helpers that take the next block of the order from a shared counter. Blocks
// are independent in CUDA's model; a kernel whose blocks depend on each other shows it under
// EMU_RACECHECK (which runs a grid's blocks on one host thread, strictly in order).
struct BlockTeam {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::thread> helpers;
    uint64_t job = 0;  // incremented per grid handed to the helpers
    int busy = 0;      // helpers still on the current grid
    std::function<void()> work;
};

static int team_size() {
    static const int n = [] {
        const char* e = getenv("EMU_THREADS");
        int v = e != nullptr ? atoi(e) : (int)std::thread::hardware_concurrency();
        return std::max(1, std::min(v, 8));
    }();
    return n;
}

static BlockTeam* team() {
    static BlockTeam* t = [] {
        BlockTeam* t = new BlockTeam();  // never destroyed: helpers may outlive main
        for (int i = 1; i < team_size(); i++)
            t->helpers.emplace_back([t] {
                uint64_t seen = 0;
                std::unique_lock<std::mutex> lk(t->mu);
                for (;;) {
                    t->cv.wait(lk, [&] { return t->job != seen; });
                    seen = t->job;
                    std::function<void()> w = t->work;
                    lk.unlock();
                    w();
                    lk.lock();
                    if (--t->busy == 0) t->cv.notify_all();
                }
            });
        return t;
    }();
    return t;
}

void run_grid(const LaunchSpec& spec, const std::function<void()>& body, Order order, bool one_thread) {
    const uint64_t nblocks = (uint64_t)spec.grid.x * spec.grid.y * spec.grid.z;
    std::vector<uint64_t> ids(nblocks);
    for (uint64_t i = 0; i < nblocks; i++) ids[i] = order.kind == ORDER_REVERSE ? nblocks - 1 - i : i;
    if (order.kind == ORDER_SHUFFLE) {
        std::mt19937_64 rng(order.seed * 0x2545f4914f6cdd1dULL + 7);
        std::shuffle(ids.begin(), ids.end(), rng);
    }
    std::atomic<uint64_t> next{0};
    auto run_blocks = [&]() {
        for (uint64_t i; (i = next.fetch_add(1)) < nblocks;) {
            const uint64_t b = ids[i];
            dim3 bidx((unsigned)(b % spec.grid.x), (unsigned)((b / spec.grid.x) % spec.grid.y),
                      (unsigned)(b / ((uint64_t)spec.grid.x * spec.grid.y)));
            run_block(spec, body, bidx, order, b);
        }
    };
    // one grid at a time uses the team (two streams' kernels may run at once: the second
    // then runs alone on its stream's thread)
    static std::atomic<bool> team_taken{false};
    bool expected = false;
    if (one_thread || nblocks < 2 || team_size() == 1 || !team_taken.compare_exchange_strong(expected, true)) {
        run_blocks();
        return;
    }
    BlockTeam* t = team();
    {
        std::lock_guard<std::mutex> lk(t->mu);
        t->work = run_blocks;
        t->busy = (int)t->helpers.size();
        t->job++;
    }
    t->cv.notify_all();
    run_blocks();
    {
        std::unique_lock<std::mutex> lk(t->mu);
        t->cv.wait(lk, [&] { return t->busy == 0; });
        t->work = nullptr;
    }
    team_taken.store(false);
}

}  // namespace emu
