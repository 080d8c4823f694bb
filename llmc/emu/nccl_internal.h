// nccl_internal.h: what the emulated NCCL's own files share (not for the sources it runs):
// the shared segment's layout, a communicator's state, one operation's arguments, error
// reporting and the wait every operation polls in. nccl.cpp has the segment, the
// collectives and the API; nccl_p2p.cpp has ncclSend and ncclRecv.
#pragma once
#include <sched.h>
#include <time.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <nccl.h>

namespace emu_nccl {

constexpr size_t PAGE = 4096;

double clock_s();
template <typename T> T load_acq(const T* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
template <typename T> void store_rel(T* p, T v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

// ---------------------------------------------------------------------------------------
// one operation as the API took it

enum CollKind : int32_t {
    COLL_ALL_REDUCE,
    COLL_REDUCE,
    COLL_BROADCAST,
    COLL_ALL_GATHER,
    COLL_REDUCE_SCATTER,
    COLL_SEND,  // point to point (nccl_p2p.cpp): Coll::root is the peer
    COLL_RECV,
};
const char* coll_name(int32_t k);
const char* type_name(int32_t t);
size_t type_size(int32_t t);  // 0: not supported
inline bool is_p2p(int32_t k) { return k == COLL_SEND || k == COLL_RECV; }

struct Coll {
    CollKind kind;
    const void* send;
    void* recv;
    size_t count;  // as the API counts it: AllGather's sendcount, ReduceScatter's recvcount
    int32_t type, op, root;  // root: the peer of a send or a receive
};

// ---------------------------------------------------------------------------------------
// the shared segment:
//   SegHeader | RankInfo[n] | Channel[n (n-1)] | page-aligned staging: per rank 2 halves of
//   `chunk` bytes | per ordered pair of ranks 2 slots of p2p_slot_bytes(n, chunk)

struct Desc {  // a collective's description, compared across ranks
    uint64_t seq;  // this communicator's collectives, counted from 1 in the order they run
    int32_t kind, type, op, root;
    uint64_t count;
    bool operator==(const Desc& o) const {
        return seq == o.seq && kind == o.kind && type == o.type && op == o.op && root == o.root && count == o.count;
    }
};

struct alignas(64) RankInfo {
    uint32_t claimed;   // 1 once a process attached as this rank
    int32_t pid;
    uint64_t arrived;   // the last barrier this rank reached
    Desc desc;          // its collective in progress
};

struct alignas(64) SegHeader {  // a multiple of 64 bytes: the RankInfo after it stay aligned
    uint32_t magic;
    uint32_t state;        // SEG_BUILDING, SEG_READY, SEG_FAILED (the creator could not size it)
    int32_t nranks;
    uint32_t attached;     // ranks attached so far
    uint64_t chunk;        // bytes per staging half
    uint64_t total_bytes;
    uint32_t poison;       // first failure anywhere: (rank + 1) << 8 | ncclResult_t; 0 none
    char name[80];
};
enum : uint32_t { SEG_BUILDING = 0, SEG_READY = 1, SEG_FAILED = 2 };
static_assert(sizeof(SegHeader) % alignof(RankInfo) == 0, "RankInfo[] follows SegHeader");
static_assert(sizeof(SegHeader) <= PAGE, "a joining rank reads the header from the first page");

// one side's description of a point-to-point message; seq is written last (release)
struct P2pDesc {
    uint64_t seq;  // the message's number in the pair's direction, from 1; 0 none yet
    uint64_t count;
    int32_t type;
};

// the ordered pair sender -> receiver (nccl_p2p.cpp says how it is used); each side
// writes only its own cache line
struct alignas(64) Channel {
    uint64_t sent;      // pieces the sender wrote into the slots, over all messages
    P2pDesc send[2];    // the sender's message k at k % 2
    alignas(64) uint64_t taken;  // pieces the receiver copied out
    P2pDesc recv[2];    // the receiver's message k at k % 2
};
static_assert(sizeof(RankInfo) % alignof(Channel) == 0, "Channel[] follows RankInfo[]");

inline size_t seg_channels_offset(int n) { return sizeof(SegHeader) + (size_t)n * sizeof(RankInfo); }
inline size_t seg_staging_offset(int n) {
    size_t b = seg_channels_offset(n) + (size_t)n * (n - 1) * sizeof(Channel);
    return (b + PAGE - 1) / PAGE * PAGE;
}
// a point-to-point slot: half of what the collectives stage per rank, shared by the rank's
// n - 1 receivers' pairs (4 MiB chunk, 4 ranks: 512 KiB), at least a page
inline size_t p2p_slot_bytes(int n, size_t chunk) {
    size_t s = chunk / (2 * (size_t)n) / PAGE * PAGE;
    return s > PAGE ? s : PAGE;
}
inline size_t seg_p2p_offset(int n, size_t chunk) { return seg_staging_offset(n) + (size_t)n * 2 * chunk; }
inline size_t seg_bytes(int n, size_t chunk) {
    return seg_p2p_offset(n, chunk) + (size_t)n * (n - 1) * 2 * p2p_slot_bytes(n, chunk);
}

// ---------------------------------------------------------------------------------------
// a communicator

constexpr double COLL_TIMEOUT_S = 900.0;  // beyond the trainer's -pt default (600 s)

struct CommState {
    int rank = 0, nranks = 1;
    std::string name;                  // the segment's
    void* map = nullptr;
    size_t map_bytes = 0;
    SegHeader* hdr = nullptr;
    RankInfo* ranks = nullptr;
    Channel* channels = nullptr;
    char* staging = nullptr;
    char* p2p = nullptr;               // the pairs' slots
    size_t chunk = 0, p2p_slot = 0;
    double coll_timeout_s = COLL_TIMEOUT_S;
    std::atomic<int> async_error{ncclSuccess};
    std::atomic<bool> aborted{false};
    std::atomic<bool> busy{false};     // an operation of this communicator runs (on some stream)
    std::atomic<int> inflight{0};      // queued outside a capture and not finished
    // touched only while holding busy: collectives, barriers and rounds so far; messages sent
    // to and received from each rank so far
    uint64_t seq = 0, barriers = 0, rounds = 0;
    std::vector<uint64_t> sends, recvs;

    ~CommState();
    // rank r's staging half of round `round`
    char* half(int r, uint64_t round) const { return staging + ((size_t)r * 2 + (round & 1)) * chunk; }
    // the pair from -> to (from != to): its channel, and the slot of its piece `piece`
    size_t pair(int from, int to) const { return (size_t)from * (nranks - 1) + (to < from ? to : to - 1); }
    Channel* channel(int from, int to) const { return channels + pair(from, to); }
    char* slot(int from, int to, uint64_t piece) const { return p2p + (pair(from, to) * 2 + (piece & 1)) * p2p_slot; }

    void poison(ncclResult_t code) {
        if (hdr == nullptr) return;
        uint32_t none = 0, mine = (uint32_t)(rank + 1) << 8 | (uint32_t)code;
        __atomic_compare_exchange_n(&hdr->poison, &none, mine, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    }
    // the first failure wins; reported once, and recorded in the segment for the other ranks
    void fail(ncclResult_t code) {
        int none = ncclSuccess;
        async_error.compare_exchange_strong(none, code);
        poison(code);
    }
};

// to stderr, and kept for ncclGetLastError (nranks 0: no communicator)
void report(int rank, int nranks, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

// true when the process no longer runs
bool process_gone(int32_t pid);

// ---------------------------------------------------------------------------------------
// waiting for other ranks

constexpr double CHECK_INTERVAL_S = 0.005;  // how often a wait looks at peers' processes

// One wait: the caller polls, and between polls calls pause(), which spins a little, then
// sleeps growing to 0.5 ms, and gives up on an abort of this communicator, a failure another
// rank recorded, a missing rank whose process is gone, or at start + timeout_s, saying why
// on stderr.
struct Wait {
    CommState* c;
    const char* what;
    double start, timeout_s;
    double next_check = 0.0;
    long sleep_ns = 2000;
    int spin = 0;

    Wait(CommState* c_, const char* what_, double start_, double timeout_s_)
        : c(c_), what(what_), start(start_), timeout_s(timeout_s_) {}
    // the failure another rank recorded (0 none); read before the poll's look at the ranks,
    // so that a failure recorded after every rank got here is no reason to fail this wait
    uint32_t poison() const { return load_acq(&c->hdr->poison); }
    // the poll moved something: spin again before sleeping
    void progressed() {
        spin = 0;
        sleep_ns = 2000;
    }
    // after a poll (p: poison() read before it) found rank first_missing, and any j with
    // missing(j), still missing: ncclSuccess to poll again, else why to give up
    template <typename Missing> ncclResult_t pause(uint32_t p, int first_missing, Missing missing) {
        if (c->aborted.load()) return ncclInvalidUsage;  // nobody asks any more: the handle is gone
        if (p != 0 && (int)(p >> 8) - 1 != c->rank) {
            report(c->rank, c->nranks, "%s: rank %d gave up or aborted (%s); giving up too", what, (int)(p >> 8) - 1,
                   ncclGetErrorString((ncclResult_t)(p & 0xff)));
            return ncclRemoteError;
        }
        if (spin < 64) {
            spin++;
            sched_yield();
            return ncclSuccess;
        }
        double now = clock_s();
        if (now >= next_check) {
            next_check = now + CHECK_INTERVAL_S;
            for (int j = 0; j < c->nranks; j++)
                // gone first, then still missing: a rank may arrive and exit in between
                if (process_gone(load_acq(&c->ranks[j].pid)) && missing(j)) {
                    report(c->rank, c->nranks, "%s: rank %d (pid %d) exited before taking part; giving up", what,
                           j, (int)c->ranks[j].pid);
                    return ncclRemoteError;
                }
            if (now - start > timeout_s) {
                report(c->rank, c->nranks, "%s: rank %d has not arrived within %.0f s (EMU_NCCL_TIMEOUT_S); giving up",
                       what, first_missing, timeout_s);
                return ncclSystemError;
            }
        }
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, nullptr);
        if (sleep_ns < 500000) sleep_ns *= 2;
        return ncclSuccess;
    }
};

// Runs a batch of sends and receives (nccl_p2p.cpp), holding c->busy. Returns the failure.
ncclResult_t run_p2p(CommState* c, const std::vector<Coll>& ops);

}  // namespace emu_nccl
