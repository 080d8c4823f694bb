// side_files.h: the two side files a GPU checkpoint may keep beside its state files, their formats,
// writers and readers, as host code: train_gpt_fp8's FP8 state (state_%08d_fp8.bin) and -ma timed's
// matmul choices (state_%08d_%05d_matmul.bin). The CUDA side (llmc/cuda/linear.cuh,
// matmul_algos.cuh) moves the data between them and the device; here the readers take a file
// from outside, so test/fuzz/fuzz_side_files.cpp feeds them hostile ones.
// defines: SIDE_FILE_MAX_WORDS, side_file_write, side_file_open, side_file_remaining, side_file_read_body,
//          side_file_close, FP8_STATE_MAGIC, linears_state_path, fp8_state_file_floats, fp8_state_file_write,
//          fp8_state_file_read, MatmulLayout, MatmulAlgoEntry, MATMUL_ALGOS_MAGIC, matmul_algos_path,
//          matmul_layout_name, matmul_algos_file_write, matmul_algos_read
#pragma once
#include <sys/stat.h>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint.h"   // defines: checksum64, AtomicFile, fsync_dir (checkpoint_prune takes these files too)
#include "gpu_scratch.h"  // defines: fp8_scaling_floats, fp8_state_tensors_per_linear

// ---------------------------------------------------------------------------------------
// Side files: the small checksummed files a checkpoint may keep beside its state files
// (train_gpt_fp8's FP8 state, state_%08d_fp8.bin; -ma timed's matmul choices,
// state_%08d_%05d_matmul.bin; checkpoint_prune takes them with the rest). A header of uint64
// words: [0] magic, [1] version, [2] step, the kind's own words, and last the checksum64 of the
// others; then the body, whose checksums the kind keeps in its header words.
enum { SIDE_FILE_MAX_WORDS = 32 };

// Seals header (its last word the checksum of the others) and writes it and the body's pieces to
// path in dir, durable on disk (AtomicFile, then the directory's entry: each rank's own file is
// durable before the checkpoint's DONE is written).
inline void side_file_write(const std::string& dir, const std::string& path, uint64_t* header, int words,
                            const std::vector<std::pair<const void*, size_t>>& body) {
    header[words - 1] = checksum64(header, (words - 1) * sizeof(uint64_t));
    AtomicFile out(path);
    out.write(header, words * sizeof(uint64_t));
    for (const auto& piece : body)
        if (piece.second > 0) out.write(piece.first, piece.second);
    out.commit();
    fsync_dir(dir);
}

// Opens a side file of kind ("FP8 state") at path and reads its header into h, checking the magic,
// the version (words_of_version[v - 1] words for version v = 1..versions), the checksum and the
// step. "" when sound: *words the header's length and *f the file at its body, for the caller to
// read and close with side_file_close. Otherwise the problem, and nothing is left open.
inline std::string side_file_open(const std::string& path, uint64_t magic, const char* kind,
                                  const int* words_of_version, int versions, int step, uint64_t* h, int* words,
                                  FILE** f) {
    *f = fopen(path.c_str(), "rb");
    if (*f == nullptr) return std::string("cannot open (") + strerror(errno) + ")";
    std::string err;
    if (fread(h, sizeof(uint64_t), 3, *f) != 3) err = "truncated header";
    else if (h[0] != magic) err = std::string("bad magic: not a gptrain ") + kind + " file";
    else if (h[1] < 1 || h[1] > (uint64_t)versions) err = std::string("unsupported ") + kind + " version " + std::to_string(h[1]);
    if (err.empty()) {
        *words = words_of_version[h[1] - 1];
        CHECK(*words > 3 && *words <= SIDE_FILE_MAX_WORDS, "%s version %d: %d header words", kind, (int)h[1], *words);
        if (fread(h + 3, sizeof(uint64_t), *words - 3, *f) != (size_t)(*words - 3)) err = "truncated header";
        else if (h[*words - 1] != checksum64(h, (*words - 1) * sizeof(uint64_t))) err = "header checksum mismatch (corrupt)";
        else if (h[2] != (uint64_t)step) err = "holds step " + std::to_string(h[2]) + ", expected " + std::to_string(step);
    }
    if (!err.empty()) {
        fclose(*f);
        *f = nullptr;
    }
    return err;
}

// The bytes of a side file after what has been read of it: a bound for the counts its header
// gives, before anything is allocated for them (the header's checksum guards against damage,
// not against a file made to ask for terabytes).
inline size_t side_file_remaining(FILE* f) {
    const long at = ftell(f);
    struct stat st;
    if (at < 0 || fstat(fileno(f), &st) != 0 || st.st_size < at) return 0;
    return (size_t)(st.st_size - at);
}

// Reads bytes of a side file's body into dst and checks them against the checksum its header
// keeps: "" or the problem (what names them).
inline std::string side_file_read_body(FILE* f, void* dst, size_t bytes, uint64_t checksum, const std::string& what) {
    if (fread(dst, 1, bytes, f) != bytes) return "truncated";
    if (checksum64(dst, bytes) != checksum) return what + " checksum mismatch (corrupt)";
    return "";
}

// Closes a side file the caller has read to its end; err (the problem so far) or, when the file
// holds more than its header said, that.
inline std::string side_file_close(FILE* f, const std::string& err) {
    const bool longer = err.empty() && fgetc(f) != EOF;
    fclose(f);
    return longer ? "longer than its header says (corrupt)" : err;
}

// ---------------------------------------------------------------------------------------
// train_gpt_fp8's FP8 state: the scales and amax histories of every linear of the model, one
// file a checkpoint, as one process holds them (the layouts put theirs together: linear.cuh).
// Header of 16 x uint64: [0] magic, [1] version, [2] step, [3] recipe (0 delayed, 1 current),
// [4] linears, [5] history length, [6] [7] the E4M3 and E5M2 states' floats, [8] [9] their
// checksums (checksum64), [15] the header's; then the two states' buffers (Fp8Scaling::buffer:
// amax, scale, scale_inv, history). The model file stays the bf16 trainer's; train_gpt_fp32 and
// _bf16 resume from an fp8 checkpoint and ignore this file.
enum { FP8_STATE_MAGIC = 20261127, FP8_STATE_VERSION = 1, FP8_STATE_HEADER_WORDS = 16 };

inline std::string linears_state_path(const std::string& dir, int step) {
    char name[64];
    snprintf(name, sizeof(name), "/state_%08d_fp8.bin", step);
    return dir + name;
}

// The floats of state i (0: E4M3, 1: E5M2) for num_linears linears with that amax history
inline size_t fp8_state_file_floats(int i, size_t num_linears, size_t history_len) {
    return fp8_scaling_floats(fp8_state_tensors_per_linear(i) * num_linears, history_len);
}

// Writes host (the two states of num_linears linears) as the FP8 state of the checkpoint at
// `step` into dir, durable on disk.
inline void fp8_state_file_write(const std::string& dir, int step, bool current, size_t history_len,
                                 size_t num_linears, const std::vector<float> host[2]) {
    uint64_t h[FP8_STATE_HEADER_WORDS] = {0};
    h[0] = FP8_STATE_MAGIC; h[1] = FP8_STATE_VERSION; h[2] = (uint64_t)step;
    h[3] = current ? 1 : 0;
    h[4] = (uint64_t)num_linears; h[5] = (uint64_t)history_len;
    for (int i = 0; i < 2; i++) {
        CHECK(host[i].size() == fp8_state_file_floats(i, num_linears, history_len), "FP8 state %d: %zu floats", i,
              host[i].size());
        h[6 + i] = host[i].size();
        h[8 + i] = checksum64(host[i].data(), host[i].size() * sizeof(float));
    }
    side_file_write(dir, linears_state_path(dir, step), h, FP8_STATE_HEADER_WORDS,
                    {{host[0].data(), host[0].size() * sizeof(float)}, {host[1].data(), host[1].size() * sizeof(float)}});
}

// The problem with the FP8 state file at path, for a run of that recipe (current or delayed)
// and amax history with num_linears linears, at `step` ("" if sound); when sound, its two
// states in host[0], host[1]. Their sizes come from the run, never from the file.
inline std::string fp8_state_file_read(const std::string& path, bool current, size_t history_len, size_t num_linears,
                                       int step, std::vector<float> host[2]) {
    static const int words_of_version[] = {FP8_STATE_HEADER_WORDS};
    uint64_t h[SIDE_FILE_MAX_WORDS];
    int words = 0;
    FILE* f = nullptr;
    std::string err = side_file_open(path, FP8_STATE_MAGIC, "FP8 state", words_of_version, FP8_STATE_VERSION, step, h,
                                     &words, &f);
    if (!err.empty()) return err;
    if (h[3] != (current ? 1u : 0u))
        err = std::string("written by a -fp8r ") + (h[3] == 1 ? "current" : "delayed") + " run; resume with that -fp8r";
    else if (h[4] != (uint64_t)num_linears || h[5] != (uint64_t)history_len ||
             h[6] != fp8_state_file_floats(0, num_linears, history_len) ||
             h[7] != fp8_state_file_floats(1, num_linears, history_len))
        err = "holds " + std::to_string(h[4]) + " linear layers with an amax history of " + std::to_string(h[5]) +
              ", this model has " + std::to_string(num_linears) + " with " + std::to_string(history_len);
    for (int i = 0; i < 2 && err.empty(); i++) {
        host[i].resize(fp8_state_file_floats(i, num_linears, history_len));
        err = side_file_read_body(f, host[i].data(), host[i].size() * sizeof(float), h[8 + i],
                                  i == 0 ? "E4M3 scaling state" : "E5M2 scaling state");
    }
    return side_file_close(f, err);
}

// ---------------------------------------------------------------------------------------
// -ma timed's matmul choices, one file a rank and checkpoint (llmc/cuda/matmul_algos.cuh says
// why). Header of uint64: [0] magic, [1] version, [2] step, [3] entries, [4] bytes an entry, [5]
// cuBLASLt's version (an algorithm is that library's opaque data), [6] the entries' checksum64,
// [7]-[10] the layout that wrote it (world, tp, pp, vp), [11] the header's; then the entries: the
// key[3], found (0 or 1), the cublasLtMatmulAlgo_t's 64 bytes. Version 1 had 8 words, no layout
// and the header's checksum in [7]; it still reads, as a file of this run's layout (what resuming
// did then). Only -ma timed runs write it; the heuristic's answers need no saving, the same
// library giving the same.
enum { MATMUL_ALGOS_MAGIC = 20261128, MATMUL_ALGOS_VERSION = 2, MATMUL_ALGOS_HEADER_WORDS = 12 };

// How a run's ranks are laid out: world = DP x PP x TP (-vp: each pipeline rank's chunks). It
// decides which products each rank meets (-tp's slices, -pp's stages), so a checkpoint's choices
// fit a run of the same layout only.
struct MatmulLayout {
    int world = 1, tp = 1, pp = 1, vp = 1;
    bool operator==(const MatmulLayout& o) const { return world == o.world && tp == o.tp && pp == o.pp && vp == o.vp; }
};

struct MatmulAlgoEntry {
    uint64_t key[3];
    uint64_t found;
    uint64_t algo[8];  // a cublasLtMatmulAlgo_t, bit for bit (matmul_algos.cuh checks the size)
};

inline std::string matmul_algos_path(const std::string& dir, int step, int rank) {
    char name[64];
    snprintf(name, sizeof(name), "/state_%08d_%05d_matmul.bin", step, rank);
    return dir + name;
}

// "8 ranks", "1 process", "4 ranks at -tp 2 -pp 2"
inline std::string matmul_layout_name(const MatmulLayout& l) {
    if (l.world == 0) return "a run that did not record its layout (version 1)";
    char name[96];
    int n = snprintf(name, sizeof(name), l.world == 1 ? "1 process" : "%d ranks", l.world);
    if (l.tp > 1 || l.pp > 1) n += snprintf(name + n, sizeof(name) - n, " at -tp %d -pp %d", l.tp, l.pp);
    if (l.vp > 1) snprintf(name + n, sizeof(name) - n, " -vp %d", l.vp);
    return name;
}

// Writes a rank's choices for the checkpoint at `step` into dir, durable on disk.
inline void matmul_algos_file_write(const std::string& dir, int step, int rank, const std::vector<MatmulAlgoEntry>& entries,
                                    uint64_t library, const MatmulLayout& l) {
    const size_t bytes = entries.size() * sizeof(MatmulAlgoEntry);
    uint64_t h[MATMUL_ALGOS_HEADER_WORDS] = {MATMUL_ALGOS_MAGIC, MATMUL_ALGOS_VERSION, (uint64_t)step,
                                             entries.size(), sizeof(MatmulAlgoEntry), library,
                                             checksum64(entries.data(), bytes), (uint64_t)l.world, (uint64_t)l.tp,
                                             (uint64_t)l.pp, (uint64_t)l.vp, 0};
    side_file_write(dir, matmul_algos_path(dir, step, rank), h, MATMUL_ALGOS_HEADER_WORDS, {{entries.data(), bytes}});
}

// The problem with the choices file at path for `step` ("" if sound). When sound: *layout the
// layout that wrote it (world 0: a version 1 file, which does not say), *library the cuBLASLt
// version it was written with, and, unless entries is nullptr (the header alone read), its entries.
inline std::string matmul_algos_read(const std::string& path, int step, MatmulLayout* layout, uint64_t* library,
                                     std::vector<MatmulAlgoEntry>* entries) {
    static const int words_of_version[] = {8, MATMUL_ALGOS_HEADER_WORDS};  // version 1, 2
    uint64_t h[SIDE_FILE_MAX_WORDS];
    int words = 0;
    FILE* f = nullptr;
    std::string err = side_file_open(path, MATMUL_ALGOS_MAGIC, "matmul-algorithm", words_of_version,
                                     MATMUL_ALGOS_VERSION, step, h, &words, &f);
    if (!err.empty()) return err;
    if (h[4] != sizeof(MatmulAlgoEntry))
        err = "entries of " + std::to_string(h[4]) + " bytes, expected " + std::to_string(sizeof(MatmulAlgoEntry));
    *library = h[5];
    *layout = words == 8 ? MatmulLayout{0, 0, 0, 0} : MatmulLayout{(int)h[7], (int)h[8], (int)h[9], (int)h[10]};
    if (entries == nullptr || !err.empty()) {  // the header alone
        fclose(f);
        return err;
    }
    const size_t room = side_file_remaining(f) / sizeof(MatmulAlgoEntry);
    if (h[3] > room)
        return side_file_close(f, "holds " + std::to_string(h[3]) + " entries, more than its remaining bytes can (" +
                                      std::to_string(room) + ", corrupt)");
    entries->resize(h[3]);
    err = side_file_read_body(f, entries->data(), entries->size() * sizeof(MatmulAlgoEntry), h[6], "entries");
    return side_file_close(f, err);
}
