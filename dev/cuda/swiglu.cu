// swiglu.cu: llmc/cuda/swiglu.cuh against llmc/cpu/swiglu.h, then a benchmark.
// Tolerances: elementwise; fp32 differs by expf's few ulps against the CPU's exp_f32:
// rtol 1e-5 + 1e-6*max. bf16: one rounding of each output: rtol 8e-3 + 1e-3*max.
#include "dev_common.cuh"
#include "../../llmc/cpu/swiglu.h"
#include "../../llmc/cuda/swiglu.cuh"

static void run_case(const CudaContext& ctx, int N, int F, bool bench) {
    char what[64];
    snprintf(what, sizeof(what), "N=%d F=%d", N, F);
    printf("-- swiglu %s\n", what);
    DevRng rng(13 + N + F);
    const size_t NF = (size_t)N * F;
    std::vector<float> inp = rand_vec(rng, 2 * NF, 5.0f), dout = rand_vec(rng, NF), dinp = rand_vec(rng, 2 * NF, 0.1f);
    for (auto* v : {&inp, &dout, &dinp}) round_to_floatX(*v);
    floatX *d_inp = dev_upload(inp), *d_dout = dev_upload(dout), *d_dinp = dev_upload(dinp), *d_out;
    CHECK_CUDA(cudaMalloc(&d_out, NF * sizeof(floatX)));
    DevTol tol = tol_for({1e-5, 1e-6}, {8e-3, 1e-3});

    std::vector<float> ref(NF);
    swiglu_forward(ref.data(), inp.data(), N, F);
    swiglu_forward(ctx, d_out, d_inp, N, F);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    dev_check("swiglu_forward", what, dev_download(d_out, NF), ref, tol);

    // the GPU overwrites dinp (what it held, dinp's random values, must not count); the CPU
    // reference accumulates, into zeros
    std::vector<float> ref_d(2 * NF, 0.0f);
    swiglu_backward(ref_d.data(), inp.data(), dout.data(), N, F);
    swiglu_backward(ctx, d_dinp, d_inp, d_dout, N, F);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    dev_check("swiglu_backward", what, dev_download(d_dinp, 2 * NF), ref_d, tol);

    if (bench) {
        float ms = bench_ms(ctx, 20, [&] { swiglu_forward(ctx, d_out, d_inp, N, F); });
        dev_report_gbs("swiglu_forward", "llama", 3.0 * NF * sizeof(floatX), ms);
        ms = bench_ms(ctx, 20, [&] { swiglu_backward(ctx, d_dinp, d_inp, d_dout, N, F); });
        dev_report_gbs("swiglu_backward", "llama", 5.0 * NF * sizeof(floatX), ms);
    }
    for (floatX* p : {d_inp, d_dout, d_dinp, d_out}) CHECK_CUDA(cudaFree(p));
}

int main(int argc, char** argv) {
    dev_parse_args(argc, argv);
    CudaContext ctx;
    cuda_context_init(&ctx, 0);
    dev_print_device(ctx, "swiglu");
    run_case(ctx, 3 * 37, 160, false);
    run_case(ctx, 1, 8, false);
    if (!g_dev_quick) run_case(ctx, 8 * 1024, 14336, true);  // Llama 3 8B's MLP, B=8 T=1024
    cuda_context_free(&ctx);
    return dev_finish("swiglu");
}
