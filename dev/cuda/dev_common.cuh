// dev_common.cuh: what the dev/cuda programs share: random inputs, host <-> device copies
// through floatX, the comparison against the CPU reference, and a cudaEvent benchmark.
// defines: DevRng, rand_vec, round_to_floatX, dev_upload, dev_upload_into, dev_upload_f32, dev_download,
//          dev_download_f32, DevTol, tol_for, dev_check, dev_expect, bench_ms, dev_report_gbs,
//          dev_report_tflops, dev_parse_args, dev_print_device, dev_finish
//
// Every program prints one line per comparison, "PASS <op> ..." or "FAIL <op> ...", then
// one machine-readable line per benchmark that scripts/gpu_check.sh collects:
//   RESULT <op> <precision> <PASS|FAIL> <value> <unit>
// and exits non-zero if any comparison failed.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../../llmc/cuda/common.cuh"

// ---------------------------------------------------------------------------------------
// random inputs: xorshift64*, the same stream on every machine

struct DevRng {
    uint64_t s;
    explicit DevRng(uint64_t seed) : s(seed * 2685821657736338717ULL + 1) {}
    uint64_t next() {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        return s * 2685821657736338717ULL;
    }
    float uniform() { return (float)((next() >> 40) / (double)(1ULL << 24)) * 2.0f - 1.0f; }  // [-1,1)
    int below(int n) { return (int)((next() >> 33) % (uint64_t)n); }
};

inline std::vector<float> rand_vec(DevRng& rng, size_t n, float scale = 1.0f) {
    std::vector<float> v(n);
    for (float& x : v) x = scale * rng.uniform();
    return v;
}

// Rounds every value to what floatX can hold, so the CPU reference sees exactly the
// inputs the GPU sees (a no-op in the fp32 build).
inline void round_to_floatX(std::vector<float>& v) {
    for (float& x : v) x = to_float(from_float<floatX>(x));
}

// ---------------------------------------------------------------------------------------
// copies (synchronous; these programs are not about overlap)

// h as floatX into d (h.size() values), then a new buffer holding it
inline void dev_upload_into(floatX* d, const std::vector<float>& h) {
    std::vector<floatX> tmp(h.size());
    for (size_t i = 0; i < h.size(); i++) tmp[i] = from_float<floatX>(h[i]);
    CHECK_CUDA(cudaMemcpy(d, tmp.data(), h.size() * sizeof(floatX), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaDeviceSynchronize());  // a pageable copy may still be in flight on return
}
inline floatX* dev_upload(const std::vector<float>& h) {
    floatX* d = nullptr;
    CHECK_CUDA(cudaMalloc(&d, std::max<size_t>(1, h.size()) * sizeof(floatX)));
    dev_upload_into(d, h);
    return d;
}
template <typename T>
inline T* dev_upload_raw(const std::vector<T>& h) {
    T* d = nullptr;
    CHECK_CUDA(cudaMalloc(&d, std::max<size_t>(1, h.size()) * sizeof(T)));
    CHECK_CUDA(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaDeviceSynchronize());
    return d;
}
inline float* dev_upload_f32(const std::vector<float>& h) { return dev_upload_raw(h); }

inline std::vector<float> dev_download(const floatX* d, size_t n) {
    std::vector<floatX> tmp(n);
    CHECK_CUDA(cudaMemcpy(tmp.data(), d, n * sizeof(floatX), cudaMemcpyDeviceToHost));
    std::vector<float> h(n);
    for (size_t i = 0; i < n; i++) h[i] = to_float(tmp[i]);
    return h;
}
inline std::vector<float> dev_download_f32(const float* d, size_t n) {
    std::vector<float> h(n);
    CHECK_CUDA(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
}

// ---------------------------------------------------------------------------------------
// comparison: element i passes when |got - ref| <= atol + rtol * |ref|, with
// atol = atol_frac * max|ref| + atol_abs (an error is judged against the tensor's scale,
// so values that cancel to near zero do not fail on rounding noise). NaN/inf always fail.

struct DevTol {
    double rtol;
    double atol_frac;
    double atol_abs = 0.0;  // a floor for tensors whose exact value is (near) zero everywhere
};

// fp32 value for the fp32 build, bf16 value for the bf16 build
inline DevTol tol_for(DevTol fp32, DevTol bf16) {
#ifdef ENABLE_BF16
    (void)fp32;
    return bf16;
#else
    (void)bf16;
    return fp32;
#endif
}

static int g_dev_failures = 0;  // this program's count of failed checks
static bool g_dev_quick = false;  // --quick: only the small cases (for compute-sanitizer)
static bool g_dev_bench = false;  // --bench: only the benchmarks, at sizes no CPU reference checks
// --profile: --bench's first sizes (a program says which), each timed function run once, without
// warm-ups: a short run for Nsight Compute to profile every kernel launch of (dev/bench_device.sh)
static bool g_dev_profile = false;

// Parses the dev programs' one flag; anything else is an error.
inline void dev_parse_args(int argc, char** argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) g_dev_quick = true;
        else if (strcmp(argv[i], "--bench") == 0) g_dev_bench = true;
        else if (strcmp(argv[i], "--profile") == 0) g_dev_bench = g_dev_profile = true;
        else fail("unknown argument %s (usage: %s [--quick | --bench | --profile])", argv[i], argv[0]);
    }
}

inline bool dev_check(const char* op, const char* what, const std::vector<float>& got,
                      const std::vector<float>& ref, DevTol tol) {
    CHECK(got.size() == ref.size(), "%s %s: %zu vs %zu values", op, what, got.size(), ref.size());
    double max_ref = 0.0;
    for (float r : ref) max_ref = std::max(max_ref, (double)std::fabs(r));
    const double atol = tol.atol_frac * max_ref + tol.atol_abs;
    double max_abs = 0.0, max_rel = 0.0;
    size_t bad = 0, first_bad = 0;
    for (size_t i = 0; i < ref.size(); i++) {
        double g = got[i], r = ref[i], err = std::fabs(g - r);
        bool ok = std::isfinite(g) && err <= atol + tol.rtol * std::fabs(r);
        if (!ok) {
            if (bad == 0) first_bad = i;
            bad++;
        }
        if (std::isfinite(err)) {
            max_abs = std::max(max_abs, err);
            if (std::fabs(r) > atol) max_rel = std::max(max_rel, err / std::fabs(r));
        }
    }
    bool pass = bad == 0;
    printf("%s %s %s [%s] n=%zu max_abs=%.3e max_rel=%.3e max|ref|=%.3e (rtol %.1e, atol %.1e*max|ref|)",
           pass ? "PASS" : "FAIL", op, what, PRECISION_NAME, ref.size(), max_abs, max_rel, max_ref,
           tol.rtol, tol.atol_frac);
    if (!pass) {
        printf(" %zu bad, first at %zu: got %.6e want %.6e", bad, first_bad, got[first_bad],
               ref[first_bad]);
        g_dev_failures++;
    }
    printf("\n");
    fflush(stdout);
    return pass;
}

// a check that is not a tensor comparison (determinism, an invariant)
inline bool dev_expect(const char* op, const char* what, bool ok) {
    printf("%s %s %s [%s]\n", ok ? "PASS" : "FAIL", op, what, PRECISION_NAME);
    if (!ok) g_dev_failures++;
    fflush(stdout);
    return ok;
}

// ---------------------------------------------------------------------------------------
// benchmark: median milliseconds over reps runs of f() on ctx.stream, after 2 warm-ups (with
// --profile: one run, no warm-up)

template <typename F>
inline float bench_ms(const CudaContext& ctx, int reps, F f) {
    cudaEvent_t start, stop;
    CHECK_CUDA(cudaEventCreate(&start));
    CHECK_CUDA(cudaEventCreate(&stop));
    if (g_dev_profile) reps = 1;
    for (int i = 0; i < (g_dev_profile ? 0 : 2); i++) f();
    std::vector<float> times;
    for (int i = 0; i < reps; i++) {
        CHECK_CUDA(cudaEventRecord(start, ctx.stream));
        f();
        CHECK_CUDA(cudaEventRecord(stop, ctx.stream));
        CHECK_CUDA(cudaEventSynchronize(stop));
        float ms = 0.0f;
        CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
        times.push_back(ms);
    }
    CHECK_CUDA(cudaEventDestroy(start));
    CHECK_CUDA(cudaEventDestroy(stop));
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

// One benchmark line. bytes or flops per call, ms per call -> GB/s or TFLOP/s.
inline void dev_report_gbs(const char* op, const char* what, double bytes, float ms) {
    double gbs = bytes / (ms * 1e-3) / 1e9;
    printf("bench %s %s [%s]: %.4f ms, %.1f GB/s\n", op, what, PRECISION_NAME, ms, gbs);
    printf("RESULT %s:%s %s %s %.1f GB/s\n", op, what, PRECISION_NAME,
           g_dev_failures ? "FAIL" : "PASS", gbs);
    fflush(stdout);
}
inline void dev_report_tflops(const char* op, const char* what, double flops, float ms) {
    double tf = flops / (ms * 1e-3) / 1e12;
    printf("bench %s %s [%s]: %.4f ms, %.2f TFLOP/s\n", op, what, PRECISION_NAME, ms, tf);
    printf("RESULT %s:%s %s %s %.2f TFLOP/s\n", op, what, PRECISION_NAME,
           g_dev_failures ? "FAIL" : "PASS", tf);
    fflush(stdout);
}

inline void dev_print_device(const CudaContext& ctx, const char* program) {
    printf("%s [%s] on %s (sm_%d%d, %d SMs, %.0f GB)\n", program, PRECISION_NAME, ctx.props.name,
           ctx.props.major, ctx.props.minor, ctx.props.multiProcessorCount,
           ctx.props.totalGlobalMem / 1e9);
}

// the exit status: 0 iff every check passed
inline int dev_finish(const char* program) {
    printf("%s [%s]: %s (%d failed check%s)\n", program, PRECISION_NAME,
           g_dev_failures ? "FAIL" : "PASS", g_dev_failures, g_dev_failures == 1 ? "" : "s");
    return g_dev_failures ? 1 : 0;
}
