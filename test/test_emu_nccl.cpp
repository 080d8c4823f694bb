// test_emu_nccl.cpp: the emulated NCCL (llmc/emu/nccl.cpp, nccl_p2p.cpp) across 1, 2 and 4
// processes. The parent makes the id, forks the ranks, and each rank runs the operations on
// device buffers and compares with results computed here from every rank's inputs (sums in
// fp32, in rank order 0..n-1, rounded once to bf16 with cuda_bf16.h; a message is its
// sender's input):
//   collectives  AllReduce fp32 and bf16 (in place and not, odd counts, count 0), AllReduce max
//                of uint32 (fp8's amaxes as bits, a NaN among them), AllGather in
//                place, one Reduce per owner to each root in one group (as grad_sync_gpu.cuh),
//                ReduceScatter (in place and not), Broadcast and Bcast; with 4 KiB of staging,
//                so every count spans several rounds
//   send/recv    a ring in one group (fp32, bf16, int32; count 1 and 0; at 2 ranks both ways
//                with one peer, at 1 rank to itself), messages of several sizes each way
//                between a pair matched in order (grouped, all sends first, and ungrouped), a
//                send to self beside the ring; with 4 KiB slots, so messages span pieces
//   large        counts above the default 4 MiB staging chunk (AllReduce, ReduceScatter), a
//                ring of several default-sized slots
//   mismatch     ranks issuing different counts get ncclInvalidUsage (a collective, a send
//                and its receive, a send to self and its receive); a send to self alone too
//   peer exits   a rank exits after init: the others' collective, or send and receive with
//                it, fails with ncclRemoteError within seconds, whether the dead rank is an
//                unreaped zombie or reaped
//   abort        ncclCommAbort unblocks a rank's blocked collectives (or sends and receives)
//                at once, and the peer's later one fails with ncclRemoteError while the
//                aborted rank lives on
//   timeouts     EMU_NCCL_TIMEOUT_S=1: a collective, a send and receive, and an init whose
//                peer never comes fail with ncclSystemError after about a second; so do two
//                ranks that send to each other before receiving, ungrouped
// and no shared memory segment is left in /dev/shm. One line per scenario; exit 1 on failure.
// Emulated build only: g++ -std=c++17 -O2 -I llmc/emu/include -include llmc/emu/emu.h
//   test/test_emu_nccl.cpp llmc/emu/*.cpp -o build/test_emu_nccl -pthread -lrt
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_bf16.h>  // defines: __float2bfloat16_rn, __bfloat162float
#include <nccl.h>       // the emulated NCCL

#define CHECK_CUDA(x)                                                                           \
    do {                                                                                        \
        cudaError_t err_ = (x);                                                                 \
        if (err_ != cudaSuccess) {                                                              \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorName(err_)); \
            _exit(2);                                                                           \
        }                                                                                       \
    } while (0)
#define CHECK_NCCL(x)                                                                             \
    do {                                                                                          \
        ncclResult_t err_ = (x);                                                                  \
        if (err_ != ncclSuccess) {                                                                \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(err_)); \
            _exit(2);                                                                             \
        }                                                                                         \
    } while (0)

static double now_s() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}
static void sleep_s(double s) { usleep((useconds_t)(s * 1e6)); }

// one rank's view of a scenario
struct Rank {
    int rank, n;
    ncclComm_t comm;
    cudaStream_t stream;
    int failures;
};

static void expect(Rank& r, bool ok, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
static void expect(Rank& r, bool ok, const char* fmt, ...) {
    if (ok) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    printf("  FAIL rank %d of %d: %s\n", r.rank, r.n, msg);
    r.failures++;
}

// rank r's input i: +-[1, 2) * 2^(-8..7), so that another summation order changes bits
static float value(int rank, size_t i, uint32_t salt) {
    uint64_t z = ((uint64_t)rank << 48) ^ ((uint64_t)i << 8) ^ salt;
    z += 0x9e3779b97f4a7c15ull;  // splitmix64
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const uint32_t sign = (uint32_t)(z >> 63), exponent = 119 + (uint32_t)((z >> 32) & 15);
    const uint32_t bits = sign << 31 | exponent << 23 | (uint32_t)(z & 0x7fffff);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

// the two element types: fp32, and bf16 held as its 16 bits
template <typename T> struct Elem;
template <> struct Elem<float> {
    static constexpr ncclDataType_t type = ncclFloat;
    static const char* name() { return "fp32"; }
    static float enc(float f) { return f; }
    static float dec(float x) { return x; }
};
template <> struct Elem<uint16_t> {
    static constexpr ncclDataType_t type = ncclBfloat16;
    static const char* name() { return "bf16"; }
    static uint16_t enc(float f) { return __float2bfloat16_rn(f).__x; }
    static float dec(uint16_t x) { return __bfloat162float(__ushort_as_bfloat16(x)); }
};

template <> struct Elem<int32_t> {  // for point-to-point only: the float's bits as an int
    static constexpr ncclDataType_t type = ncclInt32;
    static const char* name() { return "int32"; }
    static int32_t enc(float f) {
        int32_t x;
        memcpy(&x, &f, 4);
        return x;
    }
    static float dec(int32_t x) { return (float)x; }
};

template <typename T> static T input(int rank, size_t i, uint32_t salt) { return Elem<T>::enc(value(rank, i, salt)); }
template <typename T> static T sum_over_ranks(int n, size_t i, uint32_t salt) {
    float acc = Elem<T>::dec(input<T>(0, i, salt));
    for (int j = 1; j < n; j++) acc += Elem<T>::dec(input<T>(j, i, salt));
    return Elem<T>::enc(acc);
}

template <typename T> static T* device_alloc(size_t count) {
    T* d = nullptr;
    CHECK_CUDA(cudaMalloc(&d, std::max<size_t>(count, 1) * sizeof(T)));
    CHECK_CUDA(cudaMemset(d, 0xff, std::max<size_t>(count, 1) * sizeof(T)));  // NaN: unwritten shows
    return d;
}
template <typename T> static void upload(T* d, const std::vector<T>& h) {
    CHECK_CUDA(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
}
template <typename T> static std::vector<T> download(const T* d, size_t count) {
    std::vector<T> h(count);
    CHECK_CUDA(cudaMemcpy(h.data(), d, count * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

// bitwise, naming the first difference
template <typename T>
static void expect_same(Rank& r, const std::vector<T>& got, const std::vector<T>& want, size_t from, size_t count,
                        const char* what) {
    for (size_t i = from; i < from + count; i++)
        if (memcmp(&got[i], &want[i], sizeof(T)) != 0) {
            expect(r, false, "%s %s: element %zu is %.9g, expected %.9g", what, Elem<T>::name(), i,
                   (double)Elem<T>::dec(got[i]), (double)Elem<T>::dec(want[i]));
            return;
        }
}

template <typename T> static void test_all_reduce(Rank& r, size_t count, bool in_place, uint32_t salt) {
    std::vector<T> mine(count), want(count);
    for (size_t i = 0; i < count; i++) {
        mine[i] = input<T>(r.rank, i, salt);
        want[i] = sum_over_ranks<T>(r.n, i, salt);
    }
    T* send = device_alloc<T>(count);
    T* recv = in_place ? send : device_alloc<T>(count);
    upload(send, mine);
    CHECK_NCCL(ncclAllReduce(send, recv, count, Elem<T>::type, ncclSum, r.comm, r.stream));
    CHECK_CUDA(cudaStreamSynchronize(r.stream));
    char what[96];
    snprintf(what, sizeof(what), "AllReduce count %zu%s", count, in_place ? " in place" : "");
    expect_same(r, download(recv, count), want, 0, count, what);
    if (!in_place) expect_same(r, download(send, count), mine, 0, count, "AllReduce's sendbuff");
    CHECK_CUDA(cudaFree(send));
    if (!in_place) CHECK_CUDA(cudaFree(recv));
}

// ncclMax over ncclUint32, in place, as gpu_all_reduce_max_u32 sends train_gpt_fp8's amaxes: the
// bits of non-negative floats (|value|), rank 0 holding an infinity at 5 and the last rank a NaN at
// 3; the result is the integer maximum, so the NaN's bits reach every rank
static void test_all_reduce_max_u32(Rank& r, size_t count, uint32_t salt) {
    std::vector<uint32_t> mine(count), want(count, 0);
    for (int j = 0; j < r.n; j++)
        for (size_t i = 0; i < count; i++) {
            const float a = std::fabs(value(j, i, salt));
            uint32_t bits;
            memcpy(&bits, &a, 4);
            if (j == 0 && i == 5) bits = 0x7f800000u;
            if (j == r.n - 1 && i == 3) bits = 0x7fc00000u;
            want[i] = std::max(want[i], bits);
            if (j == r.rank) mine[i] = bits;
        }
    uint32_t* d = device_alloc<uint32_t>(count);
    upload(d, mine);
    CHECK_NCCL(ncclAllReduce(d, d, count, ncclUint32, ncclMax, r.comm, r.stream));
    CHECK_CUDA(cudaStreamSynchronize(r.stream));
    const std::vector<uint32_t> got = download(d, count);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < count; i++)
        if (got[i] != want[i] && bad++ == 0) first = i;
    expect(r, bad == 0 && want[3] == 0x7fc00000u, "AllReduce ncclMax uint32 count %zu in place: %zu differ (first at %zu: "
           "0x%08x, expected 0x%08x)", count, bad, first, bad ? got[first] : 0u, bad ? want[first] : 0u);
    CHECK_CUDA(cudaFree(d));
}

// in place, as gpu_all_gather: rank r's part at r * count
template <typename T> static void test_all_gather(Rank& r, size_t count, uint32_t salt) {
    std::vector<T> buf(count * r.n, Elem<T>::enc(NAN)), want(count * r.n);
    for (int j = 0; j < r.n; j++)
        for (size_t i = 0; i < count; i++) want[j * count + i] = input<T>(j, i, salt);
    for (size_t i = 0; i < count; i++) buf[r.rank * count + i] = want[r.rank * count + i];
    T* d = device_alloc<T>(count * r.n);
    upload(d, buf);
    CHECK_NCCL(ncclAllGather(d + r.rank * count, d, count, Elem<T>::type, r.comm, r.stream));
    CHECK_CUDA(cudaStreamSynchronize(r.stream));
    char what[96];
    snprintf(what, sizeof(what), "AllGather in place, count %zu", count);
    expect_same(r, download(d, count * r.n), want, 0, count * r.n, what);
    CHECK_CUDA(cudaFree(d));
}

// as grad_sync_gpu.cuh at ZeRO 1 and 2: in one group, each owner's part reduced in place to
// its owner; an owner with no part is skipped. The other parts stay as they were.
template <typename T> static void test_reduce_group(Rank& r, uint32_t salt) {
    std::vector<size_t> counts(r.n), at(r.n);
    size_t total = 0;
    for (int j = 0; j < r.n; j++) {
        counts[j] = (j == 1 && r.n > 2) ? 0 : 1000 + 617 * (size_t)j;
        at[j] = total;
        total += counts[j];
    }
    std::vector<T> mine(total), want(total);
    for (size_t i = 0; i < total; i++) {
        mine[i] = input<T>(r.rank, i, salt);
        want[i] = mine[i];
    }
    for (size_t i = at[r.rank]; i < at[r.rank] + counts[r.rank]; i++) want[i] = sum_over_ranks<T>(r.n, i, salt);
    T* d = device_alloc<T>(total);
    upload(d, mine);
    CHECK_NCCL(ncclGroupStart());
    for (int j = 0; j < r.n; j++)
        if (counts[j] > 0)
            CHECK_NCCL(ncclReduce(d + at[j], d + at[j], counts[j], Elem<T>::type, ncclSum, j, r.comm, r.stream));
    CHECK_NCCL(ncclGroupEnd());
    CHECK_CUDA(cudaStreamSynchronize(r.stream));
    expect_same(r, download(d, total), want, 0, total, "Reduce per owner in a group");
    CHECK_CUDA(cudaFree(d));
}

// in place: recvbuff is rank r's part of sendbuff, at r * count
template <typename T> static void test_reduce_scatter(Rank& r, size_t count, bool in_place, uint32_t salt) {
    const size_t total = count * r.n, own = r.rank * count;
    std::vector<T> mine(total), want(count);
    for (size_t i = 0; i < total; i++) mine[i] = input<T>(r.rank, i, salt);
    for (size_t i = 0; i < count; i++) want[i] = sum_over_ranks<T>(r.n, own + i, salt);
    T* send = device_alloc<T>(total);
    T* recv = in_place ? send + own : device_alloc<T>(count);
    upload(send, mine);
    CHECK_NCCL(ncclReduceScatter(send, recv, count, Elem<T>::type, ncclSum, r.comm, r.stream));
    CHECK_CUDA(cudaStreamSynchronize(r.stream));
    char what[96];
    snprintf(what, sizeof(what), "ReduceScatter count %zu%s", count, in_place ? " in place" : "");
    expect_same(r, download(recv, count), want, 0, count, what);
    CHECK_CUDA(cudaFree(send));
    if (!in_place) CHECK_CUDA(cudaFree(recv));
}

template <typename T> static void test_broadcast(Rank& r, size_t count, int root, bool in_place, uint32_t salt) {
    std::vector<T> mine(count), want(count);
    for (size_t i = 0; i < count; i++) {
        mine[i] = input<T>(r.rank, i, salt);
        want[i] = input<T>(root, i, salt);
    }
    T* send = device_alloc<T>(count);
    T* recv = in_place ? send : device_alloc<T>(count);
    upload(send, mine);
    if (in_place) CHECK_NCCL(ncclBcast(send, count, Elem<T>::type, root, r.comm, r.stream));
    else CHECK_NCCL(ncclBroadcast(send, recv, count, Elem<T>::type, root, r.comm, r.stream));
    CHECK_CUDA(cudaStreamSynchronize(r.stream));
    char what[96];
    snprintf(what, sizeof(what), "%s count %zu from %d", in_place ? "Bcast" : "Broadcast", count, root);
    expect_same(r, download(recv, count), want, 0, count, what);
    CHECK_CUDA(cudaFree(send));
    if (!in_place) CHECK_CUDA(cudaFree(recv));
}

// ---------------------------------------------------------------------------------------
// point to point: what arrives is the sender's input, computed here from its rank

// A ring in one group, as pipeline stages pass activations on: each rank sends its values to
// the next rank and receives the previous rank's. With 2 ranks both go to and come from the
// one peer; with 1 rank, to and from itself.
template <typename T> static void test_ring(Rank& r, size_t count, uint32_t salt) {
    const int next = (r.rank + 1) % r.n, prev = (r.rank + r.n - 1) % r.n;
    std::vector<T> mine(count), want(count);
    for (size_t i = 0; i < count; i++) {
        mine[i] = input<T>(r.rank, i, salt);
        want[i] = input<T>(prev, i, salt);
    }
    T* send = device_alloc<T>(count);
    T* recv = device_alloc<T>(count);
    upload(send, mine);
    CHECK_NCCL(ncclGroupStart());
    CHECK_NCCL(ncclSend(send, count, Elem<T>::type, next, r.comm, r.stream));
    CHECK_NCCL(ncclRecv(recv, count, Elem<T>::type, prev, r.comm, r.stream));
    CHECK_NCCL(ncclGroupEnd());
    CHECK_CUDA(cudaStreamSynchronize(r.stream));
    char what[96];
    snprintf(what, sizeof(what), "ring count %zu, from rank %d", count, prev);
    expect_same(r, download(recv, count), want, 0, count, what);
    expect_same(r, download(send, count), mine, 0, count, "ring's sendbuff");
    CHECK_CUDA(cudaFree(send));
    CHECK_CUDA(cudaFree(recv));
}

// Several messages of different sizes each way between rank r and r ^ 1 (itself when it has
// no partner), message k from rank j holding input(j, i, salt + k): first in one group, all
// sends before all receives; then the lower rank sends them all in one group while the
// higher receives them one at a time, ungrouped. Each must arrive in its own buffer, in the
// order sent, however the two sides grouped them.
static void test_order(Rank& r, uint32_t salt) {
    const int peer = (r.rank ^ 1) < r.n ? r.rank ^ 1 : r.rank;
    const size_t sizes[] = {1, 3001, 0, 777, 2050};  // 4 KiB slots: 1 piece, 3, none, 1, 3
    const int m = sizeof(sizes) / sizeof(sizes[0]);
    std::vector<float*> send(m), recv(m);
    for (int k = 0; k < m; k++) {
        std::vector<float> mine(sizes[k]);
        for (size_t i = 0; i < sizes[k]; i++) mine[i] = input<float>(r.rank, i, salt + k);
        send[k] = device_alloc<float>(sizes[k]);
        recv[k] = device_alloc<float>(sizes[k]);
        upload(send[k], mine);
    }
    auto check = [&](const char* how) {
        for (int k = 0; k < m; k++) {
            std::vector<float> want(sizes[k]);
            for (size_t i = 0; i < sizes[k]; i++) want[i] = input<float>(peer, i, salt + k);
            char what[96];
            snprintf(what, sizeof(what), "%s message %d of %d (count %zu) from rank %d", how, k + 1, m, sizes[k], peer);
            expect_same(r, download(recv[k], sizes[k]), want, 0, sizes[k], what);
        }
    };
    CHECK_NCCL(ncclGroupStart());
    for (int k = 0; k < m; k++) CHECK_NCCL(ncclSend(send[k], sizes[k], ncclFloat, peer, r.comm, r.stream));
    for (int k = 0; k < m; k++) CHECK_NCCL(ncclRecv(recv[k], sizes[k], ncclFloat, peer, r.comm, r.stream));
    CHECK_NCCL(ncclGroupEnd());
    CHECK_CUDA(cudaStreamSynchronize(r.stream));
    check("grouped");
    if (peer != r.rank) {
        for (int k = 0; k < m; k++) CHECK_CUDA(cudaMemset(recv[k], 0xff, std::max<size_t>(sizes[k], 1) * 4));
        if (r.rank < peer) CHECK_NCCL(ncclGroupStart());
        for (int k = 0; k < m; k++) {
            if (r.rank < peer) CHECK_NCCL(ncclSend(send[k], sizes[k], ncclFloat, peer, r.comm, r.stream));
            else CHECK_NCCL(ncclRecv(recv[k], sizes[k], ncclFloat, peer, r.comm, r.stream));
        }
        if (r.rank < peer) CHECK_NCCL(ncclGroupEnd());
        CHECK_CUDA(cudaStreamSynchronize(r.stream));
        if (r.rank > peer) check("ungrouped");
    }
    for (int k = 0; k < m; k++) {
        CHECK_CUDA(cudaFree(send[k]));
        CHECK_CUDA(cudaFree(recv[k]));
    }
}

// A message to itself beside the ring's, in one group, the receive from self issued first.
// With 1 rank the ring is to itself too, and the two messages match in the order issued: the
// ring's send goes to the first receive.
static void test_self(Rank& r, size_t count, uint32_t salt) {
    const int next = (r.rank + 1) % r.n, prev = (r.rank + r.n - 1) % r.n;
    std::vector<int32_t> mine(count), own(count), want(count);
    for (size_t i = 0; i < count; i++) {
        mine[i] = input<int32_t>(r.rank, i, salt);
        own[i] = input<int32_t>(r.rank, i, salt + 1);
        want[i] = input<int32_t>(prev, i, salt);
    }
    const std::vector<int32_t>& want_self = r.n == 1 ? want : own;
    const std::vector<int32_t>& want_ring = r.n == 1 ? own : want;
    int32_t* send = device_alloc<int32_t>(count);
    int32_t* self_send = device_alloc<int32_t>(count);
    int32_t* recv = device_alloc<int32_t>(count);
    int32_t* self_recv = device_alloc<int32_t>(count);
    upload(send, mine);
    upload(self_send, own);
    CHECK_NCCL(ncclGroupStart());
    CHECK_NCCL(ncclRecv(self_recv, count, ncclInt32, r.rank, r.comm, r.stream));
    CHECK_NCCL(ncclSend(send, count, ncclInt32, next, r.comm, r.stream));
    CHECK_NCCL(ncclSend(self_send, count, ncclInt32, r.rank, r.comm, r.stream));
    CHECK_NCCL(ncclRecv(recv, count, ncclInt32, prev, r.comm, r.stream));
    CHECK_NCCL(ncclGroupEnd());
    CHECK_CUDA(cudaStreamSynchronize(r.stream));
    expect_same(r, download(self_recv, count), want_self, 0, count, "send to self");
    expect_same(r, download(recv, count), want_ring, 0, count, "ring beside a send to self");
    for (int32_t* d : {send, self_send, recv, self_recv}) CHECK_CUDA(cudaFree(d));
}

static void rank_open(Rank& r, int rank, int n, const ncclUniqueId& id) {
    r = Rank{rank, n, nullptr, nullptr, 0};
    CHECK_CUDA(cudaStreamCreate(&r.stream));
    CHECK_NCCL(ncclCommInitRank(&r.comm, n, id, rank));
}

// polls as gpu_comm_wait does; returns the asynchronous error and how long it took to appear
static ncclResult_t poll_async_error(Rank& r, double limit_s, double* took) {
    const double t0 = now_s();
    ncclResult_t e = ncclSuccess;
    while (now_s() - t0 < limit_s) {
        CHECK_NCCL(ncclCommGetAsyncError(r.comm, &e));
        if (e != ncclSuccess) break;
        usleep(1000);
    }
    *took = now_s() - t0;
    return e;
}

// waits (at most 5 s) for the asynchronous error a failed operation sets, then drains the
// stream and destroys the communicator; returns the error
static ncclResult_t close_after_error(Rank& r, double* took) {
    ncclResult_t e = poll_async_error(r, 5.0, took);
    CHECK_CUDA(cudaStreamSynchronize(r.stream));
    CHECK_NCCL(ncclCommDestroy(r.comm));
    return e;
}

// What the failure scenarios post: one operation that every rank issues alike and that
// cannot finish without rank `peer` (the collective ignores it): an AllReduce in place, or
// an exchange with peer in one group, sending d[0, count) and receiving into d[count, 2 count).
typedef void (*PostFn)(Rank& r, float* d, size_t count, int peer);
static void post_all_reduce(Rank& r, float* d, size_t count, int) {
    CHECK_NCCL(ncclAllReduce(d, d, count, ncclFloat, ncclSum, r.comm, r.stream));
}
static void post_exchange(Rank& r, float* d, size_t count, int peer) {
    CHECK_NCCL(ncclGroupStart());
    CHECK_NCCL(ncclSend(d, count, ncclFloat, peer, r.comm, r.stream));
    CHECK_NCCL(ncclRecv(d + count, count, ncclFloat, peer, r.comm, r.stream));
    CHECK_NCCL(ncclGroupEnd());
}

// ---------------------------------------------------------------------------------------
// the scenarios: each runs in every rank's process and returns its failures

static int scenario_collectives(int rank, int n, const ncclUniqueId& id) {
    Rank r;
    rank_open(r, rank, n, id);
    int count = 0, me = -1;
    CHECK_NCCL(ncclCommCount(r.comm, &count));
    CHECK_NCCL(ncclCommUserRank(r.comm, &me));
    expect(r, count == n && me == rank, "ncclCommCount %d, ncclCommUserRank %d", count, me);
    // 4 KiB of staging: 1,024 fp32 or 2,048 bf16 values a round
    test_all_reduce<float>(r, 2501, false, 1);
    test_all_reduce<float>(r, 3001, true, 2);
    test_all_reduce<float>(r, 1, true, 3);
    test_all_reduce<uint16_t>(r, 4099, false, 4);
    test_all_reduce<uint16_t>(r, 777, true, 5);
    test_all_reduce_max_u32(r, 2501, 14);
    CHECK_NCCL(ncclAllReduce(nullptr, nullptr, 0, ncclFloat, ncclSum, r.comm, r.stream));  // count 0: nothing
    test_all_gather<float>(r, 1531, 6);
    test_all_gather<uint16_t>(r, 2049, 7);
    test_reduce_group<uint16_t>(r, 8);
    test_reduce_group<float>(r, 9);
    test_reduce_scatter<float>(r, 1283, false, 10);
    test_reduce_scatter<uint16_t>(r, 1283, true, 11);
    test_broadcast<float>(r, 2049, n - 1, false, 12);
    test_broadcast<uint16_t>(r, 3333, 0, true, 13);
    ncclResult_t e = ncclSuccess;
    CHECK_NCCL(ncclCommGetAsyncError(r.comm, &e));
    expect(r, e == ncclSuccess, "asynchronous error %s", ncclGetErrorString(e));
    CHECK_NCCL(ncclCommDestroy(r.comm));
    return r.failures;
}

static int scenario_p2p(int rank, int n, const ncclUniqueId& id) {
    Rank r;
    rank_open(r, rank, n, id);
    // 4 KiB slots: 1,024 fp32 or int32 values a piece, 2,048 bf16
    test_ring<float>(r, 2501, 31);
    test_ring<uint16_t>(r, 4099, 32);
    test_ring<int32_t>(r, 1, 33);
    test_ring<float>(r, 0, 34);
    test_all_reduce<float>(r, 1500, false, 35);  // between messages, which it must not disturb
    test_order(r, 40);
    test_self(r, 1500, 50);
    test_ring<int32_t>(r, 3000, 36);
    ncclResult_t e = ncclSuccess;
    CHECK_NCCL(ncclCommGetAsyncError(r.comm, &e));
    expect(r, e == ncclSuccess, "asynchronous error %s", ncclGetErrorString(e));
    CHECK_NCCL(ncclCommDestroy(r.comm));
    return r.failures;
}

static int scenario_large(int rank, int n, const ncclUniqueId& id) {
    Rank r;
    rank_open(r, rank, n, id);
    const size_t chunk_floats = (4u << 20) / 4;
    test_all_reduce<float>(r, chunk_floats + 7, true, 21);       // 2 rounds
    test_reduce_scatter<float>(r, chunk_floats / 4 + 1, false, 23);  // 2 rounds at 4 ranks, 1 at 2
    test_ring<float>(r, chunk_floats / 2 + 3, 24);  // 3 pieces of a 1 MiB slot at 2 ranks, 5 of 512 KiB at 4
    CHECK_NCCL(ncclCommDestroy(r.comm));
    return r.failures;
}

template <PostFn post> static int scenario_mismatch(int rank, int n, const ncclUniqueId& id) {
    Rank r;
    rank_open(r, rank, n, id);
    float* d = device_alloc<float>(32);
    post(r, d, 10 + rank, 1 - rank);
    double took = 0;
    ncclResult_t e = close_after_error(r, &took);
    expect(r, e == ncclInvalidUsage, "counts 10 and 11: asynchronous error %s, expected ncclInvalidUsage",
           ncclGetErrorString(e));
    return r.failures;
}

// `leaver` exits after init. The parent reaps in rank order: rank 0 at once (its pid is then
// gone), the last rank only after rank 0 (a zombie meanwhile).
template <PostFn post> static int peer_exits(int rank, int n, const ncclUniqueId& id, int leaver) {
    Rank r;
    rank_open(r, rank, n, id);
    if (rank == leaver) _exit(0);
    float* d = device_alloc<float>(2000);
    post(r, d, 1000, leaver);
    double took = 0;
    ncclResult_t e = poll_async_error(r, 10.0, &took);
    expect(r, e == ncclRemoteError, "asynchronous error %s, expected ncclRemoteError", ncclGetErrorString(e));
    expect(r, took < 3.0, "the error took %.2f s", took);
    const double t0 = now_s();
    ncclCommAbort(r.comm);
    CHECK_CUDA(cudaStreamSynchronize(r.stream));
    const double drain = now_s() - t0;
    expect(r, drain < 1.0, "abort + stream synchronize took %.2f s", drain);
    if (rank == (leaver == 0 ? 1 : 0))
        printf("  rank %d: ncclRemoteError after %.3f s; abort + synchronize %.3f s\n", rank, took, drain);
    return r.failures;
}
template <PostFn post> static int scenario_last_exits(int rank, int n, const ncclUniqueId& id) {
    return peer_exits<post>(rank, n, id, n - 1);
}
template <PostFn post> static int scenario_first_exits(int rank, int n, const ncclUniqueId& id) {
    return peer_exits<post>(rank, n, id, 0);
}

template <PostFn post> static int scenario_abort(int rank, int n, const ncclUniqueId& id) {
    Rank r;
    rank_open(r, rank, n, id);
    float* d = device_alloc<float>(2000);
    if (rank == 0) {  // two operations the peer never joins
        post(r, d, 1000, 1);
        post(r, d, 1000, 1);
        sleep_s(0.3);
        ncclResult_t e = ncclSuccess;
        CHECK_NCCL(ncclCommGetAsyncError(r.comm, &e));
        cudaError_t q = cudaStreamQuery(r.stream);
        expect(r, q == cudaErrorNotReady && e == ncclSuccess, "before the abort: stream %s, asynchronous error %s",
               cudaGetErrorName(q), ncclGetErrorString(e));
        const double t0 = now_s();
        CHECK_NCCL(ncclCommAbort(r.comm));
        const double t_abort = now_s() - t0;
        CHECK_CUDA(cudaStreamSynchronize(r.stream));
        const double t_sync = now_s() - t0;
        expect(r, t_sync < 0.5, "abort took %.3f s, the stream drained after %.3f s", t_abort, t_sync);
        printf("  rank 0: ncclCommAbort returned after %.4f s, the blocked stream drained after %.4f s\n", t_abort,
               t_sync);
        sleep_s(1.2);  // alive past the peer's check: only the abort's record in the segment tells it
    } else {  // joins late: the aborted peer must fail it rather than leave it waiting
        sleep_s(0.8);
        post(r, d, 1000, 0);
        double took = 0;
        ncclResult_t e = poll_async_error(r, 5.0, &took);
        expect(r, e == ncclRemoteError && took < 0.4, "after the peer's abort: %s after %.2f s",
               ncclGetErrorString(e), took);
        CHECK_CUDA(cudaStreamSynchronize(r.stream));
        CHECK_NCCL(ncclCommDestroy(r.comm));
    }
    return r.failures;
}

// EMU_NCCL_TIMEOUT_S=1: rank 1 never joins the operation, but lives on
template <PostFn post> static int scenario_timeout(int rank, int n, const ncclUniqueId& id) {
    Rank r;
    rank_open(r, rank, n, id);
    if (rank == 0) {
        float* d = device_alloc<float>(200);
        post(r, d, 100, 1);
        double took = 0;
        ncclResult_t e = poll_async_error(r, 5.0, &took);
        expect(r, e == ncclSystemError && took > 0.8 && took < 2.5, "timeout 1 s: %s after %.2f s",
               ncclGetErrorString(e), took);
        printf("  rank 0: ncclSystemError after %.2f s (EMU_NCCL_TIMEOUT_S=1)\n", took);
    } else {
        sleep_s(2.0);
    }
    CHECK_CUDA(cudaStreamSynchronize(r.stream));
    CHECK_NCCL(ncclCommDestroy(r.comm));
    return r.failures;
}

// EMU_NCCL_TIMEOUT_S=1: both ranks send to each other, then receive, ungrouped. Each send
// waits for the other's receive, so both give up after about a second (on a GPU this
// deadlocks, or passes while NCCL happens to buffer the message)
static int scenario_crossed_sends(int rank, int n, const ncclUniqueId& id) {
    Rank r;
    rank_open(r, rank, n, id);
    float* d = device_alloc<float>(200);
    CHECK_NCCL(ncclSend(d, 100, ncclFloat, 1 - rank, r.comm, r.stream));
    CHECK_NCCL(ncclRecv(d + 100, 100, ncclFloat, 1 - rank, r.comm, r.stream));
    double took = 0;
    ncclResult_t e = close_after_error(r, &took);
    // the second to time out may learn of the first's failure instead
    expect(r, (e == ncclSystemError || e == ncclRemoteError) && took > 0.8 && took < 2.5,
           "crossed sends, timeout 1 s: %s after %.2f s", ncclGetErrorString(e), took);
    return r.failures;
}

// one rank: a send to itself with no receive in its group, and one whose receive's count
// differs, are refused when they run
static int scenario_self_misuse(int rank, int n, const ncclUniqueId& id) {
    Rank r;
    rank_open(r, rank, n, id);
    float* d = device_alloc<float>(32);
    CHECK_NCCL(ncclSend(d, 10, ncclFloat, 0, r.comm, r.stream));
    double took = 0;
    ncclResult_t e = close_after_error(r, &took);
    expect(r, e == ncclInvalidUsage, "send to self alone: %s, expected ncclInvalidUsage", ncclGetErrorString(e));
    ncclUniqueId id2;
    CHECK_NCCL(ncclGetUniqueId(&id2));
    rank_open(r, rank, n, id2);
    CHECK_NCCL(ncclGroupStart());
    CHECK_NCCL(ncclSend(d, 10, ncclFloat, 0, r.comm, r.stream));
    CHECK_NCCL(ncclRecv(d + 16, 11, ncclFloat, 0, r.comm, r.stream));
    CHECK_NCCL(ncclGroupEnd());
    e = close_after_error(r, &took);
    expect(r, e == ncclInvalidUsage, "counts 10 and 11 to self: %s, expected ncclInvalidUsage",
           ncclGetErrorString(e));
    return r.failures;
}

// EMU_NCCL_TIMEOUT_S=1: rank 0 of 2 alone
static int scenario_init_timeout(int rank, int n, const ncclUniqueId& id) {
    Rank r{rank, n, nullptr, nullptr, 0};
    const double t0 = now_s();
    ncclResult_t e = ncclCommInitRank(&r.comm, 2, id, 0);
    const double took = now_s() - t0;
    expect(r, e == ncclSystemError && r.comm == nullptr && took > 0.8 && took < 2.5,
           "init alone: %s after %.2f s", ncclGetErrorString(e), took);
    return r.failures;
}

// ---------------------------------------------------------------------------------------
// the parent

static int g_failed = 0;

static void run(const char* name, int n, int (*scenario)(int, int, const ncclUniqueId&), const char* chunk,
                const char* timeout) {
    if (chunk) setenv("EMU_NCCL_CHUNK_BYTES", chunk, 1);
    else unsetenv("EMU_NCCL_CHUNK_BYTES");
    if (timeout) setenv("EMU_NCCL_TIMEOUT_S", timeout, 1);
    else unsetenv("EMU_NCCL_TIMEOUT_S");
    ncclUniqueId id;
    CHECK_NCCL(ncclGetUniqueId(&id));
    const double t0 = now_s();
    fflush(stdout);
    std::vector<pid_t> pids;
    for (int rank = 0; rank < n; rank++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            exit(1);
        }
        if (pid == 0) {
            alarm(30);  // a hung rank dies, and the parent reports it
            int failures = scenario(rank, n, id);
            fflush(stdout);
            _exit(failures == 0 ? 0 : 1);  // no destructors racing the stream threads
        }
        pids.push_back(pid);
    }
    bool ok = true;
    for (int rank = 0; rank < n; rank++) {  // in rank order, blocking: an early exit stays a zombie
        int status = 0;
        waitpid(pids[rank], &status, 0);
        if (WIFSIGNALED(status)) printf("  FAIL rank %d: killed by signal %d\n", rank, WTERMSIG(status));
        ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    printf("%s %-40s %d rank%s %.2f s\n", ok ? "PASS" : "FAIL", name, n, n == 1 ? " " : "s", now_s() - t0);
    if (!ok) g_failed++;
}

// every segment an id of this process named must be gone (unlinked once all ranks attached)
static void check_no_segments_left() {
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "gptrain-nccl-%d-", (int)getpid());
    int left = 0;
    if (DIR* dir = opendir("/dev/shm")) {
        while (struct dirent* e = readdir(dir))
            if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
                printf("  left behind: /dev/shm/%s\n", e->d_name);
                left++;
            }
        closedir(dir);
    }
    printf("%s %-40s\n", left == 0 ? "PASS" : "FAIL", "no shared memory segment left in /dev/shm");
    if (left) g_failed++;
}

int main() {
    const double t0 = now_s();
    for (int n : {1, 2, 4}) run("collectives (4 KiB staging)", n, scenario_collectives, "4096", nullptr);
    for (int n : {1, 2, 4}) run("send/recv (4 KiB slots)", n, scenario_p2p, "4096", nullptr);
    for (int n : {2, 4}) run("large counts (default staging)", n, scenario_large, nullptr, nullptr);
    run("mismatched counts -> ncclInvalidUsage", 2, scenario_mismatch<post_all_reduce>, nullptr, nullptr);
    run("last rank exits (zombie) -> ncclRemoteError", 4, scenario_last_exits<post_all_reduce>, nullptr, nullptr);
    run("rank 0 exits (reaped) -> ncclRemoteError", 3, scenario_first_exits<post_all_reduce>, nullptr, nullptr);
    run("ncclCommAbort unblocks", 2, scenario_abort<post_all_reduce>, nullptr, nullptr);
    run("a peer never joins -> ncclSystemError", 2, scenario_timeout<post_all_reduce>, nullptr, "1");
    // the same for a send and a receive in one group
    run("send/recv: mismatched counts -> ncclInvalidUsage", 2, scenario_mismatch<post_exchange>, nullptr, nullptr);
    run("send/recv to self: unpaired, mismatched -> ncclInvalidUsage", 1, scenario_self_misuse, nullptr, nullptr);
    run("send/recv: last rank exits (zombie) -> ncclRemoteError", 4, scenario_last_exits<post_exchange>, nullptr,
        nullptr);
    run("send/recv: rank 0 exits (reaped) -> ncclRemoteError", 3, scenario_first_exits<post_exchange>, nullptr,
        nullptr);
    run("send/recv: ncclCommAbort unblocks", 2, scenario_abort<post_exchange>, nullptr, nullptr);
    run("send/recv: a peer never posts -> ncclSystemError", 2, scenario_timeout<post_exchange>, nullptr, "1");
    run("send/recv: crossed ungrouped sends -> timeout", 2, scenario_crossed_sends, nullptr, "1");
    run("init alone -> ncclSystemError", 1, scenario_init_timeout, nullptr, "1");
    check_no_segments_left();
    printf("%s: %d scenario%s failed, %.1f s\n", g_failed ? "FAIL" : "PASS", g_failed, g_failed == 1 ? "" : "s",
           now_s() - t0);
    return g_failed ? 1 : 0;
}
