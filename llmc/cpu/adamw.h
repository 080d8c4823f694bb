// adamw.h: AdamW on fp32 parameters, PyTorch's formulation (decoupled weight decay).
// defines: adamw_update
#pragma once
#include <cmath>
#include <cstddef>

// For n parameters: g = grad * grad_scale (clipping), then
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   param -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + lr * wd * param
// t is the 1-based step number. Same arithmetic as torch.optim.AdamW (decay applied to the
// parameter before the Adam step; the Adam step does not read the parameter).
inline void adamw_update(float* param, const float* grad, float* m, float* v, size_t n,
                         float lr, float beta1, float beta2, float eps, float weight_decay,
                         float grad_scale, int t) {
    float bc1 = 1.0f - (float)std::pow((double)beta1, t);
    float bc2_sqrt = (float)std::sqrt(1.0 - std::pow((double)beta2, t));
    float step_size = lr / bc1;
    #pragma omp parallel for
    for (size_t i = 0; i < n; i++) {
        float g = grad[i] * grad_scale;
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float p = param[i] * (1.0f - lr * weight_decay);
        param[i] = p - step_size * mi / (std::sqrt(vi) / bc2_sqrt + eps);
    }
}
