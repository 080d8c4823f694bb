// hf_llama.h: Llama 3 in Hugging Face's layout (transformers' LlamaForCausalLM): its tensor
// names and shapes against the rows of llmc/llama3.h's table, its config.json read (with what
// this trainer does not implement refused, one field named) and written, and a model split
// over several safetensors files (model-0000x-of-0000y.safetensors + its index).
// defines: HfPiece, hf_llama_pieces, hf_llama_config_read, float_text, hf_llama_config_json, HfWeights, hf_weights_open,
//          hf_weights_find
//
// The mapping. HF's linear weights are (out, in), as ours; RoPE in both is "rotate half" on
// the weights as HF stores them, so nothing is permuted or transposed. Ours concatenates rows:
//   wte       model.embed_tokens.weight (V, C)                    then Vp - V zero rows
//   rms1w     model.layers.{l}.input_layernorm.weight (C)
//   qkvw      model.layers.{l}.self_attn.q_proj (NH*hs, C), k_proj (NKV*hs, C), v_proj (NKV*hs, C)
//   attprojw  model.layers.{l}.self_attn.o_proj.weight (C, C)
//   rms2w     model.layers.{l}.post_attention_layernorm.weight (C)
//   fcw       model.layers.{l}.mlp.gate_proj (F, C), up_proj (F, C)
//   fcprojw   model.layers.{l}.mlp.down_proj.weight (C, F)
//   rmsfw     model.norm.weight (C)
//   lmheadw   lm_head.weight (V, C)                               then Vp - V zero rows
#pragma once
#include <string>
#include <vector>

#include "utils.h"        // defines: fail, file_size_or_fail
#include "llama3.h"       // defines: LlamaConfig, llama_config_problem, ParamTensor, LLAMA_NUM_PARAM_TENSORS
#include "safetensors.h"  // defines: JsonValue, json_parse, json_get, json_uint, json_double, SafeTensorsFile, ...

// One HF tensor: its name and shape, and where its values go in our buffer (floats from the
// start of the parameters).
struct HfPiece {
    std::string name;
    std::vector<uint64_t> shape;
    int row;        // our table's row
    size_t offset;  // where the piece starts in the parameter buffer
};

// Every HF tensor of the model, in the order transformers writes them.
inline std::vector<HfPiece> hf_llama_pieces(const LlamaConfig& c, const ParamTensor table[LLAMA_NUM_PARAM_TENSORS]) {
    const uint64_t C = c.channels, V = c.vocab_size, F = c.ffn_hidden, hs = C / c.num_heads;
    const uint64_t Q = c.num_heads * hs, KV = c.num_kv_heads * hs;
    std::vector<HfPiece> out;
    out.push_back({"model.embed_tokens.weight", {V, C}, 0, table[0].offset});
    for (int l = 0; l < c.num_layers; l++) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        auto at = [&](int row, size_t inside) { return table[row].offset + l * (table[row].numel / c.num_layers) + inside; };
        out.push_back({p + "input_layernorm.weight", {C}, 1, at(1, 0)});
        out.push_back({p + "self_attn.q_proj.weight", {Q, C}, 2, at(2, 0)});
        out.push_back({p + "self_attn.k_proj.weight", {KV, C}, 2, at(2, Q * C)});
        out.push_back({p + "self_attn.v_proj.weight", {KV, C}, 2, at(2, (Q + KV) * C)});
        out.push_back({p + "self_attn.o_proj.weight", {C, Q}, 3, at(3, 0)});
        out.push_back({p + "post_attention_layernorm.weight", {C}, 4, at(4, 0)});
        out.push_back({p + "mlp.gate_proj.weight", {F, C}, 5, at(5, 0)});
        out.push_back({p + "mlp.up_proj.weight", {F, C}, 5, at(5, F * C)});
        out.push_back({p + "mlp.down_proj.weight", {C, F}, 6, at(6, 0)});
    }
    out.push_back({"model.norm.weight", {C}, 7, table[7].offset});
    out.push_back({"lm_head.weight", {V, C}, 8, table[8].offset});
    return out;
}

// ---------------------------------------------------------------------------------------
// config.json. Returns "" and fills *out (and *tied: tie_word_embeddings) when the model is
// one this trainer computes exactly; else the first problem, naming its field.
inline std::string hf_llama_config_read(const JsonValue& j, LlamaConfig* out, bool* tied) {
    if (j.kind != JsonValue::OBJECT) return "not a JSON object";
    auto str = [&](const char* key) -> const JsonValue* {
        const JsonValue* v = json_get(j, key);
        return v != nullptr && v->kind == JsonValue::STRING ? v : nullptr;
    };
    auto present = [&](const JsonValue* v) { return v != nullptr && v->kind != JsonValue::NUL; };
    auto truthy = [&](const char* key) {
        const JsonValue* v = json_get(j, key);
        return v != nullptr && v->kind == JsonValue::BOOL && v->b;
    };
    const JsonValue* type = str("model_type");
    if (type == nullptr) return "\"model_type\": missing (expected \"llama\")";
    if (type->str != "llama") return "\"model_type\": \"" + type->str + "\" is not supported (expected \"llama\")";
    const JsonValue* arch = json_get(j, "architectures");
    if (present(arch)) {
        if (arch->kind != JsonValue::ARRAY) return "\"architectures\": not a list";
        for (const JsonValue& a : arch->items)
            if (a.kind != JsonValue::STRING || a.str != "LlamaForCausalLM")
                return "\"architectures\": \"" + a.str + "\" is not supported (expected LlamaForCausalLM)";
    }
    // what Llama-shaped models have and this trainer does not compute
    const JsonValue* act = json_get(j, "hidden_act");
    if (present(act) && (act->kind != JsonValue::STRING || act->str != "silu"))
        return "\"hidden_act\": \"" + act->str + "\" is not supported (the SwiGLU MLP uses silu)";
    for (const char* key : {"attention_bias", "mlp_bias", "use_sliding_window"})
        if (truthy(key)) return std::string("\"") + key + "\": true is not supported (no biases, full attention)";
    for (const char* key : {"sliding_window", "num_local_experts", "num_experts", "num_experts_per_tok",
                            "n_routed_experts", "moe_intermediate_size", "quantization_config"}) {
        const JsonValue* v = json_get(j, key);
        if (present(v) && !(v->kind == JsonValue::NUMBER && v->str == "0"))
            return std::string("\"") + key + "\": not supported (" +
                   (strstr(key, "expert") || strstr(key, "moe") ? "a mixture of experts" :
                    !strcmp(key, "sliding_window") ? "sliding-window attention" : "a quantized model") + ")";
    }
    double dropout = 0.0;
    const JsonValue* drop = json_get(j, "attention_dropout");
    if (present(drop) && (!json_double(*drop, &dropout) || dropout != 0.0))
        return "\"attention_dropout\": " + drop->str + " is not supported (training here has no dropout)";
    const JsonValue* tp = json_get(j, "pretraining_tp");
    uint64_t tpv = 1;
    if (present(tp) && (!json_uint(*tp, &tpv) || tpv > 1 << 20)) return "\"pretraining_tp\": not a small integer";

    // the shape
    auto integer = [&](const char* key, long long fallback, long long* v) -> std::string {
        const JsonValue* x = json_get(j, key);
        uint64_t u;
        if (!present(x)) {
            if (fallback < 0) return std::string("\"") + key + "\": missing";
            *v = fallback;
            return "";
        }
        if (!json_uint(*x, &u) || u == 0 || u > (1u << 30)) return std::string("\"") + key + "\": not a positive integer";
        *v = (long long)u;
        return "";
    };
    auto number = [&](const JsonValue& o, const char* key, double fallback, double* v) -> std::string {
        const JsonValue* x = json_get(o, key);
        if (!present(x)) {
            if (fallback < 0) return std::string("\"") + key + "\": missing";
            *v = fallback;
            return "";
        }
        if (!json_double(*x, v)) return std::string("\"") + key + "\": not a number";
        return "";
    };
    long long C, F, L, NH, NKV, V, maxT, hd;
    std::string e;
    if (!(e = integer("hidden_size", -1, &C)).empty() || !(e = integer("intermediate_size", -1, &F)).empty() ||
        !(e = integer("num_hidden_layers", -1, &L)).empty() || !(e = integer("num_attention_heads", -1, &NH)).empty() ||
        !(e = integer("num_key_value_heads", NH, &NKV)).empty() || !(e = integer("vocab_size", -1, &V)).empty() ||
        !(e = integer("max_position_embeddings", -1, &maxT)).empty())
        return e;
    if (C % NH != 0) return "\"num_attention_heads\": does not divide hidden_size";
    if (!(e = integer("head_dim", C / NH, &hd)).empty()) return e;
    if (hd != C / NH) return "\"head_dim\": " + std::to_string(hd) + " is not hidden_size / num_attention_heads (not supported)";
    double eps, theta;
    if (!(e = number(j, "rms_norm_eps", -1, &eps)).empty() || !(e = number(j, "rope_theta", 10000.0, &theta)).empty())
        return e;
    LlamaConfig c = {(int)maxT, (int)V, round_up_128((int)V), (int)L, (int)NH, (int)NKV, (int)C, (int)F,
                     (float)eps, (float)theta, {}};
    const JsonValue* rs = json_get(j, "rope_scaling");
    if (present(rs)) {
        if (rs->kind != JsonValue::OBJECT) return "\"rope_scaling\": not an object";
        const JsonValue* rt = json_get(*rs, "rope_type");
        if (rt == nullptr) rt = json_get(*rs, "type");
        if (rt == nullptr || rt->kind != JsonValue::STRING) return "\"rope_scaling.rope_type\": missing";
        if (rt->str != "llama3")
            return "\"rope_scaling.rope_type\": \"" + rt->str + "\" is not implemented (only \"llama3\")";
        double factor, low, high, orig;
        if (!(e = number(*rs, "factor", -1, &factor)).empty() || !(e = number(*rs, "low_freq_factor", -1, &low)).empty() ||
            !(e = number(*rs, "high_freq_factor", -1, &high)).empty() ||
            !(e = number(*rs, "original_max_position_embeddings", -1, &orig)).empty())
            return "rope_scaling: " + e;
        c.rope_scaling = {(float)factor, (float)low, (float)high, (float)orig};
    }
    const char* problem = llama_config_problem(c);
    if (problem != nullptr) return std::string("the configuration: ") + problem;
    *out = c;
    *tied = truthy("tie_word_embeddings");
    return "";
}

// The shortest decimal that reads back as f (float32): config.json says 1e-05, not 9.99999975e-06.
inline std::string float_text(float f) {
    char buf[32];
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(buf, sizeof(buf), "%.*g", digits, f);
        if (strtof(buf, nullptr) == f) break;
    }
    return buf;
}

// config.json for transformers' LlamaForCausalLM (untied head, no biases).
inline std::string hf_llama_config_json(const LlamaConfig& c, const char* torch_dtype) {
    char scaling[512] = "null";
    if (c.rope_scaling.factor != 0.0f)
        snprintf(scaling, sizeof(scaling),
                 "{\"rope_type\": \"llama3\", \"factor\": %s, \"low_freq_factor\": %s, \"high_freq_factor\": %s, "
                 "\"original_max_position_embeddings\": %d}",
                 float_text(c.rope_scaling.factor).c_str(), float_text(c.rope_scaling.low_freq_factor).c_str(),
                 float_text(c.rope_scaling.high_freq_factor).c_str(), (int)c.rope_scaling.original_max_pos);
    char buf[2048];
    snprintf(buf, sizeof(buf),
             "{\n"
             "  \"architectures\": [\"LlamaForCausalLM\"],\n"
             "  \"model_type\": \"llama\",\n"
             "  \"vocab_size\": %d,\n"
             "  \"hidden_size\": %d,\n"
             "  \"intermediate_size\": %d,\n"
             "  \"num_hidden_layers\": %d,\n"
             "  \"num_attention_heads\": %d,\n"
             "  \"num_key_value_heads\": %d,\n"
             "  \"head_dim\": %d,\n"
             "  \"max_position_embeddings\": %d,\n"
             "  \"rms_norm_eps\": %s,\n"
             "  \"rope_theta\": %s,\n"
             "  \"rope_scaling\": %s,\n"
             "  \"hidden_act\": \"silu\",\n"
             "  \"attention_bias\": false,\n"
             "  \"attention_dropout\": 0.0,\n"
             "  \"mlp_bias\": false,\n"
             "  \"tie_word_embeddings\": false,\n"
             "  \"initializer_range\": 0.02,\n"
             "  \"use_cache\": true,\n"
             "  \"torch_dtype\": \"%s\"\n"
             "}\n",
             c.vocab_size, c.channels, c.ffn_hidden, c.num_layers, c.num_heads, c.num_kv_heads, c.channels / c.num_heads,
             c.max_seq_len, float_text(c.norm_eps).c_str(), float_text(c.rope_theta).c_str(), scaling, torch_dtype);
    return buf;
}

// ---------------------------------------------------------------------------------------
// The weights of a model in one safetensors file or in shards listed by an index
// (model.safetensors.index.json: {"weight_map": {tensor name: shard file name}}).
struct HfWeights {
    std::vector<SafeTensorsFile> files;
    std::map<std::string, std::pair<int, size_t>> where;  // tensor name -> (file, index in its tensors)
};

// The directory part of path ("." when none).
inline std::string path_dir(const std::string& path) {
    size_t slash = path.find_last_of('/');
    return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

inline std::string read_text_file(const std::string& path, size_t limit) {
    size_t size = file_size_or_fail(path.c_str());
    if (size > limit) fail("%s: %zu bytes, too large for what it should hold", path.c_str(), size);
    std::string text(size, '\0');
    FILE* f = fopen_or_fail(path.c_str(), "rb");
    if (size > 0) fread_or_fail(&text[0], 1, size, f, path.c_str());
    fclose(f);
    return text;
}

// Opens path: a .safetensors file, or an index .json naming the shards (beside it). A shard
// named model-0000x-of-0000y.safetensors with an index beside it opens the whole set. Every
// shard is validated (llmc/safetensors.h); a name listed twice, in no file or in another file
// than the index says is an error naming the file.
inline HfWeights hf_weights_open(const std::string& path) {
    HfWeights w;
    std::string index_path;
    const std::string base = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
    if (base.size() > 5 && base.compare(base.size() - 5, 5, ".json") == 0) {
        index_path = path;
    } else if (base.compare(0, 6, "model-") == 0 && base.find("-of-") != std::string::npos) {
        std::string guess = path_dir(path) + "/model.safetensors.index.json";
        if (access(guess.c_str(), F_OK) == 0) index_path = guess;
    }
    if (index_path.empty()) {
        w.files.push_back(safetensors_open(path.c_str()));
    } else {
        JsonValue index;
        std::string text = read_text_file(index_path, 64u << 20);
        std::string err = json_parse(text.data(), text.size(), &index);
        if (!err.empty()) fail("%s: not valid JSON: %s", index_path.c_str(), err.c_str());
        const JsonValue* map = json_get(index, "weight_map");
        if (map == nullptr || map->kind != JsonValue::OBJECT || map->members.empty())
            fail("%s: no \"weight_map\" object: not a safetensors index", index_path.c_str());
        std::vector<std::string> shard_names;
        for (const auto& m : map->members) {
            if (m.second.kind != JsonValue::STRING || m.second.str.empty() || m.second.str.find('/') != std::string::npos)
                fail("%s: weight_map[\"%s\"] is not a file name", index_path.c_str(), m.first.c_str());
            if (std::find(shard_names.begin(), shard_names.end(), m.second.str) == shard_names.end())
                shard_names.push_back(m.second.str);
        }
        for (const std::string& name : shard_names) w.files.push_back(safetensors_open((path_dir(index_path) + "/" + name).c_str()));
        for (const auto& m : map->members) {
            int file = (int)(std::find(shard_names.begin(), shard_names.end(), m.second.str) - shard_names.begin());
            if (safetensors_find(w.files[file], m.first) == nullptr)
                fail("%s: %s says tensor %s is in it, but it is not", w.files[file].path.c_str(), index_path.c_str(),
                     m.first.c_str());
        }
    }
    for (int f = 0; f < (int)w.files.size(); f++)
        for (size_t i = 0; i < w.files[f].tensors.size(); i++) {
            const std::string& name = w.files[f].tensors[i].name;
            if (w.where.count(name)) fail("%s: tensor %s is also in %s", w.files[f].path.c_str(), name.c_str(),
                                          w.files[w.where[name].first].path.c_str());
            w.where[name] = {f, i};
        }
    return w;
}

// The tensor and its file, or nullptr.
inline const SafeTensor* hf_weights_find(const HfWeights& w, const std::string& name, const SafeTensorsFile** file) {
    auto it = w.where.find(name);
    if (it == w.where.end()) return nullptr;
    *file = &w.files[it->second.first];
    return &w.files[it->second.first].tensors[it->second.second];
}
