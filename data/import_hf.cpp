// import_hf: a Hugging Face GPT-2 model.safetensors -> an llm.c fp32 model checkpoint
// (version 3) that the trainers start from (-e out.bin), e.g. to fine-tune GPT-2 124M..1.5B.
//
//   ./import_hf model.safetensors out.bin [--config config.json]
//
// Reads F32, F16 or BF16 tensors, named with or without the "transformer." prefix (OpenAI's
// released gpt2 repos have none, and also carry h.{i}.attn.bias mask buffers, skipped).
// L, C, V and maxT come from the shapes; NH from config.json's n_head (the --config file,
// else a config.json next to the safetensors file), else C/64. Conv1D weights are transposed
// back to (out, in) and wte is padded with zero rows to Vp = V rounded up to 128.
#include <string>
#include <vector>

#include "../llmc/utils.h"        // defines: fail, file_size_or_fail
#include "../llmc/gpt2.h"         // defines: GPT2, GPT2Config, gpt2_init, gpt2_config_problem
#include "../llmc/checkpoint.h"   // defines: gpt2_write_checkpoint
#include "../llmc/safetensors.h"  // defines: safetensors_open, safetensors_read_f32, json_parse, hf_gpt2_names

static void usage() {
    fprintf(stderr,
            "usage: ./import_hf <model.safetensors> <out_checkpoint.bin> [--config config.json]\n"
            "  writes an llm.c fp32 checkpoint (version 3) from a Hugging Face GPT-2 safetensors file\n");
    exit(EXIT_FAILURE);
}

static std::string shape_str(const std::vector<uint64_t>& s) {
    std::string out = "(";
    for (size_t i = 0; i < s.size(); i++) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + ")";
}

// An integer field of config.json, or -1 when absent; anything else there is an error.
static long long config_int(const JsonValue& cfg, const char* key, const char* path) {
    const JsonValue* v = json_get(cfg, key);
    uint64_t x;
    if (v == nullptr || v->kind == JsonValue::NUL) return -1;
    if (!json_uint(*v, &x) || x > (1u << 30)) fail("%s: \"%s\" is not a non-negative integer", path, key);
    return (long long)x;
}

int main(int argc, char** argv) {
    if (argc != 3 && argc != 5) usage();
    const char* st_path = argv[1];
    std::string out_path = argv[2];
    std::string cfg_path;
    if (argc == 5) {
        if (strcmp(argv[3], "--config") != 0) usage();
        cfg_path = argv[4];
    } else {
        std::string dir = st_path;
        size_t slash = dir.find_last_of('/');
        std::string guess = (slash == std::string::npos ? std::string(".") : dir.substr(0, slash)) + "/config.json";
        struct stat sb;
        if (stat(guess.c_str(), &sb) == 0 && S_ISREG(sb.st_mode)) cfg_path = guess;
    }

    SafeTensorsFile st = safetensors_open(st_path);  // every header number checked here

    // naming: transformers' "transformer.wte.weight" or the released repos' "wte.weight"
    std::string prefix;
    if (safetensors_find(st, "transformer.wte.weight")) prefix = "transformer.";
    else if (!safetensors_find(st, "wte.weight")) fail("%s: no transformer.wte.weight or wte.weight: not a GPT-2 model", st_path);
    const SafeTensor* wte = safetensors_find(st, prefix + "wte.weight");
    const SafeTensor* wpe = safetensors_find(st, prefix + "wpe.weight");
    if (wte->shape.size() != 2) fail("%s: %s has shape %s, expected (V, C)", st_path, wte->name.c_str(), shape_str(wte->shape).c_str());
    if (wpe == nullptr) fail("%s: missing tensor %swpe.weight", st_path, prefix.c_str());
    if (wpe->shape.size() != 2) fail("%s: %s has shape %s, expected (maxT, C)", st_path, wpe->name.c_str(), shape_str(wpe->shape).c_str());
    int L = 0;
    while (safetensors_find(st, prefix + "h." + std::to_string(L) + ".ln_1.weight")) L++;

    GPT2Config c;
    c.vocab_size = (int)std::min<uint64_t>(wte->shape[0], 1u << 30);
    c.channels = (int)std::min<uint64_t>(wte->shape[1], 1u << 30);
    c.max_seq_len = (int)std::min<uint64_t>(wpe->shape[0], 1u << 30);
    c.num_layers = L;
    c.padded_vocab_size = round_up_128(c.vocab_size);
    if (L == 0) fail("%s: no layers (missing tensor %sh.0.ln_1.weight)", st_path, prefix.c_str());

    c.num_heads = -1;
    if (!cfg_path.empty()) {
        size_t size = file_size_or_fail(cfg_path.c_str());
        if (size > (16u << 20)) fail("%s: too large for a config.json", cfg_path.c_str());
        std::string text(size, '\0');
        FILE* f = fopen_or_fail(cfg_path.c_str(), "rb");
        fread_or_fail(&text[0], 1, size, f, cfg_path.c_str());
        fclose(f);
        JsonValue cfg;
        std::string err = json_parse(text.data(), text.size(), &cfg);
        if (!err.empty()) fail("%s: not valid JSON: %s", cfg_path.c_str(), err.c_str());
        if (cfg.kind != JsonValue::OBJECT) fail("%s: not a JSON object", cfg_path.c_str());
        long long nh = config_int(cfg, "n_head", cfg_path.c_str());
        if (nh <= 0) fail("%s: no positive \"n_head\"", cfg_path.c_str());
        c.num_heads = (int)nh;
        // the config must describe these tensors
        struct { const char* key; int have; } checks[] = {
            {"n_embd", c.channels}, {"n_layer", c.num_layers}, {"vocab_size", c.vocab_size}, {"n_positions", c.max_seq_len}};
        for (auto& k : checks) {
            long long v = config_int(cfg, k.key, cfg_path.c_str());
            if (v >= 0 && v != k.have)
                fail("%s: \"%s\" is %lld but %s holds %d", cfg_path.c_str(), k.key, v, st_path, k.have);
        }
        const JsonValue* act = json_get(cfg, "activation_function");
        if (act && act->kind == JsonValue::STRING && act->str != "gelu_new" && act->str != "gelu_pytorch_tanh")
            fprintf(stderr, "warning: %s: activation_function \"%s\"; llm.c's GPT-2 uses the tanh GELU (gelu_new)\n",
                    cfg_path.c_str(), act->str.c_str());
        const JsonValue* inner = json_get(cfg, "n_inner");
        if (inner && inner->kind != JsonValue::NUL && config_int(cfg, "n_inner", cfg_path.c_str()) != 4LL * c.channels)
            fail("%s: n_inner is not 4 * n_embd, which llm.c's GPT-2 requires", cfg_path.c_str());
    } else {
        if (c.channels % 64 != 0)
            fail("%s: no config.json to give n_head, and C=%d is not a multiple of 64 (pass --config)", st_path, c.channels);
        c.num_heads = c.channels / 64;
    }
    const char* problem = gpt2_config_problem(c);
    if (problem != nullptr) fail("%s: inferred config L=%d C=%d NH=%d V=%d maxT=%d: %s", st_path, c.num_layers, c.channels,
                                 c.num_heads, c.vocab_size, c.max_seq_len, problem);

    // every expected tensor present with its shape, and nothing we do not understand
    ParamTensor table[NUM_PARAM_TENSORS];  // shapes only: nothing is allocated before they check out
    gpt2_param_table(c, table);
    const HfName* hf = hf_gpt2_names();
    std::vector<std::string> expected;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        std::vector<uint64_t> want = hf_tensor_shape(table[i], hf[i], c.vocab_size);
        for (int l = 0; l < (hf[i].per_layer ? L : 1); l++) {
            std::string name = hf_tensor_name(prefix, hf[i], l);
            const SafeTensor* t = safetensors_find(st, name);
            if (t == nullptr) fail("%s: missing tensor %s", st_path, name.c_str());
            if (t->shape != want)
                fail("%s: tensor %s has shape %s, expected %s", st_path, name.c_str(), shape_str(t->shape).c_str(), shape_str(want).c_str());
            if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16)
                fail("%s: tensor %s has dtype %s; expected F32, F16 or BF16", st_path, name.c_str(), t->dtype_name.c_str());
            expected.push_back(name);
        }
    }
    const SafeTensor* lm_head = nullptr;
    for (auto& t : st.tensors) {
        if (std::find(expected.begin(), expected.end(), t.name) != expected.end()) continue;
        const std::string& n = t.name;
        bool mask = n.size() > 10 && (n.compare(n.size() - 10, 10, ".attn.bias") == 0 ||
                                      (n.size() > 17 && n.compare(n.size() - 17, 17, ".attn.masked_bias") == 0));
        if (mask) continue;  // causal-mask buffers, not weights
        if (n == "lm_head.weight" && t.shape == wte->shape) { lm_head = &t; continue; }
        fail("%s: unexpected tensor %s %s (not part of GPT-2)", st_path, n.c_str(), shape_str(t.shape).c_str());
    }

    // every tensor is in the file with its shape: the model takes no more memory than the file
    // (config sizes alone, from a few bytes of header, could ask for gigabytes)
    GPT2 model;
    gpt2_init(&model, c);  // zeroed: the padded wte rows stay 0

    // read, transposing Conv1D weights back to (out, in)
    std::vector<float> buf;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        const ParamTensor& p = model.tensors[i];
        size_t layer_numel = hf[i].per_layer ? p.numel / L : p.numel;
        for (int l = 0; l < (hf[i].per_layer ? L : 1); l++) {
            const SafeTensor* t = safetensors_find(st, hf_tensor_name(prefix, hf[i], l));
            float* dst = model.params + p.offset + (size_t)l * layer_numel;
            if (!hf[i].transposed) { safetensors_read_f32(st, *t, dst); continue; }
            buf.resize(t->numel());
            safetensors_read_f32(st, *t, buf.data());
            size_t rows = p.shape[1], cols = p.shape[2];  // ours (rows=out, cols=in)
            for (size_t r = 0; r < rows; r++)
                for (size_t col = 0; col < cols; col++) dst[r * cols + col] = buf[col * rows + r];
        }
    }
    for (size_t i = 0; i < model.num_parameters; i++) {
        if (!std::isfinite(model.params[i])) {
            const ParamTensor* t = model.tensors;
            while (t + 1 < model.tensors + NUM_PARAM_TENSORS && t[1].offset <= i) t++;
            fail("%s: non-finite value in %s (llm.c tensor %s, index %zu)", st_path, hf[t - model.tensors].name, t->name, i - t->offset);
        }
    }
    if (lm_head != nullptr) {  // llm.c ties the head to wte: accept only a copy of it
        std::vector<float> head(lm_head->numel());
        safetensors_read_f32(st, *lm_head, head.data());
        if (memcmp(head.data(), model.params, head.size() * sizeof(float)) != 0)
            fail("%s: lm_head.weight differs from wte.weight; llm.c's GPT-2 needs a tied head", st_path);
    }
    gpt2_write_checkpoint(&model, out_path);
    printf("wrote %s: L=%d C=%d NH=%d%s V=%d Vp=%d maxT=%d, %zu parameters, from %s (%s)\n", out_path.c_str(),
           c.num_layers, c.channels, c.num_heads, cfg_path.empty() ? " (C/64)" : "", c.vocab_size, c.padded_vocab_size,
           c.max_seq_len, model.num_parameters, st_path, wte->dtype_name.c_str());
    return 0;
}
