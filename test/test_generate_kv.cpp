// test_generate_kv.cpp: the KV-cache forward (llmc/gpt2_kv.h) against the trainer's full
// forward (gpt2_forward over the whole sequence, no cache), and the sampler's candidate
// sets for test/generate_reference.py to check. Run by test/test_generate.sh.
//
//   build/test_generate_kv MODEL PROMPT_IDS N [CHUNK]
//       Greedy decoding of N tokens from PROMPT_IDS ("1,2,3"), the prompt fed to the cache
//       CHUNK tokens per call (default: all at once). At every step the cache's logits are
//       compared with gpt2_forward's on the whole sequence (all Vp columns) and the argmaxes
//       must agree. Then the cache is reset and the prompt run again: the logits must be
//       the first run's. Prints the generated ids, "max_logit_diff X", PASS or FAIL.
//   build/test_generate_kv --filter LOGITS V TEMPERATURE TOP_K TOP_P
//       For every row of LOGITS (V float32 each): "row id prob" for each token
//       sampler_candidates keeps, probabilities normalized; and sample_logits, drawn with
//       200 coins, must only return those tokens.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "../llmc/gpt2.h"        // defines: GPT2, gpt2_alloc_state, gpt2_forward
#include "../llmc/checkpoint.h"  // defines: gpt2_load_checkpoint
#include "../llmc/gpt2_kv.h"     // defines: GPT2KV, gpt2_kv_init, gpt2_kv_forward, gpt2_kv_reset
#include "../llmc/sampler.h"     // defines: sampler_candidates, sample_logits, rng_next_f32

static int argmax(const float* x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[best]) best = i;
    return best;
}

static int run_filter(int argc, char** argv) {
    if (argc != 7) fail("usage: %s --filter LOGITS V TEMPERATURE TOP_K TOP_P", argv[0]);
    const char* path = argv[2];
    int V = atoi(argv[3]), top_k = atoi(argv[5]);
    float temperature = (float)atof(argv[4]), top_p = (float)atof(argv[6]);
    size_t bytes = file_size_or_fail(path);
    CHECK(V > 0 && bytes % (V * sizeof(float)) == 0, "%s: %zu bytes is not rows of V=%d floats", path, bytes, V);
    size_t rows = bytes / (V * sizeof(float));
    std::vector<float> logits(rows * V);
    FILE* f = fopen_or_fail(path, "rb");
    fread_or_fail(logits.data(), sizeof(float), logits.size(), f, path);
    fclose(f);
    uint64_t rng = 12345;
    int stray = 0;
    for (size_t r = 0; r < rows; r++) {
        const float* row = logits.data() + r * V;
        std::vector<int> ids;
        std::vector<double> w;
        sampler_candidates(row, V, temperature, top_k, top_p, &ids, &w);
        double sum = 0.0;
        for (double x : w) sum += x;
        std::vector<char> in_set(V, 0);
        for (size_t i = 0; i < ids.size(); i++) {
            printf("%zu %d %.9e\n", r, ids[i], w[i] / sum);
            in_set[ids[i]] = 1;
        }
        for (int c = 0; c < 200; c++) {
            int id = sample_logits(row, V, temperature, top_k, rng_next_f32(&rng), top_p);
            if (!in_set[id]) stray++;
        }
    }
    if (stray > 0) {
        fprintf(stderr, "FAIL: sample_logits returned %d tokens outside sampler_candidates' set\n", stray);
        return 1;
    }
    return 0;
}

int main(int argc, char** argv) {
    if (argc >= 2 && std::string(argv[1]) == "--filter") return run_filter(argc, argv);
    if (argc != 4 && argc != 5) fail("usage: %s MODEL PROMPT_IDS N [CHUNK] | --filter ...", argv[0]);
    GPT2 model;
    gpt2_load_checkpoint(&model, argv[1]);
    const GPT2Config& mc = model.config;
    const int V = mc.vocab_size, Vp = mc.padded_vocab_size, maxT = mc.max_seq_len;
    std::vector<int> seq;
    for (char* s = argv[2]; *s;) {
        char* end;
        long v = strtol(s, &end, 10);
        CHECK(end != s && v >= 0 && v < V, "bad prompt id at '%s'", s);
        seq.push_back((int)v);
        s = end;
        while (*s == ',' || *s == ' ') s++;
    }
    const int P = (int)seq.size(), N = atoi(argv[3]);
    const int chunk = argc == 5 ? atoi(argv[4]) : P;
    CHECK(P >= 1 && N >= 1 && P + N - 1 <= maxT && chunk >= 1, "P=%d N=%d chunk=%d maxT=%d", P, N, chunk, maxT);
    gpt2_alloc_state(&model, 1, maxT);
    GPT2KV kv;
    gpt2_kv_init(&kv, mc);

    // the prompt, CHUNK tokens per call
    const float* kv_logits = nullptr;
    for (int i = 0; i < P; i += chunk) kv_logits = gpt2_kv_forward(&model, &kv, seq.data() + i, std::min(chunk, P - i));
    std::vector<float> first_prefill(kv_logits, kv_logits + Vp);
    double max_diff = 0.0;
    int argmax_equal = 0;
    std::vector<int> out;
    for (int step = 0; step < N; step++) {
        const int len = (int)seq.size();
        gpt2_forward(&model, seq.data(), nullptr, 1, len);
        const float* full = model.acts.logits + (size_t)(len - 1) * Vp;
        for (int i = 0; i < Vp; i++) max_diff = std::fmax(max_diff, std::fabs((double)kv_logits[i] - full[i]));
        int a = argmax(kv_logits, V), b = argmax(full, V);
        if (a == b) argmax_equal++;
        else printf("step %d: argmax %d with the cache, %d without\n", step, a, b);
        out.push_back(a);
        seq.push_back(a);
        if (step + 1 < N) kv_logits = gpt2_kv_forward(&model, &kv, &seq.back(), 1);
    }
    // a reset cache starts over: the prompt again gives the first prefill's logits
    gpt2_kv_reset(&kv);
    kv_logits = gpt2_kv_forward(&model, &kv, seq.data(), P);
    bool reset_ok = memcmp(kv_logits, first_prefill.data(), Vp * sizeof(float)) == 0;

    for (size_t i = 0; i < out.size(); i++) printf(i ? " %d" : "%d", out[i]);
    printf("\n");
    printf("kv vs full forward: P=%d chunk=%d, %d steps to position %d, max_logit_diff %.3e, argmax equal %d/%d, "
           "reset %s\n", P, chunk, N, P + N - 1, max_diff, argmax_equal, N, reset_ok ? "ok" : "DIFFERS");
    bool pass = max_diff <= 1e-5 && argmax_equal == N && reset_ok;
    printf("%s\n", pass ? "PASS" : "FAIL");
    gpt2_kv_free(&kv);
    gpt2_free(&model);
    return pass ? 0 : 1;
}
