// make_seeds: the seed corpus of the fuzz targets, small valid inputs written with the
// project's own writers where it has them (gpt2_write_checkpoint, state_write,
// safetensors_header), so that fuzzing starts from files the readers accept.
//   make_seeds OUT_DIR   ->   OUT_DIR/<target>/<seed>, one directory per fuzz_<target>.cpp
#include <sys/stat.h>
#include <string>
#include <vector>

#include "../../llmc/checkpoint.h"   // defines: gpt2_write_checkpoint, state_write, TrainState
#include "../../llmc/safetensors.h"  // defines: safetensors_header, hf_gpt2_names, hf_tensor_shape, float_to_bf16
#include "../../llmc/hf_llama.h"     // defines: hf_llama_pieces, hf_llama_config_json
#include "../../llmc/side_files.h"   // defines: fp8_state_file_write, matmul_algos_file_write
#include "../../data/bpe.h"          // defines: gpt2_unicode_to_byte, utf8_append

static std::string out_dir;

static std::string read_all(const std::string& path) {
    std::string b(file_size_or_fail(path.c_str()), '\0');
    FILE* f = fopen_or_fail(path.c_str(), "rb");
    fread_or_fail(&b[0], 1, b.size(), f, path.c_str());
    fclose(f);
    return b;
}

static void put(std::string* b, const void* p, size_t n) { b->append((const char*)p, n); }
static void put_u32(std::string* b, uint32_t x) { put(b, &x, 4); }
static void put_u16(std::string* b, uint16_t x) { put(b, &x, 2); }
static std::string header256(std::vector<int32_t> words) {  // llm.c's 256 x int32 header
    words.resize(256, 0);
    return std::string((const char*)words.data(), 1024);
}
static std::string part(const std::string& b) {  // one fuzz_split part that is not the last
    std::string p;
    put_u32(&p, (uint32_t)b.size());
    return p + b;
}

static void seed(const char* target, const char* name, const std::string& bytes) {
    std::string dir = out_dir + "/" + target;
    mkdir(dir.c_str(), 0755);
    std::string path = dir + "/" + name;
    FILE* f = fopen_or_fail(path.c_str(), "wb");
    fwrite_or_fail(bytes.data(), 1, bytes.size(), f, path.c_str());
    fclose_or_fail(f, path.c_str());
}

static GPT2 tiny_model() {  // L=1 C=8 NH=2 V=10 (Vp=16) maxT=6
    GPT2Config c = {6, 10, 16, 1, 2, 8};
    GPT2 m = {};
    gpt2_init(&m, c);
    gpt2_init_random(&m, 7);
    return m;
}

static void model_seeds(const GPT2& m) {
    std::string fp32 = out_dir + "/model_fp32.tmp";
    gpt2_write_checkpoint(&m, fp32);
    std::string b = read_all(fp32);
    remove(fp32.c_str());
    seed("checkpoint", "fp32", b);
    std::string bf16 = b.substr(0, 1024);
    int32_t version = MODEL_VERSION_BF16;
    memcpy(&bf16[4], &version, 4);
    for (size_t i = 0; i < m.num_parameters; i++) put_u16(&bf16, float_to_bf16(m.params[i]));
    seed("checkpoint", "bf16", bf16);
}

// A Llama: L=1 C=8 NH=2 NKV=1 F=12 V=10 (Vp=128) maxT=6, RoPE scaled; its model file, and the
// Hugging Face directory import_hf reads (F32 tensors by transformers' names, config.json).
static void llama_seeds() {
    LlamaConfig c = {6, 10, round_up_128(10), 1, 2, 1, 8, 12, 1e-5f, 500000.0f, {8.0f, 1.0f, 4.0f, 4.0f}};
    Llama m;
    llama_init(&m, c);
    llama_init_random(&m, 7);
    std::string path = out_dir + "/llama.tmp";
    model_write_checkpoint(&m, path);
    seed("checkpoint", "llama_fp32", read_all(path));
    remove(path.c_str());
    std::vector<SafeTensorSpec> specs;
    std::string data;
    for (const HfPiece& p : hf_llama_pieces(c, m.tensors)) {
        specs.push_back({p.name, "F32", p.shape});
        size_t n = 1;
        for (uint64_t d : p.shape) n *= d;
        put(&data, m.params + p.offset, n * sizeof(float));
    }
    seed("import_hf", "llama_f32", part(safetensors_header(specs, {{"format", "pt"}}) + data) +
                                       hf_llama_config_json(c, "float32"));
    llama_free(&m);
}

// A tiktoken file: every byte, then a few merged tokens, ranks in order; and a text.
static void tiktoken_seeds() {
    static const char* b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    auto encode = [](const std::string& bytes) {
        std::string out;
        for (size_t i = 0; i < bytes.size(); i += 3) {
            uint32_t w = (uint8_t)bytes[i] << 16;
            if (i + 1 < bytes.size()) w |= (uint8_t)bytes[i + 1] << 8;
            if (i + 2 < bytes.size()) w |= (uint8_t)bytes[i + 2];
            for (int k = 0; k < 4; k++)
                out += k <= (int)(bytes.size() - i) ? b64[(w >> (18 - 6 * k)) & 63] : '=';
        }
        return out;
    };
    std::string ranks;
    int rank = 0;
    for (int c = 0; c < 256; c++) ranks += encode(std::string(1, (char)c)) + " " + std::to_string(rank++) + "\n";
    for (const char* t : {"th", "the", " the", "ab", "12"}) ranks += encode(t) + " " + std::to_string(rank++) + "\n";
    seed("tiktoken", "tiny", part(ranks) + "the cat ate the abba's \xe2\x82\xac 1234 \xff\r\n\n  THE'S");
}

static void state_seeds(size_t n) {
    std::vector<float> m(n, 0.25f), v(n, 0.5f), master(n, 1.0f);
    TrainState s = {1, 0, 1, n, 0, 1, 2, 42, 1, 2, 4, 16, 99};
    s.step_guard = {1.0, 2.0, 3.0};
    std::string path = out_dir + "/state.tmp";
    state_write(path, s, m.data(), v.data(), master.data());
    seed("state", "one_rank", "\x01" + part(read_all(path)));
    // two ranks at step 1 (the step the target looks for), each with its slice
    std::string files[2];
    for (int k = 0; k < 2; k++) {
        TrainState sk = s;
        sk.step = 1; sk.rank = k; sk.world = 2; sk.zero_stage = 1;
        sk.range_begin = k == 0 ? 0 : n / 2;
        sk.range_count = k == 0 ? n / 2 : n - n / 2;
        state_write(path, sk, m.data(), v.data());
        files[k] = read_all(path);
    }
    remove(path.c_str());
    seed("state", "two_ranks", "\x01" + part(files[0]) + files[1]);
    seed("state", "two_ranks_raw", std::string(1, '\0') + part(files[0]) + files[1]);
}

static std::string shard(const std::vector<uint16_t>& tokens) {
    std::string b = header256({20240520, 1, (int32_t)tokens.size()});
    for (uint16_t t : tokens) put_u16(&b, t);
    return b;
}

static void dataloader_seeds() {
    std::vector<uint16_t> a, b;
    for (int i = 0; i < 60; i++) a.push_back((uint16_t)(i * 7 % 40));
    for (int i = 0; i < 33; i++) b.push_back((uint16_t)(i * 3 % 40));
    seed("dataloader", "one_shard", std::string("\x05\x0a") + part(shard(a)));
    seed("dataloader", "two_shards", std::string("\xa1\x0a") + part(shard(a)) + shard(b));
}

static void tokenizer_seeds() {
    const char* pieces[] = {"a", "b", "ab", " the", "\n", "<|endoftext|>"};
    std::string b = header256({20240328, 2, 6, 5});
    for (const char* p : pieces) {
        b += (char)strlen(p);
        b += p;
    }
    seed("tokenizer", "v2", b);
}

static void evalset_seeds() {
    // example e: context {1, 2, 3}, completions {4} and {5, 6}, label 1
    std::string b = header256({20240522, 1, 2, 28});
    for (int e = 0; e < 2; e++) {
        std::vector<uint16_t> w = {65535, 0, (uint16_t)e, 1, 2, 3, 1, 2, 3, 1, 4, 2, 5, 6};
        w[1] = (uint16_t)(2 * w.size());
        for (uint16_t x : w) put_u16(&b, x);
    }
    seed("evalset", "two_examples", std::string(1, (char)31) + b);
}

// A GPT-2 in Hugging Face's layout (transformers' names, Conv1D weights (in, out), V rows of
// wte), F32 or BF16, from model m.
static std::string hf_file(const GPT2& m, const char* dtype) {
    const HfName* hf = hf_gpt2_names();
    std::vector<SafeTensorSpec> specs;
    std::string data;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        const ParamTensor& t = m.tensors[i];
        int layers = hf[i].per_layer ? m.config.num_layers : 1;
        for (int l = 0; l < layers; l++) {
            std::vector<uint64_t> shape = hf_tensor_shape(t, hf[i], m.config.vocab_size);
            specs.push_back({hf_tensor_name("transformer.", hf[i], l), dtype, shape});
            size_t numel = 1;
            for (uint64_t d : shape) numel *= d;
            const float* src = m.params + t.offset + (size_t)l * (t.numel / layers);
            for (size_t j = 0; j < numel; j++) {
                float x = src[j];  // values only: a transposed weight is another valid weight
                if (!strcmp(dtype, "F32")) put(&data, &x, 4);
                else put_u16(&data, float_to_bf16(x));
            }
        }
    }
    return safetensors_header(specs, {{"format", "pt"}}) + data;
}

static void safetensors_seeds(const GPT2& m) {
    seed("safetensors", "gpt2_f32", hf_file(m, "F32"));
    std::vector<SafeTensorSpec> specs = {{"a", "F32", {2, 3}}, {"b", "BF16", {4}}, {"c", "F16", {1, 2}}};
    std::string mixed = safetensors_header(specs, {});
    for (int i = 0; i < 6; i++) put_u32(&mixed, 0x3f800000u + i);
    for (int i = 0; i < 6; i++) put_u16(&mixed, (uint16_t)(0x3c00 + i));
    seed("safetensors", "mixed", mixed);
    std::string config = "{\"n_head\": 2, \"n_embd\": 8, \"n_layer\": 1, \"vocab_size\": 10, \"n_positions\": 6, "
                         "\"activation_function\": \"gelu_new\", \"n_inner\": null}";
    seed("import_hf", "with_config", part(hf_file(m, "BF16")) + config);
    seed("import_hf", "f32_with_config", part(hf_file(m, "F32")) + config);
}

static void bpe_seeds() {
    // encoder.json: the 256 bytes, spelled in GPT-2's alphabet, a few merged tokens, EOT
    std::vector<int> u2b = gpt2_unicode_to_byte();
    std::string spell[256];
    for (uint32_t cp = 0; cp < u2b.size(); cp++)
        if (u2b[cp] >= 0) utf8_append(&spell[u2b[cp]], cp);
    std::vector<std::string> merges = {"t h", "th e", "\xc4\xa0 the", "a b"};
    std::string enc = "{";
    int id = 0;
    for (int c = 0; c < 256; c++) {
        std::string key = spell[c] == "\"" ? "\\\"" : spell[c] == "\\" ? "\\\\" : spell[c];
        enc += "\"" + key + "\": " + std::to_string(id++) + ", ";
    }
    for (const char* t : {"th", "the", "\xc4\xa0the", "ab"}) enc += "\"" + std::string(t) + "\": " + std::to_string(id++) + ", ";
    enc += "\"<|endoftext|>\": " + std::to_string(id) + "}";
    std::string bpe = "#version: 0.2\n";
    for (auto& m : merges) bpe += m + "\n";
    seed("bpe", "tiny", part(enc) + part(bpe) + "the cat ate the abba's \xe2\x82\xac 12 \xff\n\n  the");
}

static void args_seeds() {
    auto argv = [](std::vector<std::string> a) {
        std::string b;
        for (size_t i = 0; i < a.size(); i++) b += (i ? std::string(1, '\0') : "") + a[i];
        return b;
    };
    seed("args", "common", argv({"-i", "data/x_*.bin", "-e", "gpt2:l4c256h4", "-b", "4", "-t", "64", "-d", "-1",
                                 "-l", "3e-4", "-k", "wsd", "-x", "10", "-z", "1"}));
    seed("args", "descriptors", argv({"-e", "d12", "-e", "gpt3:c768", "-e", "gpt2:d24", "-sl", "3.5"}));
    seed("args", "target", argv({"--target-val-loss", "3.2", "-v", "5", "-pi", "tcp", "-ps", "host:1"}));
}

// a GPU checkpoint's side files, as the trainers write them: FP8 states (delayed, 3 linears,
// history 4; current, 1 linear) and matmul choices (version 2 by the writer, version 1 by hand)
static void side_file_seeds() {
    const std::string dir = out_dir + "/side_files_written";
    mkdir(dir.c_str(), 0755);
    for (int current = 0; current < 2; current++) {
        const size_t linears = current ? 1 : 3, history = current ? 1 : 4;
        std::vector<float> host[2];
        for (int i = 0; i < 2; i++) {
            host[i].resize(fp8_state_file_floats(i, linears, history));
            for (size_t k = 0; k < host[i].size(); k++) host[i][k] = 0.5f + (float)(k % 7);
        }
        fp8_state_file_write(dir, 1, current, history, linears, host);
        const int flags = 1 | (current ? 4 : 0) | (history == 4 ? 8 : 0) | (int)((linears - 1) << 4);
        seed("side_files", current ? "fp8_current" : "fp8_delayed",
             std::string(1, (char)flags) + read_all(linears_state_path(dir, 1)));
    }
    std::vector<MatmulAlgoEntry> entries(3);
    for (size_t i = 0; i < entries.size(); i++) {
        entries[i] = MatmulAlgoEntry{{i + 1, 2 * i, 3}, i % 2, {i, 66, 4, 0, 0, 0, 0, 7}};
    }
    matmul_algos_file_write(dir, 1, 0, entries, 130100, MatmulLayout{4, 2, 2, 1});
    seed("side_files", "matmul_v2", std::string(1, '\0') + read_all(matmul_algos_path(dir, 1, 0)));
    uint64_t h1[8] = {MATMUL_ALGOS_MAGIC, 1, 1, entries.size(), sizeof(MatmulAlgoEntry), 130100,
                      checksum64(entries.data(), entries.size() * sizeof(MatmulAlgoEntry)), 0};
    h1[7] = checksum64(h1, 7 * sizeof(uint64_t));
    seed("side_files", "matmul_v1", std::string(1, '\0') + std::string((const char*)h1, sizeof(h1)) +
                                        std::string((const char*)entries.data(), entries.size() * sizeof(MatmulAlgoEntry)));
}

// Inputs that once got past a reader (found by these targets); each must now be rejected
// cleanly, and runs first whenever its target does.
static void regression_seeds() {
    // V = 2^24 in a 1 KB file: 512 MB of empty tokens allocated before the first was read
    seed("tokenizer", "regress_huge_vocab", header256({20240328, 2, 1 << 24, 0}) + "\x01" "a");
    // 2^62 parameters: 4 bytes each wrapped to 0, so the size check passed and a vector of
    // 2^62 floats was asked for
    uint64_t h[STATE_HEADER_WORDS] = {STATE_MAGIC, STATE_VERSION, 1, 0, 1, 1ull << 63};
    h[22] = 1ull << 62;
    h[63] = checksum64(h, 63 * sizeof(uint64_t));
    seed("state", "regress_count_wraps", std::string(1, '\0') + part(std::string((const char*)h, sizeof(h))));
    // a 1 KB safetensors file whose wte (1 x 640) and wpe (2^20 x 0) shapes made ./import_hf
    // allocate a 2.7 GB model before it found the other tensors missing
    std::vector<SafeTensorSpec> specs = {
        {"wte.weight", "U8", {1, 640}}, {"wpe.weight", "U8", {1 << 20, 0}}, {"h.0.ln_1.weight", "U8", {0}}};
    seed("import_hf", "regress_huge_model", part(safetensors_header(specs, {}) + std::string(640, '\0')));
    // a tensor name with a newline (JSON "\n") split the one-line error that quotes it
    std::string json = "{\"a\\nerror: b\": 5}";
    std::string len(8, '\0');
    len[0] = (char)json.size();
    seed("safetensors", "regress_newline_name", len + json);
}

int main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
        return 1;
    }
    out_dir = argv[1];
    mkdir(out_dir.c_str(), 0755);
    GPT2 m = tiny_model();
    model_seeds(m);
    state_seeds(40);
    dataloader_seeds();
    tokenizer_seeds();
    evalset_seeds();
    safetensors_seeds(m);
    bpe_seeds();
    tiktoken_seeds();
    llama_seeds();
    args_seeds();
    side_file_seeds();
    regression_seeds();
    gpt2_free(&m);
    return 0;
}
