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

    // backward from the CPU's rstd (so it is checked on its own)
    CHECK_CUDA(cudaMemcpy(d_rstd, ref_rstd.data(), N * sizeof(float), cudaMemcpyHostToDevice));
    rmsnorm_backward(ctx, d_dinp, d_dw, d_dout, d_inp, d_w, d_rstd, N, C);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    std::vector<float> r_dinp = dinp, r_dw = dw;
    rmsnorm_backward(r_dinp.data(), r_dw.data(), dout.data(), inp.data(), w.data(), ref_rstd.data(), N, C);
    std::vector<float> got_dw = dev_download(d_dw, C);
    dev_check("rmsnorm_backward", (std::string(what) + " dinp").c_str(), dev_download(d_dinp, NC), r_dinp, t_bwd);
    dev_check("rmsnorm_backward", (std::string(what) + " dweight").c_str(), got_dw, r_dw, t_bwd);

    // determinism of the weight gradient
    floatX* d_dw2 = dev_upload(dw);
    rmsnorm_backward(ctx, d_dinp, d_dw2, d_dout, d_inp, d_w, d_rstd, N, C);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    std::vector<float> again = dev_download(d_dw2, C);
    dev_expect("rmsnorm_backward", (std::string(what) + " dweight bitwise deterministic").c_str(),
               memcmp(again.data(), got_dw.data(), C * sizeof(float)) == 0);

    if (bench) {
        float ms = bench_ms(ctx, 20, [&] { rmsnorm_forward(ctx, d_out, d_rstd, d_inp, d_w, N, C, eps); });
        dev_report_gbs("rmsnorm_forward", "llama", 2.0 * NC * sizeof(floatX), ms);
        ms = bench_ms(ctx, 20, [&] { rmsnorm_backward(ctx, d_dinp, d_dw2, d_dout, d_inp, d_w, d_rstd, N, C); });
        // dinp pass: read dout, inp, dinp, write dinp; partials pass: read dout, inp again
        dev_report_gbs("rmsnorm_backward", "llama", 6.0 * NC * sizeof(floatX), ms);
    }
    for (floatX* p : {d_inp, d_w, d_dout, d_dinp, d_dw, d_out, d_dw2}) CHECK_CUDA(cudaFree(p));
    CHECK_CUDA(cudaFree(d_rstd));
}

int main(int argc, char** argv) {
    dev_parse_args(argc, argv);
    CudaContext ctx;
    cuda_context_init(&ctx, 0);
    dev_print_device(ctx, "rmsnorm");
    run_case(ctx, 3 * 37, 48, 1e-5f, false);
    run_case(ctx, 5, 1600, 1e-6f, false);    // C not a multiple of 32 * 8: the lanes' last pass is partial
    run_case(ctx, 1000, 64, 1e-5f, false);   // 63 chunks: column_sums_finish's rows walk unequal counts
    if (!g_dev_quick) run_case(ctx, 8 * 1024, 4096, 1e-5f, true);  // Llama 3 8B's width, B=8 T=1024
    cuda_context_free(&ctx);
    return dev_finish("rmsnorm");
}
