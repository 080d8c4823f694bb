// cuda_bf16.h for the emulated GPU (llmc/emu/emu.h): bfloat16 as the GPU stores it, 1 sign,
// 8 exponent and 7 mantissa bits, the upper half of an IEEE float. Conversions round to
// nearest even; a NaN stays a (quiet) NaN.
#pragma once
#include <cstdint>
#include <cstring>
#include "../emu.h"  // float2

struct __nv_bfloat16_raw {
    unsigned short x;
};

struct __nv_bfloat16;
inline __nv_bfloat16 __float2bfloat16_rn(float f);
inline float __bfloat162float(__nv_bfloat16 h);

struct alignas(2) __nv_bfloat16 {
    unsigned short __x;
    __nv_bfloat16() = default;
    constexpr __nv_bfloat16(const __nv_bfloat16_raw& r) : __x(r.x) {}
    __nv_bfloat16(float f);
    __nv_bfloat16(double f) : __nv_bfloat16((float)f) {}
    __nv_bfloat16(int i) : __nv_bfloat16((float)i) {}
    operator float() const;
    operator __nv_bfloat16_raw() const { return __nv_bfloat16_raw{__x}; }
    __nv_bfloat16& operator=(const __nv_bfloat16_raw& r) {
        __x = r.x;
        return *this;
    }
};

struct alignas(4) __nv_bfloat162 {
    __nv_bfloat16 x, y;
};

inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    uint32_t bits;
    memcpy(&bits, &f, 4);
    __nv_bfloat16_raw r;
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
        r.x = (unsigned short)((bits >> 16) | 0x0040u);  // NaN: keep the sign, make it quiet
    } else {
        bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest, ties to even
        r.x = (unsigned short)(bits >> 16);
    }
    return __nv_bfloat16(r);
}
inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
inline float __bfloat162float(__nv_bfloat16 h) {
    uint32_t bits = (uint32_t)h.__x << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
inline __nv_bfloat16::__nv_bfloat16(float f) : __x(__float2bfloat16_rn(f).__x) {}
inline __nv_bfloat16::operator float() const { return __bfloat162float(*this); }

inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return __nv_bfloat16(__nv_bfloat16_raw{u}); }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
    return __nv_bfloat162{__float2bfloat16_rn(a), __float2bfloat16_rn(b)};
}
inline __nv_bfloat162 __float22bfloat162_rn(float2 f) { return __floats2bfloat162_rn(f.x, f.y); }
inline float2 __bfloat1622float2(__nv_bfloat162 h) { return float2{__bfloat162float(h.x), __bfloat162float(h.y)}; }
inline float __low2float(__nv_bfloat162 h) { return __bfloat162float(h.x); }
inline float __high2float(__nv_bfloat162 h) { return __bfloat162float(h.y); }
