// sha256.h: SHA-256 (FIPS 180-4, section 6.2) and HMAC-SHA256 (FIPS 198-1, RFC 2104), for the
// socket rendezvous's challenge-response (llmc/comm_socket.h), so that no crypto library is a
// dependency. Byte-at-a-time and unoptimised: it hashes a few hundred bytes per connection.
// Checked against the standards' known answers and against Python's hashlib/hmac
// (test/test_comm_socket.sh).
// defines: Sha256, sha256_init, sha256_update, sha256_final, sha256,
//          HmacSha256, hmac_sha256_init, hmac_sha256_update, hmac_sha256_final, hmac_sha256,
//          digest_equal
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

enum { SHA256_BLOCK_BYTES = 64, SHA256_DIGEST_BYTES = 32 };

// FIPS 180-4 4.2.2: the first 32 bits of the fractional parts of the cube roots of the first
// 64 primes.
inline constexpr uint32_t SHA256_K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

struct Sha256 {
    uint32_t h[8];                         // the hash value H(i) so far
    uint8_t block[SHA256_BLOCK_BYTES];     // the message block being filled
    size_t fill;                           // bytes of block filled
    uint64_t total;                        // message length so far, in bytes
};

inline uint32_t sha256_rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

// FIPS 180-4 6.2.2: one 512-bit block into the hash value. The block's words are big-endian.
inline void sha256_compress(Sha256* s, const uint8_t* block) {
    uint32_t w[64];
    for (size_t t = 0; t < 16; t++)
        w[t] = (uint32_t)block[4 * t] << 24 | (uint32_t)block[4 * t + 1] << 16 |
               (uint32_t)block[4 * t + 2] << 8 | (uint32_t)block[4 * t + 3];
    for (int t = 16; t < 64; t++) {
        uint32_t s0 = sha256_rotr(w[t - 15], 7) ^ sha256_rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);   // sigma0
        uint32_t s1 = sha256_rotr(w[t - 2], 17) ^ sha256_rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);    // sigma1
        w[t] = s1 + w[t - 7] + s0 + w[t - 16];
    }
    uint32_t a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3];
    uint32_t e = s->h[4], f = s->h[5], g = s->h[6], h = s->h[7];
    for (int t = 0; t < 64; t++) {
        uint32_t S1 = sha256_rotr(e, 6) ^ sha256_rotr(e, 11) ^ sha256_rotr(e, 25);  // Sigma1
        uint32_t ch = (e & f) ^ (~e & g);
        uint32_t t1 = h + S1 + ch + SHA256_K[t] + w[t];
        uint32_t S0 = sha256_rotr(a, 2) ^ sha256_rotr(a, 13) ^ sha256_rotr(a, 22);  // Sigma0
        uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
        uint32_t t2 = S0 + maj;
        h = g; g = f; f = e; e = d + t1;
        d = c; c = b; b = a; a = t1 + t2;
    }
    s->h[0] += a; s->h[1] += b; s->h[2] += c; s->h[3] += d;
    s->h[4] += e; s->h[5] += f; s->h[6] += g; s->h[7] += h;
}

// FIPS 180-4 5.3.3: H(0), the first 32 bits of the fractional parts of the square roots of the
// first 8 primes.
inline void sha256_init(Sha256* s) {
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, h0, sizeof h0);
    s->fill = 0;
    s->total = 0;
}

inline void sha256_update(Sha256* s, const void* data, size_t bytes) {
    const uint8_t* p = (const uint8_t*)data;
    s->total += bytes;
    for (size_t i = 0; i < bytes; i++) {
        s->block[s->fill++] = p[i];
        if (s->fill == SHA256_BLOCK_BYTES) {
            sha256_compress(s, s->block);
            s->fill = 0;
        }
    }
}

// FIPS 180-4 5.1.1: pad with a 1 bit, zeros, and the length in bits as a big-endian 64-bit
// number, to a whole number of blocks; the digest is H(N) written big-endian.
inline void sha256_final(Sha256* s, uint8_t out[SHA256_DIGEST_BYTES]) {
    uint64_t bits = s->total * 8;
    uint8_t one = 0x80, zero = 0;
    sha256_update(s, &one, 1);
    while (s->fill != SHA256_BLOCK_BYTES - 8) sha256_update(s, &zero, 1);
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)(bits >> (56 - 8 * i));
    sha256_update(s, len, 8);  // completes the last block
    for (size_t i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(s->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)s->h[i];
    }
}

inline void sha256(const void* data, size_t bytes, uint8_t out[SHA256_DIGEST_BYTES]) {
    Sha256 s;
    sha256_init(&s);
    sha256_update(&s, data, bytes);
    sha256_final(&s, out);
}

// HMAC(K, m) = H((K0 ^ opad) || H((K0 ^ ipad) || m)), K0 the key padded with zeros to a block
// (hashed first if longer than a block): FIPS 198-1 section 4.
struct HmacSha256 {
    Sha256 inner, outer;
};

inline void hmac_sha256_init(HmacSha256* m, const void* key, size_t key_bytes) {
    uint8_t k0[SHA256_BLOCK_BYTES] = {0};
    if (key_bytes > SHA256_BLOCK_BYTES) sha256(key, key_bytes, k0);
    else if (key_bytes > 0) memcpy(k0, key, key_bytes);
    uint8_t pad[SHA256_BLOCK_BYTES];
    for (int i = 0; i < SHA256_BLOCK_BYTES; i++) pad[i] = k0[i] ^ 0x36;  // ipad
    sha256_init(&m->inner);
    sha256_update(&m->inner, pad, sizeof pad);
    for (int i = 0; i < SHA256_BLOCK_BYTES; i++) pad[i] = k0[i] ^ 0x5c;  // opad
    sha256_init(&m->outer);
    sha256_update(&m->outer, pad, sizeof pad);
}

inline void hmac_sha256_update(HmacSha256* m, const void* data, size_t bytes) {
    sha256_update(&m->inner, data, bytes);
}

inline void hmac_sha256_final(HmacSha256* m, uint8_t out[SHA256_DIGEST_BYTES]) {
    uint8_t inner[SHA256_DIGEST_BYTES];
    sha256_final(&m->inner, inner);
    sha256_update(&m->outer, inner, sizeof inner);
    sha256_final(&m->outer, out);
}

inline void hmac_sha256(const void* key, size_t key_bytes, const void* data, size_t bytes,
                        uint8_t out[SHA256_DIGEST_BYTES]) {
    HmacSha256 m;
    hmac_sha256_init(&m, key, key_bytes);
    hmac_sha256_update(&m, data, bytes);
    hmac_sha256_final(&m, out);
}

// a == b over n bytes, in a time that does not depend on where they differ: a forger timing
// the comparison learns nothing about how many leading bytes of its guess were right.
inline bool digest_equal(const uint8_t* a, const uint8_t* b, size_t n) {
    volatile uint8_t diff = 0;  // volatile: keeps the compiler from stopping at the first difference
    for (size_t i = 0; i < n; i++) diff = diff | (uint8_t)(a[i] ^ b[i]);
    return diff == 0;
}
