// rmsnorm.cu: llmc/cuda/rmsnorm.cuh against llmc/cpu/rmsnorm.h, then a benchmark.
// Tolerances (|err| <= atol_frac*max|ref| + rtol*|ref|), as layernorm.cu's:
//   fp32: sums over C (forward) or N rows (weight grad) in fp32 where the CPU uses double:
//         rtol 1e-5 for the forward, 1e-4 + 1e-5*max for the backward reductions.
//   bf16: outputs rounded to bf16, and the += into bf16 gradients rounds once more:
//         rtol 1e-2 + 2e-3*max.
#include "dev_common.cuh"
#include "../../llmc/cpu/rmsnorm.h"
#include "../../llmc/cuda/rmsnorm.cuh"

static void run_case(const CudaContext& ctx, int N, int C, float eps, bool bench) {
    char what[64];
    snprintf(what, sizeof(what), "N=%d C=%d", N, C);
    printf("-- rmsnorm %s\n", what);
    DevRng rng(91 + N + C);
    const size_t NC = (size_t)N * C;
    std::vector<float> inp = rand_vec(rng, NC);
    for (int i = 0; i < N; i++)  // a scale per row, so the row's rms matters
        for (int c = 0; c < C; c++) inp[(size_t)i * C + c] *= 1.0f + i % 7;
    std::vector<float> w = rand_vec(rng, C), dout = rand_vec(rng, NC);
    std::vector<float> dinp = rand_vec(rng, NC, 0.1f), dw = rand_vec(rng, C, 0.1f);
    for (auto* v : {&inp, &w, &dout, &dinp, &dw}) round_to_floatX(*v);
    floatX *d_inp = dev_upload(inp), *d_w = dev_upload(w), *d_dout = dev_upload(dout), *d_dinp = dev_upload(dinp);
    floatX *d_dw = dev_upload(dw), *d_out;
    float* d_rstd;
    CHECK_CUDA(cudaMalloc(&d_out, NC * sizeof(floatX)));
    CHECK_CUDA(cudaMalloc(&d_rstd, N * sizeof(float)));
    DevTol t_out = tol_for({1e-5, 1e-5}, {1e-2, 2e-3});
    DevTol t_stat = tol_for({1e-5, 1e-6}, {1e-4, 1e-5});  // rstd is fp32 in both builds
    DevTol t_bwd = tol_for({1e-4, 1e-5}, {1e-2, 2e-3});

    std::vector<float> ref(NC), ref_rstd(N);
    rmsnorm_forward(ref.data(), ref_rstd.data(), inp.data(), w.data(), N, C, eps);
    rmsnorm_forward(ctx, d_out, d_rstd, d_inp, d_w, N, C, eps);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    dev_check("rmsnorm_forward", (std::string(what) + " out").c_str(), dev_download(d_out, NC), ref, t_out);
    dev_check("rmsnorm_forward", (std::string(what) + " rstd").c_str(), dev_download_f32(d_rstd, N), ref_rstd, t_stat);

    // backward from the CPU's rstd (so it is checked on its own), by both paths: two passes
    // (dinp, then the column partials) and one (both at once, where C fits it)
    CHECK_CUDA(cudaMemcpy(d_rstd, ref_rstd.data(), N * sizeof(float), cudaMemcpyHostToDevice));
    std::vector<float> r_dinp = dinp, r_dw = dw;
    rmsnorm_backward(r_dinp.data(), r_dw.data(), dout.data(), inp.data(), w.data(), ref_rstd.data(), N, C);
    floatX* d_dw2 = dev_upload(dw);
    const NormBackwardPath paths[2] = {NORM_BWD_TWO_PASS, NORM_BWD_ONE_PASS};
    const char* names[2] = {"rmsnorm_backward_2pass", "rmsnorm_backward_1pass"};
    const bool one_pass_fits = norm_onepass_plan(ctx, C, false).fits;
    for (int p = 0; p < 2; p++) {
        if (paths[p] == NORM_BWD_ONE_PASS && !one_pass_fits) continue;
        dev_upload_into(d_dinp, dinp);
        dev_upload_into(d_dw, dw);
        rmsnorm_backward(ctx, d_dinp, d_dw, d_dout, d_inp, d_w, d_rstd, N, C, paths[p]);
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        std::vector<float> got_dw = dev_download(d_dw, C);
        dev_check(names[p], (std::string(what) + " dinp").c_str(), dev_download(d_dinp, NC), r_dinp, t_bwd);
        dev_check(names[p], (std::string(what) + " dweight").c_str(), got_dw, r_dw, t_bwd);
        // determinism of the weight gradient
        dev_upload_into(d_dw2, dw);
        rmsnorm_backward(ctx, d_dinp, d_dw2, d_dout, d_inp, d_w, d_rstd, N, C, paths[p]);
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        std::vector<float> again = dev_download(d_dw2, C);
        dev_expect(names[p], (std::string(what) + " dweight bitwise deterministic").c_str(),
                   memcmp(again.data(), got_dw.data(), C * sizeof(float)) == 0);
    }

    if (bench) {
        float ms = bench_ms(ctx, 20, [&] { rmsnorm_forward(ctx, d_out, d_rstd, d_inp, d_w, N, C, eps); });
        dev_report_gbs("rmsnorm_forward", "llama", 2.0 * NC * sizeof(floatX), ms);
        // both paths counted as the two passes move: dinp's reads dout, inp, dinp and writes
        // dinp, the partials' reads dout and inp again (the one pass moves 4 of those 6)
        for (int p = 0; p < 2; p++) {
            if (paths[p] == NORM_BWD_ONE_PASS && !one_pass_fits) continue;
            ms = bench_ms(ctx, 20, [&] { rmsnorm_backward(ctx, d_dinp, d_dw2, d_dout, d_inp, d_w, d_rstd, N, C, paths[p]); });
            dev_report_gbs(names[p], "llama", 6.0 * NC * sizeof(floatX), ms);
        }
    }
    for (floatX* p : {d_inp, d_w, d_dout, d_dinp, d_dw, d_out, d_dw2}) CHECK_CUDA(cudaFree(p));
    CHECK_CUDA(cudaFree(d_rstd));
}

int main(int argc, char** argv) {
    dev_parse_args(argc, argv);
    CudaContext ctx;
    cuda_context_init(&ctx, 0);
    dev_print_device(ctx, "rmsnorm");
    // the one pass's plans (norm_backward.cuh: TW warps a row, CH loads a lane; bf16 / fp32)
    run_case(ctx, 3 * 37, 48, 1e-5f, false);   // 1 warp, 1 load
    run_case(ctx, 5, 1600, 1e-6f, false);      // 4 warps, 2 loads / 8 warps, 2 loads; C not a multiple of 32 * 8
    run_case(ctx, 1000, 64, 1e-5f, false);     // 63 chunks: column_sums_finish's rows walk unequal counts
    run_case(ctx, 77, 2048, 1e-5f, false);     // the 1.2B Llama's C: 4 warps, 2 loads / 8 warps, 2 loads
    run_case(ctx, 19, 4096, 1e-5f, false);     // Llama 3 8B's C: 8 warps, 2 loads / past the one pass
    run_case(ctx, 40, 720, 1e-5f, false);      // 1 warp, 3 loads / 2 warps, 3 loads
    if (g_dev_bench) {
        run_case(ctx, 8 * 1024, 2048, 1e-5f, true);  // the 1.2B Llama, B=8 T=1024
        run_case(ctx, 8 * 1024, 4096, 1e-5f, true);  // Llama 3 8B's width, B=8 T=1024
    } else if (!g_dev_quick) {
        run_case(ctx, 8 * 1024, 4096, 1e-5f, true);
    }
    cuda_context_free(&ctx);
    return dev_finish("rmsnorm");
}
