// matmul.cu: llmc/cuda/matmul.cuh (cuBLASLt) against llmc/cpu/matmul.h (+ gelu.h), then a
// benchmark in TFLOP/s.
// Tolerances (|err| <= atol_frac*max|ref| + rtol*|ref|):
//   fp32 (CUBLAS_COMPUTE_32F, no TF32): sums of K products in a different order than the
//        CPU's blocked GEMM, |err| ~ sqrt(K) ulps of the terms: rtol 1e-4 + 1e-5*max.
//   fp32 with TF32 (-f 1): 10-bit mantissa inputs: rtol 5e-3 + 2e-3*max.
//   bf16: inputs identical (rounded before the CPU sees them), fp32 accumulation, output
//        rounded to bf16 (2^-9 relative): rtol 1e-2 + 2e-3*max.
// The fused GELU epilogue is held to the same tolerance as the separate kernel: if it
// fails while the unfused path passes, cuBLASLt's GELU is not GPT-2's tanh GELU and the
// trainer must set ctx.gelu_fusion = 0 (and likewise for the DGELU epilogue of -ge 2).
#include "dev_common.cuh"
#include "../../llmc/cpu/gelu.h"
#include "../../llmc/cpu/matmul.h"
#include "../../llmc/cuda/matmul.cuh"

static DevTol matmul_tol() { return tol_for({1e-4, 1e-5}, {1e-2, 2e-3}); }

// shift: every device buffer starts that many elements past its allocation (16 bytes: the
// alignment of a layer's slice of the parameter buffer, less than cuBLASLt's default 256)
static void run_case(CudaContext& ctx, int BT, int C, int OC, bool has_bias, bool gelu, bool bench,
                     const char* bench_name, int shift = 0) {
    char what[96];
    snprintf(what, sizeof(what), "BT=%d C=%d OC=%d%s%s%s", BT, C, OC, has_bias ? " bias" : "", gelu ? " gelu" : "",
             shift ? " +16B" : "");
    printf("-- matmul %s\n", what);
    std::string w(what);
    DevRng rng(31 + BT + C + OC);
    std::vector<float> inp = rand_vec(rng, (size_t)BT * C), weight = rand_vec(rng, (size_t)OC * C, 0.1f);
    std::vector<float> bias = rand_vec(rng, OC, 0.5f), dout = rand_vec(rng, (size_t)BT * OC);
    std::vector<float> dinp0 = rand_vec(rng, (size_t)BT * C, 0.1f), dw0 = rand_vec(rng, (size_t)OC * C, 0.1f);
    std::vector<float> db0 = rand_vec(rng, OC, 0.1f);
    for (auto* v : {&inp, &weight, &bias, &dout, &dinp0, &dw0, &db0}) round_to_floatX(*v);
    const size_t nout = (size_t)BT * OC;
    std::vector<floatX*> allocs;  // what cudaMalloc returned, for cudaFree
    auto upload = [&](const std::vector<float>& h) {
        std::vector<float> padded(shift, 0.0f);
        padded.insert(padded.end(), h.begin(), h.end());
        allocs.push_back(dev_upload(padded));
        return allocs.back() + shift;
    };
    floatX *d_inp = upload(inp), *d_w = upload(weight), *d_bias = has_bias ? upload(bias) : nullptr;
    floatX *d_dout = upload(dout), *d_dinp = upload(dinp0), *d_dw = upload(dw0), *d_db = upload(db0);
    floatX *d_out = upload(std::vector<float>(nout)), *d_pre = upload(std::vector<float>(nout));
    DevTol tol = matmul_tol();

    // forward reference
    std::vector<float> ref(nout);
    matmul_forward(ref.data(), inp.data(), weight.data(), has_bias ? bias.data() : nullptr, 1, BT, C, OC);
    std::vector<float> ref_gelu;
    if (gelu) {
        ref_gelu.resize(nout);
        gelu_forward(ref_gelu.data(), ref.data(), nout);
    }
    if (!gelu) {
        matmul_forward(ctx, d_out, nullptr, d_inp, d_w, d_bias, BT, C, OC);
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        dev_check("matmul_forward", what, dev_download(d_out, nout), ref, tol);
#ifndef ENABLE_BF16
        ctx.tf32 = true;
        matmul_forward(ctx, d_out, nullptr, d_inp, d_w, d_bias, BT, C, OC);
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        ctx.tf32 = false;
        dev_check("matmul_forward", (w + " tf32").c_str(), dev_download(d_out, nout), ref, {5e-3, 2e-3});
#endif
    } else {
        // the epilogue on its own: is it offered, and is it GPT-2's GELU?
        bool offered = OC % 8 == 0 &&
                       matmul_cublaslt(ctx, d_out, d_w, d_inp, d_bias, d_pre, OC, BT, C, true, false, false,
                                       MATMUL_GELU_FORWARD);
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        printf("   cuBLASLt GELU epilogue %s\n", offered ? "offered" : "NOT offered (matmul_forward falls back to gelu_forward)");
        if (offered) {
            dev_check("matmul_forward", (w + " epilogue pre_gelu").c_str(), dev_download(d_pre, nout), ref, tol);
            if (!dev_check("matmul_forward", (w + " epilogue gelu").c_str(), dev_download(d_out, nout), ref_gelu, tol))
                printf("   ^ the GELU epilogue is not tanh-GELU within tolerance: set ctx.gelu_fusion = false\n");
        }
        ctx.gelu_fusion = 0;
        matmul_forward(ctx, d_out, d_pre, d_inp, d_w, d_bias, BT, C, OC);
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        ctx.gelu_fusion = 1;
        dev_check("matmul_forward", (w + " unfused pre_gelu").c_str(), dev_download(d_pre, nout), ref, tol);
        dev_check("matmul_forward", (w + " unfused gelu").c_str(), dev_download(d_out, nout), ref_gelu, tol);
    }

    // backward, accumulating into random prior values (as the CPU does)
    std::vector<float> r_dinp = dinp0, r_dw = dw0, r_db = db0;
    matmul_backward(r_dinp.data(), r_dw.data(), has_bias ? r_db.data() : nullptr, dout.data(), inp.data(),
                    weight.data(), 1, BT, C, OC);
    matmul_backward(ctx, d_dinp, d_dw, has_bias ? d_db : nullptr, d_dout, d_inp, d_w, BT, C, OC, true);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    dev_check("matmul_backward", (w + " dinp +=").c_str(), dev_download(d_dinp, (size_t)BT * C), r_dinp, tol);
    dev_check("matmul_backward", (w + " dweight +=").c_str(), dev_download(d_dw, (size_t)OC * C), r_dw, tol);
    if (has_bias) dev_check("matmul_backward", (w + " dbias +=").c_str(), dev_download(d_db, OC), r_db, tol);
    // overwrite mode for dinp (the trainer's)
    // (the reference is the accumulated one minus its prior: saves a second CPU dweight GEMM)
    std::vector<float> r_dinp0((size_t)BT * C);
    for (size_t i = 0; i < r_dinp0.size(); i++) r_dinp0[i] = r_dinp[i] - dinp0[i];
    matmul_backward(ctx, d_dinp, d_dw, nullptr, d_dout, d_inp, d_w, BT, C, OC, false);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    dev_check("matmul_backward", (w + " dinp =").c_str(), dev_download(d_dinp, (size_t)BT * C), r_dinp0, tol);

    // the GELU before the layer taken back with dinp: dinp = (dout @ weight) * gelu'(pre_gelu),
    // in cuBLASLt's DGELU epilogue (-ge 2) when offered, and by gelu_backward (-ge 0 and 1)
    std::vector<float> pre = rand_vec(rng, (size_t)BT * C, 2.0f);
    round_to_floatX(pre);
    floatX* d_pre_in = upload(pre);
    std::vector<float> r_dgelu((size_t)BT * C, 0.0f);
    gelu_backward(r_dgelu.data(), pre.data(), r_dinp0.data(), r_dgelu.size());
    // dinp is set to NaN before each path, so a path that writes nothing cannot pass
    auto poison_dinp = [&] { CHECK_CUDA(cudaMemsetAsync(d_dinp, 0xFF, (size_t)BT * C * sizeof(floatX), ctx.stream)); };
    poison_dinp();
    bool offered = C % 8 == 0 && matmul_cublaslt(ctx, d_dinp, d_w, d_dout, nullptr, d_pre_in, C, BT, OC, false, false,
                                                 false, MATMUL_GELU_BACKWARD);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    printf("   cuBLASLt DGELU epilogue %s\n", offered ? "offered" : "NOT offered (-ge 2 falls back to gelu_backward)");
    if (offered && !dev_check("matmul_backward", (w + " dinp = gelu' (DGELU epilogue)").c_str(),
                              dev_download(d_dinp, (size_t)BT * C), r_dgelu, tol))
        printf("   ^ the DGELU epilogue is not tanh-GELU's derivative within tolerance: -ge 2 must not be used\n");
    // and with it the bias gradient of the layer before the GELU (dbias_pre += dinp's column
    // sums): in the DGELU epilogue (DGELU_BGRAD, -bg 2) when offered, else by its own pass.
    // The pass sums dinp as stored (bf16: each term rounded, up to 2^-9 of it), the epilogue
    // its fp32 values: beside tol, 2^-8 of the largest column's sum of |terms| in bf16.
    std::vector<float> dbp0 = rand_vec(rng, C, 0.1f);
    round_to_floatX(dbp0);
    std::vector<float> r_dbp = dbp0, abs_sum(C, 0.0f);
    for (int r = 0; r < BT; r++)
        for (int c = 0; c < C; c++) {
            r_dbp[c] += r_dgelu[(size_t)r * C + c];
            abs_sum[c] += std::fabs(r_dgelu[(size_t)r * C + c]);
        }
    DevTol tol_dbp = tol;
    if (sizeof(floatX) == 2) tol_dbp.atol_abs = std::ldexp(*std::max_element(abs_sum.begin(), abs_sum.end()), -8);
    floatX* d_dbp = upload(dbp0);
    const struct { int ge, bg; const char* name; } paths[] = {
        {2, 2, " (-ge 2 -bg 2)"}, {2, 0, " (-ge 2 -bg 0)"}, {0, 2, " (-ge 0 -bg 2)"}, {2, 1, " (-ge 2 -bg 1)"}};
    for (const auto& p : paths) {
        ctx.gelu_fusion = p.ge;
        ctx.bias_grad_epilogue = p.bg;
        poison_dinp();
        dev_upload_into(d_dbp, dbp0);
        const bool taken = matmul_backward(ctx, d_dinp, d_dw, nullptr, d_dout, d_inp, d_w, BT, C, OC, false, d_pre_in,
                                           d_dbp);
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        dev_check("matmul_backward", (w + " dinp = gelu'" + p.name).c_str(), dev_download(d_dinp, (size_t)BT * C),
                  r_dgelu, tol);
        // -bg 1 leaves it to the layer's own weight-gradient epilogue: untouched, and said so
        dev_expect("matmul_backward", (w + " dbias_pre taken" + p.name).c_str(), taken == (p.bg != 1));
        dev_check("matmul_backward", (w + " dbias_pre" + p.name).c_str(), dev_download(d_dbp, C),
                  p.bg != 1 ? r_dbp : dbp0, tol_dbp);
    }
    ctx.gelu_fusion = 1;
    ctx.bias_grad_epilogue = 0;

    if (bench) {
        const double flops = 2.0 * BT * C * OC;
        float ms = bench_ms(ctx, 10, [&] { matmul_forward(ctx, d_out, gelu ? d_pre : nullptr, d_inp, d_w, d_bias, BT, C, OC); });
        dev_report_tflops("matmul_forward", bench_name, flops, ms);
        ms = bench_ms(ctx, 10, [&] {
            matmul_backward(ctx, d_dinp, d_dw, has_bias ? d_db : nullptr, d_dout, d_inp, d_w, BT, C, OC, false);
        });
        dev_report_tflops("matmul_backward", bench_name, 2.0 * flops, ms);
    }
    for (floatX* p : allocs) CHECK_CUDA(cudaFree(p));
}

// the classifier's shape (no bias, Vp columns): forward checked on the first rows only,
// since the full CPU product would take minutes
static void run_classifier_bench(const CudaContext& ctx, int BT, int C, int Vp) {
    printf("-- matmul classifier BT=%d C=%d Vp=%d\n", BT, C, Vp);
    DevRng rng(99);
    std::vector<float> inp = rand_vec(rng, (size_t)BT * C), weight = rand_vec(rng, (size_t)Vp * C, 0.1f);
    round_to_floatX(inp); round_to_floatX(weight);
    floatX *d_inp = dev_upload(inp), *d_w = dev_upload(weight), *d_out;
    CHECK_CUDA(cudaMalloc(&d_out, (size_t)BT * Vp * sizeof(floatX)));
    matmul_forward(ctx, d_out, nullptr, d_inp, d_w, nullptr, BT, C, Vp);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    const int rows = 16;
    std::vector<float> ref((size_t)rows * Vp);
    matmul_forward(ref.data(), inp.data(), weight.data(), nullptr, 1, rows, C, Vp);
    dev_check("matmul_forward", "classifier first 16 rows", dev_download(d_out, (size_t)rows * Vp), ref, matmul_tol());
    float ms = bench_ms(ctx, 10, [&] { matmul_forward(ctx, d_out, nullptr, d_inp, d_w, nullptr, BT, C, Vp); });
    dev_report_tflops("matmul_forward", "classifier", 2.0 * BT * C * Vp, ms);
    for (floatX* p : {d_inp, d_w, d_out}) CHECK_CUDA(cudaFree(p));
}

int main(int argc, char** argv) {
    dev_parse_args(argc, argv);
    CudaContext ctx;
    cuda_context_init(&ctx, 0);
    dev_print_device(ctx, "matmul");
    run_case(ctx, 3 * 37, 48, 3 * 48, true, false, false, "");
    run_case(ctx, 3 * 37, 48, 4 * 48, true, true, false, "");
    run_case(ctx, 3 * 37, 768, 1024, false, false, false, "");   // classifier-like: no bias, Vp columns
    run_case(ctx, 3 * 37, 4 * 48, 48, true, false, false, "");   // fcproj-like: K > N
    run_case(ctx, 1000, 48, 3 * 48, true, false, false, "");      // 63 chunks in the bias gradient's finish
    // pointers 16 bytes past 256-byte boundaries (as layer slices of the parameter buffer)
    run_case(ctx, 3 * 37, 48, 4 * 48, true, true, false, "", 16 / (int)sizeof(floatX));
    run_case(ctx, 3 * 37, 768, 3 * 768, true, false, false, "", 16 / (int)sizeof(floatX));
    if (!g_dev_quick) run_case(ctx, 8 * 1024, 768, 3 * 768, true, false, true, "gpt2_qkv");
    if (!g_dev_quick) run_case(ctx, 8 * 1024, 768, 4 * 768, true, true, true, "gpt2_fc_gelu");
    if (!g_dev_quick) run_classifier_bench(ctx, 8 * 1024, 768, 50304);
    cuda_context_free(&ctx);
    return dev_finish("matmul");
}
