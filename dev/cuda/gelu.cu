// gelu.cu: llmc/cuda/gelu.cuh against llmc/cpu/gelu.h, then a benchmark.
// Tolerances: elementwise, so fp32 differs only by tanhf's few ulps, which 1+tanh(u)
// magnifies for negative x (|err| ~1e-7 absolute): rtol 1e-5 + 1e-6*max. bf16: one
// rounding of the output: rtol 8e-3 + 1e-3*max.
#include "dev_common.cuh"
#include "../../llmc/cpu/gelu.h"
#include "../../llmc/cuda/gelu.cuh"

static void run_case(const CudaContext& ctx, size_t N, bool bench) {
    char what[64];
    snprintf(what, sizeof(what), "N=%zu", N);
    printf("-- gelu %s\n", what);
    DevRng rng(5 + N);
    std::vector<float> inp = rand_vec(rng, N, 5.0f), dout = rand_vec(rng, N);
    round_to_floatX(inp); round_to_floatX(dout);
    floatX *d_inp = dev_upload(inp), *d_dout = dev_upload(dout), *d_out;
    CHECK_CUDA(cudaMalloc(&d_out, N * sizeof(floatX)));
    DevTol tol = tol_for({1e-5, 1e-6}, {8e-3, 1e-3});

    std::vector<float> ref(N);
    gelu_forward(ref.data(), inp.data(), N);
    gelu_forward(ctx, d_out, d_inp, N);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    dev_check("gelu_forward", what, dev_download(d_out, N), ref, tol);

    std::vector<float> ref_d(N, 0.0f);
    gelu_backward(ref_d.data(), inp.data(), dout.data(), N);
    gelu_backward(ctx, d_out, d_inp, d_dout, N);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    dev_check("gelu_backward", what, dev_download(d_out, N), ref_d, tol);
    // in place (dinp aliasing dout), as the trainer uses it
    gelu_backward(ctx, d_dout, d_inp, d_dout, N);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    dev_check("gelu_backward", (std::string(what) + " in place").c_str(), dev_download(d_dout, N), ref_d, tol);

    if (bench) {
        float ms = bench_ms(ctx, 20, [&] { gelu_forward(ctx, d_out, d_inp, N); });
        dev_report_gbs("gelu_forward", "gpt2", 2.0 * N * sizeof(floatX), ms);
        ms = bench_ms(ctx, 20, [&] { gelu_backward(ctx, d_out, d_inp, d_out, N); });
        dev_report_gbs("gelu_backward", "gpt2", 3.0 * N * sizeof(floatX), ms);
    }
    for (floatX* p : {d_inp, d_dout, d_out}) CHECK_CUDA(cudaFree(p));
}

int main(int argc, char** argv) {
    dev_parse_args(argc, argv);
    CudaContext ctx;
    cuda_context_init(&ctx, 0);
    dev_print_device(ctx, "gelu");
    run_case(ctx, (size_t)3 * 37 * 4 * 48, false);
    run_case(ctx, 8, false);
    if (!g_dev_quick) run_case(ctx, (size_t)8 * 1024 * 4 * 768, true);  // GPT-2 124M fc activations, B=8 T=1024
    cuda_context_free(&ctx);
    return dev_finish("gelu");
}
