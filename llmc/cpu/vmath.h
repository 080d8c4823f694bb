// vmath.h: exp for float that a loop can vectorize.
// defines: exp_f32
//
// libm's expf and tanhf are calls the compiler cannot vectorize without -ffast-math, and
// calls in a loop keep the whole loop scalar: GELU and the classifier's softmax over 50,257
// logits spent most of their time in them. exp_f32 is plain arithmetic on one float, with no
// branch and no call, so that `for (i...) y[i] = exp_f32(x[i])` becomes vector code.
//
// exp(x) = 2^n * exp(r), n = round(x / ln 2) (to nearest), r = x - n ln 2 in [-ln2/2, ln2/2]:
//   - n ln 2 is subtracted in two parts (a high part with few bits, exact in the product,
//     then the low rest), so r keeps its precision for large |x|;
//   - exp(r) is its Taylor series to r^7 (the next term, r^8/8! < 5.3e-9, is below half a
//     float ulp of exp(r)), by Horner;
//   - 2^n is built in the exponent bits.
// Within 2 ulp of the exact value for x in [-87, 88] (test_cpu_kernels checks it against the
// double-precision exp); below -87 it is 0, above 88.3 it saturates at exp(88.3) (2.1e38) instead
// of inf.
#pragma once
#include <cstdint>

inline float exp_f32(float x) {
    const float log2e = 1.44269504088896341f;
    const float ln2_hi = 0.693145751953125f;       // ln 2 to 16 bits: n * ln2_hi is exact for |n| < 2^8
    const float ln2_lo = 1.42860682030941723e-6f;  // ln 2 - ln2_hi
    const float xc = x < -87.0f ? -87.0f : (x > 88.3f ? 88.3f : x);
    // round to nearest by adding and taking away 1.5 * 2^23, where a float has no fraction
    // bits left (floorf would not vectorize: it may raise the inexact exception)
    const float round_magic = 12582912.0f;
    const float n = (xc * log2e + round_magic) - round_magic;
    const float r = (xc - n * ln2_hi) - n * ln2_lo;
    // 1 + r + r^2/2! + ... + r^7/7!
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    // 2^n, n in [-126, 127]: a normal float (a bit cast, not memcpy: GCC would not vectorize
    // the trip through memory)
    const float scale = __builtin_bit_cast(float, ((int32_t)n + 127) << 23);
    const float y = p * scale;
    return x < -87.0f ? 0.0f : y;
}
