// test_llama_debug.cpp: the CPU Llama 3 model (llmc/llama3.h) against PyTorch. Reads a debug
// state written by test/llama_reference.py (a Llama written apart from the C++, computed in
// float64): its configuration, initial parameters, one batch, the logits, the loss, every
// gradient tensor, and the losses and gradient norms of 10 AdamW steps with clipping. With a
// recompute level (-r 1: RMSNorm and SwiGLU recomputed, -r 2: the whole layer; llmc/llama3.h)
// the same checks run at that level, and its first gradients must also be -r 0's bit for bit.
// usage: build/test_llama_debug DEBUG.bin [RECOMPUTE]
// (The file's format: test/llama_debug_state.h.)
#include <cmath>
#include <vector>

#include "../llmc/llama3.h"     // defines: Llama, llama_forward, llama_backward, ...
#include "debug_checks.h"        // defines: debug_check_logits, debug_check_grads, debug_check_step, ...
#include "llama_debug_state.h"   // defines: LlamaDebug, llama_debug_read

int main(int argc, char** argv) {
    CHECK(argc == 2 || argc == 3, "usage: %s DEBUG.bin [RECOMPUTE]", argv[0]);
    const int recompute = argc == 3 ? atoi(argv[2]) : 0;
    CHECK(recompute >= 0 && recompute <= 2, "recompute %d", recompute);
    Llama model;
    LlamaDebug d;
    llama_debug_read(argv[1], &model, &d);
    const LlamaConfig& c = model.config;
    const int B = d.B, T = d.T, nsteps = d.nsteps;
    printf("config L=%d C=%d NH=%d NKV=%d F=%d V=%d Vp=%d maxT=%d eps %g theta %g scaling %g, B=%d T=%d, -r %d\n",
           c.num_layers, c.channels, c.num_heads, c.num_kv_heads, c.ffn_hidden, c.vocab_size, c.padded_vocab_size,
           c.max_seq_len, c.norm_eps, c.rope_theta, c.rope_scaling.factor, B, T, recompute);
    const size_t BT = (size_t)B * T, n = model.num_parameters;

    llama_alloc_state(&model, B, T, SIZE_MAX, SIZE_MAX, recompute);
    llama_forward(&model, d.x.data(), d.y.data(), B, T);
    debug_check_logits(model.acts.logits, c.padded_vocab_size, d.logits, BT, c.vocab_size);
    debug_check_loss(model.mean_loss, d.loss);
    llama_backward(&model, d.x.data(), d.y.data(), 1.0f / (float)BT);
    debug_check_grads(model.tensors, LLAMA_NUM_PARAM_TENSORS, model.grads, d.grads.data());
    if (recompute > 0) {  // the same arithmetic in the same order: -r 0's bits
        Llama keep;
        LlamaDebug d0;
        llama_debug_read(argv[1], &keep, &d0);
        llama_alloc_state(&keep, B, T);
        llama_forward(&keep, d.x.data(), d.y.data(), B, T);
        llama_backward(&keep, d.x.data(), d.y.data(), 1.0f / (float)BT);
        size_t differ = 0;
        for (size_t i = 0; i < n; i++) differ += memcmp(&keep.grads[i], &model.grads[i], sizeof(float)) != 0;
        debug_expect(differ == 0, "gradients = -r 0's bits", (double)differ, 0.0);
        llama_free(&keep);
    }

    // 10 AdamW steps on the same batch, as the reference did
    llama_zero_grad(&model);
    for (int s = 0; s < nsteps; s++) {
        llama_forward(&model, d.x.data(), d.y.data(), B, T);
        llama_backward(&model, d.x.data(), d.y.data(), 1.0f / (float)BT);
        const float norm = (float)std::sqrt(grad_sum_squares(model.grads, n));
        debug_check_step(s, model.mean_loss, d.losses[s], norm, d.norms[s]);
        adamw_update_table(model.tensors, LLAMA_NUM_PARAM_TENSORS, model.params, model.grads, model.m, model.v, d.lr,
                           d.beta1, d.beta2, d.eps, d.weight_decay, grad_clip_scale(norm, d.grad_clip), s + 1);
        llama_zero_grad(&model);
    }
    llama_free(&model);
    printf("%s: %d failure(s)\n", debug_failures() ? "FAIL" : "PASS", debug_failures());
    return debug_failures() ? 1 : 0;
}
