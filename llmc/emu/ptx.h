// ptx.h: the emulated GPU's PTX instructions, the bodies of llmc/cuda/ptx.cuh's wrappers in the
// emulated build. Each is written from the PTX ISA's definition of the instruction (section
// 9.7 "Warp Level Matrix Multiply-Accumulate Instructions": "Matrix Fragments for mma.m16n8k16
// with floating point type" and "Warp-level matrix load instruction: ldmatrix"; 9.7.9 "cp.async"),
// not from what our kernels assume of it, so a kernel that puts a fragment in the wrong
// register gets the wrong product here as it would on the GPU.
// defines: emu::mma_m16n8k16_bf16_f32, emu::ldmatrix_m8n8_b16, emu::cp_async,
//          emu::cp_async_commit_group, emu::cp_async_wait_group, emu::cp_async_wait_all,
//          emu::bulk_reduce_add_f32, emu::bulk_commit_group, emu::bulk_wait_group,
//          emu::ptx_thread_barrier, emu::ptx_thread_exit
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
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <vector>
#include "emu.h"

namespace emu {

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
inline float ptx_bf16_bits_to_float(uint16_t bits) {
    uint32_t u = (uint32_t)bits << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// ---------------------------------------------------------------------------------------
// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 d, a, b, d: D = A B + C over the warp.
// Every lane gives its fragments; each computes its own part of D from the row of A and the
// column of B it needs, found in the 32 lanes' fragments by the ISA's tables. The products of two bf16 are
// exact in fp32; they are summed in fp32 onto C in k order (the tensor core's order and
// intermediate precision are not specified; this is one fp32 order).

inline void mma_m16n8k16_bf16_f32(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    struct Fragments {
        uint32_t a[4];
        uint32_t b[2];
        float c[4];
    };
    static_assert(sizeof(Fragments) <= 64, "warp_exchange moves at most 64 bytes a lane");
    Fragments mine = {{a[0], a[1], a[2], a[3]}, {b0, b1}, {d[0], d[1], d[2], d[3]}};
    const unsigned char* slots =
        warp_exchange_view(0xffffffffu, &mine, sizeof(Fragments), "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32");
    auto frag = [slots](size_t lane) { return reinterpret_cast<const Fragments*>(slots + 64 * lane); };
    // Each lane computes its own four elements of D, fetching A's row and B's column from the
    // lanes that hold them: the tables above, inverted. A (row, col): lane (row % 8) * 4 +
    // (col % 8) / 2, element i = 4 [col >= 8] + 2 [row >= 8] + col % 2; B (k, n): lane n * 4 +
    // (k % 8) / 2, element i = 2 [k >= 8] + k % 2; element i sits in register i / 2, half i % 2.
    auto elem = [](uint32_t reg_pair_lo_hi, int half) {
        return ptx_bf16_bits_to_float((uint16_t)(reg_pair_lo_hi >> (16 * half)));
    };
    const int lane = lane_id(), g = lane >> 2, t = lane % 4;
    for (int j = 0; j < 4; j++) {  // dj, laid out as cj
        const int row = j < 2 ? g : g + 8, col = t * 2 + (j & 1);
        float acc = mine.c[j];
        for (int k = 0; k < 16; k++) {
            const int ia = 4 * (k >= 8) + 2 * (row >= 8) + (k & 1);
            const int ib = 2 * (k >= 8) + (k & 1);
            const float av = elem(frag((row % 8) * 4 + (k % 8) / 2)->a[ia / 2], ia & 1);
            const float bv = elem(frag(col * 4 + (k % 8) / 2)->b[ib / 2], ib & 1);
            acc += av * bv;
        }
        d[j] = acc;
    }
}

// ---------------------------------------------------------------------------------------
// ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{,.trans}.shared.b16 r, [row]: num (1, 2 or 4) 8x8
// matrices of 16-bit elements from shared memory. Each lane that gives a row address (lanes
// 0..8*num-1) reads its 16-byte row as it arrives, and the warp exchanges the rows themselves:
// every lane then has all 8*num rows and takes its fragment of each matrix.

inline void ldmatrix_m8n8_b16(int num, bool trans, uint32_t* r, const void* row) {
    if (num != 1 && num != 2 && num != 4) fatal("ldmatrix: .x%d: the ISA has .x1, .x2 and .x4", num);
    const int lane = lane_id();
    uint16_t mine[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (lane < 8 * num) {
        if (((uintptr_t)row & 15) != 0)
            fatal("ldmatrix: %s (lane %d) gives row address %p, not 16-byte aligned", ptx_where().text, lane, row);
        if (device_range(row, 16))
            fatal("ldmatrix: %s (lane %d) gives row address %p in global memory: ldmatrix reads shared memory",
                  ptx_where().text, lane, row);
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
// under a mutex as streams run kernels on several host threads.

struct CpAsyncCopy {
    void* dst;
    const void* src;
    uint32_t bytes;      // cp-size: 16
    uint32_t src_bytes;  // copied from src; the rest of the bytes are zeros
    CpAsyncLanding landing;
    bool landed;
};
struct CpAsyncThread {
    std::vector<CpAsyncCopy> open;                // issued, not yet committed
    std::deque<std::vector<CpAsyncCopy>> groups;  // committed, oldest first
    uint64_t issued = 0;                          // tells its copies apart for cp_async_landing
};
inline std::mutex cp_async_mutex;
inline std::unordered_map<const ThreadState*, CpAsyncThread> cp_async_threads;
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

// the operations a thread issued and has not waited for (CpAsyncThread, BulkThread)
template <typename Thread>
inline size_t cp_async_pending(const Thread& s) {
    size_t n = s.open.size();
    for (const auto& grp : s.groups) n += grp.size();
    return n;
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
    if (src_bytes > 0 && !device_range(src, (size_t)src_bytes))
        fatal("cp.async: %s copies %d bytes from %p, not inside one cudaMalloc allocation", ptx_where().text,
              src_bytes, src);
    race_cp_async_issue(dst, (size_t)bytes, src, (size_t)src_bytes);
    const ThreadState* t = tls_thread;
    const uint64_t thread = ptx_thread_serial();
    std::lock_guard<std::mutex> lock(cp_async_mutex);
    cp_async_used.store(true, std::memory_order_relaxed);
    CpAsyncThread& s = cp_async_threads[t];
    CpAsyncCopy c{dst, src, (uint32_t)bytes, (uint32_t)src_bytes, cp_async_landing(thread * 1000003 + s.issued++),
                  false};
    if (c.landing == CP_ASYNC_AT_ISSUE) cp_async_land(c);
    s.open.push_back(c);
}

inline void cp_async_commit_group() {
    std::lock_guard<std::mutex> lock(cp_async_mutex);
    CpAsyncThread& s = cp_async_threads[tls_thread];
    s.groups.push_back(std::move(s.open));
    s.open.clear();
}

inline void cp_async_wait_group(int n) {
    std::lock_guard<std::mutex> lock(cp_async_mutex);
    auto it = cp_async_threads.find(tls_thread);
    if (it == cp_async_threads.end()) return;
    CpAsyncThread& s = it->second;
    while ((int)s.groups.size() > n) {
        for (CpAsyncCopy& c : s.groups.front()) {
            cp_async_land(c);
            race_cp_async_done(c.dst, c.bytes);
        }
        s.groups.pop_front();
    }
    if (s.groups.empty() && s.open.empty()) cp_async_threads.erase(it);
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
struct BulkThread {
    std::vector<BulkReduce> open;                // issued, not yet committed
    std::deque<std::vector<BulkReduce>> groups;  // committed, oldest first
    uint64_t issued = 0;
};
inline std::unordered_map<const ThreadState*, BulkThread> bulk_threads;  // under cp_async_mutex
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
    if (!device_range(dst, bytes))
        fatal("cp.reduce.async.bulk: %s adds %u bytes into %p, not inside one cudaMalloc allocation",
              ptx_where().text, bytes, (void*)dst);
    const ThreadState* t = tls_thread;
    const uint64_t thread = ptx_thread_serial();
    std::lock_guard<std::mutex> lock(cp_async_mutex);
    bulk_used.store(true, std::memory_order_relaxed);
    BulkThread& s = bulk_threads[t];
    BulkReduce r{dst, src, bytes, false};
    if (cp_async_landing(thread * 1000003 + 77 + s.issued++) == CP_ASYNC_AT_ISSUE) bulk_land(r);
    s.open.push_back(r);
}

inline void bulk_commit_group() {
    std::lock_guard<std::mutex> lock(cp_async_mutex);
    bulk_used.store(true, std::memory_order_relaxed);  // (an entry made here is dropped at the thread's exit)
    BulkThread& s = bulk_threads[tls_thread];
    s.groups.push_back(std::move(s.open));
    s.open.clear();
}

// wait_group N and wait_group.read N alike: every committed group but the newest N is done
inline void bulk_wait_group(int n) {
    std::lock_guard<std::mutex> lock(cp_async_mutex);
    auto it = bulk_threads.find(tls_thread);
    if (it == bulk_threads.end()) return;
    BulkThread& s = it->second;
    while ((int)s.groups.size() > n) {
        for (BulkReduce& r : s.groups.front()) bulk_land(r);
        s.groups.pop_front();
    }
    if (s.groups.empty() && s.open.empty()) bulk_threads.erase(it);
}

// To be called on the emulated thread as it arrives at __syncthreads: its copies that were to
// land by then (CP_ASYNC_AT_BARRIER) do; they stay pending until their wait all the same.
inline void ptx_thread_barrier() {
    if (!cp_async_used.load(std::memory_order_relaxed)) return;
    std::lock_guard<std::mutex> lock(cp_async_mutex);
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
    if (bulk_used.load(std::memory_order_relaxed)) {
        size_t pending = 0;
        {
            std::lock_guard<std::mutex> lock(cp_async_mutex);
            auto it = bulk_threads.find(tls_thread);
            if (it != bulk_threads.end()) {
                pending = cp_async_pending(it->second);
                bulk_threads.erase(it);
            }
        }
        if (pending > 0)
            fatal("cp.reduce.async.bulk: %s exited with %zu operations never waited for (cp.async.bulk.wait_group)",
                  ptx_where().text, pending);
    }
    if (!cp_async_used.load(std::memory_order_relaxed)) return;  // every thread ends here: keep it cheap
    size_t pending = 0;
    {
        std::lock_guard<std::mutex> lock(cp_async_mutex);
        auto it = cp_async_threads.find(tls_thread);
        if (it == cp_async_threads.end()) return;
        pending = cp_async_pending(it->second);
        cp_async_threads.erase(it);
    }
    if (pending > 0)
        fatal("cp.async: %s exited with %zu copies never waited for (cp.async.wait_group / wait_all)",
              ptx_where().text, pending);
}

}  // namespace emu
