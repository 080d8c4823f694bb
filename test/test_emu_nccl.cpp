// test_emu_nccl.cpp: the emulated NCCL (llmc/emu/nccl.cpp) across 1, 2 and 4 processes. The
// parent makes the id, forks the ranks, and each rank runs the collectives on device buffers
// and compares with results computed here from every rank's inputs (sums in fp32, in rank
// order 0..n-1, rounded once to bf16 with cuda_bf16.h):
//   collectives  AllReduce fp32 and bf16 (in place and not, odd counts, count 0), AllGather in
//                place, one Reduce per owner to each root in one group (as grad_sync_gpu.cuh),
//                ReduceScatter (in place and not), Broadcast and Bcast; with 4 KiB of staging,
//                so every count spans several rounds
//   large        counts above the default 4 MiB staging chunk (AllReduce, ReduceScatter)
//   mismatch     ranks issuing different counts get ncclInvalidUsage
//   peer exits   a rank exits after init: the others' collective fails with ncclRemoteError
//                within seconds, whether the dead rank is an unreaped zombie or reaped
//   abort        ncclCommAbort unblocks a rank's blocked collectives at once, and the peer's
//                later collective fails with ncclRemoteError while the aborted rank lives on
//   timeouts     EMU_NCCL_TIMEOUT_S=1: a collective and an init whose peer never comes fail
//                with ncclSystemError after about a second
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

static int scenario_large(int rank, int n, const ncclUniqueId& id) {
    Rank r;
    rank_open(r, rank, n, id);
    const size_t chunk_floats = (4u << 20) / 4;
    test_all_reduce<float>(r, chunk_floats + 7, true, 21);       // 2 rounds
    test_reduce_scatter<float>(r, chunk_floats / 4 + 1, false, 23);  // 2 rounds at 4 ranks, 1 at 2
    CHECK_NCCL(ncclCommDestroy(r.comm));
    return r.failures;
}

static int scenario_mismatch(int rank, int n, const ncclUniqueId& id) {
    Rank r;
    rank_open(r, rank, n, id);
    float* d = device_alloc<float>(16);
    CHECK_NCCL(ncclAllReduce(d, d, 10 + rank, ncclFloat, ncclSum, r.comm, r.stream));
    double took = 0;
    ncclResult_t e = poll_async_error(r, 5.0, &took);
    expect(r, e == ncclInvalidUsage, "counts 10 and 11: asynchronous error %s, expected ncclInvalidUsage",
           ncclGetErrorString(e));
    CHECK_CUDA(cudaStreamSynchronize(r.stream));
    CHECK_NCCL(ncclCommDestroy(r.comm));
    return r.failures;
}

// `leaver` exits after init. The parent reaps in rank order: rank 0 at once (its pid is then
// gone), the last rank only after rank 0 (a zombie meanwhile).
static int peer_exits(int rank, int n, const ncclUniqueId& id, int leaver) {
    Rank r;
    rank_open(r, rank, n, id);
    if (rank == leaver) _exit(0);
    float* d = device_alloc<float>(1000);
    CHECK_NCCL(ncclAllReduce(d, d, 1000, ncclFloat, ncclSum, r.comm, r.stream));
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
static int scenario_last_exits(int rank, int n, const ncclUniqueId& id) { return peer_exits(rank, n, id, n - 1); }
static int scenario_first_exits(int rank, int n, const ncclUniqueId& id) { return peer_exits(rank, n, id, 0); }

static int scenario_abort(int rank, int n, const ncclUniqueId& id) {
    Rank r;
    rank_open(r, rank, n, id);
    float* d = device_alloc<float>(1000);
    if (rank == 0) {  // two collectives the peer never joins
        CHECK_NCCL(ncclAllReduce(d, d, 1000, ncclFloat, ncclSum, r.comm, r.stream));
        CHECK_NCCL(ncclAllReduce(d, d, 1000, ncclFloat, ncclSum, r.comm, r.stream));
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
        CHECK_NCCL(ncclAllReduce(d, d, 1000, ncclFloat, ncclSum, r.comm, r.stream));
        double took = 0;
        ncclResult_t e = poll_async_error(r, 5.0, &took);
        expect(r, e == ncclRemoteError && took < 0.4, "after the peer's abort: %s after %.2f s",
               ncclGetErrorString(e), took);
        CHECK_CUDA(cudaStreamSynchronize(r.stream));
        CHECK_NCCL(ncclCommDestroy(r.comm));
    }
    return r.failures;
}

// EMU_NCCL_TIMEOUT_S=1: rank 1 never joins the collective, but lives on
static int scenario_timeout(int rank, int n, const ncclUniqueId& id) {
    Rank r;
    rank_open(r, rank, n, id);
    if (rank == 0) {
        float* d = device_alloc<float>(100);
        CHECK_NCCL(ncclAllReduce(d, d, 100, ncclFloat, ncclSum, r.comm, r.stream));
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
    for (int n : {2, 4}) run("large counts (default staging)", n, scenario_large, nullptr, nullptr);
    run("mismatched counts -> ncclInvalidUsage", 2, scenario_mismatch, nullptr, nullptr);
    run("last rank exits (zombie) -> ncclRemoteError", 4, scenario_last_exits, nullptr, nullptr);
    run("rank 0 exits (reaped) -> ncclRemoteError", 3, scenario_first_exits, nullptr, nullptr);
    run("ncclCommAbort unblocks", 2, scenario_abort, nullptr, nullptr);
    run("a peer never joins -> ncclSystemError", 2, scenario_timeout, nullptr, "1");
    run("init alone -> ncclSystemError", 1, scenario_init_timeout, nullptr, "1");
    check_no_segments_left();
    printf("%s: %d scenario%s failed, %.1f s\n", g_failed ? "FAIL" : "PASS", g_failed, g_failed == 1 ? "" : "s",
           now_s() - t0);
    return g_failed ? 1 : 0;
}
