// layernorm.cu: llmc/cuda/layernorm.cuh against llmc/cpu/layernorm.h (+ residual.h for the
// fused add), then a benchmark.
// Tolerances (|err| <= atol_frac*max|ref| + rtol*|ref|):
//   fp32: sums over C (forward) or N rows (parameter grads) in fp32 where the CPU uses
//         double: rtol 1e-5 for the forward, 1e-4 + 1e-5*max for the backward reductions.
//   bf16: outputs are rounded to bf16 (2^-9 relative), and the += into bf16 gradients
//         rounds once more: rtol 1e-2 + 2e-3*max (the CPU sees the same bf16 inputs).
#include "dev_common.cuh"
#include "../../llmc/cpu/layernorm.h"
#include "../../llmc/cpu/residual.h"
#include "../../llmc/cuda/layernorm.cuh"

static void run_case(const CudaContext& ctx, int N, int C, bool bench) {
    char what[64];
    snprintf(what, sizeof(what), "N=%d C=%d", N, C);
    printf("-- layernorm %s\n", what);
    DevRng rng(77 + N + C);
    const size_t NC = (size_t)N * C;
    // an offset and a scale per row, so mean and variance matter
    std::vector<float> inp = rand_vec(rng, NC);
    for (int i = 0; i < N; i++)
        for (int c = 0; c < C; c++) inp[(size_t)i * C + c] = inp[(size_t)i * C + c] * (1.0f + i % 7) + 0.5f * (i % 5);
    std::vector<float> resid_b = rand_vec(rng, NC);
    std::vector<float> w = rand_vec(rng, C), bias = rand_vec(rng, C), dout = rand_vec(rng, NC);
    std::vector<float> dinp = rand_vec(rng, NC, 0.1f), dw = rand_vec(rng, C, 0.1f), db = rand_vec(rng, C, 0.1f);
    for (auto* v : {&inp, &resid_b, &w, &bias, &dout, &dinp, &dw, &db}) round_to_floatX(*v);

    floatX *d_inp = dev_upload(inp), *d_b = dev_upload(resid_b), *d_w = dev_upload(w), *d_bias = dev_upload(bias);
    floatX *d_dout = dev_upload(dout), *d_dinp = dev_upload(dinp), *d_dw = dev_upload(dw), *d_db = dev_upload(db);
    floatX *d_out, *d_res;
    float *d_mean, *d_rstd;
    CHECK_CUDA(cudaMalloc(&d_out, NC * sizeof(floatX)));
    CHECK_CUDA(cudaMalloc(&d_res, NC * sizeof(floatX)));
    CHECK_CUDA(cudaMalloc(&d_mean, N * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&d_rstd, N * sizeof(float)));

    DevTol t_out = tol_for({1e-5, 1e-5}, {1e-2, 2e-3});
    DevTol t_stat = tol_for({1e-5, 1e-6}, {1e-4, 1e-5});  // mean/rstd are fp32 in both builds
    DevTol t_bwd = tol_for({1e-4, 1e-5}, {1e-2, 2e-3});

    // forward
    std::vector<float> ref(NC), ref_mean(N), ref_rstd(N);
    layernorm_forward(ref.data(), ref_mean.data(), ref_rstd.data(), inp.data(), w.data(), bias.data(), N, C);
    layernorm_forward(ctx, d_out, d_mean, d_rstd, d_inp, d_w, d_bias, N, C);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    dev_check("layernorm_forward", (std::string(what) + " out").c_str(), dev_download(d_out, NC), ref, t_out);
    dev_check("layernorm_forward", (std::string(what) + " mean").c_str(), dev_download_f32(d_mean, N), ref_mean, t_stat);
    dev_check("layernorm_forward", (std::string(what) + " rstd").c_str(), dev_download_f32(d_rstd, N), ref_rstd, t_stat);

    // fused residual + layernorm: the CPU adds, rounds to floatX (what the GPU stores), normalizes
    std::vector<float> ref_res(NC);
    residual_forward(ref_res.data(), inp.data(), resid_b.data(), NC);
    round_to_floatX(ref_res);
    std::vector<float> ref2(NC), ref2_mean(N), ref2_rstd(N);
    layernorm_forward(ref2.data(), ref2_mean.data(), ref2_rstd.data(), ref_res.data(), w.data(), bias.data(), N, C);
    fused_residual_layernorm_forward(ctx, d_res, d_out, d_mean, d_rstd, d_inp, d_b, d_w, d_bias, N, C);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    dev_check("fused_residual_layernorm", (std::string(what) + " residual").c_str(), dev_download(d_res, NC),
              ref_res, tol_for({1e-6, 1e-7}, {1e-6, 1e-7}));  // exact: same sum, same rounding
    dev_check("fused_residual_layernorm", (std::string(what) + " out").c_str(), dev_download(d_out, NC), ref2, t_out);
    dev_check("fused_residual_layernorm", (std::string(what) + " rstd").c_str(), dev_download_f32(d_rstd, N),
              ref2_rstd, t_stat);

    // backward from the CPU's mean/rstd (so it is checked on its own), by both paths: two
    // passes (dinp, then the column partials) and one (both at once, where C fits it)
    CHECK_CUDA(cudaMemcpy(d_mean, ref_mean.data(), N * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(d_rstd, ref_rstd.data(), N * sizeof(float), cudaMemcpyHostToDevice));
    std::vector<float> r_dinp = dinp, r_dw = dw, r_db = db;
    layernorm_backward(r_dinp.data(), r_dw.data(), r_db.data(), dout.data(), inp.data(), w.data(),
                       ref_mean.data(), ref_rstd.data(), N, C);
    floatX* d_dw2 = dev_upload(dw);
    floatX* d_db2 = dev_upload(db);
    const NormBackwardPath paths[2] = {NORM_BWD_TWO_PASS, NORM_BWD_ONE_PASS};
    const bool one_pass_fits = norm_onepass_plan(ctx, C, true).fits;
    const char* names[2] = {"layernorm_backward_2pass", "layernorm_backward_1pass"};
    for (int p = 0; p < 2; p++) {
        if (paths[p] == NORM_BWD_ONE_PASS && !one_pass_fits) continue;
        const std::string wp = std::string(what);
        dev_upload_into(d_dinp, dinp);
        dev_upload_into(d_dw, dw);
        dev_upload_into(d_db, db);
        layernorm_backward(ctx, d_dinp, d_dw, d_db, d_dout, d_inp, d_w, d_mean, d_rstd, N, C, paths[p]);
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        std::vector<float> got_dw = dev_download(d_dw, C);
        dev_check(names[p], (wp + " dinp").c_str(), dev_download(d_dinp, NC), r_dinp, t_bwd);
        dev_check(names[p], (wp + " dweight").c_str(), got_dw, r_dw, t_bwd);
        dev_check(names[p], (wp + " dbias").c_str(), dev_download(d_db, C), r_db, t_bwd);
        // determinism of the parameter gradients
        dev_upload_into(d_dw2, dw);
        dev_upload_into(d_db2, db);
        layernorm_backward(ctx, d_dinp, d_dw2, d_db2, d_dout, d_inp, d_w, d_mean, d_rstd, N, C, paths[p]);
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        std::vector<float> again = dev_download(d_dw2, C);
        dev_expect(names[p], (wp + " dweight bitwise deterministic").c_str(),
                   memcmp(again.data(), got_dw.data(), C * sizeof(float)) == 0);
    }

    if (bench) {
        float ms = bench_ms(ctx, 20, [&] { layernorm_forward(ctx, d_out, d_mean, d_rstd, d_inp, d_w, d_bias, N, C); });
        dev_report_gbs("layernorm_forward", "gpt2", 2.0 * NC * sizeof(floatX), ms);
        ms = bench_ms(ctx, 20, [&] {
            fused_residual_layernorm_forward(ctx, d_res, d_out, d_mean, d_rstd, d_inp, d_b, d_w, d_bias, N, C);
        });
        dev_report_gbs("fused_residual_layernorm", "gpt2", 4.0 * NC * sizeof(floatX), ms);
        // both paths counted as the two passes move: dinp's reads dout, inp, dinp and writes
        // dinp, the partials' reads dout and inp again (the one pass moves 4 of those 6)
        for (int p = 0; p < 2; p++) {
            if (paths[p] == NORM_BWD_ONE_PASS && !one_pass_fits) continue;
            ms = bench_ms(ctx, 20, [&] {
                layernorm_backward(ctx, d_dinp, d_dw2, d_db2, d_dout, d_inp, d_w, d_mean, d_rstd, N, C, paths[p]);
            });
            dev_report_gbs(names[p], "gpt2", 6.0 * NC * sizeof(floatX), ms);
        }
    }
    for (floatX* p : {d_inp, d_b, d_w, d_bias, d_dout, d_dinp, d_dw, d_db, d_out, d_res, d_dw2, d_db2}) CHECK_CUDA(cudaFree(p));
    CHECK_CUDA(cudaFree(d_mean));
    CHECK_CUDA(cudaFree(d_rstd));
}

int main(int argc, char** argv) {
    dev_parse_args(argc, argv);
    CudaContext ctx;
    cuda_context_init(&ctx, 0);
    dev_print_device(ctx, "layernorm");
    // the one pass's plans (norm_backward.cuh: TW warps a row, CH loads a lane; bf16 / fp32)
    run_case(ctx, 3 * 37, 48, false);    // 1 warp, 1 load (6 or 12 of 32 lanes)
    run_case(ctx, 3 * 37, 768, false);   // 1 warp, 3 loads / 2 warps, 3 loads
    run_case(ctx, 5, 1600, false);       // 4 warps, 2 loads / 8 warps, 2 loads; 5 rows: a team idles (bf16)
    run_case(ctx, 1000, 48, false);      // 63 chunks: column_sums_finish's 16 rows walk unequal counts
    run_case(ctx, 70, 1600, false);      // d48's C; 3 chunks of 32 rows, the last of 6 (two passes)
    run_case(ctx, 333, 1024, false);     // d24's C: 2 warps, 2 loads / 4 warps, 2 loads
    run_case(ctx, 100, 520, false);      // C = 65 16-byte units: the last load of the row by one lane
    run_case(ctx, 130, 384, false);      // 1 warp, 2 loads / 1 warp, 3 loads (fp32's widest for one warp)
    run_case(ctx, 37, 1280, false);      // d36's C: 2 warps, 3 loads / 4 warps, 3 loads
    run_case(ctx, 11, 2400, false);      // 4 warps, 3 loads / 8 warps, 3 loads
    run_case(ctx, 21, 4096, false);      // 8 warps, 2 loads / past the one pass (fp32's widest 3072)
    run_case(ctx, 7, 4104, false);       // 8 warps, 3 loads / past the one pass
    run_case(ctx, 9, 6160, false);       // past the one pass in both (bf16's widest 6144)
    if (g_dev_bench) {
        run_case(ctx, 64 * 1024, 768, true);  // GPT-2 124M, B=64 T=1024
        run_case(ctx, 8 * 1024, 1600, true);  // GPT-2 1.5B, B=8 T=1024
    } else if (!g_dev_quick) {
        run_case(ctx, 8 * 1024, 768, true);  // GPT-2 124M, B=8 T=1024
    }
    cuda_context_free(&ctx);
    return dev_finish("layernorm");
}
