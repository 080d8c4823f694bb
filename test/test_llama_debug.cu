// test_llama_debug.cu: the GPU Llama 3 model (llmc/llama_cuda.cuh) against PyTorch, as
// test_llama_debug.cpp does for the CPU. Reads a debug state written by test/llama_reference.py
// (read by test/llama_debug_state.h) and checks logits, loss, every gradient tensor and
// the losses and gradient norms of 10 AdamW steps with clipping.
// usage: build/test_llama_debug_{fp32,bf16} DEBUG.bin [attention kernel 0|1|2|3] [recompute 0|1|2]
// With recompute 1 or 2 (llmc/llama_cuda.cuh) the checks run at that level, and the first
// backward's gradients must also be -r 0's bit for bit. Attention kernel 2 (-ak 2, dq summed by
// atomics) loosens that, and the sink's check, to 1% of the largest gradient.
//
// Tolerances (TF32 off, so fp32 matmuls are true fp32):
//   fp32: the CPU model's (test/debug_checks.h): logits max error over the largest logit
//         1e-5, loss 1e-5 relative, each gradient tensor's relative L2 error 1e-4, the 10
//         step losses 1e-5 and grad norms 1e-4 relative.
//   bf16: GPT-2's (test_gpt2_debug.cu): loss 1e-2 relative; each gradient tensor's cosine
//         similarity >= 0.99; the 10 step losses within 2%. Logits and grad norms are printed.
// And the GradSink path: a backward whose sink places each layer's gradients in a packed
// buffer of its own gives the same bits as one into the gradient buffer, layer by layer in
// the order L-1 .. 0, then backward_done.
// Every check prints "ok" or "FAIL"; the last line is PASS or FAIL.
#include <cmath>
#include <cstring>
#include <vector>

#include "../llmc/llama3.h"       // defines: LlamaConfig, Llama, llama_init, grad_clip_scale
#include "debug_checks.h"         // defines: debug_expect, debug_check_logits, debug_check_grads, debug_check_step
#include "llama_debug_state.h"    // defines: LlamaDebug, llama_debug_read
#include "../llmc/llama_cuda.cuh" // defines: LlamaCuda, llama_cuda_forward, llama_cuda_backward, ...

// A sink as a data-parallel trainer's (llmc/model.h): layer l's gradients go to slot l of a
// device buffer of L packed layers; it records the order it was told things in.
struct PackedSink : GradSinkOf<floatX> {
    ParamLayout layout;
    floatX* slots = nullptr;  // (L, one layer's values)
    size_t layer_n = 0;
    int expect_next = 0;      // the layer whose layer_grads comes next
    bool in_order = true;
    void layer_grads(int l, floatX** slices) override {
        in_order &= l == expect_next;
        layer_slices_packed(slots + l * layer_n, layout, slices);
    }
    void layer_done(int l) override { in_order &= l == expect_next--; }
    void backward_done() override { in_order &= expect_next == -1; }
};

// Two backward passes' gradients: bit for bit the same, except under -ak 2 (ctx.attention_dq),
// whose dq sums by atomics in the order the key tiles finish (not reproducible on a GPU): there
// every value within 1% of the largest gradient
static void expect_same_grads(const CudaContext& ctx, const std::vector<float>& got, const std::vector<float>& want,
                              const char* what) {
    char label[96];
    if (ctx.attention_dq == nullptr) {
        size_t differ = 0;
        for (size_t i = 0; i < got.size(); i++) differ += memcmp(&got[i], &want[i], sizeof(float)) != 0;
        snprintf(label, sizeof(label), "%s, bit for bit", what);
        debug_expect(differ == 0, label, (double)differ, 0.0);
        return;
    }
    double most = 0.0, largest = 0.0;
    for (size_t i = 0; i < got.size(); i++) {
        most = std::fmax(most, std::fabs((double)got[i] - want[i]));
        largest = std::fmax(largest, std::fabs((double)want[i]));
    }
    snprintf(label, sizeof(label), "%s (-ak 2: within 1%% of the largest)", what);
    debug_expect(most <= 1e-2 * largest, label, largest > 0 ? most / largest : most, 1e-2);
}

// The gradients of one backward through a PackedSink must equal, bit for bit, those of one
// without: the per-layer rows from the sink's slots, the rest from the gradient buffer.
static void check_sink(LlamaCuda* model, const LlamaDebug& d, const std::vector<float>& want) {
    const int L = model->config.num_layers, B = d.B, T = d.T;
    PackedSink sink;
    sink.layout = llama_cuda_layout(model);
    for (int i = 0; i < LLAMA_NUM_LAYER_TENSORS; i++) sink.layer_n += model->tensors[1 + i].numel / L;
    sink.slots = (floatX*)cuda_malloc_or_fail(L * sink.layer_n * sizeof(floatX), "sink slots");
    CHECK_CUDA(cudaMemset(sink.slots, 0, L * sink.layer_n * sizeof(floatX)));
    sink.expect_next = L - 1;
    llama_cuda_zero_grad(model);
    llama_cuda_forward(model, d.x.data(), d.y.data(), B, T, 1.0f / (float)(B * T));
    llama_cuda_backward(model, &sink);
    std::vector<float> got(model->num_parameters), slots(L * sink.layer_n);
    llama_cuda_download_grads(model, got.data());
    cuda_download_floatx(*model->ctx, sink.slots, slots.size(), slots.data());
    for (int l = 0; l < L; l++) {  // the slots back where the table puts them
        float* packed[LLAMA_NUM_LAYER_TENSORS];
        float* placed[LLAMA_NUM_LAYER_TENSORS];
        layer_slices_packed(slots.data() + l * sink.layer_n, sink.layout, packed);
        layer_slices(got.data(), sink.layout, l, placed);
        for (int i = 0; i < LLAMA_NUM_LAYER_TENSORS; i++)
            memcpy(placed[i], packed[i], model->tensors[1 + i].numel / L * sizeof(float));
    }
    debug_expect(sink.in_order, "sink: told in order", sink.in_order ? 0.0 : 1.0, 0.0);
    expect_same_grads(*model->ctx, got, want, "sink: gradients the same");
    CHECK_CUDA(cudaFree(sink.slots));
}

int main(int argc, char** argv) {
    CHECK(argc >= 2 && argc <= 4, "usage: %s DEBUG.bin [attention kernel 0|1|2|3] [recompute 0|1|2]", argv[0]);
    const int attention_kernel = argc >= 3 ? atoi(argv[2]) : 0;
    const int recompute = argc == 4 ? atoi(argv[3]) : 0;
    CHECK(attention_kernel >= 0 && attention_kernel <= 3, "attention kernel %d", attention_kernel);
    CHECK(recompute >= 0 && recompute <= 2, "recompute %d", recompute);
    const bool bf16 = sizeof(floatX) == 2;
    Llama host;
    LlamaDebug d;
    llama_debug_read(argv[1], &host, &d);
    const LlamaConfig c = host.config;
    const int B = d.B, T = d.T, V = c.vocab_size, Vp = c.padded_vocab_size;
    const size_t BT = (size_t)B * T, n = host.num_parameters;

    CudaContext ctx;
    cuda_context_init(&ctx, 0);
    ctx.tf32 = false;  // true fp32 matmuls in the fp32 build
    // -ak 2: the one-kernel backward's fp32 dq, B*T rows of the attention's width (NH * HS = C)
    const char* problem = attention_select(&ctx, attention_kernel, c.channels / c.num_heads,
                                           BT * c.channels * sizeof(float));
    CHECK(problem == nullptr, "attention kernel %d: %s", attention_kernel, problem);
    printf("%s on %s: config L=%d C=%d NH=%d NKV=%d F=%d V=%d Vp=%d maxT=%d scaling %g, B=%d T=%d; clip %g; -ak %d -r %d\n",
           PRECISION_NAME, ctx.props.name, c.num_layers, c.channels, c.num_heads, c.num_kv_heads, c.ffn_hidden, V, Vp,
           c.max_seq_len, c.rope_scaling.factor, B, T, d.grad_clip, attention_kernel, recompute);
    LlamaCuda model;
    llama_cuda_init(&model, &ctx, &host, true, zero_layout(n, 0, 0, 1));
    llama_cuda_alloc_state(&model, B, T, recompute);

    // forward without a backward: the logits stay
    llama_cuda_forward(&model, d.x.data(), d.y.data(), B, T, 0.0f);
    const float loss = llama_cuda_loss(&model);
    std::vector<float> logits(BT * Vp);
    cuda_download_floatx(ctx, model.acts.logits, BT * Vp, logits.data());
    if (bf16) {
        double max_err = 0.0, max_ref = 0.0;
        for (size_t i = 0; i < BT * V; i++) {
            max_err = std::fmax(max_err, std::fabs(logits[i / V * Vp + i % V] - d.logits[i]));
            max_ref = std::fmax(max_ref, std::fabs(d.logits[i]));
        }
        printf("info logits (max err / max |logit|)  %.3e\n", max_err / max_ref);
        const double err = std::fabs(loss - d.loss) / std::fabs(d.loss);
        debug_expect(err <= 1e-2, "loss", err, 1e-2);
    } else {
        debug_check_logits(logits.data(), Vp, d.logits, BT, V);
        debug_check_loss(loss, d.loss);
    }

    // forward + backward: every gradient tensor
    llama_cuda_forward(&model, d.x.data(), d.y.data(), B, T, 1.0f / (float)BT);
    llama_cuda_backward(&model);
    std::vector<float> got(n);
    llama_cuda_download_grads(&model, got.data());
    if (bf16) {  // the direction of each tensor's gradient: its size is off by bf16's rounding
        for (const ParamTensor& pt : model.tensors) {
            double ref = 0.0, mine = 0.0, dot = 0.0;
            for (size_t i = pt.offset; i < pt.offset + pt.numel; i++) {
                ref += (double)d.grads[i] * d.grads[i];
                mine += (double)got[i] * got[i];
                dot += (double)got[i] * d.grads[i];
            }
            const double cosine = (ref > 0 && mine > 0) ? dot / std::sqrt(ref * mine) : (ref == mine ? 1.0 : 0.0);
            char what[64];
            snprintf(what, sizeof(what), "grad %s (cosine)", pt.name);
            debug_expect(cosine >= 0.99, what, 1.0 - cosine, 0.01);
        }
    } else {
        debug_check_grads(model.tensors, LLAMA_NUM_PARAM_TENSORS, got.data(), d.grads.data());
    }
    check_sink(&model, d, got);
    if (recompute > 0) {  // the same kernels on the same inputs: -r 0's bits
        LlamaCuda keep;
        llama_cuda_init(&keep, &ctx, &host, true, zero_layout(n, 0, 0, 1));
        llama_cuda_alloc_state(&keep, B, T, 0);
        llama_cuda_forward(&keep, d.x.data(), d.y.data(), B, T, 1.0f / (float)BT);
        llama_cuda_backward(&keep);
        std::vector<float> want(n);
        llama_cuda_download_grads(&keep, want.data());
        expect_same_grads(ctx, got, want, "gradients = -r 0's");
        llama_cuda_free(&keep);
    }
    llama_free(&host);

    // 10 AdamW steps on the same batch, as the reference did
    llama_cuda_zero_grad(&model);
    for (int s = 0; s < d.nsteps; s++) {
        llama_cuda_forward(&model, d.x.data(), d.y.data(), B, T, 1.0f / (float)BT);
        llama_cuda_backward(&model);
        const float step_loss = llama_cuda_loss(&model);
        const float norm = (float)std::sqrt(llama_cuda_grad_sum_squares(&model));
        if (bf16) {
            const double err = std::fabs(step_loss - d.losses[s]) / std::fabs(d.losses[s]);
            char what[64];
            snprintf(what, sizeof(what), "step %d loss %.6f", s, step_loss);
            debug_expect(err <= 2e-2, what, err, 2e-2);
            printf("info step %d grad norm %.4f (ref %.4f)\n", s, norm, d.norms[s]);
        } else {
            debug_check_step(s, step_loss, d.losses[s], norm, d.norms[s]);
        }
        llama_cuda_update(&model, d.lr, d.beta1, d.beta2, d.eps, d.weight_decay, grad_clip_scale(norm, d.grad_clip),
                          s + 1);
        llama_cuda_zero_grad(&model);
    }
    llama_cuda_free(&model);
    cuda_context_free(&ctx);
    printf("%s: %d failure(s)\n", debug_failures() ? "FAIL" : "PASS", debug_failures());
    return debug_failures() ? 1 : 0;
}
