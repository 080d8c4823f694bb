// test_comm_socket.cpp: one rank of the socket-bootstrap test; test/test_comm_socket.sh starts
// WORLD of these processes. The bootstrap's one collective, the exchange of a record per rank,
// is checked against records computed here, on empty, awkward and big sizes (bigger than the
// sockets' buffers: a blocking implementation would deadlock), and as a barrier.
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

#include "../llmc/comm_socket.h"  // defines: SocketComm, socket_comm_create, socket_exchange
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

static unsigned char byte_value(int q, size_t j) { return (unsigned char)hash2(q + 3000, j); }

// Each rank's record to every rank, records of `bytes` made of byte_value, so a record in the
// wrong slot or a shifted byte shows; twice, the second time with the output buffer dirty.
static void check_exchange(SocketComm* c, size_t bytes) {
    int W = c->world, r = c->rank;
    std::vector<unsigned char> mine(bytes);
    for (size_t j = 0; j < bytes; j++) mine[j] = byte_value(r, j);
    for (int round = 0; round < 2; round++) {
        std::vector<unsigned char> all(W * bytes, round == 0 ? 0x00 : 0xEE);
        socket_exchange(c, mine.data(), bytes, all.data());
        size_t bad = 0;
        for (int q = 0; q < W; q++)
            for (size_t j = 0; j < bytes; j++) bad += all[q * bytes + j] != byte_value(q, j);
        expect(bad == 0, "exchange of " + std::to_string(bytes) + "-byte records, round " + std::to_string(round) +
                             ": " + std::to_string(bad) + " bytes wrong");
    }
}

// The exchange is a barrier: a rank that arrives 300 ms late (rank 0, then the last rank)
// holds every rank until then, even with empty records.
static void check_exchange_waits(SocketComm* c) {
    for (int late : {0, c->world - 1}) {
        socket_exchange(c, nullptr, 0, nullptr);
        double start = socket_now();
        if (c->rank == late) usleep(300 * 1000);
        socket_exchange(c, nullptr, 0, nullptr);
        double waited = socket_now() - start;
        expect(c->world == 1 || waited > 0.2, "an empty exchange waited " + std::to_string(waited) +
                                                  " s for rank " + std::to_string(late) + "'s 0.3 s");
    }
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

    size_t record_bytes[] = {0, 1, 3, 128, 4000, 3000001};  // 128: NCCL's id; the last beyond socket buffers
    for (size_t bytes : record_bytes) check_exchange(c, bytes);
    check_exchange_waits(c);
    socket_comm_destroy(c);

    if (failures > 0) {
        printf("rank %d: FAIL (%d checks)\n", g_rank, failures);
        return 1;
    }
    printf("rank %d: PASS\n", g_rank);
    return 0;
}
