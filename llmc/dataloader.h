// dataloader.h: serves (inputs, targets) batches from llm.c token shards, sharded over ranks.
// defines: DataLoaderState, DataLoader, dataloader_init, dataloader_next_batch,
//          dataloader_reset, dataloader_get_state, dataloader_set_state,
//          dataloader_print_summary, dataloader_free
//
// A shard file: 256 x int32 header [0]=20240520 (magic), [1]=1 (version), [2]=ntok,
// then ntok x uint16 tokens; its size is exactly 1024 + 2*ntok bytes. Vocabularies past
// 65,536 ids (Llama 3's 128,256) use llm.c's 32-bit variant: [0]=20240801, [1]=7, [2]=ntok,
// then ntok x uint32 tokens, 1024 + 4*ntok bytes.
//
// Data order. W = world*B*T. A "global sample" is a window of W+1 tokens of one shard;
// rank r takes tokens [r*B*T, r*B*T + B*T + 1) of it: inputs are the first B*T, targets
// the same shifted by one. The global samples of a shard start at 0, W, 2W, ... while
// start + W + 1 <= ntok (the tail is dropped), so a shard holds (ntok - 1) / W of them.
//  - shuffle off: shards in sorted glob order, samples in file order, then the next
//    epoch starts again at the first shard. This is llm.c's order, so a script that
//    reads the files front to back sees the same batches.
//  - shuffle on: each epoch visits the shards in a seeded permutation, and the samples
//    of each shard in a seeded permutation. Every permutation is a pure function of
//    (seed, epoch, shard), so (epoch, shard_pos, sample_pos) is the whole state.
// All ranks compute the same permutations, so at every step they read disjoint slices
// of the same global sample, which together cover it exactly.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <glob.h>
#include <random>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "utils.h"

constexpr int DATALOADER_MAGIC = 20240520;  // uint16 tokens
constexpr int DATALOADER_VERSION = 1;
constexpr int DATALOADER_MAGIC_U32 = 20240801;  // uint32 tokens (llm.c's Llama 3 shards)
constexpr int DATALOADER_VERSION_U32 = 7;
constexpr size_t DATALOADER_HEADER_BYTES = 256 * sizeof(int32_t);

// The exact position of the next batch: enough to resume bit-for-bit (no RNG state needed).
struct DataLoaderState {
    uint64_t epoch;       // passes over all shards completed so far
    uint64_t shard_pos;   // index into this epoch's shard order (not a file index)
    uint64_t sample_pos;  // index into that shard's sample order
};

// One validated, read-only memory-mapped shard.
struct DataShard {
    char* path;              // owned copy of the file name, for messages
    void* map;               // the whole file, mmap'ed read-only
    size_t file_bytes;       // = 1024 + token_bytes*ntok
    const void* tokens;      // first token, right after the header: uint16_t or uint32_t
    int token_bytes;         // 2 or 4
    size_t ntok;             // tokens in this shard
    uint32_t num_samples;    // global samples: (ntok - 1) / (world*B*T); ntok < 2^31
};

struct DataLoader {
    int B, T;                      // micro-batch and sequence length of one rank
    int rank, world;               // this process and the process count
    int shuffle;                   // 0: llm.c's file order; 1: seeded permutations
    uint64_t seed;                 // shuffle seed
    char* pattern;                 // owned copy of the glob, for messages
    DataShard* shards;             // num_shards, in sorted glob order
    size_t num_shards;
    size_t num_tokens;             // total over shards
    size_t num_samples_per_epoch;  // global samples per epoch = batches per epoch per rank
    int* inputs;                   // (B,T) this rank's slice of the current global sample
    int* targets;                  // (B,T) inputs shifted by one token
    // position of the next batch
    uint64_t epoch, shard_pos, sample_pos;
    // permutation caches, recomputed from (seed, epoch, shard) when the position moves
    uint32_t* shard_order;         // num_shards: this epoch's shard order (file indices)
    uint64_t shard_order_epoch;    // the epoch shard_order belongs to
    bool shard_order_valid;
    uint32_t* sample_order;        // max num_samples over shards (allocated when shuffling)
    uint64_t sample_order_epoch;   // the (epoch, file index) sample_order belongs to
    size_t sample_order_shard;
    bool sample_order_valid;
};

// ----------------------------------------------------------------------------
// seeded permutations

// One independent mt19937 stream per (seed, epoch, stream). std::seed_seq and
// std::mt19937 are both fully specified by the C++ standard, so every compiler and
// every machine produces the same permutations. stream 0 orders the shards of an
// epoch; stream 1 + i orders the samples of the shard with file index i.
inline std::mt19937 dataloader_rng_(uint64_t seed, uint64_t epoch, uint64_t stream) {
    std::seed_seq seq{(uint32_t)seed, (uint32_t)(seed >> 32), (uint32_t)epoch,
                      (uint32_t)(epoch >> 32), (uint32_t)stream, (uint32_t)(stream >> 32)};
    return std::mt19937(seq);
}

// Uniform integer in [0, n), n >= 1, without modulo bias: reject the 2^32 mod n lowest
// draws, so the accepted range is a whole number of copies of [0, n).
inline uint32_t dataloader_rand_below_(std::mt19937& rng, uint32_t n) {
    uint32_t reject_below = (uint32_t)(0u - n) % n;  // 2^32 mod n
    for (;;) {
        uint32_t x = (uint32_t)rng();
        if (x >= reject_below) return x % n;
    }
}

// order[0..n) = a Fisher-Yates permutation of 0..n-1 (std::shuffle is not portable).
inline void dataloader_permutation_(uint32_t* order, uint32_t n, std::mt19937& rng) {
    for (uint32_t i = 0; i < n; i++) order[i] = i;
    for (uint32_t i = n; i > 1; i--) {
        uint32_t j = dataloader_rand_below_(rng, i);
        std::swap(order[i - 1], order[j]);
    }
}

// Brings shard_order (and sample_order when shuffling) up to date with the position.
inline void dataloader_prepare_orders_(DataLoader* dl) {
    if (!dl->shard_order_valid || dl->shard_order_epoch != dl->epoch) {
        if (dl->shuffle) {
            std::mt19937 rng = dataloader_rng_(dl->seed, dl->epoch, 0);
            dataloader_permutation_(dl->shard_order, (uint32_t)dl->num_shards, rng);
        } else {
            for (size_t i = 0; i < dl->num_shards; i++) dl->shard_order[i] = (uint32_t)i;
        }
        dl->shard_order_epoch = dl->epoch;
        dl->shard_order_valid = true;
    }
    if (!dl->shuffle) return;
    size_t shard = dl->shard_order[dl->shard_pos];
    if (!dl->sample_order_valid || dl->sample_order_epoch != dl->epoch ||
        dl->sample_order_shard != shard) {
        std::mt19937 rng = dataloader_rng_(dl->seed, dl->epoch, 1 + (uint64_t)shard);
        dataloader_permutation_(dl->sample_order, dl->shards[shard].num_samples, rng);
        dl->sample_order_epoch = dl->epoch;
        dl->sample_order_shard = shard;
        dl->sample_order_valid = true;
    }
}

// ----------------------------------------------------------------------------
// shard validation

// Opens, maps and checks one shard. Returns false with a one-line message in err (and
// nothing left mapped) if the file is not a usable shard. Thread-safe: no fail() here,
// so that parallel validation can report the first bad shard in glob order.
inline bool dataloader_open_shard_(DataShard* sh, const char* path, size_t sample_tokens,
                                   int world, int B, int T, int vocab_size, char* err,
                                   size_t errn) {
    memset(sh, 0, sizeof(*sh));
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        snprintf(err, errn, "%s: cannot open (%s)", path, strerror(errno));
        return false;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errn, "%s: not a regular file", path);
        close(fd);
        return false;
    }
    size_t bytes = (size_t)st.st_size;
    if (bytes < DATALOADER_HEADER_BYTES) {
        snprintf(err, errn, "%s: %zu bytes, shorter than the %zu-byte shard header", path,
                 bytes, DATALOADER_HEADER_BYTES);
        close(fd);
        return false;
    }
    void* map = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);  // the mapping keeps the file alive
    if (map == MAP_FAILED) {
        snprintf(err, errn, "%s: mmap failed (%s)", path, strerror(errno));
        return false;
    }
    int32_t header[256];
    memcpy(header, map, sizeof(header));
    bool ok = false;
    size_t ntok = 0;
    const bool wide = header[0] == DATALOADER_MAGIC_U32;
    const int token_bytes = wide ? 4 : 2;
    const int want_version = wide ? DATALOADER_VERSION_U32 : DATALOADER_VERSION;
    if (header[0] != DATALOADER_MAGIC && !wide) {
        snprintf(err, errn, "%s: bad magic %d in header (a token shard has %d, or %d with 32-bit tokens)", path,
                 header[0], DATALOADER_MAGIC, DATALOADER_MAGIC_U32);
    } else if (header[1] != want_version) {
        snprintf(err, errn, "%s: unsupported shard version %d (this build reads %d for magic %d)", path,
                 header[1], want_version, header[0]);
    } else if (header[2] < 0) {
        snprintf(err, errn, "%s: header says %d tokens", path, header[2]);
    } else if (bytes != DATALOADER_HEADER_BYTES + token_bytes * (size_t)header[2]) {
        snprintf(err, errn,
                 "%s: file is %zu bytes but its header says %d tokens = %zu bytes "
                 "(truncated or corrupt)",
                 path, bytes, header[2], DATALOADER_HEADER_BYTES + token_bytes * (size_t)header[2]);
    } else if ((size_t)header[2] < sample_tokens) {
        snprintf(err, errn,
                 "%s: shard has %d tokens but one sample needs world*B*T+1 = %d*%d*%d+1 = "
                 "%zu tokens",
                 path, header[2], world, B, T, sample_tokens);
    } else {
        ntok = (size_t)header[2];
        ok = true;
    }
    const void* tokens = (const char*)map + DATALOADER_HEADER_BYTES;
    // every id below the vocabulary: a branch-free max first (vectorizes), the position only
    // when something is bad
    auto check_ids = [&](auto* ids) {
        auto mx = ids[0];
        for (size_t i = 0; i < ntok; i++) mx = ids[i] > mx ? ids[i] : mx;
        if ((uint64_t)mx < (uint64_t)vocab_size) return;
        size_t i = 0;
        while ((uint64_t)ids[i] < (uint64_t)vocab_size) i++;
        snprintf(err, errn, "%s: token id %llu at position %zu is >= vocab size %d", path,
                 (unsigned long long)ids[i], i, vocab_size);
        ok = false;
    };
    if (ok && ntok > 0 && wide) check_ids((const uint32_t*)tokens);
    if (ok && ntok > 0 && !wide && vocab_size <= 65535) check_ids((const uint16_t*)tokens);
    if (!ok) {
        munmap(map, bytes);
        return false;
    }
    sh->map = map;
    sh->file_bytes = bytes;
    sh->tokens = tokens;
    sh->token_bytes = token_bytes;
    sh->ntok = ntok;
    sh->num_samples = (uint32_t)((ntok - 1) / (sample_tokens - 1));
    return true;
}

// ----------------------------------------------------------------------------
// public API

// Back to epoch 0, first sample (validation loaders do this before every evaluation).
inline void dataloader_reset(DataLoader* dl) {
    dl->epoch = 0;
    dl->shard_pos = 0;
    dl->sample_pos = 0;
    dataloader_prepare_orders_(dl);
}

// Finds the shards matching pattern (glob), validates every one of them, and positions
// the loader at epoch 0, first sample. Fails naming the file on any bad shard.
inline void dataloader_init(DataLoader* dl, const char* pattern, int B, int T, int rank,
                            int world, int shuffle, uint64_t seed, int vocab_size) {
    CHECK(B > 0 && T > 0, "B=%d T=%d", B, T);
    CHECK(world > 0 && rank >= 0 && rank < world, "rank=%d world=%d", rank, world);
    CHECK(vocab_size > 0, "vocab_size=%d", vocab_size);
    memset(dl, 0, sizeof(*dl));
    dl->B = B;
    dl->T = T;
    dl->rank = rank;
    dl->world = world;
    dl->shuffle = shuffle ? 1 : 0;
    dl->seed = seed;
    dl->pattern = strdup(pattern);
    CHECK(dl->pattern != nullptr, "strdup");

    glob_t g;
    int grc = glob(pattern, 0, nullptr, &g);
    if (grc == GLOB_NOMATCH || (grc == 0 && g.gl_pathc == 0)) fail("%s: no files match", pattern);
    if (grc != 0) fail("%s: glob failed (code %d)", pattern, grc);
    // sort bytewise ourselves: glob's order follows the locale's collation
    std::sort(g.gl_pathv, g.gl_pathv + g.gl_pathc,
              [](const char* a, const char* b) { return strcmp(a, b) < 0; });
    size_t n = g.gl_pathc;
    dl->num_shards = n;
    dl->shards = (DataShard*)xmalloc(n * sizeof(DataShard));

    // size_t: world*B*T+1 can pass 2^31 for large configs
    size_t sample_tokens = (size_t)world * (size_t)B * (size_t)T + 1;
    const size_t errn = 512;
    char* errs = (char*)xmalloc(n * errn);
    bool* ok = (bool*)xmalloc(n * sizeof(bool));
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1)
#endif
    for (long i = 0; i < (long)n; i++) {
        ok[i] = dataloader_open_shard_(&dl->shards[i], g.gl_pathv[i], sample_tokens, world, B,
                                       T, vocab_size, errs + i * errn, errn);
    }
    for (size_t i = 0; i < n; i++) {
        if (!ok[i]) fail("%s", errs + i * errn);  // the first bad shard in glob order
    }
    free(ok);
    free(errs);

    uint32_t max_samples = 0;
    for (size_t i = 0; i < n; i++) {
        DataShard* sh = &dl->shards[i];
        sh->path = strdup(g.gl_pathv[i]);
        CHECK(sh->path != nullptr, "strdup");
        dl->num_tokens += sh->ntok;
        dl->num_samples_per_epoch += sh->num_samples;
        max_samples = std::max(max_samples, sh->num_samples);
    }
    globfree(&g);

    dl->inputs = (int*)xmalloc((size_t)B * T * sizeof(int));
    dl->targets = (int*)xmalloc((size_t)B * T * sizeof(int));
    dl->shard_order = (uint32_t*)xmalloc(n * sizeof(uint32_t));
    dl->sample_order = dl->shuffle ? (uint32_t*)xmalloc(max_samples * sizeof(uint32_t)) : nullptr;
    dataloader_reset(dl);
}

// Fills inputs/targets with this rank's slice of the next global sample, then advances
// (to the next shard, or the next epoch, when this one is used up).
inline void dataloader_next_batch(DataLoader* dl) {
    dataloader_prepare_orders_(dl);
    const DataShard* sh = &dl->shards[dl->shard_order[dl->shard_pos]];
    size_t sample = dl->shuffle ? dl->sample_order[dl->sample_pos] : (size_t)dl->sample_pos;
    size_t BT = (size_t)dl->B * dl->T;
    size_t start = sample * BT * dl->world + (size_t)dl->rank * BT;
    CHECK(start + BT + 1 <= sh->ntok, "start=%zu BT=%zu ntok=%zu", start, BT, sh->ntok);
    auto take = [&](auto* tok) {
        for (size_t i = 0; i < BT; i++) {
            dl->inputs[i] = (int)tok[i];
            dl->targets[i] = (int)tok[i + 1];
        }
    };
    if (sh->token_bytes == 4) take((const uint32_t*)sh->tokens + start);
    else take((const uint16_t*)sh->tokens + start);
    dl->sample_pos++;
    if (dl->sample_pos >= sh->num_samples) {
        dl->sample_pos = 0;
        dl->shard_pos++;
        if (dl->shard_pos >= dl->num_shards) {
            dl->shard_pos = 0;
            dl->epoch++;
        }
    }
}

// The position of the NEXT batch; always a valid position (never "past the end").
inline DataLoaderState dataloader_get_state(const DataLoader* dl) {
    DataLoaderState s;
    s.epoch = dl->epoch;
    s.shard_pos = dl->shard_pos;
    s.sample_pos = dl->sample_pos;
    return s;
}

// Moves to a position saved by dataloader_get_state (of a loader over the same files
// and B, T, world). Fails if the position cannot exist for these shards.
inline void dataloader_set_state(DataLoader* dl, DataLoaderState s) {
    if (s.shard_pos >= dl->num_shards) {
        fail("%s: data loader state has shard position %llu but there are only %zu shards",
             dl->pattern, (unsigned long long)s.shard_pos, dl->num_shards);
    }
    dl->epoch = s.epoch;
    dl->shard_pos = s.shard_pos;
    dl->sample_pos = 0;
    dataloader_prepare_orders_(dl);
    const DataShard* sh = &dl->shards[dl->shard_order[dl->shard_pos]];
    if (s.sample_pos >= sh->num_samples) {
        fail("%s: data loader state has sample position %llu but the shard at position %llu "
             "of epoch %llu has only %u samples",
             sh->path, (unsigned long long)s.sample_pos, (unsigned long long)s.shard_pos,
             (unsigned long long)s.epoch, sh->num_samples);
    }
    dl->sample_pos = s.sample_pos;
}

// One line describing the loader; the caller decides who prints it (rank 0).
inline void dataloader_print_summary(const DataLoader* dl, const char* name) {
    char order[64];
    if (dl->shuffle) {
        snprintf(order, sizeof(order), "shuffled (seed %llu)", (unsigned long long)dl->seed);
    } else {
        snprintf(order, sizeof(order), "in file order");
    }
    printf("%s: %zu shard%s matching %s, %zu tokens, %zu samples/epoch of %d x %dx%d tokens, "
           "%s\n",
           name, dl->num_shards, dl->num_shards == 1 ? "" : "s", dl->pattern, dl->num_tokens,
           dl->num_samples_per_epoch, dl->world, dl->B, dl->T, order);
}

inline void dataloader_free(DataLoader* dl) {
    for (size_t i = 0; i < dl->num_shards; i++) {
        munmap(dl->shards[i].map, dl->shards[i].file_bytes);
        free(dl->shards[i].path);
    }
    free(dl->shards);
    free(dl->pattern);
    free(dl->inputs);
    free(dl->targets);
    free(dl->shard_order);
    free(dl->sample_order);
    memset(dl, 0, sizeof(*dl));
}
