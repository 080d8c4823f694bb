// tokenizer.h: the decode side of the tokenizer, for printing samples while training.
// defines: Tokenizer, tokenizer_init, tokenizer_decode, tokenizer_free
//
// Reads llm.c's tokenizer file (written by `./tokenize tokenizer-file`):
//   256 x uint32 header: [0]=20240328, [1]=version, [2]=V (vocab size), [3]=EOT id (v2)
//   then V times: uint8 length, that many bytes (the token's raw bytes, not UTF-8 checked)
// Version 1 files have no EOT in the header: GPT-2's 50256 is assumed when V == 50257.
// A missing file is not an error (the trainer prints token ids instead); a damaged one is.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "utils.h"

struct Tokenizer {
    uint32_t vocab_size;
    uint32_t eot_token;
    std::vector<std::string> pieces;  // token id -> bytes
    bool ok;                          // false: no tokenizer file, decode is unavailable
};

static const uint32_t TOKENIZER_MAGIC = 20240328;
static const uint32_t TOKENIZER_MAX_VOCAB = 1u << 24;  // GPT-2 has 50257; a bigger V is a corrupt header

inline void tokenizer_init(Tokenizer* t, const char* path) {
    t->vocab_size = 0;
    t->eot_token = 0;
    t->pieces.clear();
    t->ok = false;
    FILE* f = fopen(path, "rb");
    if (f == nullptr) {
        if (errno != ENOENT) fail("%s: cannot open tokenizer file (%s)", path, strerror(errno));
        fprintf(stderr, "warning: %s: no tokenizer file; samples print as token ids\n", path);
        return;
    }
    uint32_t header[256];
    fread_or_fail(header, sizeof(uint32_t), 256, f, path);
    if (header[0] != TOKENIZER_MAGIC)
        fail("%s: not a tokenizer file (magic %u, expected %u)", path, header[0], TOKENIZER_MAGIC);
    uint32_t version = header[1], V = header[2];
    if (version != 1 && version != 2) fail("%s: unsupported tokenizer version %u (expected 1 or 2)", path, version);
    if (V == 0 || V > TOKENIZER_MAX_VOCAB) fail("%s: implausible vocab size %u", path, V);
    // a token takes at least 2 bytes (its length, then its bytes): check before allocating V
    size_t size = file_size_or_fail(path);
    if (size < 1024 + 2 * (size_t)V) fail("%s: truncated file: %zu bytes cannot hold %u tokens", path, size, V);
    if (version == 1) {
        if (V != 50257) fail("%s: version 1 file with vocab size %u: EOT token unknown (expected V=50257)", path, V);
        t->eot_token = 50256;
    } else {
        t->eot_token = header[3];
        if (t->eot_token >= V) fail("%s: EOT token %u out of range for vocab size %u", path, t->eot_token, V);
    }
    t->pieces.resize(V);
    for (uint32_t i = 0; i < V; i++) {
        uint8_t len;
        fread_or_fail(&len, 1, 1, f, path);
        if (len == 0) fail("%s: token %u has length 0", path, i);
        t->pieces[i].resize(len);
        fread_or_fail(&t->pieces[i][0], 1, len, f, path);
    }
    // Trailing bytes mean the header's V is wrong (or the file is something else).
    if (fgetc(f) != EOF) fail("%s: %u tokens read but the file has more bytes", path, V);
    fclose(f);
    t->vocab_size = V;
    t->ok = true;
}

inline const std::string& tokenizer_decode(const Tokenizer* t, uint32_t id) {
    CHECK(t->ok, "tokenizer not loaded (id %u)", id);
    CHECK(id < t->vocab_size, "token id %u >= vocab size %u", id, t->vocab_size);
    return t->pieces[id];
}

inline void tokenizer_free(Tokenizer* t) {
    t->pieces.clear();
    t->pieces.shrink_to_fit();
    t->vocab_size = 0;
    t->ok = false;
}
