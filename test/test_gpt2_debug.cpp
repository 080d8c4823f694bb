// test_gpt2_debug.cpp: the CPU trainer against PyTorch. Reads a model file and a debug
// state written by test/pytorch_reference.py, then checks logits, loss, every gradient
// tensor and the losses and gradient norms of 10 AdamW steps with clipping.
// usage: build/test_gpt2_debug MODEL.bin DEBUG.bin
#include <cmath>
#include <vector>

#include "../llmc/gpt2.h"        // defines: GPT2, gpt2_forward, gpt2_backward, gpt2_update
#include "../llmc/checkpoint.h"  // defines: gpt2_load_checkpoint
#include "debug_state.h"         // defines: DebugState, debug_state_read

static int failures = 0;

static void expect(bool ok, const char* what, double err, double tol) {
    printf("%-4s %-28s err %.3e (tol %.0e)\n", ok ? "ok" : "FAIL", what, err, tol);
    if (!ok) failures++;
}

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
    // logits: max abs error relative to the largest logit
    double max_err = 0.0, max_ref = 0.0;
    for (size_t i = 0; i < BT; i++) {
        for (int j = 0; j < V; j++) {
            double ref = logits[i * V + j], got = model.acts.logits[i * c.padded_vocab_size + j];
            max_err = std::fmax(max_err, std::fabs(got - ref));
            max_ref = std::fmax(max_ref, std::fabs(ref));
        }
    }
    expect(max_err / max_ref <= 1e-5, "logits (max rel)", max_err / max_ref, 1e-5);
    double loss_err = std::fabs(model.mean_loss - loss) / std::fabs(loss);
    expect(loss_err <= 1e-5, "loss", loss_err, 1e-5);

    gpt2_backward(&model, x.data(), y.data(), 1.0f / (float)BT);
    for (int t = 0; t < NUM_PARAM_TENSORS; t++) {
        const ParamTensor& pt = model.tensors[t];
        double diff = 0.0, ref = 0.0;
        for (size_t i = pt.offset; i < pt.offset + pt.numel; i++) {
            double d = (double)model.grads[i] - grads[i];
            diff += d * d;
            ref += (double)grads[i] * grads[i];
        }
        double rel = ref > 0 ? std::sqrt(diff / ref) : std::sqrt(diff);
        char what[64];
        snprintf(what, sizeof(what), "grad %s (rel L2)", pt.name);
        expect(rel <= 1e-4, what, rel, 1e-4);
    }

    // 10 AdamW steps on the same batch, as the reference did
    gpt2_zero_grad(&model);
    for (int s = 0; s < nsteps; s++) {
        gpt2_forward(&model, x.data(), y.data(), B, T);
        gpt2_backward(&model, x.data(), y.data(), 1.0f / (float)BT);
        float norm = gpt2_grad_norm(&model);
        double lerr = std::fabs(model.mean_loss - losses[s]) / std::fabs(losses[s]);
        double nerr = std::fabs(norm - norms[s]) / std::fabs(norms[s]);
        char what[64];
        snprintf(what, sizeof(what), "step %d loss %.6f", s, model.mean_loss);
        expect(lerr <= 1e-5, what, lerr, 1e-5);
        snprintf(what, sizeof(what), "step %d grad norm %.4f", s, norm);
        expect(nerr <= 1e-4, what, nerr, 1e-4);
        gpt2_update(&model, lr, beta1, beta2, eps, wd, grad_clip_scale(norm, clip), s + 1);
        gpt2_zero_grad(&model);
    }
    gpt2_free(&model);
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
