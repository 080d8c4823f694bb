// test_llama_debug.cpp: the CPU Llama 3 model (llmc/llama3.h) against PyTorch. Reads a debug
// state written by test/llama_reference.py (a Llama written apart from the C++, computed in
// float64): its configuration, initial parameters, one batch, the logits, the loss, every
// gradient tensor, and the losses and gradient norms of 10 AdamW steps with clipping.
// usage: build/test_llama_debug DEBUG.bin
//
// DEBUG.bin (little-endian): header 256 int32: [0] 20241124, [1] 1, [2] B, [3] T, [4] V, [5] Vp,
// [6] C, [7] L, [8] NH, [9] NKV, [10] F, [11] maxT, [12] nsteps; [20..27] float32 bits of
// norm_eps, rope_theta, lr, beta1, beta2, eps, weight_decay, grad_clip; [28..31] float32 bits of
// Llama 3.1's RoPE scaling factor, low_freq_factor, high_freq_factor, original context (all 0:
// none). Then x, y (B*T int32),
// the parameters in llama_param_table's order (float32), logits (B*T*V), loss, the gradients
// (same layout as the parameters), losses (nsteps), norms (nsteps).
#include <cmath>
#include <vector>

#include "../llmc/llama3.h"  // defines: Llama, llama_forward, llama_backward, ...
#include "debug_checks.h"     // defines: debug_check_logits, debug_check_grads, debug_check_step, ...


template <typename T>
static void read_exactly(FILE* f, T* dst, size_t n, const char* path, const char* what) {
    if (fread(dst, sizeof(T), n, f) != n) fail("%s: truncated while reading %s", path, what);
}

static float bits_to_float(int32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

int main(int argc, char** argv) {
    CHECK(argc == 2, "usage: %s DEBUG.bin", argv[0]);
    const char* path = argv[1];
    FILE* f = fopen_or_fail(path, "rb");
    int32_t h[256];
    read_exactly(f, h, 256, path, "the header");
    if (h[0] != 20241124 || h[1] != 1) fail("%s: not a Llama debug state (magic %d version %d)", path, h[0], h[1]);
    const int B = h[2], T = h[3], nsteps = h[12];
    LlamaConfig c;
    c.vocab_size = h[4]; c.padded_vocab_size = h[5]; c.channels = h[6]; c.num_layers = h[7];
    c.num_heads = h[8]; c.num_kv_heads = h[9]; c.ffn_hidden = h[10]; c.max_seq_len = h[11];
    c.norm_eps = bits_to_float(h[20]);
    c.rope_theta = bits_to_float(h[21]);
    c.rope_scaling = {bits_to_float(h[28]), bits_to_float(h[29]), bits_to_float(h[30]), bits_to_float(h[31])};
    const float lr = bits_to_float(h[22]), beta1 = bits_to_float(h[23]), beta2 = bits_to_float(h[24]);
    const float eps = bits_to_float(h[25]), wd = bits_to_float(h[26]), clip = bits_to_float(h[27]);
    const char* problem = llama_config_problem(c);
    if (problem != nullptr) fail("%s: config: %s", path, problem);
    printf("config L=%d C=%d NH=%d NKV=%d F=%d V=%d Vp=%d maxT=%d eps %g theta %g scaling %g, B=%d T=%d\n",
           c.num_layers, c.channels, c.num_heads, c.num_kv_heads, c.ffn_hidden, c.vocab_size, c.padded_vocab_size,
           c.max_seq_len, c.norm_eps, c.rope_theta, c.rope_scaling.factor, B, T);

    Llama model;
    llama_init(&model, c);
    const size_t BT = (size_t)B * T, n = model.num_parameters;
    const int V = c.vocab_size;
    std::vector<int> x(BT), y(BT);
    std::vector<float> logits(BT * V), grads(n), losses(nsteps), norms(nsteps);
    float loss = 0.0f;
    read_exactly(f, x.data(), BT, path, "x");
    read_exactly(f, y.data(), BT, path, "y");
    read_exactly(f, model.params, n, path, "the parameters");
    read_exactly(f, logits.data(), BT * V, path, "the logits");
    read_exactly(f, &loss, 1, path, "the loss");
    read_exactly(f, grads.data(), n, path, "the gradients");
    read_exactly(f, losses.data(), nsteps, path, "the step losses");
    read_exactly(f, norms.data(), nsteps, path, "the step norms");
    fclose(f);

    llama_alloc_state(&model, B, T);
    llama_forward(&model, x.data(), y.data(), B, T);
    debug_check_logits(model.acts.logits, c.padded_vocab_size, logits, BT, V);
    debug_check_loss(model.mean_loss, loss);
    llama_backward(&model, x.data(), y.data(), 1.0f / (float)BT);
    debug_check_grads(model.tensors, LLAMA_NUM_PARAM_TENSORS, model.grads, grads.data());

    // 10 AdamW steps on the same batch, as the reference did
    llama_zero_grad(&model);
    for (int s = 0; s < nsteps; s++) {
        llama_forward(&model, x.data(), y.data(), B, T);
        llama_backward(&model, x.data(), y.data(), 1.0f / (float)BT);
        const float norm = (float)std::sqrt(grad_sum_squares(model.grads, n));
        debug_check_step(s, model.mean_loss, losses[s], norm, norms[s]);
        adamw_update_table(model.tensors, LLAMA_NUM_PARAM_TENSORS, model.params, model.grads, model.m, model.v, lr,
                           beta1, beta2, eps, wd, grad_clip_scale(norm, clip), s + 1);
        llama_zero_grad(&model);
    }
    llama_free(&model);
    printf("%s: %d failure(s)\n", debug_failures() ? "FAIL" : "PASS", debug_failures());
    return debug_failures() ? 1 : 0;
}
