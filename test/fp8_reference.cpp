// fp8_reference.cpp: NVIDIA's own FP8 conversions, the reference test/test_emu_fp8.cu holds the
// emulated GPU's cuda_fp8.h (llmc/emu/include) to. Compiled by the host compiler against the CUDA
// toolkit's cuda_fp8.h (emu.mk: -I /usr/local/cuda/include), whose conversions are
// __host__ __device__ with a software path on the host; it never sees the emulator's header.
// It runs each conversion over a set of inputs and writes inputs and results to a table
// (test/fp8_table.h describes the file):
//   - every one of the 256 codes of each format widened to float, double and bfloat16, and 256
//     pairs (each code in each half) widened to float2;
//   - floats: +-0, +-infinity, NaNs with several payloads, every fp8 number and its two float
//     neighbours, every midpoint between neighbouring fp8 numbers (where the rounding ties),
//     the midpoint between 0 and the smallest subnormal, the one half a step above the largest
//     finite number (where saturation starts), each with its float neighbours, both signs; then
//     random floats over the formats' range and beyond, and random bit patterns;
//   - doubles: the floats, and each midpoint's double neighbours (which no float can be), NaNs,
//     the largest and smallest doubles, random doubles;
//   - every bfloat16 bit pattern; ints; pairs and quads of the floats;
// through __nv_cvt_{float,double,bfloat16raw}_to_fp8 and __nv_cvt_float2_to_fp8x2 with both
// saturations, and the classes' constructors (__nv_fp8_e4m3, __nv_fp8_e5m2, the x4 types).
// The random inputs come from a fixed seed, so the table is the same on every run.
//
// usage: fp8_reference OUT_FILE
//
// defines: main
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cfloat>
#include <climits>
#include <algorithm>
#include <deque>
#include <vector>
#include <cuda_fp8.h>
#include "fp8_table.h"

#if !defined(__CUDA_FP8_TYPES_EXIST__) || defined(GPTRAIN_EMU)
#error "fp8_reference.cpp must be built against the CUDA toolkit's cuda_fp8.h, not the emulator's"
#endif

// splitmix64: a small generator whose whole state is one number, so the table is reproducible
static uint64_t rng_state = 0x5eed0f8ull;
static uint64_t rng_next() {
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

struct Section {
    Fp8TableSection head;
    std::vector<Fp8TableEntry> entries;
};

static __nv_fp8_interpretation_t interpretation_of(int fp8) { return fp8 == 0 ? __NV_E4M3 : __NV_E5M2; }
static __nv_saturation_t saturation_of(int sat) { return sat == 0 ? __NV_NOSAT : __NV_SATFINITE; }

// NVIDIA's widening of one code to float, through the class's operator float
static float nvidia_to_float(int fp8, unsigned code) {
    if (fp8 == 0) {
        __nv_fp8_e4m3 v;
        v.__x = (__nv_fp8_storage_t)code;
        return float(v);
    }
    __nv_fp8_e5m2 v;
    v.__x = (__nv_fp8_storage_t)code;
    return float(v);
}

// The float inputs for one format: see the header comment.
static std::vector<float> float_inputs(int fp8, std::vector<double>* midpoints) {
    std::vector<float> in;
    const uint32_t specials[] = {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u,  // +-0, +-inf
                                 0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u,  // quiet, signalling NaNs
                                 0x7FFFFFFFu, 0xFFFFFFFFu, 0x7FA00000u, 0x7F900000u,  // NaN payloads
                                 0x7F7FFFFFu, 0xFF7FFFFFu, 0x00800000u, 0x00000001u,  // FLT_MAX, FLT_MIN, denormal
                                 0x80000001u, 0x3F800000u, 0xBF800000u};
    for (uint32_t u : specials) in.push_back(bits_float(u));
    // the format's non-negative finite numbers in order (the codes 0x00.. are in order of magnitude)
    std::vector<double> numbers;
    for (unsigned code = 0; code < 0x80; code++) {
        const float v = nvidia_to_float(fp8, code);
        if (std::isfinite(v)) numbers.push_back(v);
    }
    std::sort(numbers.begin(), numbers.end());
    // points where the rounding ties: between neighbours, below the smallest subnormal, and half a
    // step above the largest finite number (the step of the top binade)
    midpoints->clear();
    for (size_t i = 0; i + 1 < numbers.size(); i++) midpoints->push_back(0.5 * (numbers[i] + numbers[i + 1]));
    const double top = numbers.back(), below_top = numbers[numbers.size() - 2];
    midpoints->push_back(top + 0.5 * (top - below_top));
    for (int sign = 0; sign < 2; sign++) {
        for (double d : numbers) {
            const float v = (float)(sign ? -d : d);
            in.push_back(v);
            in.push_back(std::nextafter(v, INFINITY));
            in.push_back(std::nextafter(v, -INFINITY));
        }
        for (double m : *midpoints) {
            const float v = (float)(sign ? -m : m);  // exact: a midpoint has 5 significant bits
            in.push_back(v);
            in.push_back(std::nextafter(v, INFINITY));
            in.push_back(std::nextafter(v, -INFINITY));
            in.push_back(std::nextafter(std::nextafter(v, INFINITY), INFINITY));
            in.push_back(std::nextafter(std::nextafter(v, -INFINITY), -INFINITY));
        }
    }
    // random floats whose binade lies from 4 below the smallest subnormal's to 3 above the largest
    const int lo = fp8 == 0 ? -13 : -20, hi = fp8 == 0 ? 11 : 18;
    for (int i = 0; i < 20000; i++) {
        const uint64_t r = rng_next();
        const int binade = lo + (int)(r % (uint64_t)(hi - lo + 1));
        const uint32_t mantissa = (uint32_t)(r >> 32) & 0x7FFFFFu;
        const uint32_t sign = (uint32_t)(r >> 60) & 1u;
        in.push_back(bits_float((sign << 31) | ((uint32_t)(binade + 127) << 23) | mantissa));
    }
    for (int i = 0; i < 5000; i++) in.push_back(bits_float((uint32_t)rng_next()));  // any bits
    return in;
}

// The double inputs: the floats, each midpoint's double neighbours, NaNs, extremes, random doubles.
static std::vector<double> double_inputs(int fp8, const std::vector<float>& floats, const std::vector<double>& midpoints) {
    std::vector<double> in(floats.begin(), floats.end());
    for (int sign = 0; sign < 2; sign++) {
        for (double m : midpoints) {
            const double v = sign ? -m : m;
            in.push_back(std::nextafter(v, INFINITY));
            in.push_back(std::nextafter(v, -INFINITY));
        }
    }
    const uint64_t specials[] = {0x7FF8000000000000ull, 0xFFF8000000000000ull, 0x7FF4000000000000ull,
                                 0xFFF4000000000000ull, 0x7FF0000000000001ull, 0x7FFC000000000000ull,
                                 0xFFFC000000000000ull, 0x7FFFFFFFFFFFFFFFull, 0x7FEFFFFFFFFFFFFFull,
                                 0x0000000000000001ull, 0x8000000000000001ull, 0x0010000000000000ull};
    for (uint64_t u : specials) in.push_back(bits_double(u));
    const int lo = fp8 == 0 ? -13 : -20, hi = fp8 == 0 ? 11 : 18;
    for (int i = 0; i < 10000; i++) {
        const uint64_t r = rng_next(), s = rng_next();
        const int binade = lo + (int)(s % (uint64_t)(hi - lo + 1));
        const uint64_t sign = (s >> 63) & 1u;
        in.push_back(bits_double((sign << 63) | ((uint64_t)(binade + 1023) << 52) | (r & 0xFFFFFFFFFFFFFull)));
    }
    return in;
}

static std::vector<int> int_inputs() {
    std::vector<int> in;
    for (int i = -1000; i <= 1000; i++) in.push_back(i);
    for (int k = 10; k < 31; k++)
        for (int d = -1; d <= 1; d++) {
            in.push_back((1 << k) + d);
            in.push_back(-((1 << k) + d));
        }
    const int near_edges[] = {416, 432, 447, 448, 449, 463, 464, 465, 479, 480, 481, 49152, 53248,
                              57343, 57344, 57345, 59391, 59392, 61439, 61440, 61441, INT_MAX, INT_MIN};
    for (int v : near_edges) {
        in.push_back(v);
        in.push_back(v == INT_MIN ? v : -v);
    }
    return in;
}

int main(int argc, char** argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT_FILE\n", argv[0]);
        return 2;
    }
    std::deque<Section> sections;  // a deque: the references section() hands out stay valid
    auto section = [&](uint32_t op, int fp8, int sat) -> std::vector<Fp8TableEntry>& {
        sections.push_back(Section{Fp8TableSection{op, (uint32_t)fp8, (uint32_t)sat, 0}, {}});
        return sections.back().entries;
    };
    for (int fp8 = 0; fp8 < 2; fp8++) {
        const __nv_fp8_interpretation_t kind = interpretation_of(fp8);
        std::vector<double> midpoints;
        const std::vector<float> floats = float_inputs(fp8, &midpoints);
        const std::vector<double> doubles = double_inputs(fp8, floats, midpoints);
        const std::vector<int> ints = int_inputs();
        // widening: every code, every pair
        {
            auto& to_f = section(FP8_TABLE_TO_FLOAT, fp8, 0);
            auto& to_d = section(FP8_TABLE_TO_DOUBLE, fp8, 0);
            auto& to_b = section(FP8_TABLE_TO_BF16, fp8, 0);
            for (unsigned code = 0; code < 256; code++) {
                double d;
                __nv_bfloat16 b;
                if (fp8 == 0) {
                    __nv_fp8_e4m3 v;
                    v.__x = (__nv_fp8_storage_t)code;
                    d = double(v);
                    b = __nv_bfloat16(v);
                } else {
                    __nv_fp8_e5m2 v;
                    v.__x = (__nv_fp8_storage_t)code;
                    d = double(v);
                    b = __nv_bfloat16(v);
                }
                to_f.push_back(Fp8TableEntry{{code, 0}, float_bits(nvidia_to_float(fp8, code))});
                to_d.push_back(Fp8TableEntry{{code, 0}, double_bits(d)});
                to_b.push_back(Fp8TableEntry{{code, 0}, static_cast<__nv_bfloat16_raw>(b).x});
            }
            // pairs: every code in the low byte, and (37 being odd) every code once in the high one
            auto& to_f2 = section(FP8_TABLE_TO_FLOAT2, fp8, 0);
            for (unsigned code = 0; code < 256; code++) {
                const unsigned pair = code | (((code * 37u + 11u) & 0xFFu) << 8);
                float2 f;
                if (fp8 == 0) {
                    __nv_fp8x2_e4m3 v;
                    v.__x = (__nv_fp8x2_storage_t)pair;
                    f = float2(v);
                } else {
                    __nv_fp8x2_e5m2 v;
                    v.__x = (__nv_fp8x2_storage_t)pair;
                    f = float2(v);
                }
                to_f2.push_back(Fp8TableEntry{{pair, 0}, float_bits(f.x) | (float_bits(f.y) << 32)});
            }
        }
        // narrowing by the functions, both saturations
        for (int sat = 0; sat < 2; sat++) {
            const __nv_saturation_t s = saturation_of(sat);
            auto& cf = section(FP8_TABLE_CVT_FLOAT, fp8, sat);
            for (float f : floats) cf.push_back(Fp8TableEntry{{float_bits(f), 0}, __nv_cvt_float_to_fp8(f, s, kind)});
            auto& cd = section(FP8_TABLE_CVT_DOUBLE, fp8, sat);
            for (double d : doubles) cd.push_back(Fp8TableEntry{{double_bits(d), 0}, __nv_cvt_double_to_fp8(d, s, kind)});
            auto& cb = section(FP8_TABLE_CVT_BF16, fp8, sat);
            for (unsigned u = 0; u < 65536; u++) {
                __nv_bfloat16_raw raw;
                raw.x = (unsigned short)u;
                cb.push_back(Fp8TableEntry{{u, 0}, __nv_cvt_bfloat16raw_to_fp8(raw, s, kind)});
            }
            auto& c2 = section(FP8_TABLE_CVT_FLOAT2, fp8, sat);
            for (size_t i = 0; i < 5000; i++) {
                const float2 f2 = {floats[i % floats.size()], floats[(i * 7919 + 13) % floats.size()]};
                c2.push_back(Fp8TableEntry{{float_bits(f2.x), float_bits(f2.y)}, __nv_cvt_float2_to_fp8x2(f2, s, kind)});
            }
        }
        // narrowing by the constructors (whatever saturation CUDA's header gives them)
        auto& kf = section(FP8_TABLE_CTOR_FLOAT, fp8, 1);
        auto& kd = section(FP8_TABLE_CTOR_DOUBLE, fp8, 1);
        auto& kb = section(FP8_TABLE_CTOR_BF16, fp8, 1);
        auto& ki = section(FP8_TABLE_CTOR_INT, fp8, 1);
        auto& k4 = section(FP8_TABLE_CTOR_FLOAT4, fp8, 1);
        for (float f : floats)
            kf.push_back(Fp8TableEntry{{float_bits(f), 0}, fp8 == 0 ? __nv_fp8_e4m3(f).__x : __nv_fp8_e5m2(f).__x});
        for (double d : doubles)
            kd.push_back(Fp8TableEntry{{double_bits(d), 0}, fp8 == 0 ? __nv_fp8_e4m3(d).__x : __nv_fp8_e5m2(d).__x});
        for (unsigned u = 0; u < 65536; u++) {
            __nv_bfloat16_raw raw;
            raw.x = (unsigned short)u;
            const __nv_bfloat16 b(raw);
            kb.push_back(Fp8TableEntry{{u, 0}, fp8 == 0 ? __nv_fp8_e4m3(b).__x : __nv_fp8_e5m2(b).__x});
        }
        for (int i : ints)
            ki.push_back(Fp8TableEntry{{(uint32_t)i, 0}, fp8 == 0 ? __nv_fp8_e4m3(i).__x : __nv_fp8_e5m2(i).__x});
        for (size_t i = 0; i < 5000; i++) {
            const size_t n = floats.size();
            const float4 f4 = {floats[(i * 4) % n], floats[(i * 4 + 1) % n], floats[(i * 131 + 2) % n], floats[(i * 977 + 3) % n]};
            const uint32_t x = fp8 == 0 ? __nv_fp8x4_e4m3(f4).__x : __nv_fp8x4_e5m2(f4).__x;
            k4.push_back(Fp8TableEntry{{float_bits(f4.x) | (float_bits(f4.y) << 32), float_bits(f4.z) | (float_bits(f4.w) << 32)}, x});
        }
    }
    FILE* out = fopen(argv[1], "wb");
    if (!out) {
        perror(argv[1]);
        return 1;
    }
    const uint32_t head[2] = {FP8_TABLE_MAGIC, FP8_TABLE_VERSION};
    bool ok = fwrite(head, sizeof(head), 1, out) == 1;
    size_t total = 0;
    for (Section& s : sections) {
        s.head.count = (uint32_t)s.entries.size();
        ok = ok && fwrite(&s.head, sizeof(s.head), 1, out) == 1;
        ok = ok && fwrite(s.entries.data(), sizeof(Fp8TableEntry), s.entries.size(), out) == s.entries.size();
        total += s.entries.size();
    }
    ok = (fclose(out) == 0) && ok;
    if (!ok) {
        fprintf(stderr, "%s: write failed\n", argv[1]);
        return 1;
    }
    printf("fp8_reference: %zu results of NVIDIA's cuda_fp8.h (CUDA %d.%d) in %zu sections -> %s\n", total,
           CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10, sections.size(), argv[1]);
    return 0;
}
