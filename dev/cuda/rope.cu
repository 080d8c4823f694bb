// rope.cu: llmc/cuda/rope.cuh against llmc/cpu/rope.h, then a benchmark.
// Both turn by the same fp32 table (rope_table), so fp32 differs only by the order of the
// products' rounding: rtol 1e-6 + 1e-6*max. bf16: one rounding of each output:
// rtol 8e-3 + 1e-3*max. The forward then the backward must give back the input: in bf16 after
// two roundings, each up to half an ulp of the pair's larger value, so a small value next to a
// large one is off by up to about 2^-8 * max: rtol 2e-2 + 1e-2*max.
#include "dev_common.cuh"
#include "../../llmc/cpu/rope.h"
#include "../../llmc/cuda/rope.cuh"

static void run_case(const CudaContext& ctx, int B, int T, int NH, int NKV, int hs, double theta, bool bench) {
    char what[96];
    snprintf(what, sizeof(what), "B=%d T=%d NH=%d NKV=%d hs=%d theta=%g", B, T, NH, NKV, hs, theta);
    printf("-- rope %s\n", what);
    DevRng rng(29 + B + T + hs);
    const size_t n = (size_t)B * T * (NH + 2 * NKV) * hs;
    std::vector<float> qkv = rand_vec(rng, n, 2.0f);
    round_to_floatX(qkv);
    std::vector<float> cos_t, sin_t;
    rope_table(&cos_t, &sin_t, T, hs, theta);
    floatX* d_qkv = dev_upload(qkv);
    float *d_cos, *d_sin;
    CHECK_CUDA(cudaMalloc(&d_cos, cos_t.size() * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&d_sin, sin_t.size() * sizeof(float)));
    CHECK_CUDA(cudaMemcpy(d_cos, cos_t.data(), cos_t.size() * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(d_sin, sin_t.data(), sin_t.size() * sizeof(float), cudaMemcpyHostToDevice));
    DevTol tol = tol_for({1e-6, 1e-6}, {8e-3, 1e-3});

    std::vector<float> ref = qkv;
    rope_forward(ref.data(), B, T, NH, NKV, hs, cos_t.data(), sin_t.data());
    rope_forward(ctx, d_qkv, B, T, NH, NKV, hs, d_cos, d_sin);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    dev_check("rope_forward", what, dev_download(d_qkv, n), ref, tol);
    rope_backward(ctx, d_qkv, B, T, NH, NKV, hs, d_cos, d_sin);  // the opposite turn: back to the input
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    dev_check("rope_backward", (std::string(what) + " undoes the forward").c_str(), dev_download(d_qkv, n), qkv,
              tol_for({1e-6, 1e-6}, {2e-2, 1e-2}));

    if (bench) {
        float ms = bench_ms(ctx, 20, [&] { rope_forward(ctx, d_qkv, B, T, NH, NKV, hs, d_cos, d_sin); });
        dev_report_gbs("rope_forward", "llama", 2.0 * B * T * (NH + NKV) * hs * sizeof(floatX), ms);
    }
    CHECK_CUDA(cudaFree(d_qkv));
    CHECK_CUDA(cudaFree(d_cos));
    CHECK_CUDA(cudaFree(d_sin));
}

int main(int argc, char** argv) {
    dev_parse_args(argc, argv);
    CudaContext ctx;
    cuda_context_init(&ctx, 0);
    dev_print_device(ctx, "rope");
    run_case(ctx, 3, 37, 4, 1, 16, 10000.0, false);   // one key/value head
    run_case(ctx, 2, 5, 3, 3, 128, 500000.0, false);  // NKV = NH, head size 128
    run_case(ctx, 1, 33, 6, 2, 64, 500000.0, false);
    if (!g_dev_quick) run_case(ctx, 8, 1024, 32, 8, 128, 500000.0, true);  // Llama 3 8B, B=8 T=1024
    cuda_context_free(&ctx);
    return dev_finish("rope");
}
