// fuzz_common.h: what the libFuzzer targets in test/fuzz/ share. Include it before any
// project header: it routes their fopen/fclose through fuzz_fopen/fuzz_fclose.
// defines: fuzz_fopen, fuzz_fclose, fuzz_close_leaked_files, fuzz_dir, fuzz_write_file,
//          fuzz_remove_file, FuzzPart, fuzz_split, fuzz_rejected
//
// The targets are built by test/test_fuzz.sh with clang's -fsanitize=fuzzer,address,undefined
// and -DGPTRAIN_FUZZ, under which fail() (llmc/utils.h) throws FailError instead of exiting.
// A target feeds its input to one reader and catches FailError: that is the reader rejecting
// bad input cleanly, as it should. Everything else is a finding: a sanitizer report, an
// uncaught exception, a CHECK (which exits), a hang, an allocation past -malloc_limit_mb, or a
// rejection whose message is not one line naming the file (fuzz_rejected).
#pragma once
#include <sys/stat.h>
#include <unistd.h>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

// A reader that rejects a file may leave it open: a real run exits right after, which closes
// it, but a fuzzer would leak a FILE (and its descriptor) per input. So the project code
// compiled after this point opens and closes files through these, which keep the set of open
// ones, and fuzz_rejected closes what a rejection left.
inline std::set<FILE*>& fuzz_open_files() {
    static std::set<FILE*> open;
    return open;
}
inline FILE* fuzz_fopen(const char* path, const char* mode) {
    FILE* f = fopen(path, mode);
    if (f != nullptr) fuzz_open_files().insert(f);
    return f;
}
inline int fuzz_fclose(FILE* f) {
    fuzz_open_files().erase(f);
    return fclose(f);
}
inline void fuzz_close_leaked_files() {
    for (FILE* f : fuzz_open_files()) fclose(f);
    fuzz_open_files().clear();
}
#define fopen(path, mode) fuzz_fopen(path, mode)
#define fclose(f) fuzz_fclose(f)

#include "../../llmc/utils.h"  // defines: fail, FailError (with -DGPTRAIN_FUZZ)

// The readers take paths, so inputs go through files: one directory per process, under
// $GPTRAIN_FUZZ_DIR (test_fuzz.sh points it at /dev/shm and removes it) or else /tmp.
inline const std::string& fuzz_dir() {
    static const std::string dir = [] {
        const char* base = getenv("GPTRAIN_FUZZ_DIR");
        std::string d = std::string(base != nullptr ? base : "/tmp") + "/gptrain_fuzz_" + std::to_string(getpid());
        if (mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) { perror(d.c_str()); abort(); }
        return d;
    }();
    return dir;
}

// Writes bytes to fuzz_dir()/name, replacing what the previous input left there; returns the path.
inline std::string fuzz_write_file(const char* name, const uint8_t* data, size_t size) {
    std::string path = fuzz_dir() + "/" + name;
    FILE* f = fopen(path.c_str(), "wb");
    if (f == nullptr || (size > 0 && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        perror(path.c_str());
        abort();
    }
    return path;
}

// Removes fuzz_dir()/name: an input without that part must not see the previous input's file.
inline void fuzz_remove_file(const char* name) { unlink((fuzz_dir() + "/" + name).c_str()); }

// Several files from one input: every part but the last is a little-endian uint32 length and
// that many bytes (cut short where the input ends); the last part is whatever remains.
struct FuzzPart {
    const uint8_t* data;
    size_t size;
};

inline std::vector<FuzzPart> fuzz_split(const uint8_t* data, size_t size, int n) {
    std::vector<FuzzPart> parts;
    for (int i = 0; i + 1 < n; i++) {
        uint32_t len = 0;
        size_t k = size < 4 ? size : 4;
        for (size_t j = 0; j < k; j++) len |= (uint32_t)data[j] << (8 * j);
        data += k; size -= k;
        size_t take = len < size ? len : size;
        parts.push_back({data, take});
        data += take; size -= take;
    }
    parts.push_back({data, size});
    return parts;
}

// A reader rejected its input: the message must be one line that names the file (the error
// style of llmc/utils.h), else the rejection itself is the bug.
inline void fuzz_rejected(const FailError& e, const std::string& path) {
    fuzz_close_leaked_files();
    if (strstr(e.message, path.c_str()) == nullptr || strchr(e.message, '\n') != nullptr) {
        fprintf(stderr, "rejection is not one line naming %s:\nerror: %s\n", path.c_str(), e.message);
        abort();
    }
}
