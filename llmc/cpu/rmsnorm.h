// rmsnorm.h: RMSNorm over the last dimension (Llama), forward and backward.
// defines: rmsnorm_forward, rmsnorm_backward
#pragma once
#include <cmath>
#include <cstddef>

// inp, out (N,C) with N = B*T rows; weight (C); rstd (N) saved for backward:
//   out = inp * rstd * weight,  rstd = 1 / sqrt(mean(inp^2) + eps)
inline void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C,
                            float eps) {
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const float* x = inp + (size_t)i * C;
        double ss = 0.0;  // double: the CPU trainer is the reference the GPU kernels are checked against
        for (int c = 0; c < C; c++) ss += (double)x[c] * x[c];
        const float r = (float)(1.0 / std::sqrt(ss / C + eps));
        float* o = out + (size_t)i * C;
        for (int c = 0; c < C; c++) o[c] = x[c] * r * weight[c];
        rstd[i] = r;
    }
}

// accumulates (+=) into dinp (N,C) and dweight (C), given dout (N,C). With xhat = x * rstd and
// g = dout * weight:   dinp = rstd * (g - xhat * mean(g * xhat))
inline void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                             const float* rstd, int N, int C) {
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const float* x = inp + (size_t)i * C;
        const float* d = dout + (size_t)i * C;
        const float r = rstd[i];
        double sum_gx = 0.0;
        for (int c = 0; c < C; c++) sum_gx += (double)(d[c] * weight[c]) * (x[c] * r);
        const float mean_gx = (float)(sum_gx / C);
        float* di = dinp + (size_t)i * C;
        for (int c = 0; c < C; c++) di[c] += r * (d[c] * weight[c] - x[c] * r * mean_gx);
    }
    // the weight's gradient sums over rows: parallel over channels so no two threads share one
    #pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        double dw = 0.0;
        for (int i = 0; i < N; i++) dw += (double)dout[(size_t)i * C + c] * (inp[(size_t)i * C + c] * rstd[i]);
        dweight[c] += (float)dw;
    }
}
