// test_cpu_kernels.cpp: the CPU matmul and attention layers against naive double-precision
// loops written out here, at awkward shapes (ragged tiles, hs=16, T=1, nullptr bias),
// including the += semantics of every backward output; and the matmul's bits do not depend
// on the thread count. Also the vectorized exp (llmc/cpu/vmath.h) against libm's double exp,
// GELU and the classifier's cross-entropy against their definitions in double (std::tanh,
// std::exp), and the gradient norm's sum against a plain double loop. Prints one line per check, and a digest of the matmul's output that
// test_cpu_kernels.sh compares between builds with different micro-kernels; exits 1 if any
// check fails.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "../llmc/cpu/attention.h"
#include "../llmc/cpu/crossentropy.h"
#include "../llmc/cpu/gelu.h"
#include "../llmc/cpu/matmul.h"
#include "../llmc/cpu/vmath.h"
#include "../llmc/gpt2.h"  // defines: grad_sum_squares

typedef std::vector<float> Buf;

static uint64_t rng_state = 1234567;
static float rand_uniform() {  // xorshift64*, in [-1, 1)
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    uint64_t x = rng_state * 2685821657736338717ULL;
    return (float)((x >> 40) / (double)(1ULL << 24)) * 2.0f - 1.0f;
}
static Buf rand_buf(size_t n, float scale = 1.0f) {
    Buf v(n);
    for (float& x : v) x = scale * rand_uniform();
    return v;
}

static int failures = 0;

// max |got - want| / max |want| over n elements; prints one line, counts a failure
static void check(const char* what, const float* got, const std::vector<double>& want,
                  double tol = 1e-5) {
    double max_err = 0.0, max_ref = 0.0;
    bool finite = true;
    for (size_t i = 0; i < want.size(); i++) {
        if (!std::isfinite(got[i])) finite = false;
        max_err = std::max(max_err, std::fabs(got[i] - want[i]));
        max_ref = std::max(max_ref, std::fabs(want[i]));
    }
    double rel = max_err / (max_ref > 0 ? max_ref : 1.0);
    bool ok = finite && rel < tol;
    printf("%-4s %-58s rel err %.2e (max |ref| %.3g)\n", ok ? "ok" : "FAIL", what, rel, max_ref);
    if (!ok) failures++;
}

// ----------------------------------------------------------------------------
// references: the definitions, in double

static void ref_matmul_forward(std::vector<double>& out, const Buf& inp, const Buf& w,
                               const float* bias, int BT, int C, int OC) {
    out.assign((size_t)BT * OC, 0.0);
    for (int i = 0; i < BT; i++) {
        for (int o = 0; o < OC; o++) {
            double s = bias ? bias[o] : 0.0;
            for (int c = 0; c < C; c++) s += (double)inp[(size_t)i * C + c] * w[(size_t)o * C + c];
            out[(size_t)i * OC + o] = s;
        }
    }
}

// starts from the given prior values (the += semantics)
static void ref_matmul_backward(std::vector<double>& dinp, std::vector<double>& dw,
                                std::vector<double>& db, const Buf& dout, const Buf& inp,
                                const Buf& w, int BT, int C, int OC) {
    for (int i = 0; i < BT; i++) {
        for (int c = 0; c < C; c++) {
            double s = 0.0;
            for (int o = 0; o < OC; o++) s += (double)dout[(size_t)i * OC + o] * w[(size_t)o * C + c];
            dinp[(size_t)i * C + c] += s;
        }
    }
    for (int o = 0; o < OC; o++) {
        for (int c = 0; c < C; c++) {
            double s = 0.0;
            for (int i = 0; i < BT; i++) s += (double)dout[(size_t)i * OC + o] * inp[(size_t)i * C + c];
            dw[(size_t)o * C + c] += s;
        }
        double s = 0.0;
        for (int i = 0; i < BT; i++) s += dout[(size_t)i * OC + o];
        db[o] += s;
    }
}

// forward: out (B,T,C) and att (B,NH,T,T) with zeros above the diagonal
static void ref_attention_forward(std::vector<double>& out, std::vector<double>& att,
                                  const Buf& qkv, int B, int T, int C, int NH) {
    int hs = C / NH;
    double scale = 1.0 / std::sqrt((double)hs);
    out.assign((size_t)B * T * C, 0.0);
    att.assign((size_t)B * NH * T * T, 0.0);
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                const float* q = &qkv[((size_t)b * T + t) * 3 * C + (size_t)h * hs];
                std::vector<double> p(t + 1);
                double mx = -1e300, sum = 0.0;
                for (int s = 0; s <= t; s++) {
                    const float* k = &qkv[((size_t)b * T + s) * 3 * C + C + (size_t)h * hs];
                    double d = 0.0;
                    for (int i = 0; i < hs; i++) d += (double)q[i] * k[i];
                    p[s] = d * scale;
                    mx = std::max(mx, p[s]);
                }
                for (int s = 0; s <= t; s++) sum += (p[s] = std::exp(p[s] - mx));
                double* a = &att[(((size_t)b * NH + h) * T + t) * T];
                for (int s = 0; s <= t; s++) a[s] = p[s] / sum;
                for (int i = 0; i < hs; i++) {
                    double o = 0.0;
                    for (int s = 0; s <= t; s++) o += a[s] * qkv[((size_t)b * T + s) * 3 * C + 2 * (size_t)C + (size_t)h * hs + i];
                    out[((size_t)b * T + t) * C + (size_t)h * hs + i] = o;
                }
            }
        }
    }
}

// backward through out = att @ v and att = softmax(q k^T * scale), from the saved att
static void ref_attention_backward(std::vector<double>& dqkv, const Buf& dout, const Buf& qkv,
                                   const Buf& att, int B, int T, int C, int NH) {
    int hs = C / NH;
    double scale = 1.0 / std::sqrt((double)hs);
    auto Q = [&](int b, int t) { return ((size_t)b * T + t) * 3 * C; };
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            for (int t = 0; t < T; t++) {
                const float* a = &att[(((size_t)b * NH + h) * T + t) * T];
                const float* d = &dout[((size_t)b * T + t) * C + (size_t)h * hs];
                std::vector<double> datt(t + 1), dpre(t + 1);
                for (int s = 0; s <= t; s++) {
                    double x = 0.0;
                    for (int i = 0; i < hs; i++) {
                        x += (double)d[i] * qkv[Q(b, s) + 2 * (size_t)C + (size_t)h * hs + i];
                        dqkv[Q(b, s) + 2 * (size_t)C + (size_t)h * hs + i] += (double)a[s] * d[i];  // dv
                    }
                    datt[s] = x;
                }
                // softmax jacobian written out in full: dpre[s] = sum_u datt[u] a[u] (delta_us - a[s])
                for (int s = 0; s <= t; s++) {
                    double x = 0.0;
                    for (int u = 0; u <= t; u++) x += datt[u] * a[u] * ((u == s ? 1.0 : 0.0) - a[s]);
                    dpre[s] = x;
                }
                for (int s = 0; s <= t; s++) {
                    for (int i = 0; i < hs; i++) {
                        dqkv[Q(b, t) + (size_t)h * hs + i] += dpre[s] * scale * qkv[Q(b, s) + C + (size_t)h * hs + i];  // dq
                        dqkv[Q(b, s) + C + (size_t)h * hs + i] += dpre[s] * scale * qkv[Q(b, t) + (size_t)h * hs + i];  // dk
                    }
                }
            }
        }
    }
}

// ----------------------------------------------------------------------------

static std::vector<double> to_double(const Buf& v) { return std::vector<double>(v.begin(), v.end()); }

static void test_matmul(int B, int T, int C, int OC, bool with_bias) {
    const int BT = B * T;
    char name[160];
    Buf inp = rand_buf((size_t)BT * C), w = rand_buf((size_t)OC * C, 0.2f), bias = rand_buf(OC);
    const float* bp = with_bias ? bias.data() : nullptr;
    // forward overwrites: pre-fill with garbage that must disappear
    Buf out((size_t)BT * OC, 777.0f);
    matmul_forward(out.data(), inp.data(), w.data(), bp, B, T, C, OC);
    std::vector<double> ref;
    ref_matmul_forward(ref, inp, w, bp, BT, C, OC);
    snprintf(name, sizeof(name), "matmul_forward  B=%d T=%d C=%d OC=%d bias=%s", B, T, C, OC,
             with_bias ? "yes" : "null");
    check(name, out.data(), ref);

    // backward accumulates: start from nonzero gradients
    Buf dout = rand_buf((size_t)BT * OC);
    Buf dinp = rand_buf((size_t)BT * C, 3.0f), dw = rand_buf((size_t)OC * C, 3.0f), db = rand_buf(OC, 3.0f);
    std::vector<double> rdinp = to_double(dinp), rdw = to_double(dw), rdb = to_double(db);
    ref_matmul_backward(rdinp, rdw, rdb, dout, inp, w, BT, C, OC);
    matmul_backward(dinp.data(), dw.data(), with_bias ? db.data() : nullptr, dout.data(), inp.data(),
                    w.data(), B, T, C, OC);
    snprintf(name, sizeof(name), "matmul_backward dinp    B=%d T=%d C=%d OC=%d", B, T, C, OC);
    check(name, dinp.data(), rdinp);
    snprintf(name, sizeof(name), "matmul_backward dweight B=%d T=%d C=%d OC=%d", B, T, C, OC);
    check(name, dw.data(), rdw);
    if (with_bias) {
        snprintf(name, sizeof(name), "matmul_backward dbias   B=%d T=%d C=%d OC=%d", B, T, C, OC);
        check(name, db.data(), rdb);
    } else {
        // a nullptr dbias must not be touched (nothing to check but that we did not crash)
    }
}

static void test_attention(int B, int T, int C, int NH) {
    char name[160];
    Buf qkv = rand_buf((size_t)B * T * 3 * C, 2.0f);
    Buf out((size_t)B * T * C, 777.0f), att((size_t)B * NH * T * T, 777.0f);
    attention_forward(out.data(), att.data(), qkv.data(), B, T, C, NH);
    std::vector<double> rout, ratt;
    ref_attention_forward(rout, ratt, qkv, B, T, C, NH);
    snprintf(name, sizeof(name), "attention_forward out   B=%d T=%d C=%d NH=%d", B, T, C, NH);
    check(name, out.data(), rout);
    snprintf(name, sizeof(name), "attention_forward att   B=%d T=%d C=%d NH=%d", B, T, C, NH);
    check(name, att.data(), ratt);  // includes the zeros above the diagonal

    Buf dout = rand_buf((size_t)B * T * C);
    Buf dqkv = rand_buf((size_t)B * T * 3 * C, 3.0f);
    std::vector<double> rdqkv = to_double(dqkv);
    // backward from the reference probabilities, so the two see the same input
    Buf att_in(ratt.begin(), ratt.end());
    ref_attention_backward(rdqkv, dout, qkv, att_in, B, T, C, NH);
    attention_backward(dqkv.data(), dout.data(), qkv.data(), att_in.data(), B, T, C, NH);
    snprintf(name, sizeof(name), "attention_backward dqkv B=%d T=%d C=%d NH=%d", B, T, C, NH);
    check(name, dqkv.data(), rdqkv);
}

// exp_f32 at every float in steps over [-87, 88.3] and at the ends: within 2 ulp of libm's
// double exp rounded to float; 0 below -87
static void test_exp() {
    double worst = 0.0;
    float worst_x = 0.0f;
    bool ok = true;
    for (double xd = -87.0; xd <= 88.3; xd += 0.000731) {
        const float x = (float)xd;
        const float want = (float)std::exp((double)x);
        const float ulp = std::nextafter(want, INFINITY) - want;
        const double err = std::fabs((double)exp_f32(x) - std::exp((double)x)) / ulp;
        if (err > worst) worst = err, worst_x = x;
    }
    ok = worst <= 2.0 && exp_f32(-87.5f) == 0.0f && exp_f32(-1000.0f) == 0.0f && exp_f32(0.0f) == 1.0f &&
         std::isfinite(exp_f32(1000.0f));
    printf("%-4s %-58s worst %.2f ulp at x=%g\n", ok ? "ok" : "FAIL", "exp_f32 vs double exp over [-87, 88.3]",
           worst, worst_x);
    if (!ok) failures++;
}

// GELU (tanh form) and its backward (+=) against the formula in double with std::tanh
static void test_gelu(size_t n) {
    Buf x = rand_buf(n, 6.0f), out(n, 777.0f), dout = rand_buf(n), dinp = rand_buf(n);
    x[0] = 0.0f, x[1] = -30.0f, x[2] = 30.0f;  // the far tails: exactly 0 and x
    std::vector<double> rout(n), rdinp = to_double(dinp);
    for (size_t i = 0; i < n; i++) {
        const double xi = x[i], k = std::sqrt(2.0 / M_PI);
        const double th = std::tanh(k * (xi + 0.044715 * xi * xi * xi));
        rout[i] = 0.5 * xi * (1.0 + th);
        rdinp[i] += (0.5 * (1.0 + th) + 0.5 * xi * (1.0 - th * th) * k * (1.0 + 3.0 * 0.044715 * xi * xi)) * dout[i];
    }
    gelu_forward(out.data(), x.data(), n);
    gelu_backward(dinp.data(), x.data(), dout.data(), n);
    check("gelu_forward vs tanh in double", out.data(), rout);
    check("gelu_backward (+=) vs tanh in double", dinp.data(), rdinp);
}

// cross-entropy forward and dlogits over V real columns of Vp, against log-softmax in double
static void test_crossentropy(int N, int V, int Vp) {
    char name[160];
    Buf logits = rand_buf((size_t)N * Vp, 8.0f);
    for (int i = 0; i < N; i++)
        for (int j = V; j < Vp; j++) logits[(size_t)i * Vp + j] = 1e4f;  // padding must never count
    std::vector<int> targets(N);
    for (int i = 0; i < N; i++) targets[i] = (int)((i * 7919u) % (unsigned)V);
    const float dloss = 1.0f / N;
    std::vector<double> rloss(N), rd((size_t)N * Vp, 0.0);
    for (int i = 0; i < N; i++) {
        const float* row = &logits[(size_t)i * Vp];
        double mx = row[0], sum = 0.0;
        for (int j = 0; j < V; j++) mx = std::max(mx, (double)row[j]);
        for (int j = 0; j < V; j++) sum += std::exp(row[j] - mx);
        rloss[i] = mx + std::log(sum) - row[targets[i]];
        for (int j = 0; j < V; j++) rd[(size_t)i * Vp + j] = (std::exp(row[j] - mx) / sum - (j == targets[i])) * dloss;
    }
    Buf losses(N, 777.0f);
    crossentropy_forward(losses.data(), logits.data(), targets.data(), N, V, Vp);
    crossentropy_backward(logits.data(), targets.data(), dloss, N, V, Vp);
    snprintf(name, sizeof(name), "crossentropy_forward  N=%d V=%d Vp=%d", N, V, Vp);
    check(name, losses.data(), rloss);
    snprintf(name, sizeof(name), "crossentropy_backward N=%d V=%d Vp=%d (padding 0)", N, V, Vp);
    check(name, logits.data(), rd);
}

// grad_sum_squares against a plain double loop, at lengths around its block size
static void test_grad_sum_squares() {
    bool ok = true;
    double worst = 0.0;
    for (size_t n : {(size_t)0, (size_t)1, (size_t)17, (size_t)65536, (size_t)65537, (size_t)300001}) {
        Buf g = rand_buf(n, 3.0f);
        double want = 0.0;
        for (float x : g) want += (double)x * x;
        const double got = grad_sum_squares(g.data(), n);
        const double rel = want > 0 ? std::fabs(got - want) / want : std::fabs(got);
        worst = std::max(worst, rel);
        ok = ok && rel < 1e-12;
    }
    printf("%-4s %-58s rel err %.2e\n", ok ? "ok" : "FAIL", "grad_sum_squares vs a double loop", worst);
    if (!ok) failures++;
}

// FNV-1a over the bytes of v, continuing from h
static uint64_t fnv1a(uint64_t h, const Buf& v) {
    const unsigned char* p = (const unsigned char*)v.data();
    for (size_t i = 0; i < v.size() * sizeof(float); i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

// The matmul at a shape with several macro-tiles and K slices in every product, run with 1,
// 2 and 3 threads (which cut the work into different macro-tiles): the bits must be the same.
// Prints a digest of forward, dinp and dweight for the .sh to compare across builds.
static void test_matmul_threads(int B, int T, int C, int OC) {
    const int BT = B * T;
    Buf inp = rand_buf((size_t)BT * C), w = rand_buf((size_t)OC * C, 0.2f), bias = rand_buf(OC);
    Buf dout = rand_buf((size_t)BT * OC), dinp0 = rand_buf((size_t)BT * C), dw0 = rand_buf((size_t)OC * C);
    Buf out1, dinp1, dw1;
    bool same = true;
#ifdef _OPENMP
    const int saved = omp_get_max_threads();
    const int counts[] = {1, 2, 3};
#else
    const int counts[] = {1};
#endif
    for (int nt : counts) {
#ifdef _OPENMP
        omp_set_num_threads(nt);
#endif
        Buf out((size_t)BT * OC), dinp = dinp0, dw = dw0;
        matmul_forward(out.data(), inp.data(), w.data(), bias.data(), B, T, C, OC);
        matmul_backward(dinp.data(), dw.data(), nullptr, dout.data(), inp.data(), w.data(), B, T, C, OC);
        if (nt == 1) {
            out1 = out, dinp1 = dinp, dw1 = dw;
        } else {
            same = same && memcmp(out.data(), out1.data(), out.size() * sizeof(float)) == 0 &&
                   memcmp(dinp.data(), dinp1.data(), dinp.size() * sizeof(float)) == 0 &&
                   memcmp(dw.data(), dw1.data(), dw.size() * sizeof(float)) == 0;
        }
    }
#ifdef _OPENMP
    omp_set_num_threads(saved);
#endif
    printf("%-4s matmul fwd+bwd B=%d T=%d C=%d OC=%d: same bits with 1, 2, 3 threads\n",
           same ? "ok" : "FAIL", B, T, C, OC);
    if (!same) failures++;
    uint64_t h = fnv1a(fnv1a(fnv1a(14695981039346656037ULL, out1), dinp1), dw1);
    printf("matmul digest %016llx\n", (unsigned long long)h);
}

int main() {
    printf("matmul micro-kernel: %s (MR=%d NR=%d)\n", GEMM_KERNEL_NAME, GEMM_MR, GEMM_NR);
    // matmul: ragged B*T (111 = 3*37), C=48, OC = 3C, 4C, a padded vocab, and tiles of one
    test_matmul(3, 37, 48, 144, true);
    test_matmul(3, 37, 48, 192, false);
    test_matmul(3, 37, 48, 1024, true);
    test_matmul(1, 1, 48, 144, true);
    test_matmul(2, 5, 7, 3, true);
    test_matmul(1, 1, 1, 1, false);
    // several macro-tiles in every direction and a K longer than one slice
    test_matmul(2, 150, 300, 777, true);
    test_matmul(1, 600, 130, 50, true);
    // GPT-2 small-ish: hs=64
    test_matmul(2, 64, 192, 576, true);
    // ragged for both tile shapes, 12x32 and 6x16: B*T=18 (3 rows of 6, 1.5 of 12), C=40 and
    // OC=24 (not a multiple of 16); then whole tiles of each, and one less and one more
    test_matmul(2, 9, 40, 24, true);
    test_matmul(1, 12, 64, 32, false);
    test_matmul(1, 11, 63, 31, true);
    test_matmul(1, 13, 65, 33, true);
    // several macro-tiles of rows and of columns, and a ragged last K slice in each product
    // (K = 520, 800, 530 for forward, dinp, dweight)
    test_matmul(1, 530, 520, 800, true);
    test_matmul_threads(2, 150, 300, 777);

    // attention: hs=16 with NH=3, T=1, T=37, hs=64, hs not a multiple of the vector width
    test_attention(2, 37, 48, 3);
    test_attention(3, 1, 48, 3);
    test_attention(1, 64, 128, 2);
    test_attention(2, 13, 20, 4);
    test_attention(1, 130, 64, 1);

    test_exp();
    test_gelu(100003);
    test_crossentropy(5, 50257, 50304);
    test_crossentropy(3, 37, 128);
    test_crossentropy(2, 1, 16);
    test_grad_sum_squares();

    if (failures) {
        printf("%d check(s) FAILED\n", failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}
