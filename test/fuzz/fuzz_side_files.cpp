// Fuzz target: the readers of a GPU checkpoint's side files (llmc/side_files.h): train_gpt_fp8's
// FP8 state (fp8_state_file_read) and -ma timed's matmul choices (matmul_algos_read, the header
// alone and then whole).
// Input: a flags byte, then the file. Bit 0: the FP8 state (else the choices). Bit 1: this target
// first writes correct checksums into the file (the header's, and the body's sections where the
// header puts them), so the fuzzer gets past them to everything they guard. FP8 state: bit 2 the
// run's recipe (current), bit 3 its amax history (4, else 1), bits 4-7 its linears less one.
// A reader answers a problem as a string, which its caller puts after the file's name: it must
// be one line.
#include <algorithm>

#include "fuzz_common.h"              // defines: fuzz_write_file
#include "../../llmc/side_files.h"    // defines: fp8_state_file_read, matmul_algos_read, checksum64

// the checksum of the next `bytes` of b from *at, if they are in it (0 if not), moving *at past them
static uint64_t section_sum(const std::vector<uint8_t>& b, size_t* at, uint64_t bytes) {
    if (*at > b.size() || bytes > b.size() - *at) return 0;
    const uint64_t s = checksum64(b.data() + *at, bytes);
    *at += bytes;
    return s;
}

// Sets a side file's checksums to match its bytes: header words 8, 9 (FP8) or 6 (choices), and
// the header's own last word (words: 16 for FP8; 8 or 12 by the choices' version).
static void set_checksums(std::vector<uint8_t>* file, bool fp8) {
    std::vector<uint8_t>& b = *file;
    uint64_t h[SIDE_FILE_MAX_WORDS] = {0};
    if (b.size() < 2 * sizeof(uint64_t)) return;
    memcpy(h, b.data(), std::min(b.size(), sizeof(h)));
    const int words = fp8 ? (int)FP8_STATE_HEADER_WORDS : h[1] == 1 ? 8 : (int)MATMUL_ALGOS_HEADER_WORDS;
    if (b.size() < (size_t)words * sizeof(uint64_t)) return;
    size_t at = (size_t)words * sizeof(uint64_t);
    const uint64_t big = UINT64_MAX / 64;  // a size past any file: its checksum stays 0
    if (fp8) {
        h[8] = section_sum(b, &at, h[6] < big ? h[6] * 4 : UINT64_MAX);
        h[9] = section_sum(b, &at, h[7] < big ? h[7] * 4 : UINT64_MAX);
    } else {
        h[6] = section_sum(b, &at, h[3] < big && h[4] < 4096 ? h[3] * h[4] : UINT64_MAX);
    }
    h[words - 1] = checksum64(h, (words - 1) * sizeof(uint64_t));
    memcpy(b.data(), h, (size_t)words * sizeof(uint64_t));
}

static void one_line(const std::string& err) {
    if (err.find('\n') != std::string::npos) {
        fprintf(stderr, "a side file's problem is not one line: %s\n", err.c_str());
        abort();
    }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const uint8_t flags = data[0];
    const bool fp8 = flags & 1;
    std::vector<uint8_t> b(data + 1, data + size);
    if (flags & 2) set_checksums(&b, fp8);
    const std::string path = fuzz_write_file(fp8 ? "state_00000001_fp8.bin" : "state_00000001_00000_matmul.bin",
                                             b.data(), b.size());
    try {
        if (fp8) {
            std::vector<float> host[2];
            const size_t history = flags & 8 ? 4 : 1, linears = 1 + (flags >> 4);
            const std::string err = fp8_state_file_read(path, flags & 4, history, linears, 1, host);
            one_line(err);
            if (err.empty() && (host[0].size() != fp8_state_file_floats(0, linears, history) ||
                                host[1].size() != fp8_state_file_floats(1, linears, history)))
                abort();  // sound, but not the run's sizes
        } else {
            MatmulLayout layout;
            uint64_t library = 0;
            std::vector<MatmulAlgoEntry> entries;
            one_line(matmul_algos_read(path, 1, &layout, &library, nullptr));
            one_line(matmul_algos_read(path, 1, &layout, &library, &entries));
        }
    } catch (const FailError& e) {
        fuzz_rejected(e, path);  // (they answer with strings; a fail() must still name the file)
    }
    fuzz_close_leaked_files();
    return 0;
}
