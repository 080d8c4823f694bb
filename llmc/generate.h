// generate.h: what ./generate (CPU, generate.cpp) and ./generate_fp32 / _bf16 (GPU,
// generate.cu) share: the flags, the prompt, and the sampling loop. The two mains
// differ only in the backend that turns a sequence into the logits of its last position.
// defines: GenerateConfig, generate_args_parse, generate_args_print_help, GeneratePrompt,
//          generate_check_prompt, generate_prepare_tiktoken, generate_prepare, generate_run
//
// One generation: the prompt's ids (GPT-2 BPE of -p, a tiktoken file's with -tk, or -pi as given) go through the model
// once; then, until -g tokens, EOT (-se 1) or the model's context maxT is reached: sample
// the next token from the last logits (temperature, top-k, top-p; llmc/sampler.h), print
// it, feed it back. A backend is anything with
//   const float* logits(const int* seq, int len, int n_new)
// returning the logits (Vp floats, host memory) of position len-1 of seq[0..len), of which
// the last n_new tokens are new since the previous call (a KV cache runs only those).
#pragma once
#include <unistd.h>
#include <chrono>
#include <string>
#include <vector>

#include "utils.h"           // defines: fail, CHECK, parse_int, parse_float
#include "args.h"            // defines: ArgSpec, ArgKind (the trainers' flag table types)
#include "gpt2.h"            // defines: GPT2Config
#include "sampler.h"         // defines: sample_logits, rng_next_f32
#include "tokenizer.h"       // defines: Tokenizer, tokenizer_init, tokenizer_decode
#include "../data/bpe.h"     // defines: Bpe, bpe_load, bpe_encode (GPT-2 BPE, for the prompt)

struct GenerateConfig {
    std::string model = "";          // -e  model checkpoint (llm.c format: fp32 v3 or bf16 v5)
    std::string prompt = "";         // -p  prompt text, GPT-2 BPE (empty and no -pi: start from EOT alone)
    std::string prompt_ids = "";     // -pi prompt as token ids "50256,464,3290" (used as given; replaces -p)
    int prepend_eot = 1;             // -pe 1: a text prompt starts with EOT, as every document of the shards does
    int max_new = 64;                // -g  tokens to generate at most
    float temperature = 1.0f;        // -st sampling temperature (0: greedy, the argmax)
    int top_k = 0;                   // -sk sample only from the k most likely tokens (0: all)
    float top_p = 1.0f;              // -sp sample only from the nucleus of probability p (1: all)
    int seed = 42;                   // -sd seed of the sampling RNG
    int stop_eot = 1;                // -se 1: stop after generating EOT
    int print_ids = 0;               // -oi 1: print the generated token ids instead of text
    std::string logits_out = "";     // -ol write the logits of every step to this file (V float32 each)
    int kv_cache = 1;                // -kv 0: no cache, the trainer's full forward over the sequence each step
    std::string tokenizer = "";      // -tf decode table (empty: gpt2_tokenizer.bin, then data/gpt2_tokenizer.bin)
    std::string vocab_dir = "data/gpt2_vocab";  // -vd encoder.json and vocab.bpe, to encode -p
    std::string tiktoken = "";       // -tk a tiktoken BPE file (cl100k_base, Llama 3): encodes -p, decodes the output
    int tf32 = 0;                    // -f  TF32 matmuls (GPU fp32 build; 0 keeps the logits close to the CPU's)
};

inline std::vector<ArgSpec> generate_arg_specs(GenerateConfig* c) {
#define ARG(flag, kind, field, lo, hi, help) {flag, kind, &c->field, lo, hi, help}
    return {
    ARG("-e", ARG_STRING, model, 0, 0, "model checkpoint (llm.c format, fp32 or bf16)"),
    ARG("-p", ARG_STRING, prompt, 0, 0, "prompt text, GPT-2 BPE (empty: start from EOT)"),
    ARG("-pi", ARG_STRING, prompt_ids, 0, 0, "prompt token ids, comma or space separated (replaces -p)"),
    ARG("-pe", ARG_INT, prepend_eot, 0, 1, "1: start a text prompt with EOT"),
    ARG("-g", ARG_INT, max_new, 0, 1 << 24, "tokens to generate at most (also stops at maxT)"),
    ARG("-st", ARG_FLOAT, temperature, 0, 100, "sampling temperature (0: greedy)"),
    ARG("-sk", ARG_INT, top_k, 0, 1 << 24, "top-k (0: off)"),
    ARG("-sp", ARG_FLOAT, top_p, 0, 1, "top-p, in (0, 1] (1: off)"),
    ARG("-sd", ARG_INT, seed, 0, 2147483647, "random seed of the sampling"),
    ARG("-se", ARG_INT, stop_eot, 0, 1, "1: stop after generating EOT"),
    ARG("-oi", ARG_INT, print_ids, 0, 1, "1: print generated token ids instead of text"),
    ARG("-ol", ARG_STRING, logits_out, 0, 0, "file for the logits of every step (V float32 each; empty: none)"),
    ARG("-kv", ARG_INT, kv_cache, 0, 1, "1: KV cache; 0: full forward over the sequence every step"),
    ARG("-tf", ARG_STRING, tokenizer, 0, 0, "tokenizer decode table (empty: gpt2_tokenizer.bin, data/gpt2_tokenizer.bin)"),
    ARG("-vd", ARG_STRING, vocab_dir, 0, 0, "directory of encoder.json and vocab.bpe (to encode -p)"),
    ARG("-tk", ARG_STRING, tiktoken, 0, 0, "tiktoken BPE file: encodes -p and decodes the output (replaces -tf, -vd)"),
    ARG("-f", ARG_INT, tf32, 0, 1, "TF32 matmuls (GPU fp32)"),
    };
#undef ARG
}

inline void generate_args_print_help(const char* prog) {
    GenerateConfig def;
    printf("usage: %s -e MODEL.bin [flags]   (every flag takes a value)\n", prog);
    printf("samples from a model checkpoint with a KV cache; text to stdout, progress to stderr\n");
    args_print_table(generate_arg_specs(&def), 18);
    printf("example: %s -e model.bin -p \"The Lord is\" -g 40 -st 0.8 -sk 40 -sp 0.95 -sd 1\n", prog);
}

// Parses argv into cfg (args_parse's rules: every flag takes a value, unknown flags and
// values out of range are one-line errors); --help prints the table and exits 0.
inline void generate_args_parse(int argc, char** argv, GenerateConfig* cfg) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-help") || !strcmp(argv[i], "-h")) {
            generate_args_print_help(argv[0]);
            exit(0);
        }
    }
    args_parse_table(argc, argv, generate_arg_specs(cfg));
    if (cfg->top_p <= 0.0f)  // top-p 0 would leave no token
        fail("flag -sp: expected a number in (0, 1], got '%g'", cfg->top_p);
    if (cfg->model.empty()) fail("no model: pass -e MODEL.bin (see --help)");
    if (!cfg->prompt.empty() && !cfg->prompt_ids.empty()) fail("give the prompt as -p text or -pi ids, not both");
}

// ---------------------------------------------------------------------------------------
// The prompt and how tokens print.

struct GeneratePrompt {
    std::vector<int> ids;   // the prompt, at least one token
    int eot;                // the model's end-of-text token
    Tokenizer tok;          // decode table; tok.ok false: tokens print as ids
};

// Parses "1,2 3" into ids, each in [0, V).
inline std::vector<int> generate_parse_ids(const std::string& s, int V) {
    std::vector<int> ids;
    size_t i = 0;
    while (i < s.size()) {
        if (s[i] == ',' || s[i] == ' ') { i++; continue; }
        size_t j = i;
        while (j < s.size() && s[j] != ',' && s[j] != ' ') j++;
        std::string word = s.substr(i, j - i);
        long long v;
        if (!parse_int(word.c_str(), 0, (long long)V - 1, &v))
            fail("flag -pi: '%s' is not a token id in [0, %d)", word.c_str(), V);
        ids.push_back((int)v);
        i = j;
    }
    if (ids.empty()) fail("flag -pi: no token ids in '%s'", s.c_str());
    return ids;
}

// The decode table (unless ids are printed), the EOT token, and the prompt's ids, checked
// against the model: every id < V, at most maxT of them.
// The prompt must fit the model: every id < V, at most maxT of them.
inline void generate_check_prompt(const std::vector<int>& ids, int V, int maxT) {
    for (int id : ids)
        if (id >= V) fail("the prompt holds token %d, outside the model's vocabulary of %d", id, V);
    if ((int)ids.size() > maxT) fail("the prompt is %zu tokens, longer than the model's context maxT=%d", ids.size(), maxT);
}

// -tk FILE: a tiktoken BPE file (data/bpe.h) encodes -p (after the file's separator: 100257
// for cl100k_base, 128000 <|begin_of_text|> for Llama 3, when -pe 1) and decodes what is
// printed; the model's ids past the file's ranks print as <|id N|>, the separator by its name.
inline void generate_prepare_tiktoken(const GenerateConfig& cfg, int V, int maxT, GeneratePrompt* out) {
    Bpe bpe;
    bpe_load_tiktoken(&bpe, cfg.tiktoken.c_str());
    if (bpe.pieces.size() > (size_t)V)
        fail("%s: %zu tokens, more than the model's vocabulary of %d", cfg.tiktoken.c_str(), bpe.pieces.size(), V);
    out->eot = bpe.eot_token != UINT32_MAX && bpe.eot_token < (uint32_t)V ? (int)bpe.eot_token : V - 1;
    Tokenizer& t = out->tok;
    t.vocab_size = (uint32_t)V;
    t.eot_token = (uint32_t)out->eot;
    t.pieces.assign(V, std::string());
    for (int id = 0; id < V; id++) {
        const std::string* p = bpe_piece(&bpe, (uint32_t)id);
        t.pieces[id] = p != nullptr ? *p : "<|id " + std::to_string(id) + "|>";
    }
    t.ok = !cfg.print_ids;
    out->ids.clear();
    if (!cfg.prompt_ids.empty()) {
        out->ids = generate_parse_ids(cfg.prompt_ids, V);
    } else {
        if (cfg.prepend_eot || cfg.prompt.empty()) out->ids.push_back(out->eot);
        BpeCache cache;
        std::vector<uint32_t> enc;
        bpe_encode(&bpe, &cache, cfg.prompt.data(), cfg.prompt.size(), &enc);
        for (uint32_t id : enc) out->ids.push_back((int)id);
    }
    generate_check_prompt(out->ids, V, maxT);
}

// V, maxT: the model's vocabulary size and context.
inline void generate_prepare(const GenerateConfig& cfg, int V, int maxT, GeneratePrompt* out) {
    out->tok.ok = false;
    if (!cfg.tiktoken.empty()) return generate_prepare_tiktoken(cfg, V, maxT, out);
    std::string mismatch;  // said once the prompt is known to be good: an error stays one line
    if (!cfg.print_ids) {
        std::string path = cfg.tokenizer;
        if (path.empty()) path = access("gpt2_tokenizer.bin", F_OK) == 0 ? "gpt2_tokenizer.bin" : "data/gpt2_tokenizer.bin";
        if (access(path.c_str(), F_OK) != 0)  // said later, like the mismatch
            mismatch = "warning: " + path + ": no tokenizer file; tokens print as ids\n";
        else
            tokenizer_init(&out->tok, path.c_str());
        if (out->tok.ok && (int)out->tok.vocab_size != V) {
            mismatch = "warning: " + path + " has " + std::to_string(out->tok.vocab_size) + " tokens, the model " +
                       std::to_string(V) + ": tokens print as ids\n";
            tokenizer_free(&out->tok);
        }
    }
    // EOT: the decode table's; GPT-2's 50256; else V-1 (test/make_test_data.py's shards)
    out->eot = out->tok.ok ? (int)out->tok.eot_token : V == 50257 ? 50256 : V - 1;
    out->ids.clear();
    if (!cfg.prompt_ids.empty()) {
        out->ids = generate_parse_ids(cfg.prompt_ids, V);
    } else {
        if (cfg.prepend_eot || cfg.prompt.empty()) out->ids.push_back(out->eot);
        if (!cfg.prompt.empty()) {
            if (V != 50257)
                fail("-p: prompt text is GPT-2 BPE, but the model's vocabulary has %d tokens (not 50257); give ids with -pi", V);
            std::string dir = cfg.vocab_dir;
            for (const char* name : {"/encoder.json", "/vocab.bpe"})
                if (access((dir + name).c_str(), R_OK) != 0)
                    fail("%s%s: missing (run data/get_vocab.sh, or pass -vd DIR)", dir.c_str(), name);
            Bpe bpe;
            bpe_load(&bpe, dir.c_str());
            BpeCache cache;
            std::vector<uint32_t> enc;
            bpe_encode(&bpe, &cache, cfg.prompt.data(), cfg.prompt.size(), &enc);
            for (uint32_t id : enc) out->ids.push_back((int)id);
        }
    }
    generate_check_prompt(out->ids, V, maxT);
    if (!mismatch.empty()) fputs(mismatch.c_str(), stderr);
}

// One token to stdout: its bytes (EOT as a newline-free marker), or its id.
inline void generate_print_token(const GenerateConfig& cfg, const GeneratePrompt& pr, int id, bool first) {
    if (cfg.print_ids || !pr.tok.ok) {
        printf(first ? "%d" : " %d", id);
    } else if (id == pr.eot && cfg.tiktoken.empty()) {
        fputs("<|endoftext|>", stdout);
    } else {
        const std::string& s = tokenizer_decode(&pr.tok, (uint32_t)id);
        fwrite(s.data(), 1, s.size(), stdout);
    }
    fflush(stdout);
}

// ---------------------------------------------------------------------------------------
// The loop.

// Generates from pr.ids with backend be; returns the generated tokens. Prints them as they
// come (text: the prompt first; ids: only the generated ones), a summary line on stderr.
template <typename Backend>
inline std::vector<int> generate_run(const GenerateConfig& cfg, int V, int maxT, const GeneratePrompt& pr,
                                     Backend& be) {
    using clock = std::chrono::steady_clock;
    FILE* logits_file = cfg.logits_out.empty() ? nullptr : fopen_or_fail(cfg.logits_out.c_str(), "wb");
    uint64_t rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)cfg.seed;  // as the trainer seeds its samples
    std::vector<int> seq = pr.ids, out;
    const int P = (int)seq.size();
    if (!cfg.print_ids && pr.tok.ok) {
        // the prompt as text, without the EOT that starts it
        for (int i = 0; i < P; i++)
            if (!(i == 0 && seq[0] == pr.eot)) generate_print_token(cfg, pr, seq[i], false);
    }
    const char* why = "-g tokens";
    auto t0 = clock::now();
    const float* logits = be.logits(seq.data(), P, P);  // the prompt at once
    auto t1 = clock::now();
    while (true) {
        if ((int)out.size() >= cfg.max_new) break;
        if ((int)seq.size() >= maxT) { why = "maxT"; break; }
        if (logits_file != nullptr) fwrite_or_fail(logits, sizeof(float), V, logits_file, cfg.logits_out.c_str());
        int next = sample_logits(logits, V, cfg.temperature, cfg.top_k, rng_next_f32(&rng), cfg.top_p);
        generate_print_token(cfg, pr, next, out.empty() && (cfg.print_ids || !pr.tok.ok));
        out.push_back(next);
        seq.push_back(next);
        if (cfg.stop_eot && next == pr.eot) { why = "EOT"; break; }
        if ((int)out.size() < cfg.max_new && (int)seq.size() < maxT) logits = be.logits(seq.data(), (int)seq.size(), 1);
    }
    auto t2 = clock::now();
    printf("\n");
    fflush(stdout);
    if (logits_file != nullptr) fclose_or_fail(logits_file, cfg.logits_out.c_str());
    double prefill = std::chrono::duration<double>(t1 - t0).count();
    double decode = std::chrono::duration<double>(t2 - t1).count();
    int steps = out.empty() ? 0 : (int)out.size() - 1;  // forwards after the prompt's
    fprintf(stderr, "generated %zu tokens (stopped at %s): prompt %d tokens in %.3f s, %d steps in %.3f s (%.1f tok/s)\n",
            out.size(), why, P, prefill, steps, decode, decode > 0 ? steps / decode : 0.0);
    return out;
}
