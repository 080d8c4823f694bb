// fp8_spec.cuh: the OCP 8-bit Floating Point specification's two formats, written from its
// definition, for the dev programs' CPU references (fp8.cu, fp8_linear.cu): every code decoded,
// and a value rounded to the nearest number of the format, ties to the even code, saturated.
// defines: Fp8Spec, SPEC_E4M3, SPEC_E5M2, spec_decode, spec_positive, spec_quantize, SpecOf,
//          spec_decode_all
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>
#include <cuda_fp8.h>

struct Fp8Spec {
    const char* name;
    int exp_bits, man_bits, bias;
    bool ieee_specials;  // E5M2: exponent all ones is infinity (mantissa 0) or NaN; E4M3: only S.1111.111 is NaN
    double max;          // the specification's largest finite number (its table: 448, 57344)
};
static const Fp8Spec SPEC_E4M3 = {"e4m3", 4, 3, 7, false, 448.0};
static const Fp8Spec SPEC_E5M2 = {"e5m2", 5, 2, 15, true, 57344.0};

static double spec_decode(const Fp8Spec& f, int code) {
    const int sign = code >> 7, e = (code >> f.man_bits) & ((1 << f.exp_bits) - 1), m = code & ((1 << f.man_bits) - 1);
    const int e_all = (1 << f.exp_bits) - 1, m_all = (1 << f.man_bits) - 1;
    double v;
    if (f.ieee_specials && e == e_all) v = m == 0 ? INFINITY : NAN;
    else if (!f.ieee_specials && e == e_all && m == m_all) v = NAN;
    else if (e == 0) v = std::ldexp((double)m, 1 - f.bias - f.man_bits);                       // subnormal
    else v = std::ldexp((double)((1 << f.man_bits) + m), e - f.bias - f.man_bits);              // normal
    return sign ? -v : v;
}

// the positive finite numbers in code order (0x00 up to the largest finite code), ascending
static std::vector<double> spec_positive(const Fp8Spec& f) {
    std::vector<double> pos;
    for (int c = 0; c < 128 && std::isfinite(spec_decode(f, c)); c++) pos.push_back(spec_decode(f, c));
    return pos;
}

// v to fp8: the nearest number, ties to the even code, beyond the largest finite number (and
// infinity) that number (__NV_SATFINITE), the sign kept (also on a zero). -1 for a NaN.
static int spec_quantize(const std::vector<double>& pos, float v) {
    if (std::isnan(v)) return -1;
    const int sign = std::signbit(v) ? 0x80 : 0;
    const double a = std::fabs((double)v);
    const int top = (int)pos.size() - 1;
    if (a >= pos[top]) return sign | top;
    const int i = (int)(std::upper_bound(pos.begin(), pos.end(), a) - pos.begin()) - 1;  // pos[i] <= a < pos[i+1]
    const double mid = 0.5 * (pos[i] + pos[i + 1]);  // exact: a few bits
    const int c = a < mid ? i : a > mid ? i + 1 : (i % 2 == 0 ? i : i + 1);
    return sign | c;
}

template <typename T> struct SpecOf;
template <> struct SpecOf<__nv_fp8_e4m3> { static const Fp8Spec& get() { return SPEC_E4M3; } };
template <> struct SpecOf<__nv_fp8_e5m2> { static const Fp8Spec& get() { return SPEC_E5M2; } };

// the values of fp8 codes of type T
template <typename T>
static std::vector<double> spec_decode_all(const std::vector<uint8_t>& codes) {
    std::vector<double> v(codes.size());
    for (size_t i = 0; i < codes.size(); i++) v[i] = spec_decode(SpecOf<T>::get(), codes[i]);
    return v;
}
