// utils.h: the one error style of gptrain, and checked file I/O.
// defines: CHECK, fail, fail_file, xmalloc, fopen_or_fail, fread_or_fail, fwrite_or_fail,
//          fclose_or_fail, file_size_or_fail, parse_int, parse_float,
//          FailError (fuzz builds, -DGPTRAIN_FUZZ: fail() throws it instead of exiting)
#pragma once
#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>  // madvise (huge pages for big buffers)
#include <sys/stat.h>

// Internal invariant: prints where it broke and the values, then exits non-zero.
// CHECK(B > 0, "B=%d", B);
#define CHECK(cond, ...)                                                          \
    do {                                                                          \
        if (!(cond)) {                                                            \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                         \
            fprintf(stderr, "\n");                                                \
            exit(EXIT_FAILURE);                                                   \
        }                                                                         \
    } while (0)

#ifdef GPTRAIN_FUZZ
// Fuzz builds only (test/fuzz/): fail() throws this instead of exiting, so a fuzz target can
// tell a clean rejection of bad input from a crash. message is what would follow "error: ".
struct FailError {
    char message[4096];
};
#endif

// User-facing error (bad flag, bad file): one line "error: ...", exit 1.
[[noreturn]] inline void fail(const char* fmt, ...) {
    char message[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    // one line whatever it quotes: a tensor name in a hostile file can hold newlines or escapes
    for (char* c = message; *c != '\0'; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
#ifdef GPTRAIN_FUZZ
    FailError e;
    memcpy(e.message, message, sizeof(message));
    throw e;
#else
    fflush(stdout);
    fprintf(stderr, "error: %s\n", message);
    exit(EXIT_FAILURE);
#endif
}

// malloc that fails loudly. Buffers of 4 MiB and more (parameters, gradients, AdamW state,
// activations) start on a 2 MiB boundary and ask Linux for transparent huge pages: the CPU
// matmul reads rows of weights and gradients that lie pages apart, and with 4 KiB pages
// nearly every such row costs a TLB miss (huge pages made the d12 step 15-20% faster on a
// 2-core EPYC). Where the kernel says no (THP "never"), they are ordinary pages. free() as usual.
inline void* xmalloc(size_t bytes) {
    const size_t huge = (size_t)2 << 20;
    void* p = nullptr;
    if (bytes >= 2 * huge) {
        if (posix_memalign(&p, huge, bytes) != 0) p = nullptr;
#ifdef MADV_HUGEPAGE
        if (p != nullptr) madvise(p, bytes / huge * huge, MADV_HUGEPAGE);  // advice: failure is harmless
#endif
    } else {
        p = malloc(bytes == 0 ? 1 : bytes);
    }
    if (p == nullptr) fail("out of memory allocating %zu bytes", bytes);
    return p;
}

inline FILE* fopen_or_fail(const char* path, const char* mode) {
    FILE* f = fopen(path, mode);
    if (f == nullptr) fail("%s: cannot open (%s)", path, strerror(errno));
    return f;
}

// Reads exactly n items or fails naming the file: a short read means a truncated file.
inline void fread_or_fail(void* dst, size_t size, size_t n, FILE* f, const char* path) {
    size_t got = fread(dst, size, n, f);
    if (got != n) {
        if (ferror(f)) fail("%s: read error (%s)", path, strerror(errno));
        fail("%s: truncated file (wanted %zu more bytes, got %zu)", path, size * n, size * got);
    }
}

inline void fwrite_or_fail(const void* src, size_t size, size_t n, FILE* f, const char* path) {
    if (fwrite(src, size, n, f) != n) fail("%s: write failed (%s)", path, strerror(errno));
}

inline void fclose_or_fail(FILE* f, const char* path) {
    if (fclose(f) != 0) fail("%s: close failed (%s)", path, strerror(errno));
}

// Size of a regular file in bytes; fails if it does not exist or is not a file.
inline size_t file_size_or_fail(const char* path) {
    struct stat st;
    if (stat(path, &st) != 0) fail("%s: cannot open (%s)", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) fail("%s: not a regular file", path);
    return (size_t)st.st_size;
}

// Whole-string integer parse; false on junk, empty or out of range.
inline bool parse_int(const char* s, long long lo, long long hi, long long* out) {
    if (s == nullptr || *s == '\0') return false;
    errno = 0;
    char* end = nullptr;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
    *out = v;
    return true;
}

inline bool parse_float(const char* s, double* out) {
    if (s == nullptr || *s == '\0') return false;
    errno = 0;
    char* end = nullptr;
    double v = strtod(s, &end);
    if (errno != 0 || *end != '\0' || v != v) return false;
    *out = v;
    return true;
}
