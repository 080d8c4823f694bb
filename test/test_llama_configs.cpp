// test_llama_configs.cpp: Llama 3 descriptors (llmc/llama3.h). The released shapes' parameter
// counts against the counts Meta publishes for them (Llama 3.1 8B: 8,030,261,248; 70B:
// 70,553,706,496; 405B: 405,853,388,800, as the Hugging Face model cards and safetensors
// indexes give them); the small form; descriptors and configurations that must be refused.
// Prints one line per check; exits 1 if any failed.
#include "../llmc/llama3.h"  // defines: LlamaConfig, llama_config_from_descriptor, llama_param_table, ...

static int failures = 0;

static void expect(bool ok, const char* what) {
    printf("%-4s %s\n", ok ? "ok" : "FAIL", what);
    if (!ok) failures++;
}

int main() {
    struct { const char* desc; size_t params; int L, C, NH, NKV, F; } released[] = {
        {"llama3.1:8b", 8030261248ull, 32, 4096, 32, 8, 14336},
        {"llama3.1:70b", 70553706496ull, 80, 8192, 64, 8, 28672},
        {"llama3.1:405b", 405853388800ull, 126, 16384, 128, 8, 53248},
    };
    char what[256];
    for (const auto& r : released) {
        LlamaConfig c{};
        const bool parsed = llama_config_from_descriptor(r.desc, &c);
        ParamTensor table[LLAMA_NUM_PARAM_TENSORS];
        const size_t n = parsed ? llama_param_table(c, table) : 0;
        snprintf(what, sizeof(what), "%s: %zu parameters (Meta: %zu), L=%d C=%d NH=%d NKV=%d F=%d V=%d theta %g, "
                 "RoPE scaling %g/%g/%g/%g", r.desc, n, r.params, c.num_layers, c.channels, c.num_heads,
                 c.num_kv_heads, c.ffn_hidden, c.vocab_size, c.rope_theta, c.rope_scaling.factor,
                 c.rope_scaling.low_freq_factor, c.rope_scaling.high_freq_factor, c.rope_scaling.original_max_pos);
        expect(parsed && n == r.params && c.num_layers == r.L && c.channels == r.C && c.num_heads == r.NH &&
                   c.num_kv_heads == r.NKV && c.ffn_hidden == r.F && c.vocab_size == 128256 &&
                   c.padded_vocab_size == 128256 && c.rope_theta == 500000.0f && c.rope_scaling.factor == 8.0f &&
                   c.rope_scaling.original_max_pos == 8192.0f && llama_config_problem(c) == nullptr,
               what);
    }
    LlamaConfig c{};
    const bool small = llama_config_from_descriptor("llama3:l4c256h8kv2f704", &c);
    expect(small && c.num_layers == 4 && c.channels == 256 && c.num_heads == 8 && c.num_kv_heads == 2 &&
               c.ffn_hidden == 704 && c.vocab_size == 128256 && c.rope_scaling.factor == 0.0f,
           "llama3:l4c256h8kv2f704: L=4 C=256 NH=8 NKV=2 F=704, Llama 3's vocabulary, no RoPE scaling");
    const bool gpt2_vocab = llama_config_from_descriptor("llama3:l4c256h8kv2f704v50257", &c);
    expect(gpt2_vocab && c.num_layers == 4 && c.ffn_hidden == 704 && c.vocab_size == 50257 &&
               c.padded_vocab_size == 50304,
           "llama3:l4c256h8kv2f704v50257: the same with GPT-2's vocabulary (Vp 50304)");
    const char* bad[] = {"llama3:l4c256h8kv3f704",   // 8 heads do not split into 3 groups
                         "llama3:l4c256h3kv1f704",   // 256 channels do not split into 3 heads
                         "llama3:l4c96h32kv8f704",   // head size 3: odd, RoPE turns pairs
                         "llama3:l4c256h8kv2f704x",  // trailing text
                         "llama3:l04c256h8kv2f704",  // a leading zero
                         "llama3:l4c256h8kv2f704v",       // a vocabulary without its size
                         "llama3:l4c256h8kv2f704v1",      // a vocabulary of one token
                         "llama3:l4c256h8kv2f704v50257x",  // trailing text
                         "llama3:l-4c256h8kv2f704", "llama3:l4c256h8kv2", "llama3.1:7b", "llama3:", "d12", ""};
    for (const char* d : bad) {
        snprintf(what, sizeof(what), "'%s' refused", d);
        expect(!llama_config_from_descriptor(d, &c), what);
    }
    // the RoPE scaling's own checks
    llama_config_from_descriptor("llama3.1:8b", &c);
    LlamaConfig wrong = c;
    wrong.rope_scaling.high_freq_factor = 0.5f;  // below low_freq_factor
    expect(llama_config_problem(wrong) != nullptr, "RoPE scaling with high_freq_factor < low_freq_factor refused");
    wrong = c;
    wrong.rope_scaling.factor = 0.5f;
    expect(llama_config_problem(wrong) != nullptr, "RoPE scaling factor below 1 refused");
    // Llama 3.1's frequencies at head size 128: the fastest kept, the slowest divided by 8
    const double f0 = rope_frequency(0, 128, 500000.0, c.rope_scaling);
    const double f63 = rope_frequency(63, 128, 500000.0, c.rope_scaling);
    snprintf(what, sizeof(what), "RoPE scaling: frequency 0 kept (%g), frequency 63 divided by 8 (%g vs %g)", f0, f63,
             std::pow(500000.0, -126.0 / 128) / 8);
    expect(f0 == 1.0 && std::fabs(f63 - std::pow(500000.0, -126.0 / 128) / 8) <= 1e-15 * f63, what);
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
