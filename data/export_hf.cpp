// export_hf: an llm.c model checkpoint -> a Hugging Face GPT-2 directory that
// transformers' GPT2LMHeadModel.from_pretrained(dir) loads (model.safetensors + config.json).
//
//   ./export_hf model.bin out_dir [--dtype float32|bfloat16]
//
// Tensors are written F32 (default, exact) or BF16 (round to nearest even), named and laid
// out as transformers' own GPT-2: "transformer.wte.weight" (V, C) without the padded rows,
// Conv1D weights transposed to (in, out). The LM head is tied to wte, so, as in HF's own
// GPT-2 files, there is no lm_head.weight: transformers ties it on load.
#include <sys/stat.h>
#include <string>
#include <vector>

#include "../llmc/utils.h"        // defines: fail
#include "../llmc/gpt2.h"         // defines: GPT2, GPT2Config, ParamTensor
#include "../llmc/checkpoint.h"   // defines: gpt2_load_checkpoint, AtomicFile
#include "../llmc/safetensors.h"  // defines: safetensors_header, float_to_bf16, hf_gpt2_names

static void usage() {
    fprintf(stderr,
            "usage: ./export_hf <checkpoint.bin> <out_dir> [--dtype float32|bfloat16]\n"
            "  writes out_dir/model.safetensors and out_dir/config.json (GPT2LMHeadModel)\n");
    exit(EXIT_FAILURE);
}

static std::string config_json(const GPT2Config& c, const char* torch_dtype) {
    bool gpt2_vocab = c.vocab_size == 50257;  // GPT-2's tokenizer: <|endoftext|> is 50256
    char buf[2048];
    snprintf(buf, sizeof(buf),
             "{\n"
             "  \"architectures\": [\"GPT2LMHeadModel\"],\n"
             "  \"model_type\": \"gpt2\",\n"
             "  \"vocab_size\": %d,\n"
             "  \"n_positions\": %d,\n"
             "  \"n_ctx\": %d,\n"
             "  \"n_embd\": %d,\n"
             "  \"n_layer\": %d,\n"
             "  \"n_head\": %d,\n"
             "  \"n_inner\": null,\n"
             "  \"activation_function\": \"gelu_new\",\n"
             "  \"layer_norm_epsilon\": 1e-05,\n"
             "  \"initializer_range\": 0.02,\n"
             "  \"attn_pdrop\": 0.0,\n"
             "  \"embd_pdrop\": 0.0,\n"
             "  \"resid_pdrop\": 0.0,\n"
             "  \"scale_attn_weights\": true,\n"
             "  \"use_cache\": true,\n"
             "  \"tie_word_embeddings\": true,\n"
             "%s"
             "  \"torch_dtype\": \"%s\"\n"
             "}\n",
             c.vocab_size, c.max_seq_len, c.max_seq_len, c.channels, c.num_layers, c.num_heads,
             gpt2_vocab ? "  \"bos_token_id\": 50256,\n  \"eos_token_id\": 50256,\n" : "", torch_dtype);
    return buf;
}

int main(int argc, char** argv) {
    if (argc != 3 && argc != 5) usage();
    const char* in_path = argv[1];
    std::string out_dir = argv[2];
    bool bf16 = false;
    if (argc == 5) {
        if (strcmp(argv[3], "--dtype") != 0) usage();
        if (!strcmp(argv[4], "bfloat16")) bf16 = true;
        else if (strcmp(argv[4], "float32") != 0) fail("--dtype %s: expected float32 or bfloat16", argv[4]);
    }

    GPT2 model;
    gpt2_load_checkpoint(&model, in_path);  // validates header, size, finiteness; bf16 widened
    const GPT2Config& c = model.config;
    if (mkdir(out_dir.c_str(), 0755) != 0 && errno != EEXIST)
        fail("%s: cannot create directory (%s)", out_dir.c_str(), strerror(errno));
    struct stat sb;
    if (stat(out_dir.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode)) fail("%s: not a directory", out_dir.c_str());

    // the tensor list in file order: wte, wpe, each layer's twelve, ln_f
    const HfName* hf = hf_gpt2_names();
    const char* dtype = bf16 ? "BF16" : "F32";
    struct Item { int tensor, layer; };
    std::vector<Item> items;
    std::vector<SafeTensorSpec> specs;
    auto add = [&](int i, int layer) {
        items.push_back({i, layer});
        specs.push_back({hf_tensor_name("transformer.", hf[i], layer), dtype, hf_tensor_shape(model.tensors[i], hf[i], c.vocab_size)});
    };
    add(0, 0); add(1, 0);
    for (int l = 0; l < c.num_layers; l++)
        for (int i = 2; i < 14; i++) add(i, l);
    add(14, 0); add(15, 0);

    AtomicFile st((out_dir + "/model.safetensors").c_str());
    std::string header = safetensors_header(specs, {{"format", "pt"}});
    st.write(header.data(), header.size());
    std::vector<float> buf;
    std::vector<uint16_t> half;
    size_t total = 0;
    for (size_t k = 0; k < items.size(); k++) {
        const ParamTensor& t = model.tensors[items[k].tensor];
        const std::vector<uint64_t>& shape = specs[k].shape;
        size_t n = 1;
        for (uint64_t s : shape) n *= s;
        size_t layer_numel = hf[items[k].tensor].per_layer ? t.numel / c.num_layers : t.numel;
        const float* src = model.params + t.offset + (size_t)items[k].layer * layer_numel;
        buf.resize(n);
        if (hf[items[k].tensor].transposed) {  // ours (out, in) -> HF Conv1D (in, out)
            size_t rows = t.shape[1], cols = t.shape[2];
            for (size_t r = 0; r < rows; r++)
                for (size_t col = 0; col < cols; col++) buf[col * rows + r] = src[r * cols + col];
        } else {
            memcpy(buf.data(), src, n * sizeof(float));  // wte: the first V rows only
        }
        if (bf16) {
            half.resize(n);
            for (size_t i = 0; i < n; i++) half[i] = float_to_bf16(buf[i]);
            st.write(half.data(), n * 2);
        } else {
            st.write(buf.data(), n * 4);
        }
        total += n;
    }
    st.commit();

    AtomicFile cfg((out_dir + "/config.json").c_str());
    std::string json = config_json(c, bf16 ? "bfloat16" : "float32");
    cfg.write(json.data(), json.size());
    cfg.commit();
    fsync_dir(out_dir);
    printf("wrote %s/model.safetensors (%zu tensors, %zu parameters, %s; lm_head tied to wte) and config.json: "
           "L=%d C=%d NH=%d V=%d maxT=%d\n", out_dir.c_str(), items.size(), total, dtype, c.num_layers,
           c.channels, c.num_heads, c.vocab_size, c.max_seq_len);
    return 0;
}
