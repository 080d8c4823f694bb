// export_hf: a model checkpoint -> a Hugging Face directory (model.safetensors + config.json)
// that transformers loads: GPT2LMHeadModel for GPT-2, LlamaForCausalLM for Llama 3.
//
//   ./export_hf model.bin out_dir [--dtype float32|bfloat16]
//
// Tensors are written F32 (default, exact) or BF16 (round to nearest even), named and laid
// out as transformers' own files, without the padded vocabulary rows.
// GPT-2: "transformer.wte.weight" (V, C), Conv1D weights transposed to (in, out). The LM head
// is tied to wte, so, as in HF's own GPT-2 files, there is no lm_head.weight: transformers
// ties it on load.
// Llama 3: llmc/hf_llama.h's names; q/k/v and gate/up split out of our concatenated rows; an
// untied lm_head.weight.
#include <sys/stat.h>
#include <string>
#include <vector>

#include "llmc/utils.h"        // defines: fail
#include "llmc/gpt2.h"         // defines: GPT2, GPT2Config, ParamTensor
#include "llmc/checkpoint.h"   // defines: model_load_checkpoint, AtomicFile
#include "llmc/safetensors.h"  // defines: safetensors_header, float_to_bf16, hf_gpt2_names
#include "llmc/hf_llama.h"     // defines: hf_llama_pieces, hf_llama_config_json

static void usage() {
    fprintf(stderr,
            "usage: ./export_hf <checkpoint.bin> <out_dir> [--dtype float32|bfloat16]\n"
            "  writes out_dir/model.safetensors and out_dir/config.json (GPT2LMHeadModel or LlamaForCausalLM)\n");
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

    ModelBase* model = model_load_checkpoint(in_path);  // validates header, size, finiteness; bf16 widened
    if (mkdir(out_dir.c_str(), 0755) != 0 && errno != EEXIST)
        fail("%s: cannot create directory (%s)", out_dir.c_str(), strerror(errno));
    struct stat sb;
    if (stat(out_dir.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode)) fail("%s: not a directory", out_dir.c_str());

    // the tensor list in file order: each one's name, HF shape, and where its values are
    // (transposed: ours (rows, cols) is written as (cols, rows))
    const char* dtype = bf16 ? "BF16" : "F32";
    struct Item { const float* src; bool transposed; size_t rows, cols; };
    std::vector<Item> items;
    std::vector<SafeTensorSpec> specs;
    std::string json;
    if (model->family == FAMILY_LLAMA3) {
        const Llama* m = static_cast<const Llama*>(model);
        for (const HfPiece& p : hf_llama_pieces(m->config, m->tensors)) {
            items.push_back({m->params + p.offset, false, 0, 0});
            specs.push_back({p.name, dtype, p.shape});
        }
        json = hf_llama_config_json(m->config, bf16 ? "bfloat16" : "float32");
    } else {
        const GPT2* m = static_cast<const GPT2*>(model);
        const GPT2Config& c = m->config;
        const HfName* hf = hf_gpt2_names();
        auto add = [&](int i, int layer) {
            const ParamTensor& t = m->tensors[i];
            size_t layer_numel = hf[i].per_layer ? t.numel / c.num_layers : t.numel;
            items.push_back({m->params + t.offset + (size_t)layer * layer_numel, hf[i].transposed, t.shape[1], t.shape[2]});
            specs.push_back({hf_tensor_name("transformer.", hf[i], layer), dtype, hf_tensor_shape(t, hf[i], c.vocab_size)});
        };
        add(0, 0); add(1, 0);  // wte, wpe, each layer's twelve, ln_f
        for (int l = 0; l < c.num_layers; l++)
            for (int i = 2; i < 14; i++) add(i, l);
        add(14, 0); add(15, 0);
        json = config_json(c, bf16 ? "bfloat16" : "float32");
    }

    AtomicFile st((out_dir + "/model.safetensors").c_str());
    std::string header = safetensors_header(specs, {{"format", "pt"}});
    st.write(header.data(), header.size());
    std::vector<float> buf;
    std::vector<uint16_t> half;
    size_t total = 0;
    for (size_t k = 0; k < items.size(); k++) {
        size_t n = 1;
        for (uint64_t s : specs[k].shape) n *= s;
        const Item& it = items[k];
        buf.resize(n);
        if (it.transposed) {  // ours (out, in) -> HF Conv1D (in, out)
            for (size_t r = 0; r < it.rows; r++)
                for (size_t col = 0; col < it.cols; col++) buf[col * it.rows + r] = it.src[r * it.cols + col];
        } else {
            memcpy(buf.data(), it.src, n * sizeof(float));  // wte, lm_head: the first V rows only
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
    cfg.write(json.data(), json.size());
    cfg.commit();
    fsync_dir(out_dir);
    printf("wrote %s/model.safetensors (%zu tensors, %zu parameters, %s%s) and config.json: %s\n", out_dir.c_str(),
           items.size(), total, dtype, model->family == FAMILY_GPT2 ? "; lm_head tied to wte" : "",
           model_describe(model).c_str());
    model_delete(model);
    return 0;
}
