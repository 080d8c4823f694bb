// bench_cpu_kernels.cpp: times the CPU matmul and attention layers at the shapes of one GPT-2
// 124M (d12) training step, B=4 T=64, and attention at T=1024 too.
// build: g++ -O3 -march=native -std=c++17 -fopenmp dev/bench_cpu_kernels.cpp -o build/bench_cpu_kernels
// run:   ./build/bench_cpu_kernels [B T]     (OMP_NUM_THREADS picks the thread count)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <omp.h>
#include "../llmc/cpu/attention.h"
#include "../llmc/cpu/matmul.h"

static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static std::vector<float> filled(size_t n) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) v[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    return v;
}

// runs f once to warm up, then 5 batches of ~0.1 s; returns the best batch's seconds per call.
// The best, not the mean: on a shared 2-core machine the mean mostly measures the neighbours.
template <typename F>
static double time_it(F f) {
    f();
    double best = 1e30;
    for (int batch = 0; batch < 5; batch++) {
        int reps = 0;
        double t0 = now_s(), t = t0;
        while (t - t0 < 0.1 || reps < 2) {
            f();
            reps++;
            t = now_s();
        }
        best = std::min(best, (t - t0) / reps);
    }
    return best;
}

int main(int argc, char** argv) {
    int B = argc > 2 ? atoi(argv[1]) : 4, T = argc > 2 ? atoi(argv[2]) : 64;
    const int C = 768, L = 12, NH = 12, Vp = 50304;
    const int BT = B * T;
    printf("d12 shapes, B=%d T=%d (BT=%d), %d threads\n", B, T, BT, omp_get_max_threads());
    printf("%-34s %9s %9s\n", "matmul (BT x C -> OC)", "ms", "GFLOP/s");

    struct Shape { const char* name; int C, OC, per_step; };
    // per step: L of each layer's four matmuls, and the classifier once
    Shape shapes[] = {{"qkv      C=768  OC=2304", C, 3 * C, L},
                      {"attproj  C=768  OC=768", C, C, L},
                      {"fc       C=768  OC=3072", C, 4 * C, L},
                      {"fcproj   C=3072 OC=768", 4 * C, C, L},
                      {"classif  C=768  OC=50304", C, Vp, 1}};
    double step_s = 0.0, step_flop = 0.0;
    for (const Shape& s : shapes) {
        std::vector<float> inp = filled((size_t)BT * s.C), w = filled((size_t)s.OC * s.C), bias = filled(s.OC);
        std::vector<float> out((size_t)BT * s.OC), dinp((size_t)BT * s.C), dw((size_t)s.OC * s.C), db(s.OC);
        const double flop = 2.0 * BT * s.C * s.OC;
        double tf = time_it([&] {
            matmul_forward(out.data(), inp.data(), w.data(), bias.data(), B, T, s.C, s.OC);
        });
        double tb = time_it([&] {
            matmul_backward(dinp.data(), dw.data(), db.data(), out.data(), inp.data(), w.data(), B, T,
                            s.C, s.OC);
        });
        // backward split into its two GEMMs, to see which one lags
        double td = time_it([&] {
            gemm_f32(dinp.data(), s.C, GemmView{out.data(), (size_t)s.OC, 1},
                     GemmView{w.data(), (size_t)s.C, 1}, nullptr, BT, s.C, s.OC, true);
        });
        double tw = time_it([&] {
            gemm_f32(dw.data(), s.C, GemmView{out.data(), 1, (size_t)s.OC},
                     GemmView{inp.data(), (size_t)s.C, 1}, nullptr, s.OC, s.C, BT, true);
        });
        printf("%-24s fwd      %9.3f %9.1f\n", s.name, tf * 1e3, flop / tf * 1e-9);
        printf("%-24s bwd      %9.3f %9.1f   (dinp %.1f, dweight %.1f GFLOP/s)\n", s.name, tb * 1e3,
               2 * flop / tb * 1e-9, flop / td * 1e-9, flop / tw * 1e-9);
        step_s += s.per_step * (tf + tb);
        step_flop += s.per_step * 3 * flop;
    }
    printf("one d12 step, all matmuls fwd+bwd: %.3f s, %.1f GFLOP/s\n", step_s, step_flop / step_s * 1e-9);

    printf("\n%-34s %9s %9s\n", "attention (NH=12, hs=64)", "ms", "GFLOP/s");
    int Ts[] = {64, 1024};
    for (int Ta : Ts) {
        int Ba = Ta == 64 ? B : 1;
        std::vector<float> qkv = filled((size_t)Ba * Ta * 3 * C), out((size_t)Ba * Ta * C);
        std::vector<float> att((size_t)Ba * NH * Ta * Ta), dqkv((size_t)Ba * Ta * 3 * C);
        // causal: q.k and att.v each cost ~T^2/2 * hs * 2 flop per head, backward twice that
        const double flop = 2.0 * Ba * NH * ((double)Ta * (Ta + 1) / 2) * (C / NH) * 2;
        double tf = time_it([&] { attention_forward(out.data(), att.data(), qkv.data(), Ba, Ta, C, NH); });
        double tb = time_it([&] {
            attention_backward(dqkv.data(), out.data(), qkv.data(), att.data(), Ba, Ta, C, NH);
        });
        printf("B=%d T=%-4d                  fwd      %9.3f %9.1f\n", Ba, Ta, tf * 1e3, flop / tf * 1e-9);
        printf("B=%d T=%-4d                  bwd      %9.3f %9.1f\n", Ba, Ta, tb * 1e3, 2 * flop / tb * 1e-9);
        if (Ta == 64) step_s += L * (tf + tb);
    }
    printf("one d12 step, matmuls + attention: %.3f s\n", step_s);
    return 0;
}
