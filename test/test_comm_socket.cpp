// test_comm_socket.cpp: one rank of the socket-collective test; test/test_comm_socket.sh starts
// WORLD of these processes. Every collective is checked against plain arithmetic done here:
// integer-valued sums exactly, real-valued sums bit for bit against the ring order the header
// documents, on awkward and uneven sizes and on big buffers that would deadlock a blocking implementation.
// usage: build/test_comm_socket RANK WORLD METHOD ARG TIMEOUT [MODE]
//   METHOD fs: ARG is the shared directory; METHOD tcp: ARG is HOST:PORT.
//   MODE die: rank 1 exits with status 3 right after connecting; hang: rank 1 sleeps forever.
//   The other ranks run the normal checks and must stop with an error instead of hanging.
//   The job secret and the interface come from the environment, as in the trainer.
// usage: build/test_comm_socket sha CASES
//   SHA-256 and HMAC-SHA256 (llmc/sha256.h): the known answers of FIPS 180-4's examples and RFC
//   4231, then every line "KEY MSG SHA256 HMAC" (hex, "-" for empty) of CASES, which the test
//   script wrote with Python's hashlib and hmac.
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "../llmc/comm_socket.h"  // defines: SocketComm, socket_comm_create, socket_reduce_scatter_f32, ...
#include "../llmc/sha256.h"       // defines: sha256, hmac_sha256, sha256_update, digest_equal, ...

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

// ----------------------------------------------------------------------------------------
// SHA-256 and HMAC-SHA256

static std::string hex_of(const uint8_t* p, size_t n) {
    static const char digits[] = "0123456789abcdef";
    std::string h;
    for (size_t i = 0; i < n; i++) h += std::string(1, digits[p[i] >> 4]) + digits[p[i] & 15];
    return h;
}
static std::string bytes_of_hex(const std::string& h) {  // "-" is empty
    std::string b;
    for (size_t i = 0; h != "-" && i + 1 < h.size(); i += 2) b += (char)std::stoi(h.substr(i, 2), nullptr, 16);
    return b;
}
static std::string sha_hex(const std::string& m) {
    uint8_t d[32];
    sha256(m.data(), m.size(), d);
    return hex_of(d, 32);
}
static std::string hmac_hex(const std::string& k, const std::string& m) {
    uint8_t d[32];
    hmac_sha256(k.data(), k.size(), m.data(), m.size(), d);
    return hex_of(d, 32);
}

// FIPS 180-4's examples (as published with the standard: one block, two blocks, a million
// 'a'), SHA-256 of nothing, and RFC 4231's HMAC-SHA256 test cases 1-7.
static int check_sha_known_answers() {
    struct { std::string msg, want; } sha[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
         "mnopqrstnopqrstu", "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
        {std::string(1000000, 'a'), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
    };
    for (const auto& t : sha)
        expect(sha_hex(t.msg) == t.want, "SHA-256 of " + std::to_string(t.msg.size()) + " bytes \"" +
                                             t.msg.substr(0, 8) + "...\": " + sha_hex(t.msg) + ", want " + t.want);
    std::string key4;
    for (int i = 1; i <= 25; i++) key4 += (char)i;
    struct { std::string key, msg, want; } mac[] = {
        {std::string(20, '\x0b'), "Hi There", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
        {"Jefe", "what do ya want for nothing?", "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
        {std::string(20, '\xaa'), std::string(50, '\xdd'), "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
        {key4, std::string(50, '\xcd'), "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
        {std::string(20, '\x0c'), "Test With Truncation", "a3b6167473100ee06e0c796c2955552b"},  // 128 bits
        {std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First",
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
        {std::string(131, '\xaa'), "This is a test using a larger than block-size key and a larger than block-size data. "
         "The key needs to be hashed before being used by the HMAC algorithm.",
         "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
    };
    int n = 0;
    for (const auto& t : mac) {
        std::string got = hmac_hex(t.key, t.msg).substr(0, t.want.size());
        expect(got == t.want, "RFC 4231 case " + std::to_string(++n) + ": " + got + ", want " + t.want);
    }
    // fed in pieces (across block edges, the 56-byte padding edge) it must hash the same
    std::string msg(300, 'x');
    for (size_t i = 0; i < msg.size(); i++) msg[i] = (char)byte_value(7, i);
    size_t pieces[] = {1, 54, 1, 8, 63, 64, 65, 44};
    Sha256 st;
    sha256_init(&st);
    size_t off = 0;
    for (size_t p : pieces) {
        sha256_update(&st, msg.data() + off, p);
        off += p;
    }
    uint8_t d[32];
    sha256_final(&st, d);
    expect(off == msg.size() && hex_of(d, 32) == sha_hex(msg), "SHA-256 fed in pieces equals it fed at once");
    // the constant-time compare: equal, and unequal at every position
    uint8_t a[32], b[32];
    memcpy(a, d, 32);
    expect(digest_equal(a, d, 32), "digest_equal: a digest equals itself");
    for (int i = 0; i < 32; i++) {
        memcpy(b, d, 32);
        b[i] ^= (uint8_t)(1 << (i % 8));
        expect(!digest_equal(b, d, 32), "digest_equal: one bit changed in byte " + std::to_string(i));
    }
    return (int)(sizeof sha / sizeof sha[0] + sizeof mac / sizeof mac[0]);
}

static int check_sha_cases(const char* path) {
    std::ifstream in(path);
    CHECK(in.good(), "cannot read %s", path);
    std::string key, msg, sha, mac;
    int n = 0;
    while (in >> key >> msg >> sha >> mac) {
        std::string k = bytes_of_hex(key), m = bytes_of_hex(msg);
        n++;
        expect(sha_hex(m) == sha, "Python case " + std::to_string(n) + ": SHA-256 of " + std::to_string(m.size()) +
                                      " bytes: " + sha_hex(m) + ", hashlib " + sha);
        expect(hmac_hex(k, m) == mac, "Python case " + std::to_string(n) + ": HMAC, key " + std::to_string(k.size()) +
                                          " bytes, message " + std::to_string(m.size()) + ": " + hmac_hex(k, m) +
                                          ", hmac " + mac);
    }
    return n;
}

int main(int argc, char** argv) {
    if (argc == 3 && strcmp(argv[1], "sha") == 0) {
        int known = check_sha_known_answers(), cases = check_sha_cases(argv[2]);
        if (failures > 0 || cases == 0) {
            printf("sha: FAIL (%d checks, %d cases)\n", failures, cases);
            return 1;
        }
        printf("sha: PASS (%d known answers, %d cases from Python)\n", known, cases);
        return 0;
    }
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
