// attention_wgmma.cu: llmc/cuda/attention_wgmma.cuh (the causal attention forward and backward
// on Hopper's warpgroup MMA: forward at head size 64 and 128, one or two warpgroups a block, and
// at 64 with key tiles of 128;
// backward at 64 and 128, two kernels or, at 64, dQ by atomics) against llmc/cpu/attention.h's attention_forward_gqa /
// attention_backward_gqa and a double lse, then (--bench) timed beside attention_mma.cuh's
// forward and backward at issue 23's sizes. bf16 build, sm_90a (cuda.mk builds it so); on
// another GPU it says why and checks nothing. Every output is prefilled with NaN bytes, so an
// element never written fails.
// Tolerances as attention.cu's bf16 ones: out rtol 1e-2 + 2e-3*max, lse rtol 1e-5 + 1e-6*max +
// 1e-5, dq, dk, dv rtol 2e-2 + 5e-3*max + 1e-3.
#include "dev_common.cuh"
#include "../../llmc/cpu/attention.h"
#include "../../llmc/cuda/attention_wgmma.cuh"

#ifdef ENABLE_BF16
// one case's device buffers: qkv and dout uploaded, out, dqkv and lse allocated; freed with it
struct AttBuffers {
    floatX *qkv, *dout, *out = nullptr, *dqkv = nullptr;
    float* lse = nullptr;
    AttBuffers(const std::vector<float>& qkv_h, const std::vector<float>& dout_h, size_t n_lse)
        : qkv(dev_upload(qkv_h)), dout(dev_upload(dout_h)) {
        CHECK_CUDA(cudaMalloc(&out, dout_h.size() * sizeof(floatX)));
        CHECK_CUDA(cudaMalloc(&dqkv, qkv_h.size() * sizeof(floatX)));
        CHECK_CUDA(cudaMalloc(&lse, n_lse * sizeof(float)));
    }
    AttBuffers(const AttBuffers&) = delete;
    AttBuffers& operator=(const AttBuffers&) = delete;
    ~AttBuffers() {
        for (void* p : {(void*)qkv, (void*)dout, (void*)out, (void*)dqkv, (void*)lse}) CHECK_CUDA(cudaFree(p));
    }
};

// lse of every (b, h, t) row in double from the definition, qkv rows [q (NH) | k (NKV) | v (NKV)]
static std::vector<float> ref_lse_gqa(const std::vector<float>& qkv, int B, int T, int NH, int NKV, int HS) {
    const size_t ld = (size_t)(NH + 2 * NKV) * HS;
    std::vector<float> lse((size_t)B * NH * T);
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const size_t kcol = (size_t)(NH + h / (NH / NKV)) * HS;
            for (int t = 0; t < T; t++) {
                const float* q = &qkv[((size_t)b * T + t) * ld + (size_t)h * HS];
                std::vector<double> s(t + 1);
                double mx = -1e300;
                for (int j = 0; j <= t; j++) {
                    const float* k = &qkv[((size_t)b * T + j) * ld + kcol];
                    double acc = 0.0;
                    for (int i = 0; i < HS; i++) acc += (double)q[i] * k[i];
                    s[j] = acc / std::sqrt((double)HS);
                    mx = std::max(mx, s[j]);
                }
                double sum = 0.0;
                for (int j = 0; j <= t; j++) sum += std::exp(s[j] - mx);
                lse[((size_t)b * NH + h) * T + t] = (float)(mx + std::log(sum));
            }
        }
    }
    return lse;
}

// every: all the variants; else (--quick's larger cases) the forward with one and two warpgroups
// and the backward with one, the trainers' (the emulated race check's time)
static void run_case(const CudaContext& ctx, int B, int T, int NH, int NKV, int HS = 64, bool every = true) {
    const int C = NH * HS;
    char what[80];
    snprintf(what, sizeof(what), "B=%d T=%d NH=%d NKV=%d HS=%d", B, T, NH, NKV, HS);
    printf("-- attention_wgmma %s\n", what);
    const std::string w(what);
    DevRng rng(31 + B * 100 + T + NH);
    const size_t n_qkv = (size_t)B * T * (NH + 2 * NKV) * HS, n_out = (size_t)B * T * C, n_lse = (size_t)B * NH * T;
    std::vector<float> qkv = rand_vec(rng, n_qkv, 2.0f), dout = rand_vec(rng, n_out);
    round_to_floatX(qkv);
    round_to_floatX(dout);
    std::vector<float> ref_out(n_out), att((size_t)B * NH * T * T), ref_dqkv(n_qkv, 0.0f);
    attention_forward_gqa(ref_out.data(), att.data(), qkv.data(), B, T, NH, NKV, HS);
    attention_backward_gqa(ref_dqkv.data(), dout.data(), qkv.data(), att.data(), B, T, NH, NKV, HS);
    const std::vector<float> ref_lse = ref_lse_gqa(qkv, B, T, NH, NKV, HS);
    const AttBuffers buf(qkv, dout, n_lse);
    floatX *d_qkv = buf.qkv, *d_dout = buf.dout, *d_out = buf.out, *d_dqkv = buf.dqkv;
    float* d_lse = buf.lse;
    // one warpgroup a block, then two (128 queries sharing the key tiles)
    auto check = [&](const char* op, auto forward) {
        CHECK_CUDA(cudaMemset(d_out, 0xFF, n_out * sizeof(floatX)));  // NaN: a row never written fails
        CHECK_CUDA(cudaMemset(d_lse, 0xFF, n_lse * sizeof(float)));
        forward();
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        const std::vector<float> got = dev_download(d_out, n_out);
        dev_check(op, (w + " out").c_str(), got, ref_out, {1e-2, 2e-3});
        dev_check(op, (w + " lse").c_str(), dev_download_f32(d_lse, n_lse), ref_lse, {1e-5, 1e-6, 1e-5});
        forward();
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        dev_expect(op, (w + " bitwise deterministic").c_str(),
                   memcmp(dev_download(d_out, n_out).data(), got.data(), n_out * sizeof(float)) == 0);
        return got;
    };
    check("attention_forward_wgmma", [&] { attention_forward_wgmma<1>(ctx, d_out, d_lse, d_qkv, B, T, NH, NKV, HS); });
    check("attention_forward_wgmma_wg2",
          [&] { attention_forward_wgmma<2>(ctx, d_out, d_lse, d_qkv, B, T, NH, NKV, HS); });
    if (HS == 64)  // key tiles of 128
        check("attention_forward_wgmma_k128",
              [&] { attention_forward_wgmma<1, 128>(ctx, d_out, d_lse, d_qkv, B, T, NH, NKV, HS); });
    // the backward from the last forward's out and lse, q, k and v reported apart (a slip usually
    // sits in one); returns what it wrote. Bitwise reproducible unless dQ sums by atomics.
    auto check_backward = [&](const char* op, auto backward, bool reproducible = true) {
        CHECK_CUDA(cudaMemset(d_dqkv, 0xFF, n_qkv * sizeof(floatX)));
        backward();
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        const std::vector<float> got = dev_download(d_dqkv, n_qkv);
        const size_t ld = (size_t)(NH + 2 * NKV) * HS, width[3] = {(size_t)C, (size_t)NKV * HS, (size_t)NKV * HS};
        const char* names[3] = {" dq", " dk", " dv"};
        for (size_t part = 0, col0 = 0; part < 3; col0 += width[part], part++) {
            std::vector<float> g, r;
            for (size_t bt = 0; bt < (size_t)B * T; bt++) {
                g.insert(g.end(), got.begin() + bt * ld + col0, got.begin() + bt * ld + col0 + width[part]);
                r.insert(r.end(), ref_dqkv.begin() + bt * ld + col0, ref_dqkv.begin() + bt * ld + col0 + width[part]);
            }
            dev_check(op, (w + names[part]).c_str(), g, r, {2e-2, 5e-3, 1e-3});
        }
        if (reproducible) {
            backward();
            CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
            dev_expect(op, (w + " bitwise deterministic").c_str(),
                       memcmp(dev_download(d_dqkv, n_qkv).data(), got.data(), n_qkv * sizeof(float)) == 0);
        }
        return got;
    };
    const std::vector<float> two = check_backward("attention_backward_wgmma", [&] {
        attention_backward_wgmma<1>(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, NH, NKV, HS);
    });
    if (!every) return;
    check_backward("attention_backward_wgmma_wg2", [&] {
        attention_backward_wgmma<2>(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, NH, NKV, HS);
    });
    if (HS != 64) return;  // dQ by atomics at head size 64 only
    // dQ inside the dK/dV kernel, by atomics: dK and dV are the two-kernel backward's bit for bit
    float* d_dq_accum;
    CHECK_CUDA(cudaMalloc(&d_dq_accum, n_out * sizeof(float)));
    const std::vector<float> fused = check_backward(
        "attention_backward_wgmma_fused",
        [&] {
            attention_backward_wgmma<1, true>(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, NH, NKV, HS, d_dq_accum);
        },
        false);
    bool same_kv = true;
    const size_t ld = (size_t)(NH + 2 * NKV) * HS;
    for (size_t i = 0; i < n_qkv; i++) same_kv &= i % ld < (size_t)C || memcmp(&fused[i], &two[i], sizeof(float)) == 0;
    dev_expect("attention_backward_wgmma_fused", (w + " dk and dv bit for bit the two-kernel backward's").c_str(),
               same_kv);
    CHECK_CUDA(cudaFree(d_dq_accum));
}

// --bench: beside attention_forward_mma (the trainers' forward) at issue 23's sizes, useful causal
// FLOPs (attention.cu's count)
static void bench_case(const CudaContext& ctx, int B, int T, int NH, int HS) {
    const int C = NH * HS;
    char what[80];
    snprintf(what, sizeof(what), "B=%d,T=%d,NH=%d,HS=%d", B, T, NH, HS);
    printf("-- attention_wgmma bench %s\n", what);
    const size_t n_qkv = (size_t)B * T * 3 * C, n_out = (size_t)B * T * C;
    const double fwd_flops = 4.0 * ((double)B * NH * T * (T + 1) / 2.0) * HS;
    DevRng rng(7 + T);
    const std::vector<float> qkv = rand_vec(rng, n_qkv, 2.0f), dout = rand_vec(rng, n_out);
    const AttBuffers buf(qkv, dout, (size_t)B * NH * T);
    floatX *d_qkv = buf.qkv, *d_dout = buf.dout, *d_out = buf.out, *d_dqkv = buf.dqkv;
    float* d_lse = buf.lse;
    const int reps = T >= 4096 ? 5 : 10;
    float ms = bench_ms(ctx, reps, [&] { attention_forward_mma(ctx, d_out, d_lse, d_qkv, B, T, C, NH); });
    dev_report_tflops("attention_forward_mma", what, fwd_flops, ms);
    ms = bench_ms(ctx, reps, [&] { attention_forward_wgmma<1>(ctx, d_out, d_lse, d_qkv, B, T, NH, NH, HS); });
    dev_report_tflops("attention_forward_wgmma", what, fwd_flops, ms);
    ms = bench_ms(ctx, reps, [&] { attention_forward_wgmma<2>(ctx, d_out, d_lse, d_qkv, B, T, NH, NH, HS); });
    dev_report_tflops("attention_forward_wgmma_wg2", what, fwd_flops, ms);
    if (HS == 64) {
        ms = bench_ms(ctx, reps, [&] { attention_forward_wgmma<1, 128>(ctx, d_out, d_lse, d_qkv, B, T, NH, NH, HS); });
        dev_report_tflops("attention_forward_wgmma_k128", what, fwd_flops, ms);
    }
    // the backwards from the last forward's out and lse; counted as flash-attention does, 2.5x the forward
    ms = bench_ms(ctx, reps, [&] { attention_backward_mma(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, C, NH); });
    dev_report_tflops("attention_backward_mma", what, 2.5 * fwd_flops, ms);
    ms = bench_ms(ctx, reps,
                  [&] { attention_backward_wgmma<1>(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, NH, NH, HS); });
    dev_report_tflops("attention_backward_wgmma", what, 2.5 * fwd_flops, ms);
    ms = bench_ms(ctx, reps,
                  [&] { attention_backward_wgmma<2>(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, NH, NH, HS); });
    dev_report_tflops("attention_backward_wgmma_wg2", what, 2.5 * fwd_flops, ms);
    if (HS != 64) return;  // dQ by atomics at head size 64 only
    float* d_dq_accum;
    CHECK_CUDA(cudaMalloc(&d_dq_accum, n_out * sizeof(float)));
    ms = bench_ms(ctx, reps, [&] {
        attention_backward_wgmma<1, true>(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, NH, NH, HS, d_dq_accum);
    });
    dev_report_tflops("attention_backward_wgmma_fused", what, 2.5 * fwd_flops, ms);
    CHECK_CUDA(cudaFree(d_dq_accum));
}
#endif

int main(int argc, char** argv) {
    dev_parse_args(argc, argv);
    CudaContext ctx;
    cuda_context_init(&ctx, 0);
    dev_print_device(ctx, "attention_wgmma");
#ifdef ENABLE_BF16
    if (const char* problem = attention_wgmma_problem(ctx, 64)) {
        printf("attention_wgmma: %s; nothing checked\n", problem);
    } else if (g_dev_bench) {
        // attention.cu's rows: GPT-2's C=768 and a Llama's C=2048 (--profile: T=1024 only)
        for (int HS : {64, 128}) {
            for (int T : {1024, 4096}) {
                if (T == 1024 || !g_dev_profile) bench_case(ctx, 16384 / T, T, HS == 64 ? 12 : 16, HS);
            }
        }
    } else {
        run_case(ctx, 1, 37, 2, 2);   // one tile, T not a multiple of it
        run_case(ctx, 2, 70, 3, 3);   // two tiles, batch and heads
        run_case(ctx, 1, 193, 2, 2);  // 4 tiles, the last of one row: both stages, every mask
        // --quick (CI's emulated runs, under the race check): the larger cases with the trainers'
        // variants only (every variant still runs in the cases above and at head size 128's first)
        run_case(ctx, 1, 300, 2, 2, 64, !g_dev_quick);  // two warpgroups: 3 blocks of 128, the last of 44 rows
        run_case(ctx, 1, 150, 4, 1, 64, !g_dev_quick);  // grouped-query: 4 heads on one key/value head
        run_case(ctx, 1, 100, 2, 2, 128);                // head size 128: two tiles, the last partial
        // and grouped-query over 3 blocks of two warpgroups (--quick: two query heads on one
        // key/value head rather than four on two)
        run_case(ctx, 1, 300, g_dev_quick ? 2 : 4, g_dev_quick ? 1 : 2, 128, !g_dev_quick);
    }
#else
    printf("attention_wgmma: the bf16 build's; nothing checked\n");
#endif
    cuda_context_free(&ctx);
    return dev_finish("attention_wgmma");
}
