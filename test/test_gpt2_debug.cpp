// test_gpt2_debug.cpp: the CPU trainer against PyTorch. Reads a model file and a debug
// state written by test/pytorch_reference.py, then checks logits, loss, every gradient
// tensor and the losses and gradient norms of 10 AdamW steps with clipping.
// usage: build/test_gpt2_debug MODEL.bin DEBUG.bin
#include <cmath>
#include <vector>

#include "../llmc/gpt2.h"        // defines: GPT2, gpt2_forward, gpt2_backward, gpt2_update
#include "../llmc/checkpoint.h"  // defines: gpt2_load_checkpoint
#include "debug_state.h"         // defines: DebugState, debug_state_read
#include "debug_checks.h"        // defines: debug_check_logits, debug_check_grads, debug_check_step, ...


int main(int argc, char** argv) {
    CHECK(argc == 3, "usage: %s MODEL.bin DEBUG.bin", argv[0]);
    GPT2 model;
    gpt2_load_checkpoint(&model, argv[1]);
    const GPT2Config& c = model.config;

    DebugState d;
    debug_state_read(argv[2], c, model.num_parameters, &d);
    int B = d.B, T = d.T, nsteps = d.nsteps, V = d.V;
    float lr = d.lr, beta1 = d.beta1, beta2 = d.beta2, eps = d.eps, wd = d.weight_decay, clip = d.grad_clip;
    size_t BT = (size_t)B * T;
    std::vector<int>& x = d.x;
    std::vector<int>& y = d.y;
    const std::vector<float>& logits = d.logits;
    const std::vector<float>& grads = d.grads;
    const std::vector<float>& losses = d.losses;
    const std::vector<float>& norms = d.norms;
    float loss = d.loss;
    printf("config L=%d C=%d NH=%d V=%d Vp=%d maxT=%d, B=%d T=%d; lr %g wd %g clip %g\n", c.num_layers,
           c.channels, c.num_heads, V, c.padded_vocab_size, c.max_seq_len, B, T, lr, wd, clip);

    gpt2_alloc_state(&model, B, T);
    gpt2_forward(&model, x.data(), y.data(), B, T);
    debug_check_logits(model.acts.logits, c.padded_vocab_size, logits, BT, V);
    debug_check_loss(model.mean_loss, loss);
    gpt2_backward(&model, x.data(), y.data(), 1.0f / (float)BT);
    debug_check_grads(model.tensors, NUM_PARAM_TENSORS, model.grads, grads.data());

    // 10 AdamW steps on the same batch, as the reference did
    gpt2_zero_grad(&model);
    for (int s = 0; s < nsteps; s++) {
        gpt2_forward(&model, x.data(), y.data(), B, T);
        gpt2_backward(&model, x.data(), y.data(), 1.0f / (float)BT);
        float norm = gpt2_grad_norm(&model);
        debug_check_step(s, model.mean_loss, losses[s], norm, norms[s]);
        gpt2_update(&model, lr, beta1, beta2, eps, wd, grad_clip_scale(norm, clip), s + 1);
        gpt2_zero_grad(&model);
    }
    gpt2_free(&model);
    printf("%s: %d failure(s)\n", debug_failures() ? "FAIL" : "PASS", debug_failures());
    return debug_failures() ? 1 : 0;
}
