// checkpoint.h: model files (llm.c's for GPT-2, gptrain's own for Llama 3), gptrain's
// resume-state files, and the checkpoint directory (model_%08d.bin, state_%08d_%05d.bin,
// DONE_%08d). Every write goes to a temporary name, is flushed to disk, then renamed, so a
// crash never leaves a half file under a real name; DONE is written last, and a checkpoint
// without it does not exist.
// defines: model_file_check, model_file_read_range, model_load_checkpoint, model_write_checkpoint, gpt2_load_checkpoint,
//          gpt2_write_checkpoint,
//          TrainState, state_write, state_read, state_read_range, checkpoint_write_model_and_state,
//          checkpoint_mark_done, checkpoint_find_latest, checkpoint_prune, checksum64, AtomicFile, fsync_dir
#pragma once
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>
#include <algorithm>
#include <string>
#include <vector>

#include "utils.h"  // defines: fail, xmalloc, file_size_or_fail
#include "families.h" // defines: ModelConfig, ModelBase, model_new, model_config_problem, GPT2, ...
#include "faults.h" // defines: fault_inject_pause_ms

enum { MODEL_MAGIC = 20240326, MODEL_VERSION_FP32 = 3, MODEL_VERSION_BF16 = 5 };
enum { LLAMA_MODEL_MAGIC = 20261124 };  // gptrain's Llama 3 model files (versions as above)
enum { STATE_MAGIC = 20241122, STATE_VERSION = 1 };

// 64-bit FNV-1a over bytes, 8 at a time: catches flipped, truncated or zeroed sections.
inline uint64_t checksum64(const void* data, size_t bytes) {
    const unsigned char* p = (const unsigned char*)data;
    uint64_t h = 1469598103934665603ull;
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 1099511628211ull;
    }
    for (; i < bytes; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

// A file written under "<path>.tmp" and renamed over <path> only once it is fully on disk.
// A write that fails (a full disk) removes the temporary file, which frees its space, and
// stops the run: <path>, and every checkpoint before this one, is as it was.
struct AtomicFile {
    std::string path, tmp;
    FILE* f = nullptr;
    explicit AtomicFile(const std::string& final_path) : path(final_path), tmp(final_path + ".tmp") {
        f = fopen_or_fail(tmp.c_str(), "wb");
    }
    void write(const void* src, size_t bytes) {
        if (fwrite(src, 1, bytes, f) != bytes) abandon("write failed");
    }
    void commit() {
        if (fflush(f) != 0 || fsync(fileno(f)) != 0) abandon("write failed");
        FILE* closing = f;
        f = nullptr;  // fclose releases the stream even when it fails
        if (fclose(closing) != 0) abandon("close failed");
        int pause_ms = fault_inject_pause_ms(FAULT_SLOW_WRITE);  // TEST HOOK, 0 in real runs
        if (pause_ms > 0) usleep((useconds_t)pause_ms * 1000);
        if (rename(tmp.c_str(), path.c_str()) != 0) abandon("rename failed");
    }
    [[noreturn]] void abandon(const char* what) {
        int err = errno;  // before fclose and remove can change it
        if (f != nullptr) fclose(f);
        remove(tmp.c_str());
        fail("%s: %s (%s); removed it, %s is untouched", tmp.c_str(), what, strerror(err), path.c_str());
    }
};

inline void fsync_dir(const std::string& dir) {
    int fd = open(dir.c_str(), O_RDONLY);
    if (fd >= 0) { fsync(fd); close(fd); }
}

// ---------------------------------------------------------------------------------------
// Model files: a header of 256 x int32, then the tensors of the family's table in order, as
// fp32 (version 3) or bf16 (version 5).
//   GPT-2 (llm.c's format): [0] 20240326, [1] version, [2] maxT, [3] V, [4] L, [5] NH, [6] C, [7] Vp
//   Llama 3 (gptrain's): [0] 20261124, [1] version, [2] maxT, [3] V, [4] L, [5] NH, [6] NKV,
//     [7] C, [8] F, [9] Vp, then float32 values stored bit for bit in int32 slots (nothing is
//     truncated): [10] RMSNorm eps, [11] RoPE theta, [12] RoPE scaling factor (0: none),
//     [13] low_freq_factor, [14] high_freq_factor, [15] original context length.
// Every other header word is 0.
enum { LLAMA_HEADER_FLOATS_AT = 10 };

inline float header_float(int32_t word) {
    float f;
    memcpy(&f, &word, 4);
    return f;
}
inline int32_t header_word(float f) {
    int32_t w;
    memcpy(&w, &f, 4);
    return w;
}

// Reads and validates the header and the file size. Returns "" if sound, else the problem.
inline std::string model_file_check(const char* path, ModelConfig* cfg, int* version) {
    FILE* f = fopen(path, "rb");
    if (f == nullptr) return std::string("cannot open (") + strerror(errno) + ")";
    int32_t h[256];
    size_t got = fread(h, sizeof(int32_t), 256, f);
    fseek(f, 0, SEEK_END);
    long long size = ftell(f);
    fclose(f);
    if (got != 256) return "truncated file: shorter than the 1024-byte header";
    if (h[0] != MODEL_MAGIC && h[0] != LLAMA_MODEL_MAGIC)
        return "bad magic " + std::to_string(h[0]) + " (expected " + std::to_string(MODEL_MAGIC) + " for GPT-2 or " +
               std::to_string(LLAMA_MODEL_MAGIC) + " for Llama 3): not a model checkpoint";
    if (h[1] != MODEL_VERSION_FP32 && h[1] != MODEL_VERSION_BF16)
        return "unsupported version " + std::to_string(h[1]) + " (expected 3 = fp32 or 5 = bf16)";
    ModelConfig c;
    if (h[0] == MODEL_MAGIC) {
        c.family = FAMILY_GPT2;
        GPT2Config& g = c.gpt2;
        g.max_seq_len = h[2]; g.vocab_size = h[3]; g.num_layers = h[4]; g.num_heads = h[5];
        g.channels = h[6]; g.padded_vocab_size = h[7];
    } else {
        c.family = FAMILY_LLAMA3;
        LlamaConfig& l = c.llama;
        l.max_seq_len = h[2]; l.vocab_size = h[3]; l.num_layers = h[4]; l.num_heads = h[5];
        l.num_kv_heads = h[6]; l.channels = h[7]; l.ffn_hidden = h[8]; l.padded_vocab_size = h[9];
        const int32_t* x = h + LLAMA_HEADER_FLOATS_AT;
        l.norm_eps = header_float(x[0]);
        l.rope_theta = header_float(x[1]);
        l.rope_scaling = {header_float(x[2]), header_float(x[3]), header_float(x[4]), header_float(x[5])};
    }
    const char* problem = model_config_problem(c);
    if (problem != nullptr) return std::string("corrupt header: ") + problem;
    size_t n = model_config_num_parameters(c);
    size_t elem = h[1] == MODEL_VERSION_FP32 ? 4 : 2;
    long long want = 1024 + (long long)(n * elem);
    if (size != want)
        return "truncated or corrupt: " + std::to_string(size) + " bytes, header says " + std::to_string(want);
    *cfg = c;
    *version = h[1];
    return "";
}

// Loads a model file of any family into a new model (model_delete frees it). bf16 files are
// widened to fp32.
// Values [begin, end) of the flat vector of a checked model file (f, of `version`) into dst,
// widened from bf16 where the file holds bf16, and each one finite. model: its table.
inline void model_file_read_range(FILE* f, const char* path, int version, const ModelBase* model, size_t begin,
                                  size_t end, float* dst) {
    const size_t elem = version == MODEL_VERSION_FP32 ? sizeof(float) : sizeof(uint16_t), n = end - begin;
    if (fseeko(f, (off_t)(1024 + begin * elem), SEEK_SET) != 0) fail("%s: cannot seek (%s)", path, strerror(errno));
    if (version == MODEL_VERSION_FP32) {
        fread_or_fail(dst, sizeof(float), n, f, path);
    } else {
        // bf16 is the top half of an fp32: widening is a shift
        std::vector<uint16_t> buf(std::min(n, (size_t)1 << 20));
        for (size_t done = 0; done < n;) {
            size_t k = std::min(buf.size(), n - done);
            fread_or_fail(buf.data(), sizeof(uint16_t), k, f, path);
            for (size_t i = 0; i < k; i++) {
                uint32_t bits = (uint32_t)buf[i] << 16;
                memcpy(&dst[done + i], &bits, 4);
            }
            done += k;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (!std::isfinite(dst[i])) {
            const ParamTensor& t = model->layout().tensor_at(begin + i);
            fail("%s: corrupt: non-finite value in tensor %s at index %zu", path, t.name, begin + i - t.offset);
        }
    }
}

// A model file's model: with_params false (a ZeRO 3 rank's): its table only, and the values of
// each range [begin[i], end[i]) of the flat vector in dst[i] (count ranges; they may overlap).
inline ModelBase* model_load_checkpoint(const char* path, bool with_params = true, int count = 0,
                                        const size_t* begin = nullptr, const size_t* end = nullptr,
                                        float* const* dst = nullptr) {
    ModelConfig cfg;
    int version = 0;
    std::string err = model_file_check(path, &cfg, &version);
    if (!err.empty()) fail("%s: %s", path, err.c_str());
    ModelBase* model = model_new(cfg, with_params);
    FILE* f = fopen_or_fail(path, "rb");
    if (with_params) model_file_read_range(f, path, version, model, 0, model->num_parameters, model->params);
    for (int i = 0; i < count; i++) model_file_read_range(f, path, version, model, begin[i], end[i], dst[i]);
    fclose(f);
    return model;
}

// Loads a GPT-2 model file into *model (gpt2_free frees it): for the programs that run GPT-2 only.
inline void gpt2_load_checkpoint(GPT2* model, const char* path) {
    ModelBase* loaded = model_load_checkpoint(path);
    if (gpt2_take_over(model, loaded)) return;
    ModelFamily family = loaded->family;
    model_delete(loaded);
    fail("%s: a %s model: this program runs GPT-2 models only", path, model_family_name(family));
}

// Writes the model's parameters as an fp32 model file of its family.
inline void model_write_checkpoint(const ModelBase* model, const std::string& path) {
    int32_t h[256] = {0};
    h[1] = MODEL_VERSION_FP32;
    if (model->family == FAMILY_LLAMA3) {
        const LlamaConfig& c = static_cast<const Llama*>(model)->config;
        h[0] = LLAMA_MODEL_MAGIC; h[2] = c.max_seq_len; h[3] = c.vocab_size; h[4] = c.num_layers;
        h[5] = c.num_heads; h[6] = c.num_kv_heads; h[7] = c.channels; h[8] = c.ffn_hidden;
        h[9] = c.padded_vocab_size;
        const float floats[] = {c.norm_eps, c.rope_theta, c.rope_scaling.factor, c.rope_scaling.low_freq_factor,
                                c.rope_scaling.high_freq_factor, c.rope_scaling.original_max_pos};
        for (int i = 0; i < 6; i++) h[LLAMA_HEADER_FLOATS_AT + i] = header_word(floats[i]);
    } else {
        const GPT2Config& c = static_cast<const GPT2*>(model)->config;
        h[0] = MODEL_MAGIC; h[2] = c.max_seq_len; h[3] = c.vocab_size;
        h[4] = c.num_layers; h[5] = c.num_heads; h[6] = c.channels; h[7] = c.padded_vocab_size;
    }
    AtomicFile out(path);
    out.write(h, sizeof(h));
    out.write(model->params, model->num_parameters * sizeof(float));
    out.commit();
}

inline void gpt2_write_checkpoint(const GPT2* model, const std::string& path) { model_write_checkpoint(model, path); }

// ---------------------------------------------------------------------------------------
// Resume state (gptrain's own format, one file per rank): everything besides the weights
// that the next step depends on. Header of 64 x uint64, then AdamW m and v of the slice of
// the flat parameter vector this rank owns (llmc/zero.h): the files of the W ranks of a run
// cover the vector once, in rank order. A single process owns everything.
struct TrainState {
    uint64_t step;          // optimizer steps done; training continues with this step
    uint64_t rank, world;
    uint64_t num_parameters;
    uint64_t dl_epoch, dl_shard_pos, dl_sample_pos;  // train data loader position
    uint64_t seed, shuffle, B, T, total_batch;       // must match the resuming run
    uint64_t sample_rng;    // sampling RNG state
    uint64_t range_begin = 0, range_count = 0;  // the slice of m, v (and master) in this file
    uint64_t zero_stage = 0;                    // -z of the run that wrote it (information only)
    uint64_t data_world = 0;                    // the data-parallel processes, if not `world` (-tp:
                                                // rank 0 writes the one file; 0 in older files)
    // optional section: the step guard (outlier windows, fault counters; llmc/faults.h) as
    // doubles. Empty when absent: files written before it existed still load.
    std::vector<double> step_guard = {};
};
enum { STATE_HEADER_WORDS = 64 };

// m, v: s.range_count values each, for the parameters [range_begin, range_begin + count)
// (words 21 and 22; a file written before ranks existed has 0 there and holds all of them).
// master (optional, range_count fp32): the bf16 GPU trainer's master weights, written as a
// third section after m and v; header word 17 says how many such extra sections follow (0 or
// 1), so files without it (the CPU trainer's, the fp32 GPU trainer's) are unchanged.
// s.step_guard (optional): written last, its length in doubles in header word 19 (0: absent,
// as in every file written before it existed) and its checksum in word 20.
inline void state_write(const std::string& path, const TrainState& s, const float* m, const float* v,
                        const float* master = nullptr) {
    uint64_t h[STATE_HEADER_WORDS] = {0};
    h[0] = STATE_MAGIC; h[1] = STATE_VERSION;
    h[2] = s.step; h[3] = s.rank; h[4] = s.world; h[5] = s.num_parameters;
    h[6] = s.dl_epoch; h[7] = s.dl_shard_pos; h[8] = s.dl_sample_pos;
    h[9] = s.seed; h[10] = s.shuffle; h[11] = s.B; h[12] = s.T; h[13] = s.total_batch;
    h[14] = s.sample_rng;
    CHECK(s.range_begin + s.range_count <= s.num_parameters, "range %llu+%llu of %llu",
          (unsigned long long)s.range_begin, (unsigned long long)s.range_count, (unsigned long long)s.num_parameters);
    // range 0 + 0 means all parameters, as in files written before ranks existed
    uint64_t count = s.range_begin == 0 && s.range_count == 0 ? s.num_parameters : s.range_count;
    h[21] = s.range_begin; h[22] = count; h[23] = s.zero_stage; h[24] = s.data_world;
    size_t bytes = count * sizeof(float);
    h[15] = checksum64(m, bytes);
    h[16] = checksum64(v, bytes);
    if (master != nullptr) {
        h[17] = 1;
        h[18] = checksum64(master, bytes);
    }
    h[19] = s.step_guard.size();
    h[20] = checksum64(s.step_guard.data(), s.step_guard.size() * sizeof(double));
    h[63] = checksum64(h, 63 * sizeof(uint64_t));
    AtomicFile out(path);
    out.write(h, sizeof(h));
    out.write(m, bytes);
    out.write(v, bytes);
    if (master != nullptr) out.write(master, bytes);
    if (!s.step_guard.empty()) out.write(s.step_guard.data(), s.step_guard.size() * sizeof(double));
    out.commit();
}

// Reads a state file; m and v (s->range_count floats: read the header first, with nullptr)
// are filled only if they are non-null; s->step_guard always (empty if the file has no such
// section). A file from before ranks existed reads as the range of all parameters.
// has_master (optional) tells whether the file holds master weights; master (optional) is
// filled with them when it does (and left alone when it does not).
// Returns "" if sound, else the problem (the caller decides whether that is fatal).
inline std::string state_read(const char* path, TrainState* s, float* m, float* v, float* master = nullptr,
                              bool* has_master = nullptr) {
    FILE* f = fopen(path, "rb");
    if (f == nullptr) return std::string("cannot open (") + strerror(errno) + ")";
    uint64_t h[STATE_HEADER_WORDS];
    if (fread(h, sizeof(uint64_t), STATE_HEADER_WORDS, f) != STATE_HEADER_WORDS) { fclose(f); return "truncated header"; }
    if (h[0] != STATE_MAGIC) { fclose(f); return "bad magic: not a gptrain state file"; }
    if (h[1] != STATE_VERSION) { fclose(f); return "unsupported state version " + std::to_string(h[1]); }
    if (h[63] != checksum64(h, 63 * sizeof(uint64_t))) { fclose(f); return "header checksum mismatch (corrupt)"; }
    s->step = h[2]; s->rank = h[3]; s->world = h[4]; s->num_parameters = h[5];
    s->dl_epoch = h[6]; s->dl_shard_pos = h[7]; s->dl_sample_pos = h[8];
    s->seed = h[9]; s->shuffle = h[10]; s->B = h[11]; s->T = h[12]; s->total_batch = h[13];
    s->sample_rng = h[14];
    s->range_begin = h[21];
    s->range_count = h[22] == 0 && h[21] == 0 ? h[5] : h[22];
    s->zero_stage = h[23];
    s->data_world = h[24];
    if (s->range_begin > s->num_parameters || s->range_count > s->num_parameters - s->range_begin ||
        s->rank >= s->world) {  // compared so that no sum can wrap
        fclose(f);
        return "corrupt header: range or rank out of bounds";
    }
    if (h[17] > 1) { fclose(f); return "unknown extra sections " + std::to_string(h[17]); }
    if (h[19] > (1u << 20)) { fclose(f); return "step-guard section of " + std::to_string(h[19]) + " values (corrupt)"; }
    if (has_master != nullptr) *has_master = h[17] == 1;
    fseek(f, 0, SEEK_END);
    long long size = ftell(f);
    // m and v alone take 8 bytes a parameter: a larger count is corrupt, and would wrap below
    if (s->range_count > (uint64_t)size / 8) {
        fclose(f);
        return "truncated or corrupt: " + std::to_string(size) + " bytes cannot hold the " +
               std::to_string(s->range_count) + " parameters the header says";
    }
    size_t bytes = s->range_count * sizeof(float);
    long long want = (long long)(sizeof(h) + (2 + h[17]) * bytes + h[19] * sizeof(double));
    if (size != want) {
        fclose(f);
        return "truncated or corrupt: " + std::to_string(size) + " bytes, header says " + std::to_string(want);
    }
    std::string err;
    if (m != nullptr && v != nullptr) {
        fseek(f, sizeof(h), SEEK_SET);
        if (fread(m, 1, bytes, f) != bytes || fread(v, 1, bytes, f) != bytes) err = "read error";
        else if (checksum64(m, bytes) != h[15]) err = "optimizer m checksum mismatch (corrupt)";
        else if (checksum64(v, bytes) != h[16]) err = "optimizer v checksum mismatch (corrupt)";
    }
    if (err.empty() && master != nullptr && h[17] == 1) {
        fseek(f, sizeof(h) + 2 * bytes, SEEK_SET);
        if (fread(master, 1, bytes, f) != bytes) err = "read error";
        else if (checksum64(master, bytes) != h[18]) err = "master weights checksum mismatch (corrupt)";
    }
    s->step_guard.assign(h[19], 0.0);
    if (err.empty() && h[19] > 0) {
        size_t guard_bytes = h[19] * sizeof(double);
        fseek(f, (long)(sizeof(h) + (2 + h[17]) * bytes), SEEK_SET);
        if (fread(s->step_guard.data(), 1, guard_bytes, f) != guard_bytes) err = "read error";
        else if (checksum64(s->step_guard.data(), guard_bytes) != h[20]) err = "step-guard checksum mismatch (corrupt)";
    }
    fclose(f);
    return err;
}

// ---------------------------------------------------------------------------------------
// The checkpoint directory.
inline std::string checkpoint_path(const std::string& dir, const char* kind, int step, int rank = -1) {
    char name[64];
    if (rank >= 0) snprintf(name, sizeof(name), "/%s_%08d_%05d.bin", kind, step, rank);
    else if (!strcmp(kind, "DONE")) snprintf(name, sizeof(name), "/DONE_%08d", step);
    else snprintf(name, sizeof(name), "/%s_%08d.bin", kind, step);
    return dir + name;
}

// Steps that have a DONE marker, newest first.
inline std::vector<int> checkpoint_done_steps(const std::string& dir) {
    std::vector<int> steps;
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) return steps;
    while (struct dirent* e = readdir(d)) {
        long long step;
        if (strncmp(e->d_name, "DONE_", 5) == 0 && strlen(e->d_name) == 13 &&
            parse_int(e->d_name + 5, 0, 99999999, &step))
            steps.push_back((int)step);
    }
    closedir(d);
    std::sort(steps.rbegin(), steps.rend());
    return steps;
}

// AdamW m, v (and, when master is non-null and the files hold them, the master weights) for
// the parameters [begin, end), gathered from the state files of the checkpoint at `step`,
// however many ranks wrote them: each file holds a slice, and whichever overlap [begin, end)
// are read (a resume on another number of ranks re-shards this way). m[0..end-begin) etc.
// *s gets rank 0's header (step, data position, RNG, step guard); *has_master whether every
// file holds master weights. With m == nullptr every file is read and verified, nothing
// copied. Returns "" if sound, else the problem, naming the file.
inline std::string state_read_range(const std::string& dir, int step, size_t num_parameters, size_t begin,
                                    size_t end, TrainState* s, float* m, float* v, float* master = nullptr,
                                    bool* has_master = nullptr) {
    std::string path0 = checkpoint_path(dir, "state", step, 0);
    std::string err = state_read(path0.c_str(), s, nullptr, nullptr);
    if (!err.empty()) return path0 + ": " + err;
    uint64_t world = s->world;
    bool all_master = true;
    size_t covered = 0;  // the files' slices must tile [0, n) in rank order
    for (uint64_t k = 0; k < world; k++) {
        std::string path = checkpoint_path(dir, "state", step, (int)k);
        TrainState sk;
        bool file_master = false;
        err = state_read(path.c_str(), &sk, nullptr, nullptr, nullptr, &file_master);
        if (err.empty() && (sk.step != (uint64_t)step || sk.world != world || sk.rank != k))
            err = "holds step " + std::to_string(sk.step) + " of rank " + std::to_string(sk.rank) + " of " +
                  std::to_string(sk.world) + ", expected step " + std::to_string(step) + " of rank " +
                  std::to_string(k) + " of " + std::to_string(world);
        if (err.empty() && sk.num_parameters != num_parameters)
            err = "state is for " + std::to_string(sk.num_parameters) + " parameters, the model has " +
                  std::to_string(num_parameters);
        if (err.empty() && sk.range_begin != covered) err = "its slice does not follow the previous rank's";
        if (!err.empty()) return path + ": " + err;
        size_t b = sk.range_begin, e = sk.range_begin + sk.range_count;
        covered = e;
        all_master &= file_master;
        size_t lo = std::max(b, begin), hi = std::min(e, end);
        if (m != nullptr && lo >= hi) continue;  // nothing of this file is wanted
        std::vector<float> fm(sk.range_count), fv(sk.range_count), fmaster(file_master ? sk.range_count : 0);
        err = state_read(path.c_str(), &sk, fm.data(), fv.data(), file_master ? fmaster.data() : nullptr);
        if (!err.empty()) return path + ": " + err;
        if (m == nullptr) continue;
        for (size_t i = lo; i < hi; i++) {
            m[i - begin] = fm[i - b];
            v[i - begin] = fv[i - b];
            if (master != nullptr && file_master) master[i - begin] = fmaster[i - b];
        }
    }
    if (covered != num_parameters)
        return path0 + ": the " + std::to_string(world) + " state files cover " + std::to_string(covered) + " of " +
               std::to_string(num_parameters) + " parameters";
    if (has_master != nullptr) *has_master = all_master;
    return "";
}

// The newest complete checkpoint whose model file and every rank's state file verify, or -1.
// A newer one that fails verification is reported and skipped: the previous good one is used.
inline int checkpoint_find_latest(const std::string& dir) {
    for (int step : checkpoint_done_steps(dir)) {
        ModelConfig cfg;
        int version;
        std::string model_path = checkpoint_path(dir, "model", step);
        std::string err = model_file_check(model_path.c_str(), &cfg, &version);
        if (!err.empty()) {
            err = model_path + ": " + err;
        } else {
            size_t n = model_config_num_parameters(cfg);
            TrainState s;
            err = state_read_range(dir, step, n, 0, n, &s, nullptr, nullptr);
        }
        if (err.empty()) return step;
        fprintf(stderr, "warning: checkpoint at step %d is unusable (%s); trying the previous one\n", step,
                err.c_str());
    }
    return -1;
}

// The model file (written by rank 0 only: model != nullptr there) and this rank's state file,
// each durable on disk. m, v: s.range_count values. The DONE marker follows once every rank
// is done (checkpoint_mark_done, after a barrier).
inline void checkpoint_write_model_and_state(const std::string& dir, int step, const ModelBase* model,
                                             const TrainState& s, const float* m, const float* v) {
    if (model != nullptr) model_write_checkpoint(model, checkpoint_path(dir, "model", step));
    state_write(checkpoint_path(dir, "state", step, (int)s.rank), s, m, v);
    fsync_dir(dir);
}

// Rank 0, after every rank's files are on disk: from now on the checkpoint exists. State
// files of ranks >= world at this step are left over from an earlier run on more processes
// (overwritten up to here); they go.
inline void checkpoint_mark_done(const std::string& dir, int step, int world) {
    for (int k = world; remove(checkpoint_path(dir, "state", step, k).c_str()) == 0; k++) {}
    AtomicFile done(checkpoint_path(dir, "DONE", step));
    done.commit();
    fsync_dir(dir);
}

// -nk / -nm, run by rank 0 after each checkpoint and after a resume (-o is shared by every
// rank): keeps the newest `keep` complete checkpoints and those at multiples of `major`
// (0: none), deletes the other complete ones, and the files of incomplete checkpoints older
// than the newest complete one (what a kill during a checkpoint write or a deletion leaves;
// newer ones are rewritten when training gets there). Each DONE marker goes first, so a
// half-deleted checkpoint is never taken as complete.
inline void checkpoint_prune(const std::string& dir, int keep, int major) {
    std::vector<int> done = checkpoint_done_steps(dir), victims;
    if (done.empty() || keep <= 0) return;
    for (size_t i = keep; i < done.size(); i++)
        if (major == 0 || done[i] % major != 0) victims.push_back(done[i]);
    std::vector<std::string> names;  // model_S.bin, state_S_R.bin and their .tmp files
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) return;
    while (struct dirent* e = readdir(d)) {
        long long step;
        const char* name = e->d_name;
        size_t skip = strncmp(name, "model_", 6) == 0 ? 6 : strncmp(name, "state_", 6) == 0 ? 6 : 0;
        if (skip == 0 || strlen(name) < skip + 8) continue;
        std::string digits(name + skip, 8);
        if (!parse_int(digits.c_str(), 0, 99999999, &step)) continue;
        names.push_back(name);
        bool complete = std::find(done.begin(), done.end(), (int)step) != done.end();
        if (!complete && step < done[0] && std::find(victims.begin(), victims.end(), (int)step) == victims.end())
            victims.push_back((int)step);
    }
    closedir(d);
    if (victims.empty()) return;
    for (int s : victims) remove(checkpoint_path(dir, "DONE", s).c_str());
    fsync_dir(dir);
    for (const std::string& name : names) {
        int step = atoi(name.c_str() + 6);
        if (std::find(victims.begin(), victims.end(), step) != victims.end()) remove((dir + "/" + name).c_str());
    }
    fsync_dir(dir);
}
