// fp8.cu: llmc/cuda/fp8.cuh against references taken from the specifications, then benchmarks.
//   1. the numbers: the 256 codes of E4M3 and E5M2 decoded from the OCP 8-bit Floating Point
//      specification's definition (sign, exponent bias 7 or 15, subnormals; E4M3's only NaN
//      S.1111.111 and no infinity, E5M2's IEEE-like infinities and NaNs) by spec_decode (fp8_spec.cuh),
//      compared with cuda_fp8.h's own widening on the host (NVIDIA's header on a GPU machine);
//   2. the cast: every output code against the input times the scale (one fp32 product, as the
//      kernel) rounded to the nearest number of that table, ties to the even code, saturated to
//      +-max (__NV_SATFINITE): bit for bit, at odd sizes, with planted ties, zeros, saturation and
//      infinities; amax == max |x| exactly; NaN making amax NaN; the running max over calls;
//   2b. the cast-transpose: out_t (cols, rows) against the same reference read transposed, and
//      the plain cast written beside it bit for bit fp8_cast's; odd shapes (1x1, a row, a column,
//      partial tiles, more tiles than blocks); nothing written past either output; amax exact
//      and a running max;
//   3. the scaling state: delayed scaling worked by hand (history [1,4,2] -> 448/4; the window of
//      H steps; margin; E5M2's 57344; zero and non-finite amaxes keep the scale; H = 1024 forgets
//      an amax after exactly 1024 updates) and current scaling;
//   4. the FP8 GEMM (compute capability 8.9 or later; SKIP below, as on an A100): D against a
//      double product of the fp8 inputs decoded by the same table, times the two scale_inv, plus
//      bias or the D it accumulates onto; E4M3 x E4M3, E4M3 x E5M2, E5M2 x E4M3, FAST_ACCUM on and
//      off; and the shapes it must refuse.
// Tolerances of the GEMM: the inputs are exact, so the error is the GPU's accumulation and D's
// rounding. D rounds once (bf16: 2^-9 relative; fp32 ~1e-7): rtol 4e-3 / 1e-5. The sum: fp32
// on the emulated GPU, but Hopper's tensor cores keep fewer bits before they promote to fp32
// (about 14, DeepSeek-V3's report measured; FAST_ACCUM promotes less often): atol 2e-3 * max|D|.
// With FAST_ACCUM the sum stays in those bits: DeepSeek-V3's report measured errors up to nearly 2%
// at k = 4096, so atol 2% of max|D| times sqrt(k / 4096) (a sum of k rounding errors of either
// sign), 2e-3 at least. The H200 (2026-11-28) gave 0.58% of max|D| at k = 4096, 1 bf16 ulp past
// the tighter bound on 49 of 117 million elements.
// Each check was seen to fail (--quick on the emulated GPU, exit 1) with one slip planted in
// fp8.cuh at a time: the cast ignoring the scale, the amax taken after scaling, the finish
// reading only block 0's maximum, no saturation (__NV_NOSAT), a NaN dropped from the amax, the
// history not shifted, the margin ignored, the amax not cleared by the update, the GEMM without
// B's scale, without accumulate, without the bias epilogue. The cast-transpose's likewise: the
// tile read back untransposed, the amax taken after scaling, the scale ignored, blocks taking one
// tile each (1 x 32805 fails), the row bound dropped from the transposed store (guard bytes
// written), the finish not accumulating; and without the barrier after the tile's stores the
// race-check build (EMU_RACECHECK=1) reports a write-after-read hazard.
#include "dev_common.cuh"
#include "fp8_spec.cuh"  // defines: Fp8Spec, spec_decode, spec_positive, spec_quantize, SpecOf, spec_decode_all
#include "../../llmc/cuda/fp8.cuh"

// ---------------------------------------------------------------------------------------
// 1. the formats as the OCP FP8 specification defines them (fp8_spec.cuh) = cuda_fp8.h's

template <typename T>
static void check_format() {
    const Fp8Spec& f = SpecOf<T>::get();
    int bad = 0, first_bad = -1;
    for (int c = 0; c < 256; c++) {
        T q;
        q.__x = (__nv_fp8_storage_t)c;
        const double want = spec_decode(f, c), got = (double)(float)q;
        const bool ok = std::isnan(want) ? std::isnan(got) : got == want;
        if (!ok && bad++ == 0) first_bad = c;
    }
    char what[160];
    snprintf(what, sizeof(what), "%s: 256 codes decoded per the OCP spec = cuda_fp8.h's widening (%d differ%s%d)",
             f.name, bad, bad ? ", first 0x" : "", bad ? first_bad : 0);
    dev_expect("fp8_format", what, bad == 0);
    const std::vector<double> pos = spec_positive(f);
    snprintf(what, sizeof(what), "%s: largest finite %g = the spec's %g = Fp8Traits::max %g", f.name, pos.back(), f.max,
             (double)Fp8Traits<T>::max);
    dev_expect("fp8_format", what, pos.back() == f.max && (double)Fp8Traits<T>::max == f.max);
}

// ---------------------------------------------------------------------------------------
// 2. the cast

template <typename Tin> struct TinName;
template <> struct TinName<float> { static const char* get() { return "fp32"; } };
template <> struct TinName<__nv_bfloat16> { static const char* get() { return "bf16"; } };

template <typename Tin>
static Tin* upload_as(const std::vector<float>& h) {
    std::vector<Tin> tmp(h.size());
    for (size_t i = 0; i < h.size(); i++) tmp[i] = from_float<Tin>(h[i]);
    return dev_upload_raw(tmp);
}
template <typename Tin> static float round_as(float x) { return to_float(from_float<Tin>(x)); }

static float* dev_scalar(float v) { return dev_upload_f32(std::vector<float>{v}); }
static float get_scalar(const float* d) { return dev_download_f32(d, 1)[0]; }

// n inputs spanning 2^-24 .. 2^12 around zero (some below fp8's smallest subnormal, some beyond
// its max once scaled), the first ones planted: zeros, values that saturate, ties between
// neighbouring fp8 numbers (with a power-of-two scale), infinities (when asked: the amax is then
// infinity, so the cases that check a finite amax have none); and the largest |x| at 5/7 of n
template <typename Tout, typename Tin>
static std::vector<float> cast_inputs(size_t n, float scale, bool pow2_scale, bool infinities, uint64_t seed) {
    const Fp8Spec& f = SpecOf<Tout>::get();
    const std::vector<double> pos = spec_positive(f);
    DevRng rng(seed);
    std::vector<float> x(n);
    for (float& v : x) v = round_as<Tin>(rng.uniform() * std::ldexp(1.0f, rng.below(37) - 24));
    std::vector<float> planted = {0.0f, -0.0f, (float)(2.0 * f.max / scale), (float)(-1.5 * f.max / scale)};
    if (infinities) planted.insert(planted.end(), {INFINITY, -INFINITY});
    if (pow2_scale) {  // midpoints: exact in bf16 (at most 5 significant bits), exact after a power-of-two scale
        for (size_t i = 0; i + 1 < pos.size(); i += 5) {
            planted.push_back((float)(0.5 * (pos[i] + pos[i + 1]) / scale));
            planted.push_back((float)(-0.5 * (pos[i] + pos[i + 1]) / scale));
        }
    }
    for (size_t i = 0; i < planted.size() && i < n; i++) x[i] = round_as<Tin>(planted[i]);
    // the largest magnitude, negative, in a later block than the first (the finish must see them all)
    x[n * 5 / 7] = round_as<Tin>((float)(-4.0 * std::max(2.0 * f.max / scale, 4096.0)));
    return x;
}

static float host_amax(const std::vector<float>& x) {
    float m = 0.0f;
    for (float v : x) m = std::max(m, std::fabs(v));
    return m;
}

template <typename Tout, typename Tin>
static void run_cast_case(const CudaContext& ctx, size_t n, float scale, bool pow2_scale, bool infinities = false) {
    const Fp8Spec& f = SpecOf<Tout>::get();
    char what[128];
    snprintf(what, sizeof(what), "%s->%s n=%zu scale=%g%s", TinName<Tin>::get(), f.name, n, scale,
             infinities ? " with +-inf" : "");
    std::string w(what);
    const std::vector<double> pos = spec_positive(f);
    std::vector<float> x = cast_inputs<Tout, Tin>(n, scale, pow2_scale, infinities, 7 + n);
    Tin* d_in = upload_as<Tin>(x);
    Tout* d_out;
    CHECK_CUDA(cudaMalloc(&d_out, n));
    CHECK_CUDA(cudaMemset(d_out, 0x55, n));
    float *d_scale = dev_scalar(scale), *d_amax = dev_scalar(0.0f), *d_scale_inv = dev_scalar(-1.0f);

    fp8_cast(ctx, d_out, d_amax, d_scale_inv, d_in, d_scale, n);
    std::vector<uint8_t> got(n);
    CHECK_CUDA(cudaMemcpy(got.data(), d_out, n, cudaMemcpyDeviceToHost));
    size_t bad = 0, first = 0, ties = 0, saturated = 0;
    for (size_t i = 0; i < n; i++) {
        const float p = x[i] * scale;  // one fp32 product, as the kernel
        const int want = spec_quantize(pos, p);
        if (std::fabs((double)p) < pos.back()) {
            const auto it = std::upper_bound(pos.begin(), pos.end(), std::fabs((double)p));
            if (it != pos.begin() && it != pos.end() && 0.5 * (*(it - 1) + *it) == std::fabs((double)p)) ties++;
        } else {
            saturated++;
        }
        if (got[i] != want && bad++ == 0) first = i;
    }
    char detail[200];
    snprintf(detail, sizeof(detail), " codes = the spec's nearest-even of x*scale (%zu ties, %zu saturated; %zu differ",
             ties, saturated, bad);
    std::string msg = w + detail;
    if (bad) {
        snprintf(detail, sizeof(detail), ", first at %zu: x=%.9g got 0x%02x want 0x%02x", first, x[first], got[first],
                 spec_quantize(pos, x[first] * scale));
        msg += detail;
    }
    dev_expect("fp8_cast", (msg + ")").c_str(), bad == 0);
    const float amax = get_scalar(d_amax), want_amax = host_amax(x);
    snprintf(detail, sizeof(detail), " amax %.9g = max|x| %.9g, scale_inv %.9g = 1/scale", amax, want_amax,
             get_scalar(d_scale_inv));
    dev_expect("fp8_cast", (w + detail).c_str(), amax == want_amax && get_scalar(d_scale_inv) == 1.0f / scale);

    // the amax is a running max: a larger one stays, and a second cast brings nothing new
    const float larger = 2.0f * want_amax;
    CHECK_CUDA(cudaMemcpy(d_amax, &larger, sizeof(float), cudaMemcpyHostToDevice));
    fp8_cast(ctx, d_out, d_amax, (float*)nullptr, d_in, d_scale, n);
    const float kept = get_scalar(d_amax);
    fp8_amax(ctx, d_amax, d_in, n);  // overwrites
    const float only = get_scalar(d_amax);
    snprintf(detail, sizeof(detail), " amax kept %.9g over a smaller one; fp8_amax alone %.9g", kept, only);
    dev_expect("fp8_cast", (w + detail).c_str(), kept == 2.0f * want_amax && only == want_amax);
    CHECK_CUDA(cudaFree(d_in));
    CHECK_CUDA(cudaFree(d_out));
    for (float* p : {d_scale, d_amax, d_scale_inv}) CHECK_CUDA(cudaFree(p));
}

// a NaN among the inputs: its code is a NaN and the amax is NaN (not dropped)
template <typename Tout, typename Tin>
static void run_cast_nan(const CudaContext& ctx) {
    const Fp8Spec& f = SpecOf<Tout>::get();
    const size_t n = 77;
    std::vector<float> x = cast_inputs<Tout, Tin>(n, 1.0f, true, false, 99);
    x[41] = NAN;
    Tin* d_in = upload_as<Tin>(x);
    Tout* d_out;
    CHECK_CUDA(cudaMalloc(&d_out, n));
    float *d_scale = dev_scalar(1.0f), *d_amax = dev_scalar(0.0f);
    fp8_cast(ctx, d_out, d_amax, (float*)nullptr, d_in, d_scale, n);
    std::vector<uint8_t> got(n);
    CHECK_CUDA(cudaMemcpy(got.data(), d_out, n, cudaMemcpyDeviceToHost));
    char what[128];
    snprintf(what, sizeof(what), "%s->%s a NaN input: its code 0x%02x is a NaN, amax %g", TinName<Tin>::get(), f.name,
             got[41], get_scalar(d_amax));
    dev_expect("fp8_cast", what, std::isnan(spec_decode(f, got[41])) && std::isnan(get_scalar(d_amax)));
    CHECK_CUDA(cudaFree(d_in));
    CHECK_CUDA(cudaFree(d_out));
    CHECK_CUDA(cudaFree(d_scale));
    CHECK_CUDA(cudaFree(d_amax));
}

template <typename Tin>
static void run_casts(const CudaContext& ctx) {
    printf("-- fp8_cast from %s\n", TinName<Tin>::get());
    const size_t sizes[] = {1, 7, 3 * 37 * 48 + 5, g_dev_quick ? (size_t)4099 : (size_t)1234567};
    for (size_t n : sizes) {
        run_cast_case<__nv_fp8_e4m3, Tin>(ctx, n, 1.0f, true);
        run_cast_case<__nv_fp8_e5m2, Tin>(ctx, n, 0.25f, true);
    }
    run_cast_case<__nv_fp8_e4m3, Tin>(ctx, 3 * 37 * 48 + 5, 3.7f, false);
    run_cast_case<__nv_fp8_e5m2, Tin>(ctx, 3 * 37 * 48 + 5, 1234.5f, false);
    run_cast_case<__nv_fp8_e4m3, Tin>(ctx, 1001, 1.0f, true, true);
    run_cast_case<__nv_fp8_e5m2, Tin>(ctx, 1001, 1.0f, true, true);
    run_cast_nan<__nv_fp8_e4m3, Tin>(ctx);
    run_cast_nan<__nv_fp8_e5m2, Tin>(ctx);
}

// ---------------------------------------------------------------------------------------
// 2b. the cast-transpose: the same reference, read transposed

// A cast that makes an activation on the way (src) against the activation's pass (pass: writes
// the (rows, cols) floatX tensor it is given) and then the cast of that tensor, bit for bit:
// fp8_cast_transpose's out, out_t, amax (and, with_dbias, the bias gradient), and for a forward
// activation fp8_cast's codes and amax too
template <typename Pass>
static void check_cast_from(const CudaContext& ctx, const char* what, const char* from, const floatX* in, int rows,
                            int cols, bool with_dbias, Fp8Src src, Pass pass) {
    const size_t n = (size_t)rows * cols;
    floatX* made;
    CHECK_CUDA(cudaMalloc(&made, n * sizeof(floatX)));
    CHECK_CUDA(cudaMemset(made, 0x7f, n * sizeof(floatX)));  // overwritten by the pass
    pass(made);
    __nv_fp8_e5m2 *q[2], *q_t[2];
    floatX* dbias[2];
    float *amax[2], *amax_plain[2], *scale = dev_scalar(1.0f);
    std::vector<uint8_t> got[2], got_t[2], plain[2];
    std::vector<float> db[2];
    const std::vector<float> zeros(cols, 0.0f);
    for (int i = 0; i < 2; i++) {  // 0: made in the cast, 1: the pass then the cast
        CHECK_CUDA(cudaMalloc(&q[i], n));
        CHECK_CUDA(cudaMalloc(&q_t[i], n));
        dbias[i] = dev_upload(zeros);
        amax[i] = dev_scalar(0.0f);
        amax_plain[i] = dev_scalar(0.0f);
        fp8_cast_transpose(ctx, q[i], q_t[i], amax[i], (float*)nullptr, i == 0 ? in : made, scale, rows, cols,
                           with_dbias ? dbias[i] : nullptr, i == 0 ? src : Fp8Src{});
        got[i].resize(n), got_t[i].resize(n);
        CHECK_CUDA(cudaMemcpy(got[i].data(), q[i], n, cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(got_t[i].data(), q_t[i], n, cudaMemcpyDeviceToHost));
        db[i] = dev_download(dbias[i], cols);
        plain[i].assign(n, 0);
        if (!fp8_src_reads_in(src)) {  // the forward's plain cast
            fp8_cast(ctx, q[i], amax_plain[i], (float*)nullptr, i == 0 ? (const floatX*)nullptr : made, scale, n,
                     i == 0 ? src : Fp8Src{}, cols);
            CHECK_CUDA(cudaMemcpy(plain[i].data(), q[i], n, cudaMemcpyDeviceToHost));
        }
    }
    const bool same = got[0] == got[1] && got_t[0] == got_t[1] && db[0] == db[1] && plain[0] == plain[1] &&
                      get_scalar(amax[0]) == get_scalar(amax[1]) && get_scalar(amax[0]) > 0.0f &&
                      get_scalar(amax_plain[0]) == get_scalar(amax_plain[1]);
    const bool forward = !fp8_src_reads_in(src);
    dev_expect("fp8_cast_from", (std::string(what) + ": " + from + " made in the cast = its pass then the cast, bit "
                                 "for bit (out, out_t, amax" + (with_dbias ? ", dbias" : "") +
                                 (forward ? "; fp8_cast's too)" : ")")).c_str(),
               same);
    for (int i = 0; i < 2; i++)
        for (void* p : std::vector<void*>{q[i], q_t[i], dbias[i], amax[i], amax_plain[i]}) CHECK_CUDA(cudaFree(p));
    CHECK_CUDA(cudaFree(made));
    CHECK_CUDA(cudaFree(scale));
}

// With a bias gradient (dbias, cols long, already holding something): dbias += in's column sums,
// in fp32 and rounded once, from both kernels (the tiled one sums them itself, the 32x32 one leaves
// them to matmul_bias_backward): within a rounding of floatX and fp32 sums' error of the double sum
static void check_cast_transpose_dbias(const CudaContext& ctx, const char* what, const void* d_in, int rows, int cols) {
    const floatX* in = (const floatX*)d_in;
    std::vector<float> xin = dev_download(in, (size_t)rows * cols);  // x as the device holds it
    std::vector<float> init(cols);
    for (int c = 0; c < cols; c++) init[c] = 0.25f * (float)(c % 5) - 0.5f;  // exact in bf16
    __nv_fp8_e5m2 *q, *q_t;
    CHECK_CUDA(cudaMalloc(&q, (size_t)rows * cols));
    CHECK_CUDA(cudaMalloc(&q_t, (size_t)rows * cols));
    float *d_scale = dev_scalar(1.0f), *d_amax = dev_scalar(0.0f);
    for (int tiled = 1; tiled >= 0; tiled--) {
        floatX* dbias = dev_upload(init);
        fp8_cast_transpose(ctx, q, q_t, d_amax, (float*)nullptr, in, d_scale, rows, cols, dbias, Fp8Src{},
                           tiled == 1);
        const std::vector<float> got = dev_download(dbias, cols);
        size_t bad = 0;
        double worst = 0.0;
        for (int c = 0; c < cols; c++) {
            double sum = init[c], mag = std::fabs((double)init[c]);
            for (int r = 0; r < rows; r++) {
                sum += xin[(size_t)r * cols + c];
                mag += std::fabs((double)xin[(size_t)r * cols + c]);
            }
            const double err = std::fabs(got[c] - sum), tol = (sizeof(floatX) == 2 ? 1.0 / 128 : 1e-6) * std::fabs(sum) +
                                                               1e-6 * mag * std::sqrt((double)rows);
            worst = std::max(worst, err / std::max(tol, 1e-30));
            bad += !(err <= tol);
        }
        char detail[200];
        snprintf(detail, sizeof(detail), ": dbias += column sums, %s kernel (%zu of %d outside the tolerance, worst %.2f of it)",
                 tiled ? "tiled" : "32x32", bad, cols, worst);
        dev_expect("fp8_cast_transpose", (std::string(what) + detail).c_str(), bad == 0);
        CHECK_CUDA(cudaFree(dbias));
    }
    // the casts that make an activation on the way (Fp8Src): the same bits as the activation's
    // own pass (dev/cuda/gelu.cu and swiglu.cu check those against the CPU reference) and then the
    // cast of what it wrote. in: a gradient (of GELU's output; of SwiGLU's, read half as wide)
    if (rows % 16 == 0) {
        const size_t n = (size_t)rows * cols;
        DevRng rng(5 + rows);
        floatX* pre = dev_upload(rand_vec(rng, 2 * n, 3.0f));  // GELU's input, or SwiGLU's of cols / 2 or cols
        const int F = cols / 2;
        check_cast_from(ctx, what, "GELU's backward", in, rows, cols, true, fp8_src(Act{ACT_GELU, pre}, true),
                        [&](floatX* t) { gelu_backward(ctx, t, pre, in, n); });
        check_cast_from(ctx, what, "GELU", nullptr, rows, cols, false, fp8_src(Act{ACT_GELU, pre}, false),
                        [&](floatX* t) { gelu_forward(ctx, t, pre, n); });
        check_cast_from(ctx, what, "SwiGLU", nullptr, rows, cols, false, fp8_src(Act{ACT_SWIGLU, pre}, false),
                        [&](floatX* t) { swiglu_forward(ctx, t, pre, rows, cols); });
        if (cols % 16 == 0)
            check_cast_from(ctx, what, "SwiGLU's backward (in its output's gradient, half as wide)", in, rows, cols,
                            false, fp8_src(Act{ACT_SWIGLU, pre}, true),
                            [&](floatX* t) { swiglu_backward(ctx, t, pre, in, rows, F); });
        CHECK_CUDA(cudaFree(pre));
    }
    for (void* p : std::vector<void*>{q, q_t, d_scale, d_amax}) CHECK_CUDA(cudaFree(p));
}

// in (rows, cols) from cast_inputs; out_t (cols, rows) and, with_rows, out (rows, cols) against
// the spec's codes of x*scale; both buffers 64 bytes longer than the tensor, filled with 0x55,
// and those bytes must stay (a write past the end shows); out bit for bit = fp8_cast's output;
// amax = max|x| exactly, scale_inv = 1/scale, and a larger amax already there kept
template <typename Tout, typename Tin>
static void run_cast_transpose_case(const CudaContext& ctx, int rows, int cols, float scale, bool pow2_scale,
                                    bool with_rows) {
    const Fp8Spec& f = SpecOf<Tout>::get();
    const size_t n = (size_t)rows * cols, guard = 64;
    char what[160];
    snprintf(what, sizeof(what), "%s->%s (%d,%d) -> (%d,%d) scale=%g%s", TinName<Tin>::get(), f.name, rows, cols, cols,
             rows, scale, with_rows ? " + the plain cast" : "");
    const std::vector<double> pos = spec_positive(f);
    std::vector<float> x = cast_inputs<Tout, Tin>(n, scale, pow2_scale, false, 11 + n);
    Tin* d_in = upload_as<Tin>(x);
    Tout *d_out, *d_out_t, *d_plain;
    for (Tout** p : {&d_out, &d_out_t, &d_plain}) {
        CHECK_CUDA(cudaMalloc(p, n + guard));
        CHECK_CUDA(cudaMemset(*p, 0x55, n + guard));
    }
    float *d_scale = dev_scalar(scale), *d_amax = dev_scalar(0.0f), *d_scale_inv = dev_scalar(-1.0f);
    fp8_cast_transpose(ctx, with_rows ? d_out : (Tout*)nullptr, d_out_t, d_amax, d_scale_inv, d_in, d_scale, rows, cols);
    std::vector<uint8_t> got(n + guard), got_t(n + guard), plain(n);
    CHECK_CUDA(cudaMemcpy(got.data(), d_out, n + guard, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(got_t.data(), d_out_t, n + guard, cudaMemcpyDeviceToHost));
    size_t bad_t = 0, bad = 0, ties = 0, saturated = 0, first_t = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) {
            const size_t i = (size_t)r * cols + c;
            const float p = x[i] * scale;
            const int want = spec_quantize(pos, p);
            if (std::fabs((double)p) >= pos.back()) saturated++;
            else {
                const auto it = std::upper_bound(pos.begin(), pos.end(), std::fabs((double)p));
                if (it != pos.begin() && it != pos.end() && 0.5 * (*(it - 1) + *it) == std::fabs((double)p)) ties++;
            }
            if (got_t[(size_t)c * rows + r] != want && bad_t++ == 0) first_t = i;
            if (with_rows && got[i] != want) bad++;
        }
    size_t guard_bad = 0;
    for (size_t i = n; i < n + guard; i++) guard_bad += (got_t[i] != 0x55) + (got[i] != 0x55);
    size_t untouched = 0;  // without the plain cast, out must not be written at all
    for (size_t i = 0; i < n && !with_rows; i++) untouched += got[i] == 0x55;
    char detail[256];
    snprintf(detail, sizeof(detail), ": out_t = the spec's nearest-even of x*scale, transposed (%zu ties, %zu saturated;"
             " %zu differ", ties, saturated, bad_t);
    std::string msg = std::string(what) + detail;
    if (bad_t) {
        snprintf(detail, sizeof(detail), ", first at row %zu col %zu", first_t / cols, first_t % cols);
        msg += detail;
    }
    dev_expect("fp8_cast_transpose", (msg + ")").c_str(), bad_t == 0);
    if (with_rows) {
        // the plain cast of the same tensor: the codes must be the very bits fp8_cast writes
        float* d_amax2 = dev_scalar(0.0f);
        fp8_cast(ctx, d_plain, d_amax2, (float*)nullptr, d_in, d_scale, n);
        CHECK_CUDA(cudaMemcpy(plain.data(), d_plain, n, cudaMemcpyDeviceToHost));
        const bool same = memcmp(plain.data(), got.data(), n) == 0;
        snprintf(detail, sizeof(detail), ": out = the spec's codes (%zu differ) = fp8_cast's bits (%s)", bad,
                 same ? "same" : "differ");
        dev_expect("fp8_cast_transpose", (std::string(what) + detail).c_str(), bad == 0 && same);
        CHECK_CUDA(cudaFree(d_amax2));
    }
    const float amax = get_scalar(d_amax), want_amax = host_amax(x), scale_inv = get_scalar(d_scale_inv);
    snprintf(detail, sizeof(detail), ": amax %.9g = max|x| %.9g, scale_inv %.9g = 1/scale; %zu guard bytes written%s",
             amax, want_amax, scale_inv, guard_bad, with_rows ? "" : "; out untouched");
    dev_expect("fp8_cast_transpose", (std::string(what) + detail).c_str(),
               amax == want_amax && scale_inv == 1.0f / scale && guard_bad == 0 && (with_rows || untouched == n));
    // the amax is a running max, as fp8_cast's
    const float larger = 2.0f * want_amax;
    CHECK_CUDA(cudaMemcpy(d_amax, &larger, sizeof(float), cudaMemcpyHostToDevice));
    fp8_cast_transpose(ctx, (Tout*)nullptr, d_out_t, d_amax, (float*)nullptr, d_in, d_scale, rows, cols);
    snprintf(detail, sizeof(detail), ": a larger amax already there (%.9g) kept: %.9g", larger, get_scalar(d_amax));
    dev_expect("fp8_cast_transpose", (std::string(what) + detail).c_str(), get_scalar(d_amax) == larger);
    // the 32x32 kernel (tiled = false) writes the very bits the tiled one does, where that one ran
    if (fp8_cast_transpose_tiled(with_rows ? d_out : (Tout*)nullptr, d_out_t, d_in, rows, cols)) {
        std::vector<uint8_t> small_t(n);
        CHECK_CUDA(cudaMemset(d_plain, 0x55, n + guard));
        fp8_cast_transpose(ctx, (Tout*)nullptr, d_plain, d_amax, (float*)nullptr, d_in, d_scale, rows, cols,
                           (floatX*)nullptr, Fp8Src{}, false);
        CHECK_CUDA(cudaMemcpy(small_t.data(), d_plain, n, cudaMemcpyDeviceToHost));
        dev_expect("fp8_cast_transpose", (std::string(what) + ": the tiled kernel's out_t = the 32x32 kernel's").c_str(),
                   memcmp(small_t.data(), got_t.data(), n) == 0);
    }
    if (std::is_same<Tin, floatX>::value && cols % 8 == 0) check_cast_transpose_dbias(ctx, what, d_in, rows, cols);
    for (void* p : std::vector<void*>{d_in, d_out, d_out_t, d_plain, d_scale, d_amax, d_scale_inv}) CHECK_CUDA(cudaFree(p));
}

template <typename Tin>
static void run_cast_transposes(const CudaContext& ctx) {
    printf("-- fp8_cast_transpose from %s\n", TinName<Tin>::get());
    // odd shapes: one element, a row, a column, partial tiles both ways; 1 x 32805 and 32805 x 1
    // make 1026 tiles, more than the 1024 blocks, so blocks take several tiles
    // tiled (rows a multiple of 16, cols of 8): one tile; partial tiles both ways; one column
    // strip of 160 row tiles (the blocks split them); 129 strips (8 row splits)
    const int shapes[][2] = {{1, 1},  {1, 37},  {37, 1},   {33, 65},     {100, 300}, {1, 32805},
                             {32805, 1}, {64, 48}, {16, 8}, {80, 136}, {10240, 8}, {16, 8256}};
    for (const auto& sh : shapes) {
        run_cast_transpose_case<__nv_fp8_e4m3, Tin>(ctx, sh[0], sh[1], 1.0f, true, true);
        run_cast_transpose_case<__nv_fp8_e5m2, Tin>(ctx, sh[0], sh[1], 0.25f, true, false);
    }
    run_cast_transpose_case<__nv_fp8_e4m3, Tin>(ctx, 77, 129, 3.7f, false, false);
    run_cast_transpose_case<__nv_fp8_e5m2, Tin>(ctx, 129, 77, 1234.5f, false, true);
    if (!g_dev_quick) {
        run_cast_transpose_case<__nv_fp8_e4m3, Tin>(ctx, 1100, 1001, 2.0f, true, true);
        run_cast_transpose_case<__nv_fp8_e5m2, Tin>(ctx, 768, 3072, 0.5f, true, true);
    }
}

// ---------------------------------------------------------------------------------------
// 3. the scaling state

struct ScalingView {
    std::vector<float> amax, scale, scale_inv, history;
    bool gemm_copy;  // the GEMMs' copy of each scale_inv equals it, at a 16-byte aligned address
};
static ScalingView download(const Fp8Scaling& s) {
    std::vector<float> all = dev_download_f32(s.buffer, s.buffer_floats);
    const size_t T = (size_t)s.num_tensors;
    ScalingView v{std::vector<float>(all.begin(), all.begin() + T),
                  std::vector<float>(all.begin() + T, all.begin() + 2 * T),
                  std::vector<float>(all.begin() + 2 * T, all.begin() + 3 * T),
                  std::vector<float>(all.begin() + 3 * T, all.end()), true};
    const std::vector<float> gemm = dev_download_f32(s.gemm_scale_inv, T * FP8_GEMM_SCALE_STRIDE);
    for (size_t t = 0; t < T; t++)
        v.gemm_copy = v.gemm_copy && gemm[t * FP8_GEMM_SCALE_STRIDE] == v.scale_inv[t] &&
                      (uintptr_t)fp8_gemm_scale_inv(s, (int)t) % 16 == 0 &&
                      fp8_gemm_scale_inv(s, (int)t) >= s.buffer + s.buffer_floats;
    return v;
}
static void set_amax(const Fp8Scaling& s, const std::vector<float>& a) {
    CHECK_CUDA(cudaMemcpy(s.amax, a.data(), a.size() * sizeof(float), cudaMemcpyHostToDevice));
}

// feeds amaxes one step at a time to tensor 0, and 8 times them to tensor 1, and checks tensor
// 0's scale after each update against the numbers worked out by hand (tensor 1's: an eighth of
// them, but for the initial 1 and FLT_MAX), the scale_inv, and the amaxes cleared
static void expect_scales(const CudaContext& ctx, const char* what, Fp8Recipe recipe, float fp8_max, int H, int margin,
                          const std::vector<float>& amaxes, const std::vector<float>& want) {
    Fp8Scaling s;
    fp8_scaling_init(&s, recipe, fp8_max, 2, H, margin);
    bool ok = true;
    std::string got_list;
    for (size_t i = 0; i < amaxes.size(); i++) {
        set_amax(s, {amaxes[i], 8.0f * amaxes[i]});
        fp8_scaling_update(ctx, s);
        ScalingView v = download(s);
        char buf[64];
        snprintf(buf, sizeof(buf), "%s%g", i ? " " : "", v.scale[0]);
        got_list += buf;
        const float want1 = want[i] == 1.0f || want[i] == FLT_MAX ? want[i] : want[i] / 8.0f;
        ok = ok && v.scale[0] == want[i] && v.scale_inv[0] == 1.0f / want[i] && v.scale[1] == want1 &&
             v.scale_inv[1] == 1.0f / want1 && v.amax[0] == 0.0f && v.amax[1] == 0.0f && v.gemm_copy;
    }
    char msg[400];
    snprintf(msg, sizeof(msg), "%s: scales %s", what, got_list.c_str());
    dev_expect("fp8_scaling", msg, ok);
    fp8_scaling_free(&s);
}

static void run_scaling(const CudaContext& ctx) {
    printf("-- fp8_scaling\n");
    const float E4 = 448.0f, E5 = 57344.0f;
    // history [1,4,2] (H=3): 448/1, then 448/4 while 4 is in the window, 448/2 once it leaves
    expect_scales(ctx, "delayed e4m3 H=3 amaxes 1 4 2 0.5 0.5 -> 448 112 112 112 224", FP8_RECIPE_DELAYED, E4, 3, 0,
                  {1, 4, 2, 0.5f, 0.5f}, {448, 112, 112, 112, 224});
    expect_scales(ctx, "delayed e4m3 H=3 margin 1 -> 448/4/2 = 56", FP8_RECIPE_DELAYED, E4, 3, 1, {1, 4, 2},
                  {224, 56, 56});
    expect_scales(ctx, "delayed e5m2 H=2 amaxes 4 2 1 -> 57344/4 = 14336, then 28672", FP8_RECIPE_DELAYED, E5, 2, 0,
                  {4, 2, 1}, {14336, 14336, 28672});
    expect_scales(ctx, "delayed e4m3: amax 0 keeps the initial scale 1", FP8_RECIPE_DELAYED, E4, 3, 0, {0, 0, 8},
                  {1, 1, 56});
    expect_scales(ctx, "delayed e4m3 H=2: an inf amax keeps the scale while in the window", FP8_RECIPE_DELAYED, E4, 2, 0,
                  {2, INFINITY, 4, 4}, {224, 224, 224, 112});
    expect_scales(ctx, "delayed e4m3 H=2: a NaN amax keeps the scale while in the window", FP8_RECIPE_DELAYED, E4, 2, 0,
                  {2, NAN, 4, 4}, {224, 224, 224, 112});
    expect_scales(ctx, "delayed e4m3: an amax of 2^-130 gives FLT_MAX, not inf", FP8_RECIPE_DELAYED, E4, 1, 0,
                  {std::ldexp(1.0f, -130)}, {FLT_MAX});
    expect_scales(ctx, "current e4m3 amaxes 1 4 2 -> 448 112 224 (no history)", FP8_RECIPE_CURRENT, E4, 1024, 0,
                  {1, 4, 2}, {448, 112, 224});

    // H = 1024: an amax of 1000 sets the scale for 1024 updates (itself and 1023 more), then goes
    {
        Fp8Scaling s;
        fp8_scaling_init(&s, FP8_RECIPE_DELAYED, E4, 1);
        CHECK(s.history_len == 1024, "default history %d", s.history_len);
        std::vector<float> scales;
        for (int step = 0; step < 1025; step++) {
            set_amax(s, {step == 0 ? 1000.0f : 1.0f});
            fp8_scaling_update(ctx, s);
            if (step == 0 || step == 1023 || step == 1024) scales.push_back(download(s).scale[0]);
        }
        char msg[200];
        snprintf(msg, sizeof(msg), "delayed e4m3 H=1024 (default): amax 1000 then 1s: scale %g at step 0, %g at 1023, "
                 "%g at 1024 (want 0.448, 0.448, 448)", scales[0], scales[1], scales[2]);
        dev_expect("fp8_scaling", msg, scales[0] == 448.0f / 1000.0f && scales[1] == scales[0] && scales[2] == 448.0f);
        fp8_scaling_free(&s);
    }
    // tensors are independent, and only [first, first+count) moves; two states fed the same
    // amaxes hold the same bits (what every data-parallel rank does after the all-reduce)
    {
        Fp8Scaling a, b;
        fp8_scaling_init(&a, FP8_RECIPE_DELAYED, E4, 3, 4);
        fp8_scaling_init(&b, FP8_RECIPE_DELAYED, E4, 3, 4);
        DevRng rng(5);
        for (int step = 0; step < 9; step++) {
            std::vector<float> am = {std::fabs(rng.uniform()) * 50, std::fabs(rng.uniform()), std::fabs(rng.uniform()) * 3};
            set_amax(a, am);
            set_amax(b, am);
            fp8_scaling_update(ctx, a);
            fp8_scaling_update(ctx, b);
        }
        set_amax(a, {1e-3f, 1e-3f, 1e-3f});
        const ScalingView before = download(a);
        fp8_scaling_update(ctx, a, 1, 1);
        const ScalingView after = download(a), other = download(b);
        const bool same = memcmp(before.history.data(), other.history.data(), other.history.size() * 4) == 0 &&
                          before.scale == other.scale;
        const bool only_one = after.scale[0] == before.scale[0] && after.scale[2] == before.scale[2] &&
                              after.history[0] == before.history[0] && after.history[8] == before.history[8] &&
                              after.history[4] == 1e-3f && after.amax[0] == 1e-3f && after.amax[1] == 0.0f;
        dev_expect("fp8_scaling", "two states fed the same amaxes hold the same bits; an update of tensor 1 alone "
                   "leaves tensors 0 and 2", same && only_one);
        fp8_scaling_free(&a);
        fp8_scaling_free(&b);
    }
    // a buffer written whole (a resumed checkpoint's state): fp8_scaling_copy_gemm brings the
    // GEMMs' copy of scale_inv up to it
    {
        Fp8Scaling s;
        fp8_scaling_init(&s, FP8_RECIPE_DELAYED, E4, 5, 2);
        std::vector<float> all(s.buffer_floats);
        for (size_t i = 0; i < all.size(); i++) all[i] = 0.25f * (float)(i + 1);
        CHECK_CUDA(cudaMemcpy(s.buffer, all.data(), all.size() * sizeof(float), cudaMemcpyHostToDevice));
        const bool stale = !download(s).gemm_copy;
        fp8_scaling_copy_gemm(ctx, s);
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        dev_expect("fp8_scaling", "a buffer written whole: fp8_scaling_copy_gemm gives the GEMMs' 16-byte aligned "
                   "copy its scale_inv (stale before)", stale && download(s).gemm_copy);
        fp8_scaling_free(&s);
    }
}

// ---------------------------------------------------------------------------------------
// 4. the FP8 GEMM


// A (m,k) and B (n,k) row-major, cast from random data with scales that use the formats' range;
// D (m,n) column-major = D^T row-major (n,m)
template <typename TA, typename TB>
static void run_gemm_case(const CudaContext& ctx, int m, int n, int k, bool bias, bool accumulate, bool fast_accum,
                          bool scales, const char* bench_name) {
    char what[160];
    snprintf(what, sizeof(what), "%s x %s m=%d n=%d k=%d%s%s%s%s", SpecOf<TA>::get().name, SpecOf<TB>::get().name, m, n,
             k, bias ? " bias" : "", accumulate ? " accumulate" : "", fast_accum ? " fast_accum" : "",
             scales ? "" : " no scales");
    printf("-- fp8_matmul %s\n", what);
    DevRng rng(1000 + m + n + k);
    const size_t na = (size_t)m * k, nb = (size_t)n * k, nd = (size_t)m * n;
    std::vector<float> a = rand_vec(rng, na, 3.0f), b = rand_vec(rng, nb, 0.02f), bv = rand_vec(rng, (size_t)m, 0.5f);
    std::vector<float> d0 = rand_vec(rng, nd, 1.0f);
    round_to_floatX(d0);
    __nv_bfloat16* d_a_hi = upload_as<__nv_bfloat16>(a);
    __nv_bfloat16* d_b_hi = upload_as<__nv_bfloat16>(b);
    __nv_bfloat16* d_bias = upload_as<__nv_bfloat16>(bv);
    floatX* d_d = dev_upload(d0);
    TA* d_a;
    TB* d_b;
    CHECK_CUDA(cudaMalloc(&d_a, na));
    CHECK_CUDA(cudaMalloc(&d_b, nb));
    // the scales current scaling would give (max |x| to the format's max), as device floats
    const float sa = scales ? Fp8Traits<TA>::max / host_amax(a) : 1.0f, sb = scales ? Fp8Traits<TB>::max / host_amax(b) : 1.0f;
    float *d_sa = dev_scalar(sa), *d_sb = dev_scalar(sb), *d_sa_inv = dev_scalar(0.0f), *d_sb_inv = dev_scalar(0.0f);
    float* d_amax = dev_scalar(0.0f);
    fp8_cast(ctx, d_a, d_amax, d_sa_inv, d_a_hi, d_sa, na);
    fp8_cast(ctx, d_b, d_amax, d_sb_inv, d_b_hi, d_sb, nb);
    fp8_matmul(ctx, d_d, d_a, d_b, scales ? d_sa_inv : nullptr, scales ? d_sb_inv : nullptr, bias ? d_bias : nullptr, m,
               n, k, accumulate, fast_accum);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    std::vector<float> got = dev_download(d_d, nd);

    // the reference: the fp8 codes the GPU holds, decoded by the specification, in double
    std::vector<uint8_t> ca(na), cb(nb);
    CHECK_CUDA(cudaMemcpy(ca.data(), d_a, na, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(cb.data(), d_b, nb, cudaMemcpyDeviceToHost));
    const std::vector<double> qa = spec_decode_all<TA>(ca), qb = spec_decode_all<TB>(cb);
    const double inv = scales ? (double)get_scalar(d_sa_inv) * (double)get_scalar(d_sb_inv) : 1.0;
    std::vector<float> ref(nd);
#pragma omp parallel for
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double acc = 0.0;
            for (int p = 0; p < k; p++) acc += qa[(size_t)i * k + p] * qb[(size_t)j * k + p];
            double r = inv * acc;
            if (bias) r += (double)round_as<__nv_bfloat16>(bv[i]);
            if (accumulate) r += d0[(size_t)j * m + i];
            ref[(size_t)j * m + i] = (float)r;
        }
    DevTol tol = tol_for({1e-5, 2e-3}, {4e-3, 2e-3});
    if (fast_accum) tol.atol_frac = std::max(tol.atol_frac, 0.02 * std::sqrt(k / 4096.0));
    dev_check("fp8_matmul", what, got, ref, tol);

    if (bench_name != nullptr) {
        float ms = bench_ms(ctx, 10, [&] {
            fp8_matmul(ctx, d_d, d_a, d_b, d_sa_inv, d_sb_inv, bias ? d_bias : nullptr, m, n, k, false, fast_accum);
        });
        dev_report_tflops("fp8_matmul", bench_name, 2.0 * m * n * k, ms);
    }
    for (void* p : std::vector<void*>{d_a_hi, d_b_hi, d_bias, d_d, d_a, d_b, d_sa, d_sb, d_sa_inv, d_sb_inv, d_amax})
        CHECK_CUDA(cudaFree(p));
}

static void run_gemm(const CudaContext& ctx) {
    const int cc = ctx.props.major * 10 + ctx.props.minor;
    // the refusals, which hold on any GPU: shapes first, on a GPU that has FP8
    CudaContext hopper = ctx;
    hopper.props.major = 9, hopper.props.minor = 0;
    CudaContext ampere = ctx;
    ampere.props.major = 8, ampere.props.minor = 0;
    alignas(16) static char buf[64];
    const float* sc = (const float*)buf;  // a 16-byte aligned scale; sc + 1 is 4 bytes past
    const bool refusals = fp8_matmul_refusal(hopper, 48, 32, 64, buf, buf, buf, nullptr, sc, sc) == nullptr &&
                          fp8_matmul_refusal(hopper, 48, 32, 64, buf, buf, buf, nullptr, nullptr, nullptr) == nullptr &&
                          fp8_matmul_refusal(hopper, 40, 32, 64, buf, buf, buf, nullptr, sc, sc) != nullptr &&
                          fp8_matmul_refusal(hopper, 48, 33, 64, buf, buf, buf, nullptr, sc, sc) != nullptr &&
                          fp8_matmul_refusal(hopper, 48, 32, 72, buf, buf, buf, nullptr, sc, sc) != nullptr &&
                          fp8_matmul_refusal(hopper, 48, 32, 0, buf, buf, buf, nullptr, sc, sc) != nullptr &&
                          fp8_matmul_refusal(hopper, 48, 32, 64, buf + 8, buf, buf, nullptr, sc, sc) != nullptr &&
                          fp8_matmul_refusal(hopper, 48, 32, 64, buf, buf, buf, buf + 2, sc, sc) != nullptr &&
                          fp8_matmul_refusal(hopper, 48, 32, 64, buf, buf, buf, nullptr, sc + 1, sc) != nullptr &&
                          fp8_matmul_refusal(hopper, 48, 32, 64, buf, buf, buf, nullptr, sc, sc + 2) != nullptr &&
                          fp8_matmul_refusal(ampere, 48, 32, 64, buf, buf, buf, nullptr, sc, sc) != nullptr;
    dev_expect("fp8_matmul", "refuses m, n or k not a multiple of 16 (or 0), operands or scale pointers not "
               "16-byte aligned, compute capability below 8.9; takes 48x32x64", refusals);
    if (cc < 89) {
        printf("SKIP fp8_matmul: sm_%d%d has no FP8 tensor cores (cuBLASLt's FP8 GEMMs need 8.9 or later)\n",
               ctx.props.major, ctx.props.minor);
        return;
    }
    run_gemm_case<__nv_fp8_e4m3, __nv_fp8_e4m3>(ctx, 48, 32, 64, true, false, false, true, nullptr);
    run_gemm_case<__nv_fp8_e4m3, __nv_fp8_e5m2>(ctx, 32, 48, 80, false, true, true, true, nullptr);
    run_gemm_case<__nv_fp8_e5m2, __nv_fp8_e4m3>(ctx, 16, 16, 16, true, true, false, false, nullptr);
    if (!g_dev_quick) {
        run_gemm_case<__nv_fp8_e4m3, __nv_fp8_e4m3>(ctx, 768, 512, 768, true, false, false, true, nullptr);
        run_gemm_case<__nv_fp8_e4m3, __nv_fp8_e5m2>(ctx, 256, 768, 1024, false, true, true, true, nullptr);
    }
}

// ---------------------------------------------------------------------------------------
// benchmarks: the default run and --bench (alone); not --quick

static void run_bench(const CudaContext& ctx) {
    printf("-- fp8 benchmarks\n");
    const size_t n = (size_t)8192 * 8192;
    std::vector<float> x(n, 0.5f);
    __nv_bfloat16* d_in = upload_as<__nv_bfloat16>(x);
    __nv_fp8_e4m3* d_out;
    CHECK_CUDA(cudaMalloc(&d_out, n));
    float *d_scale = dev_scalar(2.0f), *d_amax = dev_scalar(0.0f), *d_scale_inv = dev_scalar(0.0f);
    float ms = bench_ms(ctx, 20, [&] { fp8_cast(ctx, d_out, d_amax, d_scale_inv, d_in, d_scale, n); });
    dev_report_gbs("fp8_cast", "bf16_to_e4m3_64M", (double)n * 3, ms);
    ms = bench_ms(ctx, 20, [&] { fp8_amax(ctx, d_amax, d_in, n); });
    dev_report_gbs("fp8_amax", "bf16_64M", (double)n * 2, ms);
    // the backward's cast-transposes at GPT-2 d48's fc (BT 8192, 4C 6400, C 1600): dout both ways
    // with its bias gradient (read 2 bytes, write 2 a value), inp^T (read 2, write 1); the tiled
    // kernel beside the 32x32 one (the trainer's before 2026-11-28, and without the bias gradient
    // the 32x32 one's dbias is matmul_bias_backward's pass)
    __nv_fp8_e4m3* d_out_t;
    CHECK_CUDA(cudaMalloc(&d_out_t, n));
    floatX* d_dbias;
    CHECK_CUDA(cudaMalloc(&d_dbias, 6400 * sizeof(floatX)));
    CHECK_CUDA(cudaMemset(d_dbias, 0, 6400 * sizeof(floatX)));
    for (int tiled = 1; tiled >= 0; tiled--) {
        const char* kind = tiled ? "tiled" : "32x32";
        std::string name = std::string("dout_8192x6400_dbias_") + kind;
        ms = bench_ms(ctx, 20, [&] {
            fp8_cast_transpose(ctx, d_out, d_out_t, d_amax, (float*)nullptr, d_in, d_scale, 8192, 6400,
                               sizeof(floatX) == 2 ? d_dbias : nullptr, Fp8Src{}, tiled == 1);
        });
        dev_report_gbs("fp8_cast_transpose", name.c_str(), 8192.0 * 6400 * 4, ms);
        name = std::string("inp_t_8192x1600_") + kind;
        ms = bench_ms(ctx, 20, [&] {
            fp8_cast_transpose(ctx, (__nv_fp8_e4m3*)nullptr, d_out_t, d_amax, (float*)nullptr, d_in, d_scale, 8192,
                               1600, (floatX*)nullptr, Fp8Src{}, tiled == 1);
        });
        dev_report_gbs("fp8_cast_transpose", name.c_str(), 8192.0 * 1600 * 3, ms);
    }
    for (void* p : std::vector<void*>{d_in, d_out, d_out_t, d_dbias, d_scale, d_amax, d_scale_inv}) CHECK_CUDA(cudaFree(p));
    if (ctx.props.major * 10 + ctx.props.minor < 89) return;
    // GPT-2 d48's fc (BT=8192, C=1600, 4C) and an 8B Llama's gate/up (C=4096, F=14336)
    run_gemm_case<__nv_fp8_e4m3, __nv_fp8_e4m3>(ctx, 4 * 1600, 8192, 1600, true, false, true, true, "d48_fc_fast");
    run_gemm_case<__nv_fp8_e4m3, __nv_fp8_e4m3>(ctx, 14336, 8192, 4096, false, false, true, true, "llama8b_up_fast");
    run_gemm_case<__nv_fp8_e4m3, __nv_fp8_e4m3>(ctx, 14336, 8192, 4096, false, false, false, true, "llama8b_up");
    // d48's fc weight gradient, E4M3 inp^T x E5M2 dout^T summed over BT = 8192, without fast
    // accumulation (Transformer Engine's default, the trainer's -fp8fa 1) and with it (-fp8fa 2):
    // the speed the backward would gain, and (the check above each) what the GPU's sums lose
    run_gemm_case<__nv_fp8_e4m3, __nv_fp8_e5m2>(ctx, 1600, 4 * 1600, 8192, false, true, false, true, "d48_fc_dweight");
    run_gemm_case<__nv_fp8_e4m3, __nv_fp8_e5m2>(ctx, 1600, 4 * 1600, 8192, false, true, true, true,
                                                "d48_fc_dweight_fast");
}

int main(int argc, char** argv) {
    dev_parse_args(argc, argv);
    CudaContext ctx;
    cuda_context_init(&ctx, 0);
    dev_print_device(ctx, "fp8");
    if (!g_dev_bench) {
        printf("-- fp8 formats\n");
        check_format<__nv_fp8_e4m3>();
        check_format<__nv_fp8_e5m2>();
        run_casts<floatX>(ctx);
        run_cast_transposes<floatX>(ctx);
#ifdef ENABLE_BF16
        run_casts<float>(ctx);  // the fp32 input path too
        run_cast_transposes<float>(ctx);
#endif
        run_scaling(ctx);
        run_gemm(ctx);
    }
    if (!g_dev_quick) run_bench(ctx);
    cuda_context_free(&ctx);
    return dev_finish("fp8");
}
