// hellaswag.h: multiple-choice evaluation (HellaSwag, -h 1) in llm.c's eval-file format.
// File: 256 x int32 header [0]=20240522 [1]=1 [2]=examples [3]=bytes of the longest example,
// then each example as uint16 words:
//   65535 (start), its size in bytes (these first 3 words included), its index, the label
//   (index of the right completion), the number of completions, the context's length and
//   tokens, then per completion its length and tokens.
// A completion's score is its mean loss given the context: the loss at the positions that
// predict its tokens. The lowest score is the model's choice (the first one on a tie, as in
// llm.c); accuracy is the fraction of examples where that is the label.
// Each (example, completion) pair is one row of context + completion; rows go through the
// model B at a time, only as long as the longest row of the batch (causal attention: the
// padding after a row's end changes nothing before it).
// defines: EvalExample, EvalSet, evalset_load, EvalRows, EvalCursor, evalset_rows_fill, evalset_rows_score,
//          evalset_choice
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "utils.h"  // defines: fail, file_size_or_fail, fopen_or_fail, fread_or_fail

static const int32_t EVALSET_MAGIC = 20240522;
static const int32_t EVALSET_VERSION = 1;

struct EvalExample {
    int label = 0;
    std::vector<int> context;
    std::vector<std::vector<int>> completions;
};

struct EvalSet {
    std::string path;
    std::vector<EvalExample> examples;
    size_t rows = 0;  // (example, completion) pairs over the whole file
};

// Reads and checks the whole file: every size against what is left, every token against
// vocab_size, every row against T (the trainer's -t). Errors name the file and the example.
inline void evalset_load(EvalSet* set, const char* path, int vocab_size, int T) {
    set->path = path;
    size_t size = file_size_or_fail(path);
    if (size < 1024) fail("%s: %zu bytes, shorter than the 1024-byte header of an eval file", path, size);
    if ((size - 1024) % 2 != 0) fail("%s: odd size %zu: the examples are uint16 words", path, size);
    FILE* f = fopen_or_fail(path, "rb");
    int32_t header[256];
    fread_or_fail(header, sizeof(int32_t), 256, f, path);
    std::vector<uint16_t> w((size - 1024) / 2);
    fread_or_fail(w.data(), sizeof(uint16_t), w.size(), f, path);
    fclose(f);
    if (header[0] != EVALSET_MAGIC)
        fail("%s: bad magic %d (an llm.c eval file has %d)", path, header[0], EVALSET_MAGIC);
    if (header[1] != EVALSET_VERSION) fail("%s: unsupported version %d (expected %d)", path, header[1], EVALSET_VERSION);
    int num = header[2];
    if (num < 1 || (size_t)num > w.size() / 8)  // an example takes at least 8 words
        fail("%s: header says %d examples, impossible in %zu bytes", path, num, size);
    set->examples.assign(num, EvalExample());
    set->rows = 0;
    size_t at = 0;  // word index into w
    for (int e = 0; e < num; e++) {
        if (w.size() - at < 3) fail("%s: truncated: example %d of %d is missing", path, e, num);
        if (w[at] != 65535) fail("%s: example %d does not start with the 65535 marker (found %u)", path, e, w[at]);
        size_t words = w[at + 1] / 2;
        if (w[at + 1] % 2 != 0 || words < 8) fail("%s: example %d claims %u bytes, impossible", path, e, w[at + 1]);
        if (words > w.size() - at)
            fail("%s: truncated: example %d needs %u bytes, %zu are left", path, e, w[at + 1], 2 * (w.size() - at));
        if (w[at + 2] != (uint16_t)e) fail("%s: example %d has index %u (out of order)", path, e, w[at + 2]);
        const uint16_t* x = &w[at + 3];
        size_t left = words - 3;  // words of this example after its first three
        EvalExample& ex = set->examples[e];
        int ncomp = x[1];
        size_t ctx = x[2];
        if (ncomp < 1) fail("%s: example %d has no completions", path, e);
        if (x[0] >= ncomp) fail("%s: example %d: label %u but only %d completions", path, e, x[0], ncomp);
        if (ctx < 1 || 3 + ctx > left) fail("%s: example %d: context of %zu tokens does not fit its bytes", path, e, ctx);
        ex.label = x[0];
        ex.context.assign(x + 3, x + 3 + ctx);
        size_t i = 3 + ctx;
        for (int c = 0; c < ncomp; c++) {
            if (i >= left) fail("%s: example %d: completion %d is missing", path, e, c);
            size_t len = x[i];
            if (len < 1 || i + 1 + len > left)
                fail("%s: example %d: completion %d of %zu tokens does not fit its bytes", path, e, c, len);
            if (ctx + len > (size_t)T)
                fail("%s: example %d: context + completion %d is %zu tokens, longer than -t %d", path, e, c, ctx + len, T);
            ex.completions.emplace_back(x + i + 1, x + i + 1 + len);
            i += 1 + len;
        }
        if (i != left) fail("%s: example %d: %zu bytes left over after its completions", path, e, 2 * (left - i));
        for (int tok : ex.context)
            if (tok >= vocab_size) fail("%s: example %d: token %d outside the model's vocab %d", path, e, tok, vocab_size);
        for (const auto& comp : ex.completions)
            for (int tok : comp)
                if (tok >= vocab_size) fail("%s: example %d: token %d outside the model's vocab %d", path, e, tok, vocab_size);
        set->rows += ncomp;
        at += words;
    }
    if (at != w.size()) fail("%s: %zu bytes after the last of its %d examples", path, 2 * (w.size() - at), num);
}

// One batch of rows: row r is (example, completion) number first + r of a run of examples.
struct EvalRows {
    int B = 0, T = 0;                  // rows filled, and the length they share
    std::vector<int> inputs, targets;  // (B, T)
    std::vector<int> example, completion;  // per row
};

// The next (example, completion) pair to put in a row.
struct EvalCursor {
    int example = 0, completion = 0;
};

// Fills up to max_B rows from the pair at *at on, stopping before example `end`, and moves
// *at past them. Padding positions hold token 0 (the model never attends from a row's
// positions to later ones). Returns the rows filled.
inline int evalset_rows_fill(const EvalSet& set, int end, EvalCursor* at, int max_B, EvalRows* r) {
    r->example.clear();
    r->completion.clear();
    int& e = at->example;
    int& c = at->completion;
    int maxT = 1;
    while (e < end && (int)r->example.size() < max_B) {
        const EvalExample& ex = set.examples[e];
        r->example.push_back(e);
        r->completion.push_back(c);
        maxT = std::max(maxT, (int)(ex.context.size() + ex.completions[c].size()));
        if (++c == (int)ex.completions.size()) { c = 0; e++; }
    }
    r->B = (int)r->example.size();
    r->T = maxT;
    r->inputs.assign((size_t)r->B * maxT, 0);
    r->targets.assign((size_t)r->B * maxT, 0);
    for (int b = 0; b < r->B; b++) {
        const EvalExample& ex = set.examples[r->example[b]];
        const std::vector<int>& comp = ex.completions[r->completion[b]];
        int* in = &r->inputs[(size_t)b * maxT];
        int* tg = &r->targets[(size_t)b * maxT];
        size_t ctx = ex.context.size();
        std::copy(ex.context.begin(), ex.context.end(), in);
        std::copy(comp.begin(), comp.end(), in + ctx);
        // position ctx-1+i predicts completion token i
        for (size_t i = 0; i < comp.size(); i++) tg[ctx - 1 + i] = comp[i];
    }
    return r->B;
}

// Adds each row's score (mean loss over its completion's positions; losses is (B, T) from
// the forward of r) into scores[example][completion].
inline void evalset_rows_score(const EvalSet& set, const EvalRows& r, const float* losses,
                               std::vector<std::vector<double>>* scores) {
    for (int b = 0; b < r.B; b++) {
        const EvalExample& ex = set.examples[r.example[b]];
        size_t ctx = ex.context.size(), len = ex.completions[r.completion[b]].size();
        double sum = 0.0;
        for (size_t i = 0; i < len; i++) sum += losses[(size_t)b * r.T + ctx - 1 + i];
        (*scores)[r.example[b]][r.completion[b]] = sum / (double)len;
    }
}

// The model's choice for each example in [begin, end): index of the lowest score (first on ties).
inline int evalset_choice(const std::vector<double>& s) {
    int best = 0;
    for (int c = 1; c < (int)s.size(); c++)
        if (s[c] < s[best]) best = c;
    return best;
}
