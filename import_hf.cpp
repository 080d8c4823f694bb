// import_hf: a Hugging Face model -> an fp32 model checkpoint (version 3) that the trainers
// start from (-e out.bin): GPT-2 (GPT2LMHeadModel, llm.c's file) or Llama 3
// (LlamaForCausalLM, gptrain's Llama file: llmc/checkpoint.h).
//
//   ./import_hf model.safetensors out.bin [--config config.json]
//   ./import_hf model.safetensors.index.json out.bin        (a sharded model; or any of its shards)
//
// Reads F32, F16 or BF16 tensors. config.json is the --config file, else the one next to the
// weights; its model_type picks the family ("llama"; else GPT-2).
// GPT-2: tensors named with or without the "transformer." prefix (OpenAI's released gpt2 repos
// have none, and also carry h.{i}.attn.bias mask buffers, skipped). L, C, V and maxT come from
// the shapes; NH from config.json's n_head, else C/64. Conv1D weights are transposed back to
// (out, in) and wte is padded with zero rows to Vp = V rounded up to 128.
// Llama 3: config.json is required (heads, eps, RoPE); what this trainer does not compute
// (biases, sliding windows, another RoPE type, experts, ...) is refused naming the field, before
// anything is written. The tensors map as llmc/hf_llama.h says; a tied head is copied into the
// untied one.
#include <string>
#include <vector>

#include "llmc/utils.h"        // defines: fail, file_size_or_fail
#include "llmc/gpt2.h"         // defines: GPT2, GPT2Config, gpt2_init, gpt2_config_problem
#include "llmc/llama3.h"       // defines: Llama, LlamaConfig, llama_init
#include "llmc/checkpoint.h"   // defines: gpt2_write_checkpoint, model_write_checkpoint
#include "llmc/safetensors.h"  // defines: safetensors_open, safetensors_read_f32, json_parse, hf_gpt2_names
#include "llmc/hf_llama.h"     // defines: hf_llama_config_read, hf_llama_pieces, hf_weights_open, read_text_file

static void usage() {
    fprintf(stderr,
            "usage: ./import_hf <model.safetensors | model.safetensors.index.json> <out_checkpoint.bin> [--config config.json]\n"
            "  writes an fp32 model checkpoint (version 3) from a Hugging Face GPT-2 (GPT2LMHeadModel) or\n"
            "  Llama 3 (LlamaForCausalLM) model; config.json defaults to the one beside the weights\n");
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

// A LlamaForCausalLM (config.json parsed as cfg) -> a Llama model file. Every check runs
// before out_path is touched.
static int import_llama(const std::string& weights_path, const std::string& out_path, const std::string& cfg_path,
                        const JsonValue& cfg) {
    LlamaConfig c;
    bool tied = false;
    std::string err = hf_llama_config_read(cfg, &c, &tied);
    if (!err.empty()) fail("%s: %s", cfg_path.c_str(), err.c_str());
    HfWeights w = hf_weights_open(weights_path);
    ParamTensor table[LLAMA_NUM_PARAM_TENSORS];  // shapes only: nothing is allocated before they check out
    llama_param_table(c, table);
    std::vector<HfPiece> pieces = hf_llama_pieces(c, table);
    std::map<std::string, bool> expected;
    bool has_head = false;
    for (const HfPiece& p : pieces) {
        const SafeTensorsFile* file = nullptr;
        const SafeTensor* t = hf_weights_find(w, p.name, &file);
        expected[p.name] = true;
        if (t == nullptr) {
            if (p.row == 8 && tied) continue;  // tie_word_embeddings: the head is embed_tokens
            fail("%s: missing tensor %s", weights_path.c_str(), p.name.c_str());
        }
        if (t->shape != p.shape)
            fail("%s: tensor %s has shape %s, expected %s (from %s)", file->path.c_str(), p.name.c_str(),
                 shape_str(t->shape).c_str(), shape_str(p.shape).c_str(), cfg_path.c_str());
        if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16)
            fail("%s: tensor %s has dtype %s; expected F32, F16 or BF16", file->path.c_str(), p.name.c_str(),
                 t->dtype_name.c_str());
        if (p.row == 8) has_head = true;
    }
    for (const auto& kv : w.where) {
        const std::string& n = kv.first;
        if (expected.count(n)) continue;
        if (n.size() > 20 && n.compare(n.size() - 20, 20, ".rotary_emb.inv_freq") == 0) continue;  // a buffer, recomputed
        fail("%s: unexpected tensor %s (not part of a LlamaForCausalLM with this config.json)",
             w.files[kv.second.first].path.c_str(), n.c_str());
    }

    Llama model;
    llama_init(&model, c);  // zeroed: the padded vocabulary rows stay 0
    for (const HfPiece& p : pieces) {
        const SafeTensorsFile* file = nullptr;
        const SafeTensor* t = hf_weights_find(w, p.name, &file);
        if (t != nullptr && (p.row != 8 || !tied || has_head)) safetensors_read_f32(*file, *t, model.params + p.offset);
    }
    const size_t VC = (size_t)c.vocab_size * c.channels;
    if (tied) memcpy(model.params + model.tensors[8].offset, model.params + model.tensors[0].offset, VC * sizeof(float));
    for (const HfPiece& p : pieces) {
        size_t n = 1;
        for (uint64_t d : p.shape) n *= d;
        for (size_t i = 0; i < n; i++)
            if (!std::isfinite(model.params[p.offset + i]))
                fail("%s: non-finite value in tensor %s at index %zu", weights_path.c_str(), p.name.c_str(), i);
    }
    model_write_checkpoint(&model, out_path);
    printf("wrote %s: Llama 3 L=%d C=%d NH=%d NKV=%d F=%d V=%d Vp=%d maxT=%d theta=%g eps=%g%s, %zu parameters, "
           "from %s (%zu file%s)%s\n",
           out_path.c_str(), c.num_layers, c.channels, c.num_heads, c.num_kv_heads, c.ffn_hidden, c.vocab_size,
           c.padded_vocab_size, c.max_seq_len, c.rope_theta, c.norm_eps,
           c.rope_scaling.factor != 0.0f ? " (RoPE scaling llama3)" : "", model.num_parameters, weights_path.c_str(),
           w.files.size(), w.files.size() == 1 ? "" : "s", tied ? "; tied head copied into lm_head (trained untied)" : "");
    llama_free(&model);
    return 0;
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
        std::string guess = path_dir(st_path) + "/config.json";
        struct stat sb;
        if (stat(guess.c_str(), &sb) == 0 && S_ISREG(sb.st_mode)) cfg_path = guess;
    }
    JsonValue cfg;
    if (!cfg_path.empty()) {
        std::string text = read_text_file(cfg_path, 16u << 20);
        std::string err = json_parse(text.data(), text.size(), &cfg);
        if (!err.empty()) fail("%s: not valid JSON: %s", cfg_path.c_str(), err.c_str());
        if (cfg.kind != JsonValue::OBJECT) fail("%s: not a JSON object", cfg_path.c_str());
        const JsonValue* type = json_get(cfg, "model_type");
        if (type != nullptr && type->kind == JsonValue::STRING && type->str == "llama")
            return import_llama(st_path, out_path, cfg_path, cfg);
        if (type != nullptr && !(type->kind == JsonValue::STRING && type->str == "gpt2"))
            fail("%s: \"model_type\": \"%s\" is not supported (expected \"gpt2\" or \"llama\")", cfg_path.c_str(),
                 type->str.c_str());
    }

    SafeTensorsFile st = safetensors_open(st_path);  // every header number checked here
    if (safetensors_find(st, "model.embed_tokens.weight"))
        fail("%s: a Llama model needs its config.json (heads, RMSNorm eps, RoPE theta): none beside it, pass --config",
             st_path);

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
