// nccl.cpp: NCCL for the emulated GPU (llmc/emu/include/nccl.h says what it promises), for
// one rank or for several processes of one machine meeting in a POSIX shared memory segment:
// the segment, the collectives and the API; ncclSend and ncclRecv run in nccl_p2p.cpp.
//
// The segment (named by ncclGetUniqueId, created by the first rank to arrive, unlinked once
// all have attached so nothing is left in /dev/shm; its layout in nccl_internal.h) holds per
// rank two staging halves of `chunk` bytes for the collectives, and per ordered pair of ranks
// a channel for point-to-point messages.
// A collective is a series of rounds. In a round every rank copies its next piece into its
// own staging half, meets the others at a barrier, then reads whatever it needs from every
// rank's half of that round (in rank order). Rounds alternate between the two halves, so one
// barrier a round suffices: a rank overwrites a half two rounds later, past a barrier that
// every rank reaches only after it finished reading that half.
// A barrier is a counter per rank (RankInfo::arrived, written with release after the rank's
// copies): barrier k is passed when every rank's counter is >= k. Before its rounds, each
// collective publishes its description (sequence number, kind, count, type, op, root) and
// passes a barrier, and every rank checks that all descriptions agree.
//
// Failure: every wait polls, and gives up when this communicator is aborted, when another
// rank recorded a failure in the segment (SegHeader::poison: a peer's error or abort), when a
// rank not yet arrived is a process that no longer runs, or at the timeout (Wait). The failure
// becomes the communicator's asynchronous error; its later operations do nothing.
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "nccl_internal.h"  // defines: CommState, Coll, the segment's layout, Wait, run_p2p

namespace emu_nccl {

double clock_s() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

const char* coll_name(int32_t k) {
    static const char* names[] = {"ncclAllReduce", "ncclReduce", "ncclBroadcast", "ncclAllGather",
                                  "ncclReduceScatter", "ncclSend", "ncclRecv"};
    return k >= 0 && k <= COLL_RECV ? names[k] : "?";
}
const char* type_name(int32_t t) {
    static const char* names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                                  "float16", "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2"};
    return t >= 0 && t < ncclNumTypes ? names[t] : "?";
}
size_t type_size(int32_t t) {
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;  // fp8 and unknown: refused
    }
}

// true when the process no longer runs (an exited child its parent has not reaped yet is
// a zombie: kill() still finds it, /proc says Z)
bool process_gone(int32_t pid) {
    if (pid <= 0) return false;
    if (kill(pid, 0) != 0) return errno == ESRCH;
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE* f = fopen(path, "r");
    if (f == nullptr) return false;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char* paren = strrchr(buf, ')');  // "pid (comm) S ...": comm may hold spaces
    return paren != nullptr && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

// ---------------------------------------------------------------------------------------
// error reporting: to stderr, and kept for ncclGetLastError

std::mutex g_error_mu;
char g_last_error[1024] = "";

void report(int rank, int nranks, const char* fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    std::lock_guard<std::mutex> lk(g_error_mu);
    if (nranks > 0)
        snprintf(g_last_error, sizeof(g_last_error), "emulated NCCL, rank %d of %d: %s", rank, nranks, msg);
    else
        snprintf(g_last_error, sizeof(g_last_error), "emulated NCCL: %s", msg);
    fprintf(stderr, "%s\n", g_last_error);
    fflush(stderr);
}

CommState::~CommState() {
    if (map != nullptr) munmap(map, map_bytes);
}

}  // namespace emu_nccl

struct ncclComm {
    std::shared_ptr<emu_nccl::CommState> st;
};

namespace emu_nccl {
namespace {

constexpr char ID_MAGIC[8] = {'E', 'M', 'U', 'N', 'C', 'C', 'L', '1'};
constexpr uint32_t SEG_MAGIC = 0x6e63636cu;           // "nccl"
constexpr size_t CHUNK_DEFAULT = 4u << 20;            // bytes per staging half, per rank
constexpr size_t CHUNK_MIN = PAGE;
constexpr double INIT_TIMEOUT_S = 120.0;

double env_double(const char* name, double dflt) {
    const char* v = getenv(name);
    if (v == nullptr || *v == '\0') return dflt;
    char* end = nullptr;
    double x = strtod(v, &end);
    return (end != v && x > 0.0) ? x : dflt;
}

const char* op_name(int32_t o) {
    static const char* names[] = {"sum", "prod", "max", "min", "avg"};
    return o >= 0 && o < ncclNumOps ? names[o] : "?";
}

// ---------------------------------------------------------------------------------------
// reductions: floating point in fp32 (fp64 for float64), integers wrapping in their type

float bf16_to_float(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
uint16_t float_to_bf16(float f) {  // round to nearest even, as __float2bfloat16_rn
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);  // NaN stays NaN (cuda_bf16.h)
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
    if (e == 0) {  // zero or subnormal: m * 2^-24
        float f = (float)m * (1.0f / 16777216.0f);
        return sign ? -f : f;
    }
    if (e == 31) u = sign | 0x7f800000u | (m << 13);
    else u = sign | ((e + 112) << 23) | (m << 13);
    float f;
    memcpy(&f, &u, 4);
    return f;
}
uint16_t float_to_half(float f) {  // round to nearest even
    uint32_t u;
    memcpy(&u, &f, 4);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    u &= 0x7fffffffu;
    if (u > 0x7f800000u) return sign | 0x7e00u;   // NaN
    if (u >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to infinity
    if (u < 0x38800000u) {                        // below 2^-14: a subnormal in units of 2^-24
        float a;
        memcpy(&a, &u, 4);
        return sign | (uint16_t)lrintf(a * 16777216.0f);  // the default rounding mode: to even
    }
    uint32_t h = ((((u >> 23) - 127 + 15) << 10) | ((u & 0x7fffffu) >> 13)), rest = u & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;  // a carry into the exponent is right
    return sign | (uint16_t)h;
}

// each type: S as stored, A as accumulated
template <typename T> struct TypeSame {
    typedef T S, A;
    static A load(S v) { return v; }
    static S store(A a) { return a; }
};
struct TypeBF16 {
    typedef uint16_t S;
    typedef float A;
    static A load(S v) { return bf16_to_float(v); }
    static S store(A a) { return float_to_bf16(a); }
};
struct TypeF16 {
    typedef uint16_t S;
    typedef float A;
    static A load(S v) { return half_to_float(v); }
    static S store(A a) { return float_to_half(a); }
};

template <typename A> A combine(int32_t op, A a, A b) {
    // integers wrap (through their unsigned type, where signed overflow would be undefined)
    typedef typename std::conditional<std::is_integral<A>::value, std::make_unsigned<A>,
                                      std::common_type<A>>::type::type W;
    switch (op) {
    case ncclProd: return (A)((W)a * (W)b);
    case ncclMax: return a < b ? b : a;
    case ncclMin: return b < a ? b : a;
    default: return (A)((W)a + (W)b);  // sum, avg
    }
}

// dst[i] = op over ranks j = 0..n-1 of src[j][i], in that order, rounded once to the type
template <typename Ty>
void reduce_typed(void* dst, const char* const* src, int n, size_t m, int32_t op) {
    typedef typename Ty::S S;
    typedef typename Ty::A A;
    S* out = (S*)dst;
    for (size_t i = 0; i < m; i++) {
        A acc = Ty::load(((const S*)src[0])[i]);
        for (int j = 1; j < n; j++) acc = combine<A>(op, acc, Ty::load(((const S*)src[j])[i]));
        if (op == ncclAvg) acc = acc / (A)n;
        out[i] = Ty::store(acc);
    }
}

void reduce_into(void* dst, const char* const* src, int n, size_t m, int32_t type, int32_t op) {
    switch (type) {
    case ncclInt8: return reduce_typed<TypeSame<int8_t>>(dst, src, n, m, op);
    case ncclUint8: return reduce_typed<TypeSame<uint8_t>>(dst, src, n, m, op);
    case ncclInt32: return reduce_typed<TypeSame<int32_t>>(dst, src, n, m, op);
    case ncclUint32: return reduce_typed<TypeSame<uint32_t>>(dst, src, n, m, op);
    case ncclInt64: return reduce_typed<TypeSame<int64_t>>(dst, src, n, m, op);
    case ncclUint64: return reduce_typed<TypeSame<uint64_t>>(dst, src, n, m, op);
    case ncclFloat16: return reduce_typed<TypeF16>(dst, src, n, m, op);
    case ncclFloat32: return reduce_typed<TypeSame<float>>(dst, src, n, m, op);
    case ncclFloat64: return reduce_typed<TypeSame<double>>(dst, src, n, m, op);
    case ncclBfloat16: return reduce_typed<TypeBF16>(dst, src, n, m, op);
    }
}

// ---------------------------------------------------------------------------------------
// the collectives

thread_local int g_group_depth = 0;  // ncclGroupStart nesting, per thread as in NCCL

// Waits until no rank j has missing(j) (Wait says when it gives up).
template <typename Missing>
ncclResult_t wait_for(CommState* c, const char* what, double start, double timeout_s, Missing missing) {
    Wait w(c, what, start, timeout_s);
    for (;;) {
        const uint32_t p = w.poison();
        int first_missing = -1;
        for (int j = 0; j < c->nranks && first_missing < 0; j++)
            if (missing(j)) first_missing = j;
        if (first_missing < 0) return ncclSuccess;
        if (ncclResult_t r = w.pause(p, first_missing, missing)) return r;
    }
}

ncclResult_t barrier(CommState* c, const char* what, double start) {
    const uint64_t k = ++c->barriers;
    store_rel(&c->ranks[c->rank].arrived, k);
    return wait_for(c, what, start, c->coll_timeout_s, [c, k](int j) { return load_acq(&c->ranks[j].arrived) < k; });
}

void run_local(const Coll& a) {  // one rank: every collective is a copy
    const size_t bytes = a.count * type_size(a.type);
    if (bytes > 0 && a.send != a.recv) memmove(a.recv, a.send, bytes);
}

// The collective with the other ranks. Returns the failure, if any.
ncclResult_t run_shared(CommState* c, const Coll& a) {
    const char* what = coll_name(a.kind);
    const double start = clock_s();
    const int n = c->nranks, me = c->rank;
    const size_t E = type_size(a.type);
    const char* send = (const char*)a.send;
    char* recv = (char*)a.recv;

    const Desc d = {++c->seq, a.kind, a.type, a.op, a.root, a.count};
    c->ranks[me].desc = d;  // published by the barrier's release
    if (ncclResult_t r = barrier(c, what, start)) return r;
    for (int j = 0; j < n; j++) {
        const Desc o = c->ranks[j].desc;
        if (o == d) continue;
        report(me, n,
               "collective #%llu does not match across ranks: this rank %s(count %llu, %s, %s, root %d), "
               "rank %d %s(count %llu, %s, %s, root %d) as its #%llu",
               (unsigned long long)d.seq, what, (unsigned long long)d.count, type_name(d.type), op_name(d.op), d.root,
               j, coll_name(o.kind), (unsigned long long)o.count, type_name(o.type), op_name(o.op), o.root,
               (unsigned long long)o.seq);
        return ncclInvalidUsage;
    }

    const char* src[64];  // the ranks' halves of the round (n <= 64: checked at init)
    // elements a round moves per rank: ReduceScatter's half holds one piece per destination
    const size_t per = a.kind == COLL_REDUCE_SCATTER ? c->chunk / E / n : c->chunk / E;
    size_t o = 0;
    do {
        const size_t m = std::min(per, a.count - o);
        const uint64_t round = c->rounds++;
        char* mine = c->half(me, round);
        switch (m == 0 ? -1 : a.kind) {  // count 0: no copies (the buffers may be null)
        case COLL_ALL_REDUCE:
        case COLL_REDUCE:
        case COLL_ALL_GATHER: memcpy(mine, send + o * E, m * E); break;
        case COLL_BROADCAST:
            if (me == a.root) memcpy(mine, send + o * E, m * E);
            break;
        case COLL_REDUCE_SCATTER:
            for (int t = 0; t < n; t++) memcpy(mine + (size_t)t * m * E, send + ((size_t)t * a.count + o) * E, m * E);
            break;
        }
        // also when m == 0 (count 0): the descriptions stay until every rank compared them
        if (ncclResult_t r = barrier(c, what, start)) return r;
        for (int j = 0; j < n; j++) src[j] = c->half(j, round);
        switch (m == 0 ? -1 : a.kind) {
        case COLL_ALL_REDUCE: reduce_into(recv + o * E, src, n, m, a.type, a.op); break;
        case COLL_REDUCE:
            if (me == a.root) reduce_into(recv + o * E, src, n, m, a.type, a.op);
            break;
        case COLL_BROADCAST: memcpy(recv + o * E, src[a.root], m * E); break;
        case COLL_ALL_GATHER:
            for (int j = 0; j < n; j++) memcpy(recv + ((size_t)j * a.count + o) * E, src[j], m * E);
            break;
        case COLL_REDUCE_SCATTER:
            for (int j = 0; j < n; j++) src[j] += (size_t)me * m * E;
            reduce_into(recv + o * E, src, n, m, a.type, a.op);
            break;
        }
        o += m;
    } while (o < a.count);
    return ncclSuccess;
}

// On the stream's thread: waits for the communicator's previous operation (another stream
// may run it), then runs this one, a collective or a batch of sends and receives, unless the
// communicator already failed or was aborted.
void run_job(CommState* c, const std::vector<Coll>& ops) {
    for (;;) {
        if (c->aborted.load() || c->async_error.load() != ncclSuccess) return;
        bool idle = false;
        if (c->busy.compare_exchange_weak(idle, true, std::memory_order_acquire)) break;
        usleep(50);
    }
    ncclResult_t r = is_p2p(ops[0].kind) ? run_p2p(c, ops)
                     : c->nranks == 1    ? (run_local(ops[0]), ncclSuccess)
                                         : run_shared(c, ops[0]);
    if (r != ncclSuccess && !c->aborted.load()) c->fail(r);
    c->busy.store(false, std::memory_order_release);
}

ncclResult_t check_comm(ncclComm_t comm, const char* what) {
    if (comm == nullptr || comm->st == nullptr) {
        report(-1, 0, "%s: the communicator is null", what);
        return ncclInvalidArgument;
    }
    return ncclSuccess;
}

// the bytes of sendbuff a reads and of recvbuff it writes on this rank (0: not used)
void buffer_bytes(const Coll& a, int rank, int n, size_t* send_bytes, size_t* recv_bytes) {
    const size_t bytes = a.count * type_size(a.type);
    const bool send_used = a.kind == COLL_BROADCAST ? rank == a.root : a.kind != COLL_RECV;
    const bool recv_used = a.kind == COLL_REDUCE ? rank == a.root : a.kind != COLL_SEND;
    *send_bytes = send_used ? (a.kind == COLL_REDUCE_SCATTER ? bytes * n : bytes) : 0;
    *recv_bytes = recv_used ? (a.kind == COLL_ALL_GATHER ? bytes * n : bytes) : 0;
}

// NCCL's checks of an operation's arguments
ncclResult_t check_args(const Coll& a, const CommState* c) {
    const char* what = coll_name(a.kind);
    const int n = c->nranks;
    if (type_size(a.type) == 0) {
        report(c->rank, n, "%s: datatype %d is not supported", what, (int)a.type);
        return ncclInvalidArgument;
    }
    const bool reduces = a.kind == COLL_ALL_REDUCE || a.kind == COLL_REDUCE || a.kind == COLL_REDUCE_SCATTER;
    if (reduces && (a.op < 0 || a.op >= ncclNumOps)) {
        report(c->rank, n, "%s: reduction op %d is not supported", what, (int)a.op);
        return ncclInvalidArgument;
    }
    const bool rooted = a.kind == COLL_REDUCE || a.kind == COLL_BROADCAST || is_p2p(a.kind);
    if (rooted && (a.root < 0 || a.root >= n)) {
        report(c->rank, n, "%s: %s %d is not a rank of %d", what, is_p2p(a.kind) ? "peer" : "root", a.root, n);
        return ncclInvalidArgument;
    }
    size_t send_bytes, recv_bytes;
    buffer_bytes(a, c->rank, n, &send_bytes, &recv_bytes);
    // the buffers must be device memory, as NCCL's pointer checks demand
    if (send_bytes > 0 && (a.send == nullptr || !emu::device_range(a.send, send_bytes))) {
        report(c->rank, n, "%s: sendbuff %p is not %zu bytes of device memory", what, a.send, send_bytes);
        return ncclInvalidArgument;
    }
    if (recv_bytes > 0 && (a.recv == nullptr || !emu::device_range(a.recv, recv_bytes))) {
        report(c->rank, n, "%s: recvbuff %p is not %zu bytes of device memory", what, a.recv, recv_bytes);
        return ncclInvalidArgument;
    }
    return ncclSuccess;
}

// Queues ops on the stream as one stream operation: a collective, or sends and receives that
// progress together (a group's on one communicator and stream).
ncclResult_t queue(const std::shared_ptr<CommState>& st, cudaStream_t stream, std::vector<Coll> ops) {
    const char* what = ops.size() == 1 ? coll_name(ops[0].kind) : "ncclGroupEnd";
    // queued work is waited for by ncclCommDestroy; work a capture records may run any number
    // of times later, so it is not counted
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (stream != nullptr) cudaStreamIsCapturing(stream, &capture);
    const bool counted = capture == cudaStreamCaptureStatusNone;
    if (counted) st->inflight++;
    cudaError_t e = emu::stream_enqueue(stream, what, [st, ops = std::move(ops), counted]() {
        for (const Coll& a : ops) {  // the race check (EMU_RACECHECK=1): what it reads, writes
            size_t send_bytes, recv_bytes;
            buffer_bytes(a, st->rank, st->nranks, &send_bytes, &recv_bytes);
            emu::race_range(a.send, send_bytes, false);
            emu::race_range(a.recv, recv_bytes, true);
        }
        run_job(st.get(), ops);
        if (counted) st->inflight--;
    });
    if (e != cudaSuccess) {
        if (counted) st->inflight--;
        report(st->rank, st->nranks, "%s: queueing on the stream failed: %s", what, cudaGetErrorString(e));
        return ncclUnhandledCudaError;
    }
    return ncclSuccess;
}

// a send or a receive of an open group, queued at its ncclGroupEnd
struct GroupedP2p {
    std::shared_ptr<CommState> st;
    cudaStream_t stream;
    Coll op;
};
thread_local std::vector<GroupedP2p> g_group_p2p;  // this thread's, in the order issued

// NCCL's checks, then the operation queued on the stream (a send or a receive inside a group:
// at the group's end)
ncclResult_t enqueue(const Coll& a, ncclComm_t comm, cudaStream_t stream) {
    if (ncclResult_t r = check_comm(comm, coll_name(a.kind))) return r;
    if (ncclResult_t r = check_args(a, comm->st.get())) return r;
    if (is_p2p(a.kind) && g_group_depth > 0) {
        g_group_p2p.push_back(GroupedP2p{comm->st, stream, a});
        return ncclSuccess;
    }
    return queue(comm->st, stream, {a});
}

// Attaches c to the segment named in id, creating it if it is the first rank there, and waits
// for all ranks (at most timeout_s).
ncclResult_t attach(CommState* c, const char* name, double timeout_s) {
    const int n = c->nranks, me = c->rank;
    const double start = clock_s();
    int fd = -1;
    bool creator = false;
    SegHeader* hdr = nullptr;
    for (;;) {  // open it, or create it
        fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
        if (fd >= 0) {
            creator = true;
            break;
        }
        if (errno != EEXIST) {
            report(me, n, "shm_open(%s): %s", name, strerror(errno));
            return ncclSystemError;
        }
        fd = shm_open(name, O_RDWR, 0600);
        if (fd >= 0) break;
        if (errno != ENOENT || clock_s() - start > timeout_s) {
            report(me, n, "shm_open(%s): %s", name, strerror(errno));
            return ncclSystemError;
        }
        usleep(1000);  // unlinked between the two calls: try again
    }
    if (creator) {
        // the staging size, halved until the segment fits in half of what /dev/shm has free
        size_t chunk = CHUNK_DEFAULT;
        if (const char* v = getenv("EMU_NCCL_CHUNK_BYTES")) chunk = strtoull(v, nullptr, 10);
        chunk = std::max(CHUNK_MIN, chunk / PAGE * PAGE);
        struct statvfs vfs;
        if (fstatvfs(fd, &vfs) == 0) {
            const double avail = (double)vfs.f_bavail * (double)vfs.f_frsize;
            while (chunk > CHUNK_MIN && (double)seg_bytes(n, chunk) > avail / 2) chunk = chunk / 2 / PAGE * PAGE;
        }
        const size_t total = seg_bytes(n, chunk);
        int err = posix_fallocate(fd, 0, (off_t)total);  // so a full /dev/shm fails here, not as SIGBUS later
        if (err == EINVAL || err == EOPNOTSUPP) err = ftruncate(fd, (off_t)total) == 0 ? 0 : errno;
        if (err != 0) {
            report(me, n, "cannot size the shared memory segment %s to %zu bytes: %s", name, total, strerror(err));
            // the ranks waiting for it learn at once
            if (ftruncate(fd, PAGE) == 0) {
                void* p = mmap(nullptr, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
                if (p != MAP_FAILED) {
                    store_rel(&((SegHeader*)p)->state, (uint32_t)SEG_FAILED);
                    munmap(p, PAGE);
                }
            }
            shm_unlink(name);
            close(fd);
            return ncclSystemError;
        }
        void* p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            report(me, n, "mmap of %zu bytes: %s", total, strerror(errno));
            shm_unlink(name);
            close(fd);
            return ncclSystemError;
        }
        hdr = (SegHeader*)p;  // zeroed by the allocation
        hdr->magic = SEG_MAGIC;
        hdr->nranks = n;
        hdr->chunk = chunk;
        hdr->total_bytes = total;
        snprintf(hdr->name, sizeof(hdr->name), "%s", name);
        store_rel(&hdr->state, (uint32_t)SEG_READY);
        c->map = p;
        c->map_bytes = total;
    } else {
        // the creator sizes it in one step; its first page says when the header is written
        struct stat sb;
        for (;;) {
            if (fstat(fd, &sb) == 0 && (size_t)sb.st_size >= PAGE) break;
            if (clock_s() - start > timeout_s) {
                report(me, n, "the shared memory segment %s was never sized", name);
                close(fd);
                return ncclSystemError;
            }
            usleep(1000);
        }
        void* p = mmap(nullptr, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            report(me, n, "mmap: %s", strerror(errno));
            close(fd);
            return ncclSystemError;
        }
        SegHeader* h = (SegHeader*)p;
        uint32_t state;
        while ((state = load_acq(&h->state)) == SEG_BUILDING && clock_s() - start < timeout_s) usleep(1000);
        const bool ok = state == SEG_READY && h->magic == SEG_MAGIC && h->nranks == n;
        const int seg_n = h->nranks;
        const size_t total = h->total_bytes;
        munmap(p, PAGE);
        if (!ok) {
            if (state == SEG_READY)
                report(me, n, "the segment %s was made for %d ranks, this rank was told %d", name, seg_n, n);
            else if (state == SEG_FAILED)
                report(me, n, "the rank that created the segment %s failed", name);
            else
                report(me, n, "the segment %s was not set up within %.0f s", name, timeout_s);
            close(fd);
            return state == SEG_READY ? ncclInvalidUsage : ncclSystemError;
        }
        p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            report(me, n, "mmap of %zu bytes: %s", total, strerror(errno));
            close(fd);
            return ncclSystemError;
        }
        c->map = p;
        c->map_bytes = total;
        hdr = (SegHeader*)p;
    }
    close(fd);  // the mapping stays
    c->hdr = hdr;
    c->ranks = (RankInfo*)((char*)hdr + sizeof(SegHeader));
    c->channels = (Channel*)((char*)hdr + seg_channels_offset(n));
    c->staging = (char*)hdr + seg_staging_offset(n);
    c->chunk = hdr->chunk;
    c->p2p = (char*)hdr + seg_p2p_offset(n, c->chunk);
    c->p2p_slot = p2p_slot_bytes(n, c->chunk);

    uint32_t free_slot = 0;
    if (!__atomic_compare_exchange_n(&c->ranks[me].claimed, &free_slot, 1u, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        report(me, n, "rank %d joined the communicator twice", me);
        c->poison(ncclInvalidUsage);
        return ncclInvalidUsage;
    }
    store_rel(&c->ranks[me].pid, (int32_t)getpid());
    if (__atomic_add_fetch(&hdr->attached, 1u, __ATOMIC_ACQ_REL) == (uint32_t)n) shm_unlink(name);  // all here
    ncclResult_t r = wait_for(c, "ncclCommInitRank", start, timeout_s,
                              [c](int j) { return load_acq(&c->ranks[j].claimed) == 0; });
    if (r != ncclSuccess) {
        c->poison(r);
        shm_unlink(name);  // nothing left behind (the others give up too)
    }
    return r;
}

}  // namespace
}  // namespace emu_nccl

using namespace emu_nccl;

// ---------------------------------------------------------------------------------------
// the API

extern "C" {

ncclResult_t ncclGetVersion(int* version) {
    if (version == nullptr) return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t result) {
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (emulated NCCL: see stderr)";
    case ncclSystemError: return "unhandled system error (emulated NCCL: see stderr)";
    case ncclInternalError: return "internal error (emulated NCCL)";
    case ncclInvalidArgument: return "invalid argument (emulated NCCL: see stderr)";
    case ncclInvalidUsage: return "invalid usage (emulated NCCL: see stderr)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

const char* ncclGetLastError(ncclComm_t) {
    std::lock_guard<std::mutex> lk(g_error_mu);
    static thread_local char copy[sizeof(g_last_error)];
    memcpy(copy, g_last_error, sizeof(copy));
    return copy;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
    if (id == nullptr) return ncclInvalidArgument;
    uint64_t rnd = 0;
    if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        rnd = (uint64_t)std::chrono::steady_clock::now().time_since_epoch().count() * 0x9e3779b97f4a7c15ull;
    memset(id, 0, sizeof(*id));
    memcpy(id->internal, ID_MAGIC, sizeof(ID_MAGIC));
    snprintf(id->internal + sizeof(ID_MAGIC), 64, "/gptrain-nccl-%d-%016llx", (int)getpid(), (unsigned long long)rnd);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
    if (comm == nullptr || nranks < 1 || nranks > 64 || rank < 0 || rank >= nranks) {
        report(rank, nranks, "ncclCommInitRank: rank %d of %d ranks (1..64 ranks here)", rank, nranks);
        return ncclInvalidArgument;
    }
    *comm = nullptr;
    if (memcmp(id.internal, ID_MAGIC, sizeof(ID_MAGIC)) != 0) {
        report(rank, nranks, "ncclCommInitRank: the id was not made by ncclGetUniqueId");
        return ncclInvalidArgument;
    }
    char name[65];
    memcpy(name, id.internal + sizeof(ID_MAGIC), 64);
    name[64] = '\0';
    auto st = std::make_shared<CommState>();
    st->rank = rank;
    st->nranks = nranks;
    st->sends.assign(nranks, 0);
    st->recvs.assign(nranks, 0);
    st->name = name;
    st->coll_timeout_s = env_double("EMU_NCCL_TIMEOUT_S", COLL_TIMEOUT_S);
    if (nranks > 1)
        if (ncclResult_t r = attach(st.get(), name, env_double("EMU_NCCL_TIMEOUT_S", INIT_TIMEOUT_S))) return r;
    *comm = new ncclComm{st};
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* err) {
    if (ncclResult_t r = check_comm(comm, "ncclCommGetAsyncError")) return r;
    if (err == nullptr) return ncclInvalidArgument;
    *err = (ncclResult_t)comm->st->async_error.load();
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
    if (ncclResult_t r = check_comm(comm, "ncclCommCount")) return r;
    if (count == nullptr) return ncclInvalidArgument;
    *count = comm->st->nranks;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
    if (ncclResult_t r = check_comm(comm, "ncclCommUserRank")) return r;
    if (rank == nullptr) return ncclInvalidArgument;
    *rank = comm->st->rank;
    return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
    if (ncclResult_t r = check_comm(comm, "ncclCommCuDevice")) return r;
    if (device == nullptr) return ncclInvalidArgument;
    return cudaGetDevice(device) == cudaSuccess ? ncclSuccess : ncclUnhandledCudaError;
}

// Waits for the collectives queued (outside captures) to finish: each is bounded by the
// timeout, and after a failure the rest return at once.
ncclResult_t ncclCommFinalize(ncclComm_t comm) {
    if (ncclResult_t r = check_comm(comm, "ncclCommFinalize")) return r;
    CommState* c = comm->st.get();
    const double start = clock_s();
    while (c->inflight.load() > 0) {
        if (clock_s() - start > c->coll_timeout_s + 10.0) {
            report(c->rank, c->nranks, "ncclCommFinalize: %d queued collectives never ran", c->inflight.load());
            return ncclInternalError;
        }
        usleep(200);
    }
    return (ncclResult_t)c->async_error.load();
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (comm == nullptr) return ncclSuccess;  // as NCCL
    ncclResult_t r = ncclCommFinalize(comm);
    if (r == ncclInternalError) return r;  // still queued: the handle must stay valid
    if (!comm->st->name.empty() && comm->st->nranks > 1) shm_unlink(comm->st->name.c_str());  // if init never completed
    delete comm;  // the state lives on while queued work holds it
    return ncclSuccess;
}

// Stops this rank's collectives: one blocked in a wait returns within a polling interval,
// queued ones do nothing when they run. The other ranks' waits fail with ncclRemoteError.
ncclResult_t ncclCommAbort(ncclComm_t comm) {
    if (comm == nullptr) return ncclSuccess;
    CommState* c = comm->st.get();
    c->aborted.store(true);
    c->poison(ncclRemoteError);
    const double start = clock_s();
    while (c->busy.load() && clock_s() - start < 2.0) usleep(100);
    delete comm;
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    return enqueue(Coll{COLL_ALL_REDUCE, sendbuff, recvbuff, count, datatype, op, 0}, comm, stream);
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
    return enqueue(Coll{COLL_REDUCE, sendbuff, recvbuff, count, datatype, op, root}, comm, stream);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
    return enqueue(Coll{COLL_BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root}, comm, stream);
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
    return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
    return enqueue(Coll{COLL_ALL_GATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0}, comm, stream);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    return enqueue(Coll{COLL_REDUCE_SCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0}, comm, stream);
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
    return enqueue(Coll{COLL_SEND, sendbuff, nullptr, count, datatype, ncclSum, peer}, comm, stream);
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
    return enqueue(Coll{COLL_RECV, nullptr, recvbuff, count, datatype, ncclSum, peer}, comm, stream);
}

// Collectives inside a group are queued when made, in order: every rank makes them in the
// same order, so running them one after another matches. Sends and receives wait for the
// outermost ncclGroupEnd, which queues them as one stream operation per communicator and
// stream, so that they progress together (nccl.h).
ncclResult_t ncclGroupStart() {
    g_group_depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
    if (g_group_depth == 0) {
        report(-1, 0, "ncclGroupEnd without ncclGroupStart");
        return ncclInvalidUsage;
    }
    if (--g_group_depth > 0) return ncclSuccess;
    std::vector<GroupedP2p> left;
    left.swap(g_group_p2p);
    ncclResult_t result = ncclSuccess;
    while (!left.empty()) {  // the batch of the first one left's communicator and stream
        const std::shared_ptr<CommState> st = left[0].st;
        const cudaStream_t stream = left[0].stream;
        std::vector<Coll> ops;
        std::vector<GroupedP2p> others;
        for (GroupedP2p& g : left) {
            if (g.st == st && g.stream == stream) ops.push_back(g.op);
            else others.push_back(std::move(g));
        }
        left.swap(others);
        ncclResult_t r = queue(st, stream, std::move(ops));
        if (result == ncclSuccess) result = r;
    }
    return result;
}

}  // extern "C"
