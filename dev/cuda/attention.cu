// attention.cu: llmc/cuda/attention.cuh (flash-style, fp32 arithmetic) against
// llmc/cpu/attention.h, at every compiled head size and awkward T, then a benchmark (--bench: the
// benchmarks alone, at training sizes). The bf16 build also checks the tensor-core forward and
// backward (llmc/cuda/attention_mma.cuh) against the same references and tolerances, and
// times them.
// The GPU's dqkv is prefilled with NaN bytes, so an element the backward never writes fails.
// Tolerances (|err| <= atol_frac*max|ref| + rtol*|ref|):
//   fp32: the online softmax and the tiled sums reorder fp32 arithmetic over T keys:
//         out rtol 1e-4 + 1e-5*max; dqkv (sums over up to T rows with cancellation,
//         since each dS row sums to ~0) rtol 1e-4 + 2e-5*max + 1e-5; lse vs a double
//         reference rtol 1e-5 + 1e-6*max + 1e-5 (scores are dot products of HS terms).
//   bf16: inputs are identical, outputs rounded to bf16 (2^-9), and the backward's
//         D = dO.O uses the stored bf16 O: out rtol 1e-2 + 2e-3*max, dqkv rtol 2e-2 +
//         5e-3*max + 1e-3, lse (fp32) as in the fp32 build.
#include "dev_common.cuh"
#include "../../llmc/cpu/attention.h"
#include "../../llmc/cuda/attention.cuh"
#include "../../llmc/cuda/attention_mma.cuh"

// lse of every (b, h, t) row in double, from the definition
static std::vector<float> ref_lse(const std::vector<float>& qkv, int B, int T, int C, int NH) {
    const int HS = C / NH;
    const double scale = 1.0 / std::sqrt((double)HS);
    std::vector<float> out((size_t)B * NH * T);
#pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            std::vector<double> s(T);
            for (int t = 0; t < T; t++) {
                const float* q = &qkv[((size_t)b * T + t) * 3 * C + (size_t)h * HS];
                double mx = -1e300;
                for (int j = 0; j <= t; j++) {
                    const float* k = &qkv[((size_t)b * T + j) * 3 * C + C + (size_t)h * HS];
                    double acc = 0.0;
                    for (int i = 0; i < HS; i++) acc += (double)q[i] * k[i];
                    s[j] = acc * scale;
                    mx = std::max(mx, s[j]);
                }
                double sum = 0.0;
                for (int j = 0; j <= t; j++) sum += std::exp(s[j] - mx);
                out[((size_t)b * NH + h) * T + t] = (float)(mx + std::log(sum));
            }
        }
    }
    return out;
}

// dqkv (B*T rows of [q | k | v], C each) against the reference, q, k and v reported
// separately: a mistake usually sits in one of them
static void check_dqkv(const char* op, const std::string& w, const std::vector<float>& got,
                       const std::vector<float>& ref, size_t BT, int C, DevTol tol) {
    const char* names[3] = {" dq", " dk", " dv"};
    for (int part = 0; part < 3; part++) {
        std::vector<float> g, r;
        g.reserve(BT * C);
        r.reserve(BT * C);
        for (size_t bt = 0; bt < BT; bt++) {
            for (int c = 0; c < C; c++) {
                g.push_back(got[bt * 3 * C + (size_t)part * C + c]);
                r.push_back(ref[bt * 3 * C + (size_t)part * C + c]);
            }
        }
        dev_check(op, (w + names[part]).c_str(), g, r, tol);
    }
}

#ifdef ENABLE_BF16
// attention_mma.cuh's forward variants (32 query rows a warp, Q in registers), checked here
// against the same reference as the trainer's forward and timed beside it by --bench (not
// <128, 2, true>: 255 registers and spills on sm_90)
typedef void (*FwdVariantFn)(const CudaContext&, floatX*, float*, const floatX*, int, int, int, int);
struct FwdVariant {
    const char* name;
    int hs;
    FwdVariantFn fn;
};
static const FwdVariant fwd_variants[] = {
    {"attention_forward_mma_qreg", 64, attention_forward_mma_variant<64, 1, true>},
    {"attention_forward_mma_wm2", 64, attention_forward_mma_variant<64, 2, false>},
    {"attention_forward_mma_wm2_qreg", 64, attention_forward_mma_variant<64, 2, true>},
    {"attention_forward_mma_qreg", 128, attention_forward_mma_variant<128, 1, true>},
    {"attention_forward_mma_wm2", 128, attention_forward_mma_variant<128, 2, false>},
};
#endif

static void run_case(const CudaContext& ctx, int B, int T, int NH, int HS, bool bench) {
    const int C = NH * HS;
    char what[80];
    snprintf(what, sizeof(what), "B=%d T=%d NH=%d HS=%d", B, T, NH, HS);
    printf("-- attention %s\n", what);
    std::string w(what);
    DevRng rng(23 + B * 1000 + T + HS);
    const size_t n_qkv = (size_t)B * T * 3 * C, n_out = (size_t)B * T * C;
    // the benchmarks' flops: each query attends to t+1 keys; 2 products (QK^T, PV) of 2*HS
    // flops per pair; the backward counted as flash-attention does, 2.5x the forward
    const double fwd_flops = 4.0 * ((double)B * NH * T * (T + 1) / 2.0) * HS;
    std::vector<float> qkv = rand_vec(rng, n_qkv, 2.0f), dout = rand_vec(rng, n_out);
    round_to_floatX(qkv);
    round_to_floatX(dout);
    floatX *d_qkv = dev_upload(qkv), *d_dout = dev_upload(dout), *d_out, *d_dqkv;
    float* d_lse;
    CHECK_CUDA(cudaMalloc(&d_out, n_out * sizeof(floatX)));
    CHECK_CUDA(cudaMalloc(&d_dqkv, n_qkv * sizeof(floatX)));
    CHECK_CUDA(cudaMalloc(&d_lse, (size_t)B * NH * T * sizeof(float)));
    CHECK_CUDA(cudaMemset(d_dqkv, 0xFF, n_qkv * sizeof(floatX)));  // NaN in fp32 and bf16

    // forward
    std::vector<float> ref_out(n_out), att((size_t)B * NH * T * T);
    attention_forward(ref_out.data(), att.data(), qkv.data(), B, T, C, NH);
    const std::vector<float> ref_lse_v = ref_lse(qkv, B, T, C, NH);
    auto check_forward = [&](const char* op, const floatX* out, const float* lse) {
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        dev_check(op, (w + " out").c_str(), dev_download(out, n_out), ref_out, tol_for({1e-4, 1e-5}, {1e-2, 2e-3}));
        dev_check(op, (w + " lse").c_str(), dev_download_f32(lse, (size_t)B * NH * T), ref_lse_v, {1e-5, 1e-6, 1e-5});
    };
    attention_forward(ctx, d_out, d_lse, d_qkv, B, T, C, NH);
    check_forward("attention_forward", d_out, d_lse);

#ifdef ENABLE_BF16
    // the tensor-core forward against the same reference
    if (attention_mma_supported(HS)) {
        floatX* d_out_mma;
        float* d_lse_mma;
        CHECK_CUDA(cudaMalloc(&d_out_mma, n_out * sizeof(floatX)));
        CHECK_CUDA(cudaMalloc(&d_lse_mma, (size_t)B * NH * T * sizeof(float)));
        CHECK_CUDA(cudaMemset(d_out_mma, 0xFF, n_out * sizeof(floatX)));  // NaN: a row never written fails
        attention_forward_mma(ctx, d_out_mma, d_lse_mma, d_qkv, B, T, C, NH);
        check_forward("attention_forward_mma", d_out_mma, d_lse_mma);
        if (bench) {
            float ms = bench_ms(ctx, 10, [&] { attention_forward_mma(ctx, d_out_mma, d_lse_mma, d_qkv, B, T, C, NH); });
            dev_report_tflops("attention_forward_mma", "gpt2", fwd_flops, ms);
        }
        for (const FwdVariant& v : fwd_variants) {
            if (v.hs != HS || bench) continue;  // checked on the small cases (the emulated GPU's time)
            CHECK_CUDA(cudaMemset(d_out_mma, 0xFF, n_out * sizeof(floatX)));
            CHECK_CUDA(cudaMemset(d_lse_mma, 0xFF, (size_t)B * NH * T * sizeof(float)));
            v.fn(ctx, d_out_mma, d_lse_mma, d_qkv, B, T, NH, NH);
            check_forward(v.name, d_out_mma, d_lse_mma);
        }
        CHECK_CUDA(cudaFree(d_out_mma));
        CHECK_CUDA(cudaFree(d_lse_mma));
    }
#endif

    // backward: the GPU from its own out and lse, the CPU from its att
    std::vector<float> ref_dqkv(n_qkv, 0.0f);
    attention_backward(ref_dqkv.data(), dout.data(), qkv.data(), att.data(), B, T, C, NH);
    attention_backward(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, C, NH);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    std::vector<float> got = dev_download(d_dqkv, n_qkv);
    // the floor: at T=1 the exact dq and dk are 0 (dS = P (dP - D) with P = 1 and dP = D),
    // and the GPU's dP and D are the same dot product summed in two different orders
    DevTol tb = tol_for({1e-4, 2e-5, 1e-5}, {2e-2, 5e-3, 1e-3});
    check_dqkv("attention_backward", w, got, ref_dqkv, (size_t)B * T, C, tb);
    attention_backward(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, C, NH);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    std::vector<float> again = dev_download(d_dqkv, n_qkv);
    dev_expect("attention_backward", (w + " bitwise deterministic").c_str(),
               memcmp(again.data(), got.data(), n_qkv * sizeof(float)) == 0);
#ifdef ENABLE_BF16
    // the tensor-core backward, from the same out and lse, into a NaN-filled dqkv
    if (attention_mma_supported(HS)) {
        CHECK_CUDA(cudaMemset(d_dqkv, 0xFF, n_qkv * sizeof(floatX)));
        attention_backward_mma(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, C, NH);
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        std::vector<float> got_mma = dev_download(d_dqkv, n_qkv);
        check_dqkv("attention_backward_mma", w, got_mma, ref_dqkv, (size_t)B * T, C, tb);
        // a second run, into a NaN-filled dqkv, must give the same bits: the dk/dv and dq kernels
        // the launcher did not choose where there are such (16 keys a warp, or 32 at head sizes
        // up to 64; dq with or without Q and dO in registers at 64: the same sums in the same
        // order), else the same launch again (deterministic)
        const int other_keys = attention_mma_dkv_warp_keys(ctx, HS) == 32 ? 16 : 32;
        const bool other = other_keys == 16 || HS <= 64;
        const int other_qreg = HS == 64 ? !attention_mma_dq_qreg(HS) : 0;
        CHECK_CUDA(cudaMemset(d_dqkv, 0xFF, n_qkv * sizeof(floatX)));
        attention_backward_mma_launch<false>(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, NH, NH, HS, nullptr,
                                             other ? other_keys : 0, other_qreg);
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        const std::string other_name = "attention_backward_mma_keys" + std::to_string(other_keys) +
                                       (HS == 64 ? (other_qreg ? "_dq_qreg" : "_dq_plain") : "");
        dev_expect(other ? other_name.c_str() : "attention_backward_mma",
                   (w + (other ? " dqkv bit for bit attention_backward_mma's" : " bitwise deterministic")).c_str(),
                   memcmp(dev_download(d_dqkv, n_qkv).data(), got_mma.data(), n_qkv * sizeof(float)) == 0);
        if (bench) {
            float ms = bench_ms(ctx, 10, [&] { attention_backward_mma(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, C, NH); });
            dev_report_tflops("attention_backward_mma", "gpt2", 2.5 * fwd_flops, ms);
        }
        // the fused variant (dq by atomics from the dk/dv kernel): dq within the same tolerance,
        // dk and dv bit for bit the two-kernel path's (the same kernel computes them)
        float* d_dq_accum;
        CHECK_CUDA(cudaMalloc(&d_dq_accum, n_out * sizeof(float)));
        CHECK_CUDA(cudaMemset(d_dqkv, 0xFF, n_qkv * sizeof(floatX)));
        attention_backward_mma(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, C, NH, d_dq_accum);
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        std::vector<float> got_fused = dev_download(d_dqkv, n_qkv);
        check_dqkv("attention_backward_mma_fused", w, got_fused, ref_dqkv, (size_t)B * T, C, tb);
        bool same_kv = true;
        for (size_t bt = 0; bt < (size_t)B * T && same_kv; bt++)
            same_kv = memcmp(got_fused.data() + bt * 3 * C + C, got_mma.data() + bt * 3 * C + C,
                             2 * (size_t)C * sizeof(float)) == 0;
        dev_expect("attention_backward_mma_fused", (w + " dk and dv bit for bit attention_backward_mma's").c_str(), same_kv);
        if (bench) {
            float ms = bench_ms(ctx, 10, [&] {
                attention_backward_mma(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, C, NH, d_dq_accum);
            });
            dev_report_tflops("attention_backward_mma_fused", "gpt2", 2.5 * fwd_flops, ms);
        }
        // the same with dq by the TMA unit's bulk reductions (sm_90): the same checks
        if (ctx.props.major >= 9) {
            CHECK_CUDA(cudaMemset(d_dqkv, 0xFF, n_qkv * sizeof(floatX)));
            attention_backward_mma_launch<true>(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, NH, NH, C / NH, d_dq_accum);
            CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
            std::vector<float> got_bulk = dev_download(d_dqkv, n_qkv);
            check_dqkv("attention_backward_mma_bulk", w, got_bulk, ref_dqkv, (size_t)B * T, C, tb);
            same_kv = true;
            for (size_t bt = 0; bt < (size_t)B * T && same_kv; bt++)
                same_kv = memcmp(got_bulk.data() + bt * 3 * C + C, got_mma.data() + bt * 3 * C + C,
                                 2 * (size_t)C * sizeof(float)) == 0;
            dev_expect("attention_backward_mma_bulk", (w + " dk and dv bit for bit attention_backward_mma's").c_str(),
                       same_kv);
        }
        CHECK_CUDA(cudaFree(d_dq_accum));
    }
#endif

    if (bench) {
        float ms = bench_ms(ctx, 10, [&] { attention_forward(ctx, d_out, d_lse, d_qkv, B, T, C, NH); });
        dev_report_tflops("attention_forward", "gpt2", fwd_flops, ms);
        ms = bench_ms(ctx, 10, [&] { attention_backward(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, C, NH); });
        dev_report_tflops("attention_backward", "gpt2", 2.5 * fwd_flops, ms);
    }
    CHECK_CUDA(cudaFree(d_qkv));
    CHECK_CUDA(cudaFree(d_dout));
    CHECK_CUDA(cudaFree(d_out));
    CHECK_CUDA(cudaFree(d_dqkv));
    CHECK_CUDA(cudaFree(d_lse));
}

// --bench: the kernels alone at training sizes (issue 23's: head size 64 and 128, T = 1024 and
// 4096, B*NH*T/64 query tiles filling the GPU many times over), where a CPU reference would take
// minutes and the T*T attention matrix gigabytes. The numbers count useful causal FLOPs: each
// query attends to t+1 keys, 2 products of 2*HS flops a pair; the backward as 2.5x the forward.
static void bench_case(const CudaContext& ctx, int B, int T, int NH, int HS) {
    const int C = NH * HS;
    char what[80];
    snprintf(what, sizeof(what), "B=%d,T=%d,NH=%d,HS=%d", B, T, NH, HS);
    printf("-- attention bench %s\n", what);
    const size_t n_qkv = (size_t)B * T * 3 * C, n_out = (size_t)B * T * C;
    const double fwd_flops = 4.0 * ((double)B * NH * T * (T + 1) / 2.0) * HS;
    DevRng rng(7 + T + HS);
    std::vector<float> qkv = rand_vec(rng, n_qkv, 2.0f), dout = rand_vec(rng, n_out);
    floatX *d_qkv = dev_upload(qkv), *d_dout = dev_upload(dout), *d_out, *d_dqkv;
    float* d_lse;
    CHECK_CUDA(cudaMalloc(&d_out, n_out * sizeof(floatX)));
    CHECK_CUDA(cudaMalloc(&d_dqkv, n_qkv * sizeof(floatX)));
    CHECK_CUDA(cudaMalloc(&d_lse, (size_t)B * NH * T * sizeof(float)));
    const int reps = T >= 4096 ? 5 : 10;
#ifdef ENABLE_BF16
    if (attention_mma_supported(HS)) {
        float ms = bench_ms(ctx, reps, [&] { attention_forward_mma(ctx, d_out, d_lse, d_qkv, B, T, C, NH); });
        dev_report_tflops("attention_forward_mma", what, fwd_flops, ms);
        for (const FwdVariant& v : fwd_variants) {
            if (v.hs != HS) continue;
            ms = bench_ms(ctx, reps, [&] { v.fn(ctx, d_out, d_lse, d_qkv, B, T, NH, NH); });
            dev_report_tflops(v.name, what, fwd_flops, ms);
        }
        // (the backward below reads the last forward's out and lse: the trainer's, computed again)
        attention_forward_mma(ctx, d_out, d_lse, d_qkv, B, T, C, NH);
        ms = bench_ms(ctx, reps, [&] { attention_backward_mma(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, C, NH); });
        dev_report_tflops("attention_backward_mma", what, 2.5 * fwd_flops, ms);
        // the dk/dv kernels by name, with each dq kernel (the launcher takes one pair above)
        for (int keys : {16, 32}) {
            for (int qreg : {0, 1}) {
                if ((keys == 32 && HS > 64) || (qreg == 1 && HS != 64)) continue;
                ms = bench_ms(ctx, reps, [&] {
                    attention_backward_mma_launch<false>(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, NH, NH, HS,
                                                         nullptr, keys, qreg);
                });
                const std::string name = "attention_backward_mma_keys" + std::to_string(keys) +
                                         (HS == 64 ? (qreg ? "_dq_qreg" : "_dq_plain") : "");
                dev_report_tflops(name.c_str(), what, 2.5 * fwd_flops, ms);
            }
        }
        float* d_dq_accum;
        CHECK_CUDA(cudaMalloc(&d_dq_accum, (size_t)B * T * C * sizeof(float)));
        ms = bench_ms(ctx, reps, [&] {
            attention_backward_mma(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, C, NH, d_dq_accum);
        });
        dev_report_tflops("attention_backward_mma_fused", what, 2.5 * fwd_flops, ms);
        if (ctx.props.major >= 9) {
            ms = bench_ms(ctx, reps, [&] {
                attention_backward_mma_launch<true>(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, NH, NH, C / NH, d_dq_accum);
            });
            dev_report_tflops("attention_backward_mma_bulk", what, 2.5 * fwd_flops, ms);
        }
        CHECK_CUDA(cudaFree(d_dq_accum));
    }
#endif
    float ms = bench_ms(ctx, reps, [&] { attention_forward(ctx, d_out, d_lse, d_qkv, B, T, C, NH); });
    dev_report_tflops("attention_forward", what, fwd_flops, ms);
    ms = bench_ms(ctx, reps, [&] { attention_backward(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, C, NH); });
    dev_report_tflops("attention_backward", what, 2.5 * fwd_flops, ms);
    CHECK_CUDA(cudaFree(d_qkv));
    CHECK_CUDA(cudaFree(d_dout));
    CHECK_CUDA(cudaFree(d_out));
    CHECK_CUDA(cudaFree(d_dqkv));
    CHECK_CUDA(cudaFree(d_lse));
}

int main(int argc, char** argv) {
    dev_parse_args(argc, argv);
    CudaContext ctx;
    cuda_context_init(&ctx, 0);
    dev_print_device(ctx, "attention");
    if (g_dev_bench) {  // 16,384 tokens a batch: GPT-2's C=768 (NH=12) and a Llama's C=2048 (NH=16)
        const int hs_nh[][2] = {{64, 12}, {128, 16}};
        for (auto& c : hs_nh) {
            for (int T : {1024, 4096}) {
                if (T > 1024 && g_dev_profile) continue;  // --profile: T=1024 (d12's and the 1.2B Llama's)
                bench_case(ctx, 16384 / T, T, c[1], c[0]);
            }
        }
        cuda_context_free(&ctx);
        return dev_finish("attention");
    }
    run_case(ctx, 2, 37, 3, 16, false);    // C = 48, T not a multiple of the tile
    run_case(ctx, 1, 1, 1, 64, false);     // one position
    run_case(ctx, 2, 100, 3, 64, false);
    const int head_sizes[] = {8, 16, 32, 48, 64, 80, 96, 128};
    for (int hs : head_sizes) run_case(ctx, 1, 70, 2, hs, false);
    run_case(ctx, 1, 256, 4, 128, false);  // several full tiles at the largest head
    run_case(ctx, 1, 193, 2, 80, false);   // 4 tiles of 64, the last of one row: every pipeline stage
    run_case(ctx, 1, 300, 2, 64, false);   // the forward variants' 128-query tiles: 3, the last of 44 rows
    if (!g_dev_quick) run_case(ctx, 4, 1024, 12, 64, true);  // GPT-2 124M
    cuda_context_free(&ctx);
    return dev_finish("attention");
}
