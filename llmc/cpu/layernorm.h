// layernorm.h: LayerNorm over the last dimension (eps 1e-5, as GPT-2), forward and backward.
// defines: layernorm_forward, layernorm_backward
#pragma once
#include <cmath>
#include <cstddef>

// inp, out (N,C) with N = B*T rows; weight, bias (C); mean, rstd (N) saved for backward.
inline void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                              const float* weight, const float* bias, int N, int C) {
    const float eps = 1e-5f;
    #pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const float* x = inp + (size_t)i * C;
        // double sums: the CPU trainer is the reference the GPU kernels are checked against
        double s = 0.0;
        for (int c = 0; c < C; c++) s += x[c];
        double m = s / C;
        double v = 0.0;
        for (int c = 0; c < C; c++) { double d = x[c] - m; v += d * d; }
        v /= C;  // biased variance, as torch.nn.LayerNorm
        float r = (float)(1.0 / std::sqrt(v + eps));
        float mf = (float)m;
        float* o = out + (size_t)i * C;
        for (int c = 0; c < C; c++) o[c] = (x[c] - mf) * r * weight[c] + bias[c];
        mean[i] = mf;
        rstd[i] = r;
    }
}

// accumulates (+=) into dinp (N,C), dweight, dbias (C). dout (N,C).
// With xhat = (x - mean) * rstd and g = dout * weight:
//   dinp = rstd * (g - mean(g) - xhat * mean(g * xhat))
inline void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                               const float* inp, const float* weight, const float* mean,
                               const float* rstd, int N, int C) {
    #pragma omp parallel for
    for (int i = 0; i < N; i++) {
        const float* x = inp + (size_t)i * C;
        const float* d = dout + (size_t)i * C;
        float m = mean[i], r = rstd[i];
        double sum_g = 0.0, sum_gx = 0.0;
        for (int c = 0; c < C; c++) {
            float xhat = (x[c] - m) * r;
            float g = d[c] * weight[c];
            sum_g += g;
            sum_gx += (double)g * xhat;
        }
        float mean_g = (float)(sum_g / C), mean_gx = (float)(sum_gx / C);
        float* di = dinp + (size_t)i * C;
        for (int c = 0; c < C; c++) {
            float xhat = (x[c] - m) * r;
            di[c] += r * (d[c] * weight[c] - mean_g - xhat * mean_gx);
        }
    }
    // parameter gradients sum over rows: parallel over channels so no two threads share one
    #pragma omp parallel for
    for (int c = 0; c < C; c++) {
        double dw = 0.0, db = 0.0;
        for (int i = 0; i < N; i++) {
            float xhat = (inp[(size_t)i * C + c] - mean[i]) * rstd[i];
            float d = dout[(size_t)i * C + c];
            dw += (double)d * xhat;
            db += d;
        }
        dweight[c] += (float)dw;
        dbias[c] += (float)db;
    }
}
