// test_comm_socket.cpp: one rank of the socket-collective test; test/test_comm_socket.sh starts
// WORLD of these processes. Every collective is checked against plain arithmetic done here:
// integer-valued sums exactly, real-valued sums bit for bit against the ring order the header
// documents, on awkward and uneven sizes and on big buffers that would deadlock a blocking implementation.
// usage: build/test_comm_socket RANK WORLD METHOD ARG TIMEOUT [MODE]
//   METHOD fs: ARG is the shared directory; METHOD tcp: ARG is HOST:PORT.
//   MODE die: rank 1 exits with status 3 right after connecting; hang: rank 1 sleeps forever.
//   The other ranks run the normal checks and must stop with an error instead of hanging.
#include <cmath>
#include <string>
#include <vector>

#include "../llmc/comm_socket.h"  // defines: SocketComm, socket_comm_create, socket_reduce_scatter_f32, ...

static int g_rank = 0;
static int failures = 0;
static void expect(bool ok, const std::string& what) {
    if (ok) return;
    printf("rank %d: FAIL: %s\n", g_rank, what.c_str());
    failures++;
}

static uint64_t mix64(uint64_t x) {  // splitmix64's finaliser: a fixed, well-spread hash
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
static uint64_t hash2(uint64_t a, uint64_t b) { return mix64(mix64(a) ^ b); }

// Integers in [-1000, 1000]: any sum over a few ranks is exact in float.
static float int_value(int q, size_t i) { return (float)((int)(hash2(q, i) % 2001) - 1000); }
// Reals of mixed magnitude (2^-8 .. 2^8), so the order of additions changes the rounding.
static float real_value(int q, size_t i) {
    uint64_t h = hash2(q + 1000, i);
    double unit = (double)(h >> 40) / (double)(1ull << 24) * 2.0 - 1.0;
    return (float)std::ldexp(unit, (int)(h % 17) - 8);
}
static double real_value64(int q, int i) {
    uint64_t h = hash2(q + 2000, (uint64_t)i);
    double unit = (double)(h >> 11) / (double)(1ull << 53) * 2.0 - 1.0;
    return std::ldexp(unit, (int)(h % 41) - 20);
}
static unsigned char byte_value(int q, size_t j) { return (unsigned char)hash2(q + 3000, j); }

static uint64_t fnv64(const void* data, size_t bytes) {
    const unsigned char* p = (const unsigned char*)data;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < bytes; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

// The receive path that adds floats must handle a float split across two recv() calls; loopback
// rarely splits, so drive it by hand on a socket pair, 12 bytes in pieces of 3, 3, 1 and 5.
static void check_split_floats() {
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0, "socketpair");
    SocketComm c;
    c.scratch.resize(SOCKET_SCRATCH_BYTES / sizeof(float));
    // values whose four bytes all differ, so a byte landing in the wrong place shows
    float dst[3] = {1.0f, 2.0f, 3.0f}, src[3] = {0.1f, -3.3f, 7.7f}, want[3];
    for (int i = 0; i < 3; i++) want[i] = dst[i] + src[i];
    SocketTransfer t = socket_recv_of(sv[1], 1, dst, sizeof dst);
    t.add_f32 = true;
    const char* s = (const char*)src;
    size_t pieces[4] = {3, 3, 1, 5}, off = 0;
    for (size_t p : pieces) {
        CHECK(write(sv[0], s + off, p) == (ssize_t)p, "write");
        off += p;
        while (t.done < off) socket_transfer_step(&c, &t, POLLIN);
    }
    expect(memcmp(dst, want, sizeof dst) == 0, "floats split across receives add up: got " +
                                                     std::to_string(dst[0]) + " " + std::to_string(dst[1]) +
                                                     " " + std::to_string(dst[2]));
    close(sv[0]);
    close(sv[1]);
}

static void check_reduce_scatter_int(SocketComm* c, size_t shard) {
    int W = c->world, r = c->rank;
    std::vector<float> buf(W * shard);
    for (size_t i = 0; i < buf.size(); i++) buf[i] = int_value(r, i);
    socket_reduce_scatter_f32(c, buf.data(), shard);
    size_t bad = 0, first_bad = 0;
    for (size_t j = 0; j < shard; j++) {
        size_t i = r * shard + j;
        int want = 0;
        for (int q = 0; q < W; q++) want += (int)int_value(q, i);
        if (buf[i] != (float)want && bad++ == 0) first_bad = j;
    }
    expect(bad == 0, "reduce-scatter of integers, shard " + std::to_string(shard) + ": " +
                         std::to_string(bad) + " wrong, first at " + std::to_string(first_bad));
}

// Real values: the reduced vector must follow the documented order bit for bit, be the same on a
// second run, and (after an all-gather) be the same bytes on every rank.
static void check_reduce_scatter_real(SocketComm* c, size_t shard) {
    int W = c->world, r = c->rank;
    std::vector<float> runs[2];
    for (auto& buf : runs) {
        buf.resize(W * shard);
        for (size_t i = 0; i < buf.size(); i++) buf[i] = real_value(r, i);
        socket_reduce_scatter_f32(c, buf.data(), shard);
        socket_all_gather(c, buf.data(), shard * sizeof(float));
    }
    expect(memcmp(runs[0].data(), runs[1].data(), runs[0].size() * sizeof(float)) == 0,
           "reduce-scatter of reals gives the same bits twice");
    size_t bad = 0;
    for (int s = 0; s < W; s++)
        for (size_t j = 0; j < shard; j++) {
            size_t i = s * shard + j;
            float acc = real_value((s + 1) % W, i);  // slice s: ranks s+1, s+2, ..., s
            for (int m = 2; m <= W; m++) acc = acc + real_value((s + m) % W, i);
            if (memcmp(&acc, &runs[0][i], sizeof acc) != 0) bad++;
        }
    expect(bad == 0, "reduce-scatter of reals follows the ring order bit for bit (" +
                         std::to_string(bad) + " of " + std::to_string(W * shard) + " differ)");
    std::vector<uint64_t> sums(W);
    sums[r] = fnv64(runs[0].data(), runs[0].size() * sizeof(float));
    socket_all_gather(c, sums.data(), sizeof(uint64_t));
    for (int q = 0; q < W; q++)
        expect(sums[q] == sums[r], "rank " + std::to_string(q) + " holds the same reduced bytes");
}

static void check_all_gather(SocketComm* c, size_t shard_bytes) {
    int W = c->world, r = c->rank;
    std::vector<unsigned char> buf(W * shard_bytes, 0xEE);
    for (size_t j = 0; j < shard_bytes; j++) buf[r * shard_bytes + j] = byte_value(r, j);
    socket_all_gather(c, buf.data(), shard_bytes);
    size_t bad = 0;
    for (int q = 0; q < W; q++)
        for (size_t j = 0; j < shard_bytes; j++) bad += buf[q * shard_bytes + j] != byte_value(q, j);
    expect(bad == 0, "all-gather of " + std::to_string(shard_bytes) + "-byte slices: " +
                         std::to_string(bad) + " bytes wrong");
}

// Uneven parts (some empty), as the trainer's gradient buckets cut them: reduce-scatter-v then
// all-gather-v must leave every rank with every part's sum, in the ring order, bit for bit.
static void check_uneven(SocketComm* c, const std::vector<size_t>& pattern) {
    int W = c->world;
    std::vector<size_t> counts(W), off(W + 1, 0);
    for (int q = 0; q < W; q++) {
        counts[q] = pattern[q % pattern.size()];
        off[q + 1] = off[q] + counts[q];
    }
    std::vector<float> buf(off[W]);
    for (size_t i = 0; i < buf.size(); i++) buf[i] = real_value(c->rank, i);
    socket_reduce_scatter_v_f32(c, buf.data(), counts.data());
    std::vector<size_t> bytes(W);
    for (int q = 0; q < W; q++) bytes[q] = counts[q] * sizeof(float);
    socket_all_gather_v(c, buf.data(), bytes.data());
    size_t bad = 0;
    for (int s = 0; s < W; s++)
        for (size_t i = off[s]; i < off[s + 1]; i++) {
            float acc = real_value((s + 1) % W, i);  // part s: ranks s+1, s+2, ..., s
            for (int m = 2; m <= W; m++) acc = acc + real_value((s + m) % W, i);
            if (memcmp(&acc, &buf[i], sizeof acc) != 0) bad++;
        }
    std::string what;
    for (size_t n : counts) what += std::to_string(n) + " ";
    expect(bad == 0, "uneven parts " + what + "reduce-scatter-v + all-gather-v: " + std::to_string(bad) +
                         " of " + std::to_string(off[W]) + " values differ from the ring order");
}

static void check_broadcast(SocketComm* c, size_t bytes, int root) {
    std::vector<unsigned char> buf(bytes, 0);
    if (c->rank == root)
        for (size_t j = 0; j < bytes; j++) buf[j] = byte_value(root + 100, j);
    socket_broadcast(c, buf.data(), bytes, root);
    size_t bad = 0;
    for (size_t j = 0; j < bytes; j++) bad += buf[j] != byte_value(root + 100, j);
    expect(bad == 0, "broadcast of " + std::to_string(bytes) + " bytes from rank " +
                         std::to_string(root) + ": " + std::to_string(bad) + " bytes wrong");
}

static void check_sum_f64(SocketComm* c, int n) {
    std::vector<double> x(n), want(n, 0.0);
    for (int i = 0; i < n; i++) x[i] = real_value64(c->rank, i);
    for (int i = 0; i < n; i++) {
        want[i] = real_value64(0, i);
        for (int q = 1; q < c->world; q++) want[i] = want[i] + real_value64(q, i);
    }
    socket_sum_f64(c, x.data(), n);
    expect(n == 0 || memcmp(x.data(), want.data(), n * sizeof(double)) == 0,
           "sum_f64 of " + std::to_string(n) + " values adds in rank order, bit for bit");
    std::vector<double> zero = x;
    socket_broadcast(c, zero.data(), n * sizeof(double), 0);
    expect(n == 0 || memcmp(x.data(), zero.data(), n * sizeof(double)) == 0,
           "sum_f64 gives rank 0's bits on every rank");
}

// Rank 0 arrives 300 ms late at the second barrier: nobody may leave it before then.
static void check_barrier(SocketComm* c) {
    socket_barrier(c);
    double start = socket_now();
    if (c->rank == 0) usleep(300 * 1000);
    socket_barrier(c);
    double waited = socket_now() - start;
    expect(c->world == 1 || waited > 0.2,
           "barrier waited " + std::to_string(waited) + " s for rank 0's 0.3 s");
    for (int i = 0; i < 3; i++) socket_barrier(c);
}

int main(int argc, char** argv) {
    long long rank, world;
    double timeout;
    if (argc < 6 || argc > 7 || !parse_int(argv[1], 0, 1 << 20, &rank) ||
        !parse_int(argv[2], 1, 1 << 20, &world) || !parse_float(argv[5], &timeout))
        fail("usage: %s RANK WORLD fs|tcp DIR|HOST:PORT TIMEOUT [die|hang]", argv[0]);
    std::string method = argv[3], mode = argc == 7 ? argv[6] : "";
    g_rank = (int)rank;
    SocketComm* c = socket_comm_create((int)rank, (int)world, method.c_str(), argv[4], argv[4], timeout);
    if (mode == "die" && rank == 1) exit(3);
    if (mode == "hang" && rank == 1)
        for (;;) pause();

    if (rank == 0) check_split_floats();
    size_t int_shards[] = {0, 1, 7, 1000, 3000000};
    for (size_t shard : int_shards) check_reduce_scatter_int(c, shard);
    check_reduce_scatter_real(c, 1);
    check_reduce_scatter_real(c, 100003);
    check_uneven(c, {5, 0, 1000003});
    check_uneven(c, {0, 3});
    check_uneven(c, {0});
    check_uneven(c, {2000000, 1, 0, 77});
    size_t gather_bytes[] = {0, 1, 3, 4000, 12000000};
    for (size_t b : gather_bytes) check_all_gather(c, b);
    int roots[] = {c->world - 1, 0, c->world / 2};
    size_t bcast_bytes[] = {0, 1, 1001, 8000003};
    for (int root : roots)
        for (size_t b : bcast_bytes) check_broadcast(c, b, root);
    check_sum_f64(c, 0);
    check_sum_f64(c, 1);
    check_sum_f64(c, 5);
    check_barrier(c);
    socket_comm_destroy(c);

    if (failures > 0) {
        printf("rank %d: FAIL (%d checks)\n", g_rank, failures);
        return 1;
    }
    printf("rank %d: PASS\n", g_rank);
    return 0;
}
