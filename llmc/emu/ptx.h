// ptx.h: the emulated GPU's PTX instructions, the bodies of llmc/cuda/ptx.cuh's wrappers in the
// emulated build. Each is written from the PTX ISA's definition of the instruction (section
// 9.7 "Warp Level Matrix Multiply-Accumulate Instructions": "Matrix Fragments for mma.m16n8k16
// with floating point type" and "Warp-level matrix load instruction: ldmatrix"; 9.7.9 "cp.async"),
// not from what our kernels assume of it, so a kernel that puts a fragment in the wrong
// register gets the wrong product here as it would on the GPU.
// defines: emu::mma_m16n8k16_bf16_f32, emu::ldmatrix_m8n8_b16, emu::cp_async,
//          emu::cp_async_commit_group, emu::cp_async_wait_group, emu::cp_async_wait_all,
//          emu::bulk_reduce_add_f32, emu::bulk_commit_group, emu::bulk_wait_group,
//          emu::shared_address, emu::wgmma_element_address, emu::wgmma_m64nNk16_bf16_f32,
//          emu::wgmma_commit_group, emu::wgmma_wait_group, emu::ptx_thread_barrier, emu::ptx_thread_exit,
//          emu::ex2_approx_ftz
//
// Fragment layouts, with g = laneid >> 2 (groupID), t = laneid % 4 (threadID_in_group); a
// register of two 16-bit elements holds the lower-numbered element in its low half ("Elements
// (low to high)" in the ISA's tables):
//   mma.m16n8k16 A (16 x 16, .bf16, a0..a7 in 4 registers):
//       row = g for ai with i < 2 or 4 <= i < 6, else g + 8
//       col = 2t + (i & 1) for i < 4, else 2t + (i & 1) + 8
//   mma.m16n8k16 B (16 x 8, .bf16, b0..b3 in 2 registers):
//       row = 2t + (i & 1) for i < 2, else 2t + (i & 1) + 8;   col = g
//   mma.m16n8k16 C and D (16 x 8, .f32, c0..c3):
//       row = g for ci with i < 2, else g + 8;   col = 2t + (i & 1)
//   ldmatrix .m8n8 .b16: lanes 8j..8j+7 give the addresses of rows 0..7 of matrix j (x1: j = 0,
//       x2: j < 2, x4: j < 4; the other lanes' addresses are not read); register j of lane l
//       holds row g, columns 2t and 2t+1 of matrix j; with .trans the matrix is read in column
//       major order, so the register holds elements (2t, g) and (2t+1, g) of the rows given.
#pragma once
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <unordered_map>
#include <vector>
#include "emu.h"

namespace emu {

// In a race-check build (emu.mk's build/emu/race/) the program's code, this header's inline
// functions with it, calls the race check at every load and store. The instructions below that
// read shared memory tell the race check of their reads themselves (race_shared_read), once a
// run of bytes; the loads of their own working arrays, and their copies of what they checked,
// are the emulator's bookkeeping, not the kernel's accesses. EMU_UNCHECKED keeps the
// instrumentation out of those functions and of the helpers their loops call (their loops have
// no lambda: one would be instrumented, and not inlined). dev/cuda programs at --quick under
// EMU_RACECHECK=1 on 2 cores (2026-11-30): attention_wgmma bf16 61 s -> 13 s, attention bf16
// 41 s -> 19 s, gqa bf16 13 s -> 6 s.
#define EMU_UNCHECKED __attribute__((no_sanitize("thread")))

// "thread (x,y,z) of block (x,y,z)" of the running emulated thread, for messages
struct PtxWhere {
    char text[96];
};
inline PtxWhere ptx_where() {
    PtxWhere w;
    const ThreadState* t = tls_thread;
    snprintf(w.text, sizeof(w.text), "thread (%u,%u,%u) of block (%u,%u,%u)", t->idx.x, t->idx.y, t->idx.z,
             t->block->idx.x, t->block->idx.y, t->block->idx.z);
    return w;
}

// the float a bf16's bits stand for (bf16 is the upper half of an IEEE float)
EMU_UNCHECKED inline float ptx_bf16_bits_to_float(uint16_t bits) {
    uint32_t u = (uint32_t)bits << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
// the bf16 in half `half` (0: the lower 16 bits) of a 32-bit register
EMU_UNCHECKED inline float ptx_bf16_half(uint32_t reg, int half) {
    return ptx_bf16_bits_to_float((uint16_t)(reg >> (16 * half)));
}

// ---------------------------------------------------------------------------------------
// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 d, a, b, d: D = A B + C over the warp.
// Every lane gives its fragments; each computes its own part of D from the row of A and the
// column of B it needs, found in the 32 lanes' fragments by the ISA's tables. The products of two bf16 are
// exact in fp32; they are summed in fp32 onto C in k order (the tensor core's order and
// intermediate precision are not specified; this is one fp32 order).

EMU_UNCHECKED inline void mma_m16n8k16_bf16_f32(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    struct Fragments {
        uint32_t a[4];
        uint32_t b[2];
        float c[4];
    };
    static_assert(sizeof(Fragments) <= 64, "warp_exchange moves at most 64 bytes a lane");
    Fragments mine = {{a[0], a[1], a[2], a[3]}, {b0, b1}, {d[0], d[1], d[2], d[3]}};
    const unsigned char* slots =
        warp_exchange_view(0xffffffffu, &mine, sizeof(Fragments), "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32");
    // Each lane computes its own four elements of D, fetching A's row and B's column from the
    // lanes that hold them: the tables above, inverted. A (row, col): lane (row % 8) * 4 +
    // (col % 8) / 2, element i = 4 [col >= 8] + 2 [row >= 8] + col % 2; B (k, n): lane n * 4 +
    // (k % 8) / 2, element i = 2 [k >= 8] + k % 2; element i sits in register i / 2, half i % 2.
    const int lane = lane_id(), g = lane >> 2, t = lane % 4;
    // the lane's two rows of A (g, g + 8) and two columns of B (2t, 2t + 1), fetched once
    float arow[2][16], bcol[2][16];
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 16; k++) {
            const int row = g + 8 * i, col = t * 2 + i;
            const int ia = 4 * (k >= 8) + 2 * (row >= 8) + (k & 1);
            const int ib = 2 * (k >= 8) + (k & 1);
            const size_t la = (size_t)((row % 8) * 4 + (k % 8) / 2), lb = (size_t)(col * 4 + (k % 8) / 2);
            const Fragments* fa = reinterpret_cast<const Fragments*>(slots + 64 * la);
            const Fragments* fb = reinterpret_cast<const Fragments*>(slots + 64 * lb);
            arow[i][k] = ptx_bf16_half(fa->a[ia / 2], ia & 1);
            bcol[i][k] = ptx_bf16_half(fb->b[ib / 2], ib & 1);
        }
    for (int j = 0; j < 4; j++) {  // dj, laid out as cj: row g + 8 (j >= 2), column 2t + (j & 1)
        const float* av = arow[j >> 1];
        const float* bv = bcol[j & 1];
        float acc = mine.c[j];
        for (int k = 0; k < 16; k++) acc += av[k] * bv[k];
        d[j] = acc;
    }
}

// ---------------------------------------------------------------------------------------
// ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{,.trans}.shared.b16 r, [row]: num (1, 2 or 4) 8x8
// matrices of 16-bit elements from shared memory. Each lane that gives a row address (lanes
// 0..8*num-1) reads its 16-byte row as it arrives, and the warp exchanges the rows themselves:
// every lane then has all 8*num rows and takes its fragment of each matrix.

EMU_UNCHECKED inline void ldmatrix_m8n8_b16(int num, bool trans, uint32_t* r, const void* row) {
    if (num != 1 && num != 2 && num != 4) fatal("ldmatrix: .x%d: the ISA has .x1, .x2 and .x4", num);
    const int lane = lane_id();
    uint16_t mine[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (lane < 8 * num) {
        if (((uintptr_t)row & 15) != 0)
            fatal("ldmatrix: %s (lane %d) gives row address %p, not 16-byte aligned", ptx_where().text, lane, row);
        if (device_range(row, 16))
            fatal("ldmatrix: %s (lane %d) gives row address %p in global memory: ldmatrix reads shared memory",
                  ptx_where().text, lane, row);
        if (!shared_range(row, 16))
            fatal("ldmatrix: %s (lane %d) gives row address %p, outside the block's shared memory (%zu bytes of "
                  "dynamic shared memory at %p, and its __shared__ variables)",
                  ptx_where().text, lane, row, shared_dynamic_bytes(), shared_dynamic_ptr());
        race_shared_read(row, 16);
        memcpy(mine, row, 16);
    }
    // the instruction's full name, so lanes that meet with different ones are an error
    static const char* const names[2][3] = {
        {"ldmatrix.sync.aligned.m8n8.x1.shared.b16", "ldmatrix.sync.aligned.m8n8.x2.shared.b16",
         "ldmatrix.sync.aligned.m8n8.x4.shared.b16"},
        {"ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16", "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16",
         "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"}};
    uint16_t rows[32][8];
    warp_exchange(0xffffffffu, mine, rows, sizeof(mine), names[trans ? 1 : 0][num == 1 ? 0 : (num == 2 ? 1 : 2)]);
    const size_t g = lane >> 2, t = lane % 4;
    for (int j = 0; j < num; j++) {
        const uint16_t(*m)[8] = rows + 8 * (size_t)j;  // matrix j: its row i is lane 8j+i's row
        uint16_t lo, hi;
        if (!trans) {
            lo = m[g][2 * t];
            hi = m[g][2 * t + 1];
        } else {
            lo = m[2 * t][g];
            hi = m[2 * t + 1][g];
        }
        r[j] = (uint32_t)lo | ((uint32_t)hi << 16);
    }
}

// ---------------------------------------------------------------------------------------
// cp.async.cg.shared.global [dst], [src], 16{, src_size}; cp.async.commit_group;
// cp.async.wait_group N; cp.async.wait_all.
// PTX ISA, "Data Movement and Conversion Instructions: cp.async": control returns before the copy
// is complete, "no other synchronization mechanism" than cp.async.wait_group / wait_all (or an
// mbarrier) guarantees that it is, and two copies have no order between them. So
// here a copy lands at a moment EMU_ORDER picks between its issue and the wait that completes
// it (cp_async_landing: at the wait in forward order, at the issue in reverse, either of those
// or the thread's next __syncthreads, per copy, when shuffled), reading its source then.
// commit_group closes the copies issued since the last commit into a group (an empty one if
// there were none); wait_group N completes every committed group but the newest N, wait_all
// every group and the uncommitted copies too. A kernel that reads a destination too early, or
// overwrites one still being read, then gets different data in different orders, and the race
// check (EMU_RACECHECK=1) stops it in any order: it counts a copy as writing its destination
// from the issue until the wait.
// The pending copies of each running emulated thread live in a table keyed by its ThreadState,
// one table per host thread: a block runs to its end on one host thread, so no other thread
// ever looks at its threads' entries, and no lock is needed (a global one, held while a wgmma
// landed, had the host threads of a grid queue on it).

struct CpAsyncCopy {
    void* dst;
    const void* src;
    uint32_t bytes;      // cp-size: 16
    uint32_t src_bytes;  // copied from src; the rest of the bytes are zeros
    CpAsyncLanding landing;
    bool landed;
};
// One running thread's asynchronous operations of one kind (cp.async copies, bulk reductions,
// wgmma), and the tables of them by thread (thread_local, see above).
template <typename Op>
struct AsyncThread {
    std::vector<Op> open;                // issued, not yet committed
    std::deque<std::vector<Op>> groups;  // committed, oldest first
    uint64_t issued = 0;                 // tells its operations apart for cp_async_landing
};
template <typename Op>
using AsyncThreads = std::unordered_map<const ThreadState*, AsyncThread<Op>>;

// commit_group: the running thread's open operations become its newest group (an empty one
// if there are none)
template <typename Op>
inline void async_commit(AsyncThreads<Op>& threads) {
    AsyncThread<Op>& s = threads[tls_thread];
    s.groups.push_back(std::move(s.open));
    s.open.clear();
}
// wait_group n: every committed group but the newest n completes, finish(op) on each, oldest first
template <typename Op, typename Finish>
inline void async_wait(AsyncThreads<Op>& threads, int n, Finish finish) {
    auto it = threads.find(tls_thread);
    if (it == threads.end()) return;
    AsyncThread<Op>& s = it->second;
    while ((int)s.groups.size() > n) {
        for (Op& op : s.groups.front()) finish(op);
        s.groups.pop_front();
    }
    if (s.groups.empty() && s.open.empty()) threads.erase(it);
}
// the operations the running thread issued and has not waited for; drops its entry (the next
// thread whose ThreadState has the same address must not take them for its own)
template <typename Op>
inline size_t async_drop(AsyncThreads<Op>& threads) {
    auto it = threads.find(tls_thread);
    if (it == threads.end()) return 0;
    size_t n = it->second.open.size();
    for (const auto& grp : it->second.groups) n += grp.size();
    threads.erase(it);
    return n;
}

inline thread_local AsyncThreads<CpAsyncCopy> cp_async_threads;
inline std::atomic<bool> cp_async_used{false};  // set at the first cp.async: until then no thread has any

// the running emulated thread's number in its grid (block-major), which salts cp_async_landing
inline uint64_t ptx_thread_serial() {
    const ThreadState* t = tls_thread;
    const BlockState* b = t->block;
    return (((uint64_t)b->idx.z * b->grid.y + b->idx.y) * b->grid.x + b->idx.x) * 1024 + t->linear;
}

inline void cp_async_land(CpAsyncCopy& c) {
    if (c.landed) return;
    memcpy(c.dst, c.src, c.src_bytes);
    memset(static_cast<char*>(c.dst) + c.src_bytes, 0, c.bytes - c.src_bytes);
    c.landed = true;
}

inline void cp_async(void* dst, const void* src, int bytes, int src_bytes) {
    if (bytes != 16) fatal("cp.async.cg: %s copies %d bytes: .cg copies 16", ptx_where().text, bytes);
    if (src_bytes < 0 || src_bytes > bytes)
        fatal("cp.async: %s gives src-size %d, outside 0..%d", ptx_where().text, src_bytes, bytes);
    if (((uintptr_t)dst & 15) != 0 || ((uintptr_t)src & 15) != 0)
        fatal("cp.async: %s copies %p -> %p: both must be aligned to the 16 bytes copied", ptx_where().text, src,
              dst);
    if (device_range(dst, 1))
        fatal("cp.async: %s copies to %p in global memory: the destination is shared memory", ptx_where().text, dst);
    // (on a GPU, an address past the block's shared memory: an illegal address, or another
    // block's data; here it would be the heap's)
    if (!shared_range(dst, (size_t)bytes))
        fatal("cp.async: %s copies to %p, outside the block's shared memory (%zu bytes of dynamic shared memory at "
              "%p, and its __shared__ variables)",
              ptx_where().text, dst, shared_dynamic_bytes(), shared_dynamic_ptr());
    if (src_bytes > 0 && !device_range(src, (size_t)src_bytes))
        fatal("cp.async: %s copies %d bytes from %p, not inside one cudaMalloc allocation", ptx_where().text,
              src_bytes, src);
    race_cp_async_issue(dst, (size_t)bytes, src, (size_t)src_bytes);
    const ThreadState* t = tls_thread;
    const uint64_t thread = ptx_thread_serial();
    cp_async_used.store(true, std::memory_order_relaxed);
    AsyncThread<CpAsyncCopy>& s = cp_async_threads[t];
    CpAsyncCopy c{dst, src, (uint32_t)bytes, (uint32_t)src_bytes, cp_async_landing(thread * 1000003 + s.issued++),
                  false};
    if (c.landing == CP_ASYNC_AT_ISSUE) cp_async_land(c);
    s.open.push_back(c);
}

inline void cp_async_commit_group() {
    async_commit(cp_async_threads);
}

inline void cp_async_wait_group(int n) {
    async_wait(cp_async_threads, n, [](CpAsyncCopy& c) {
        cp_async_land(c);
        race_cp_async_done(c.dst, c.bytes);
    });
}

inline void cp_async_wait_all() {
    cp_async_commit_group();
    cp_async_wait_group(0);
}

// ---------------------------------------------------------------------------------------
// cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [dst], [src], size;
// cp.async.bulk.commit_group; cp.async.bulk.wait_group{.read} N (sm_90).
// PTX ISA, "cp.reduce.async.bulk": adds size bytes of floats in shared memory to global memory,
// each element atomically (the reduction is "performed atomically" per element with respect to
// other accesses to that location), asynchronously: the source may be read at any time until a
// cp.async.bulk.wait_group.read covering the operation's bulk async-group has returned, and the
// global writes complete by the matching cp.async.bulk.wait_group (or the kernel's end); dst and
// src 16-byte aligned, size a multiple of 16. Here an operation reads its source and adds at a
// moment EMU_ORDER picks, at the issue or at the wait (cp_async_landing's choice, a barrier
// landing counted as the wait), so a kernel that writes the source too late (no __syncwarp
// before the issue) or too early (before the wait) adds the wrong numbers in some order. A
// thread that exits with an operation it never waited for stops the program, as the shared
// memory it reads is gone when its block ends. The race check (EMU_RACECHECK=1) does not see
// these reads: the landing orders are what catch a source written at the wrong time.

struct BulkReduce {
    float* dst;
    const float* src;
    uint32_t bytes;
    bool landed;
};
inline thread_local AsyncThreads<BulkReduce> bulk_threads;
inline std::atomic<bool> bulk_used{false};

inline void bulk_land(BulkReduce& r) {
    if (r.landed) return;
    for (uint32_t i = 0; i < r.bytes / 4; i++) ::atomicAdd(r.dst + i, r.src[i]);
    r.landed = true;
}

inline void bulk_reduce_add_f32(float* dst, const float* src, uint32_t bytes) {
    if (bytes == 0 || bytes % 16 != 0)
        fatal("cp.reduce.async.bulk: %s gives size %u: a multiple of 16 bytes", ptx_where().text, bytes);
    if (((uintptr_t)dst & 15) != 0 || ((uintptr_t)src & 15) != 0)
        fatal("cp.reduce.async.bulk: %s adds %p into %p: both must be 16-byte aligned", ptx_where().text,
              (const void*)src, (void*)dst);
    if (device_range(src, 1))
        fatal("cp.reduce.async.bulk: %s reads %p in global memory: the source is shared memory", ptx_where().text,
              (const void*)src);
    if (!shared_range(src, bytes))
        fatal("cp.reduce.async.bulk: %s reads %u bytes at %p, outside the block's shared memory", ptx_where().text,
              bytes, (const void*)src);
    if (!device_range(dst, bytes))
        fatal("cp.reduce.async.bulk: %s adds %u bytes into %p, not inside one cudaMalloc allocation",
              ptx_where().text, bytes, (void*)dst);
    const ThreadState* t = tls_thread;
    const uint64_t thread = ptx_thread_serial();
    bulk_used.store(true, std::memory_order_relaxed);
    AsyncThread<BulkReduce>& s = bulk_threads[t];
    BulkReduce r{dst, src, bytes, false};
    if (cp_async_landing(thread * 1000003 + 77 + s.issued++) == CP_ASYNC_AT_ISSUE) bulk_land(r);
    s.open.push_back(r);
}

inline void bulk_commit_group() {
    bulk_used.store(true, std::memory_order_relaxed);  // (an entry made here is dropped at the thread's exit)
    async_commit(bulk_threads);
}

// wait_group N and wait_group.read N alike: every committed group but the newest N is done
inline void bulk_wait_group(int n) {
    async_wait(bulk_threads, n, bulk_land);
}

// ---------------------------------------------------------------------------------------
// wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16 (N = 64 or 128); wgmma.commit_group;
// wgmma.wait_group N (sm_90a). PTX ISA 9.7.15 "Asynchronous Warpgroup Level Matrix
// Multiply-Accumulate Instructions": a warpgroup (4 consecutive warps, the first a multiple of 4)
// computes D (64 x N, fp32) = A (64 x 16) B (16 x N) + (scale-d ? D : 0). A and B in shared
// memory are given by matrix descriptors ("Matrix Descriptor Format": bits 0-13 the start
// address >> 4, 16-29 the leading dimension byte offset >> 4, 32-45 the stride dimension byte
// offset >> 4, 49-51 the base offset, 62-63 the swizzle: 0 none, 1 128-byte, 2 64-byte, 3
// 32-byte), an element's place by the "Canonical Layouts" table (in 16-bit elements, T = 8 a
// 16-byte unit; mn the row of A or the column of B, k the other index):
//   K-major, no swizzle:   ((8,m),(T,2k)):((1T,SBO),(1,LBO))
//   K-major, S-byte swizzle (S = 32, 64, 128): ((8,m),(T,2k)):((S/16 T,SBO),(1,T))
//   MN-major, no swizzle:  ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))
//   MN-major, S-byte swizzle: ((T,S/16,m),(8,k)):((1,T,LBO),(S/16 T,SBO))
// then the swizzle Swizzle<log2(S/16),4,3> on the byte address: its 16-byte unit (bits 4..)
// XOR the bits 7.. above it. Only base offset 0 is taken (the kernels align their swizzled
// tiles to the pattern: 1024 bytes for 128-byte swizzling); the shared-window address is the
// offset into the block's dynamic shared memory (shared_address; the only shared memory our
// operands live in). A in registers: each warp's 16 rows as mma.m16n8k16's A fragment. D: warp w
// of the group holds rows 16w.., as mma.m16n8k16's C, d[4j..4j+3] for columns 8j..8j+7 (N / 2
// values a thread).
// Asynchronous: an operation reads its shared-memory operands and adds into D at a moment
// EMU_ORDER picks (cp_async_landing: at the issue or at the wait_group that completes it), so a
// kernel that writes an operand's shared memory, or reads D, before that wait gets different
// numbers in different orders; a thread's operations run in their issue order (each adds into
// the D of the one before). Its A registers are taken at the issue (the warp exchanges them
// there), and the wait stops the program if they have changed since (wgmma_wait_group). Sums in
// fp32 in k order, as mma_m16n8k16_bf16_f32's. Per-thread groups as cp.async's.

inline uint32_t shared_address(const void* p) {
    const char* base = static_cast<const char*>(shared_dynamic_ptr());
    const size_t bytes = shared_dynamic_bytes();
    const char* q = static_cast<const char*>(p);
    if (base == nullptr || q < base || q > base + bytes)
        fatal("cvta.to.shared: %s converts %p, not in the block's dynamic shared memory (%zu bytes at %p)",
              ptx_where().text, p, bytes, (const void*)base);
    return (uint32_t)(q - base);
}

// ex2.approx.ftz.f32 d, a (9.7.3 "Floating Point Instructions: ex2"): 2^a, a subnormal a read as
// zero (2^0 = 1) and a subnormal result written as +0; -Inf gives +0, +Inf +Inf, NaN NaN. The
// GPU's result is an approximation (the ISA bounds its error, not its bits); this one is the
// C library's exp2f, so a kernel's sums here are a correct rounding's, not the unit's.
inline float ex2_approx_ftz(float a) {
    if (std::fpclassify(a) == FP_SUBNORMAL) a = 0.0f;
    const float y = std::exp2(a);
    return std::fpclassify(y) == FP_SUBNORMAL ? 0.0f : y;
}

// the shared-window byte address of element (mn, k) of a descriptor's operand (k < 16)
EMU_UNCHECKED inline uint32_t wgmma_element_address(uint64_t desc, bool mn_major, int mn, int k) {
    const uint32_t start = (uint32_t)(desc & 0x3FFF) << 4;
    const uint32_t lbo = (uint32_t)((desc >> 16) & 0x3FFF) << 4, sbo = (uint32_t)((desc >> 32) & 0x3FFF) << 4;
    const int mode = (int)(desc >> 62);
    const uint32_t S = mode == 1 ? 128 : mode == 2 ? 64 : mode == 3 ? 32 : 0;  // swizzle bytes
    uint32_t off;
    if (!mn_major) {
        off = S == 0 ? (mn % 8) * 16 + (mn / 8) * sbo + (k % 8) * 2 + (k / 8) * lbo
                     : (mn % 8) * S + (mn / 8) * sbo + (k % 8) * 2 + (k / 8) * 16;
    } else {
        const uint32_t along = S == 0 ? 8 : S / 2;  // mn elements in one unit (none) or one swizzle row
        off = S == 0 ? (mn % 8) * 2 + (mn / 8) * sbo + (k % 8) * 16 + (k / 8) * lbo
                     : (mn % along) * 2 + (mn / along) * lbo + (k % 8) * S + (k / 8) * sbo;
    }
    uint32_t addr = start + off;
    if (S != 0) addr ^= ((addr >> 7) & (S / 16 - 1)) << 4;
    return addr;
}

struct WgmmaOp {
    int n;               // N: 64 or 128
    float* d;            // the issuing thread's N / 2 accumulators
    bool a_in_regs;      // else a_desc
    float a[2][16];      // a_in_regs: the lane's rows of A (g and g + 8, lane = 4 g + t)
    const uint32_t* a_src;  // a_in_regs: the issuing thread's 4 A registers, and their bits at the issue
    uint32_t a_issued[4];
    uint64_t a_desc, b_desc;
    int accumulate, trans_a, trans_b;
    int warp, lane;      // warp within the warpgroup, lane
    bool landed;
};
inline thread_local AsyncThreads<WgmmaOp> wgmma_threads;
inline std::atomic<bool> wgmma_used{false};

// One lane's reads of a wgmma's operand from shared memory: each element's address checked
// against the dynamic shared memory, and the race check told of the bytes a run at a time (the
// contiguous elements: 8 along K of a K-major row, 2 along N of an N-major B), not an element a
// call. Every byte read is checked as the thread's read at this time, whatever the grouping.
struct WgmmaReads {
    const unsigned char* base = static_cast<const unsigned char*>(shared_dynamic_ptr());
    size_t bytes = shared_dynamic_bytes();
    uint32_t run = 0, len = 0;  // the run of bytes read and not yet told
    EMU_UNCHECKED float operand(uint64_t desc, bool mn_major, int mn, int k, const char* which) {
        const uint32_t addr = wgmma_element_address(desc, mn_major, mn, k);
        if ((size_t)addr + 2 > bytes)
            fatal("wgmma.mma_async: %s: %s element (%d, %d) at shared address %u, past the %zu bytes of dynamic "
                  "shared memory (descriptor 0x%016llx)", ptx_where().text, which, mn, k, addr, bytes,
                  (unsigned long long)desc);
        if (len > 0 && addr == run + len) {
            len += 2;
        } else {
            told();
            run = addr, len = 2;
        }
        uint16_t bits;
        memcpy(&bits, base + addr, 2);
        return ptx_bf16_bits_to_float(bits);
    }
    EMU_UNCHECKED void told() {
        if (len > 0) race_shared_read(base + run, len);
        len = 0;
    }
};

EMU_UNCHECKED inline void wgmma_land(WgmmaOp& op) {
    if (op.landed) return;
    const int g = op.lane >> 2, t = op.lane % 4;
    // the lane's accumulator v is (row g + 8 ((v >> 1) & 1), column 8 (v >> 2) + 2 t + (v & 1)):
    // its two rows of A and N / 4 columns of B, each element read once (and checked once), along
    // the operand's contiguous direction in the inner loop
    float a_smem[2][16], b[32][16];
    WgmmaReads reads;
    if (!op.a_in_regs)
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 16; k++)
                a_smem[i][k] = reads.operand(op.a_desc, op.trans_a != 0, 16 * op.warp + g + 8 * i, k, "A");
    const float(*a)[16] = op.a_in_regs ? op.a : a_smem;
    const bool n_major = op.trans_b != 0;
    for (int outer = 0; outer < (n_major ? 16 : op.n / 4); outer++)
        for (int inner = 0; inner < (n_major ? op.n / 4 : 16); inner++) {
            const int j = n_major ? inner : outer, k = n_major ? outer : inner;
            b[j][k] = reads.operand(op.b_desc, n_major, 8 * (j >> 1) + 2 * t + (j & 1), k, "B");
        }
    reads.told();
    for (int v = 0; v < op.n / 2; v++) {
        const float* av = a[(v >> 1) & 1];
        const float* bv = b[(v >> 2) * 2 + (v & 1)];
        float acc = op.accumulate ? op.d[v] : 0.0f;
        for (int k = 0; k < 16; k++) acc += av[k] * bv[k];
        op.d[v] = acc;
    }
    op.landed = true;
}

EMU_UNCHECKED inline void wgmma_m64nNk16_bf16_f32(int n, float* d, const uint32_t* a_regs, uint64_t a_desc,
                                                   uint64_t b_desc, int accumulate, int trans_a, int trans_b) {
    const ThreadState* th = tls_thread;
    if (n != 64 && n != 128)
        fatal("wgmma.mma_async: %s: N = %d (the emulated GPU has 64 and 128)", ptx_where().text, n);
    const BlockState* b = th->block;
    const unsigned threads = b->dim.x * b->dim.y * b->dim.z;
    if (threads % 128 != 0)
        fatal("wgmma.mma_async: %s: the block's %u threads are not whole warpgroups of 128", ptx_where().text,
              threads);
    auto check_desc = [](uint64_t desc, const char* which) {
        if (((desc >> 49) & 7) != 0)
            fatal("wgmma.mma_async: %s: %s's descriptor 0x%016llx has a base offset (only 0 is emulated: align "
                  "the swizzled tile to its pattern)", ptx_where().text, which, (unsigned long long)desc);
    };
    if (a_regs == nullptr) check_desc(a_desc, "A");
    check_desc(b_desc, "B");
    // the warp meets here: every lane the same instruction and the same descriptors, and A's
    // fragments, when in registers, go round
    struct Mine {
        uint64_t a_desc, b_desc;
        uint32_t a[4];
        int flags;
    };
    static_assert(sizeof(Mine) <= 64, "warp_exchange moves at most 64 bytes a lane");
    Mine mine = {a_desc, b_desc, {0, 0, 0, 0}, accumulate != 0 ? 1 : 0};
    if (a_regs != nullptr)
        for (int i = 0; i < 4; i++) mine.a[i] = a_regs[i];
    static const char* const names[2][2] = {
        {"wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16",
         "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 (A in registers)"},
        {"wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16",
         "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 (A in registers)"}};
    // (a lane of another N meets a different name here: the exchange stops the program)
    const unsigned char* slots =
        warp_exchange_view(0xffffffffu, &mine, sizeof(Mine), names[n == 128][a_regs != nullptr]);
    WgmmaOp op;
    op.n = n;
    op.d = d;
    op.a_in_regs = a_regs != nullptr;
    op.a_src = a_regs;
    for (int i = 0; i < 4; i++) op.a_issued[i] = a_regs != nullptr ? a_regs[i] : 0;
    op.a_desc = a_desc;
    op.b_desc = b_desc;
    op.accumulate = accumulate;
    op.trans_a = trans_a;
    op.trans_b = trans_b;
    op.warp = (th->linear / 32) % 4;
    op.lane = th->linear % 32;
    op.landed = false;
    for (int l = 0; l < 32; l++) {
        const Mine* other = reinterpret_cast<const Mine*>(slots + 64 * (size_t)l);
        if (a_regs == nullptr && other->a_desc != a_desc)
            fatal("wgmma.mma_async: %s: lane %d gives A's descriptor 0x%016llx, this lane 0x%016llx",
                  ptx_where().text, l, (unsigned long long)other->a_desc, (unsigned long long)a_desc);
        if (other->b_desc != b_desc || other->flags != mine.flags)
            fatal("wgmma.mma_async: %s: lane %d gives B's descriptor 0x%016llx and scale-d %d, this lane 0x%016llx "
                  "and %d", ptx_where().text, l, (unsigned long long)other->b_desc, other->flags,
                  (unsigned long long)b_desc, mine.flags);
        if (a_regs != nullptr && l >> 2 == op.lane >> 2) {
            // lane l = 4 g + t holds A (g, 2t..2t+1), (g+8, ..), (g, 2t+8..), (g+8, 2t+8..): the
            // four lanes of this lane's g hold its two rows
            const int t = l % 4;
            for (int i = 0; i < 8; i++) {
                const int col = 2 * t + (i & 1) + 8 * (i >> 2);
                op.a[(i >> 1) & 1][col] = ptx_bf16_half(other->a[i >> 1], i & 1);
            }
        }
    }
    const uint64_t thread = ptx_thread_serial();
    wgmma_used.store(true, std::memory_order_relaxed);
    AsyncThread<WgmmaOp>& s = wgmma_threads[th];
    if (cp_async_landing(thread * 1000003 + 131 + s.issued++) == CP_ASYNC_AT_ISSUE) {
        // the operations before it first: they run in issue order (the later ones add into the
        // earlier ones' D)
        for (std::vector<WgmmaOp>& grp : s.groups)
            for (WgmmaOp& o : grp) wgmma_land(o);
        for (WgmmaOp& o : s.open) wgmma_land(o);
        wgmma_land(op);
    }
    s.open.push_back(op);
}

inline void wgmma_commit_group() {
    wgmma_used.store(true, std::memory_order_relaxed);
    async_commit(wgmma_threads);
}

// The wait: each operation it completes lands (if it has not), after the check that its A
// registers still hold what they held at the issue. The PTX ISA's wgmma.mma_async section makes
// accessing the accumulator or the registers of A's fragments before the wgmma.wait_group that
// completes the operation undefined; writing A early is a bug the emulated wgmma, which takes A
// at the issue, would otherwise not show in any order (an early write of the accumulator shows:
// it lands into it at the issue or at the wait).
inline void wgmma_wait_group(int n) {
    async_wait(wgmma_threads, n, [](WgmmaOp& op) {
        if (op.a_in_regs && memcmp(op.a_src, op.a_issued, sizeof(op.a_issued)) != 0)
            fatal("wgmma.mma_async: %s: its A fragment registers changed between a wgmma and the "
                  "wgmma.wait_group that completes it (0x%08x 0x%08x 0x%08x 0x%08x at the issue, 0x%08x 0x%08x "
                  "0x%08x 0x%08x now): undefined in the PTX ISA", ptx_where().text, op.a_issued[0], op.a_issued[1], op.a_issued[2], op.a_issued[3], op.a_src[0], op.a_src[1],
                  op.a_src[2], op.a_src[3]);
        wgmma_land(op);
    });
}

// To be called on the emulated thread as it arrives at __syncthreads: its copies that were to
// land by then (CP_ASYNC_AT_BARRIER) do; they stay pending until their wait all the same.
inline void ptx_thread_barrier() {
    if (!cp_async_used.load(std::memory_order_relaxed)) return;
    auto it = cp_async_threads.find(tls_thread);
    if (it == cp_async_threads.end()) return;
    for (CpAsyncCopy& c : it->second.open)
        if (c.landing == CP_ASYNC_AT_BARRIER) cp_async_land(c);
    for (std::vector<CpAsyncCopy>& grp : it->second.groups)
        for (CpAsyncCopy& c : grp)
            if (c.landing == CP_ASYNC_AT_BARRIER) cp_async_land(c);
}

// To be called on the emulated thread as it exits (its own kernel's end): a copy it issued and
// never waited for is a bug (its data was never used), and left in the table it would be taken
// for the pending copy of the next thread whose ThreadState has the same address. Drops the
// thread's entry; stops the program if a copy was still pending.
inline void ptx_thread_exit() {
    // each kind in use: the thread's operations never waited for, its entry dropped
    auto drop = [](const std::atomic<bool>& used, auto& threads) -> size_t {
        if (!used.load(std::memory_order_relaxed)) return 0;  // every thread ends here: keep it cheap
        return async_drop(threads);
    };
    if (size_t pending = drop(wgmma_used, wgmma_threads))
        fatal("wgmma.mma_async: %s exited with %zu operations never waited for (wgmma.wait_group)",
              ptx_where().text, pending);
    if (size_t pending = drop(bulk_used, bulk_threads))
        fatal("cp.reduce.async.bulk: %s exited with %zu operations never waited for (cp.async.bulk.wait_group)",
              ptx_where().text, pending);
    if (size_t pending = drop(cp_async_used, cp_async_threads))
        fatal("cp.async: %s exited with %zu copies never waited for (cp.async.wait_group / wait_all)",
              ptx_where().text, pending);
}

}  // namespace emu
