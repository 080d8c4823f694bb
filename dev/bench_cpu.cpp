// bench_cpu.cpp: one full training step of train_gpt_cpu's model (forward, backward, AdamW)
// timed on random tokens. Prints ms/step (median), tokens/s and GFLOP/s.
// usage: build/bench_cpu [descriptor=d12] [B=4] [T=64] [steps=5]
#include <algorithm>
#include <chrono>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../llmc/gpt2.h"  // defines: GPT2, gpt2_init, gpt2_forward, gpt2_backward, gpt2_update

int main(int argc, char** argv) {
    const char* desc = argc > 1 ? argv[1] : "d12";
    int B = argc > 2 ? atoi(argv[2]) : 4;
    int T = argc > 3 ? atoi(argv[3]) : 64;
    int steps = argc > 4 ? atoi(argv[4]) : 5;
    GPT2Config cfg;
    if (!gpt2_config_from_descriptor(desc, &cfg)) fail("unknown model descriptor '%s'", desc);
    if (B < 1 || T < 1 || T > cfg.max_seq_len || steps < 1) fail("bad B=%d T=%d steps=%d", B, T, steps);
    GPT2 model;
    gpt2_init(&model, cfg);
    gpt2_init_random(&model, 42);
    gpt2_alloc_state(&model, B, T);
    std::vector<int> tokens(B * T + 1);
    uint32_t x = 12345;
    for (int& t : tokens) { x = x * 1664525u + 1013904223u; t = (int)((x >> 8) % cfg.vocab_size); }

    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    size_t n = model.num_parameters;
    double tokens_per_step = (double)B * T;
    double flops_6n = 6.0 * n * tokens_per_step;
    double flops_attn = 6.0 * cfg.num_layers * cfg.channels * T * tokens_per_step;
    printf("bench_cpu: %s (%zu parameters), B=%d T=%d, %d threads, %d timed steps after 1 warmup\n",
           desc, n, B, T, threads, steps);
    std::vector<double> ms;
    for (int s = 0; s <= steps; s++) {
        auto t0 = std::chrono::steady_clock::now();
        gpt2_forward(&model, tokens.data(), tokens.data() + 1, B, T);
        auto t1 = std::chrono::steady_clock::now();
        gpt2_backward(&model, tokens.data(), tokens.data() + 1, 1.0f / (B * T));
        auto t2 = std::chrono::steady_clock::now();
        float norm = gpt2_grad_norm(&model);
        gpt2_update(&model, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, grad_clip_scale(norm, 1.0f), s + 1);
        gpt2_zero_grad(&model);
        auto t3 = std::chrono::steady_clock::now();
        auto ms_between = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
        double dt = ms_between(t0, t3);
        printf("  step %d: loss %.4f, %.1f ms (forward %.1f, backward %.1f, norm+AdamW %.1f)%s\n", s,
               model.mean_loss, dt, ms_between(t0, t1), ms_between(t1, t2), ms_between(t2, t3),
               s == 0 ? " (warmup)" : "");
        if (s > 0) ms.push_back(dt);
    }
    std::sort(ms.begin(), ms.end());
    double med = ms[ms.size() / 2];
    printf("median %.1f ms/step | %.0f tokens/s | %.1f GFLOP/s of 6N flops | %.1f GFLOP/s of 6N+6LCT\n",
           med, tokens_per_step / med * 1000, flops_6n / med / 1e6, (flops_6n + flops_attn) / med / 1e6);
    gpt2_free(&model);
    return 0;
}
