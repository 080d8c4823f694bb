// gqa.cu: grouped-query attention on the GPU (llmc/cuda/gqa.cuh: repeat the key/value heads,
// the multi-head kernels, sum the repeats' gradients) against llmc/cpu/attention.h's
// attention_forward_gqa / attention_backward_gqa, with the CUDA-core kernels and, in the bf16
// build, the tensor-core ones. gqa_expand is a copy and must be exact.
// The GPU's dqkv is prefilled with NaN bytes, so an element never written fails.
// Tolerances as attention.cu's: out fp32 rtol 1e-4 + 1e-5*max, bf16 1e-2 + 2e-3*max; dqkv
// fp32 rtol 1e-4 + 2e-5*max + 1e-5, bf16 2e-2 + 5e-3*max + 1e-3 (a key/value head's
// gradient sums its group's, each rounded to bf16 first).
#include "dev_common.cuh"
#include "../../llmc/cpu/attention.h"
#include "../../llmc/cuda/attention.cuh"
#include "../../llmc/cuda/attention_mma.cuh"
#include "../../llmc/cuda/gqa.cuh"

static void run_case(const CudaContext& ctx, int B, int T, int NH, int NKV, int HS) {
    char what[96];
    snprintf(what, sizeof(what), "B=%d T=%d NH=%d NKV=%d HS=%d", B, T, NH, NKV, HS);
    printf("-- gqa %s\n", what);
    const std::string w(what);
    const int C = NH * HS;
    DevRng rng(41 + B * 100 + T + NH * 7 + HS);
    const size_t n_gqa = (size_t)B * T * (NH + 2 * NKV) * HS, n_mha = (size_t)B * T * 3 * C, n_out = (size_t)B * T * C;
    std::vector<float> qkv = rand_vec(rng, n_gqa, 2.0f), dout = rand_vec(rng, n_out);
    round_to_floatX(qkv);
    round_to_floatX(dout);
    floatX *d_qkv = dev_upload(qkv), *d_dout = dev_upload(dout), *d_mha, *d_dmha, *d_out, *d_dqkv;
    float* d_lse;
    CHECK_CUDA(cudaMalloc(&d_mha, n_mha * sizeof(floatX)));
    CHECK_CUDA(cudaMalloc(&d_dmha, n_mha * sizeof(floatX)));
    CHECK_CUDA(cudaMalloc(&d_out, n_out * sizeof(floatX)));
    CHECK_CUDA(cudaMalloc(&d_dqkv, n_gqa * sizeof(floatX)));
    CHECK_CUDA(cudaMalloc(&d_lse, (size_t)B * NH * T * sizeof(float)));

    // the expansion, against the layout written out here
    gqa_expand(ctx, d_mha, d_qkv, B, T, NH, NKV, HS);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    std::vector<float> want_mha(n_mha);
    for (size_t bt = 0; bt < (size_t)B * T; bt++) {
        const float* src = &qkv[bt * (NH + 2 * NKV) * HS];
        float* dst = &want_mha[bt * 3 * C];
        for (int h = 0; h < NH; h++) {
            const int j = h / (NH / NKV);
            for (int d = 0; d < HS; d++) {
                dst[h * HS + d] = src[h * HS + d];
                dst[C + h * HS + d] = src[C + j * HS + d];
                dst[2 * C + h * HS + d] = src[C + NKV * HS + j * HS + d];
            }
        }
    }
    dev_check("gqa_expand", what, dev_download(d_mha, n_mha), want_mha, {0.0, 0.0});

    std::vector<float> ref_out(n_out), att((size_t)B * NH * T * T), ref_dqkv(n_gqa, 0.0f);
    attention_forward_gqa(ref_out.data(), att.data(), qkv.data(), B, T, NH, NKV, HS);
    attention_backward_gqa(ref_dqkv.data(), dout.data(), qkv.data(), att.data(), B, T, NH, NKV, HS);
    const DevTol t_out = tol_for({1e-4, 1e-5}, {1e-2, 2e-3}), t_d = tol_for({1e-4, 2e-5, 1e-5}, {2e-2, 5e-3, 1e-3});
    auto backward_and_check = [&](const char* op, bool mma) {
        CHECK_CUDA(cudaMemset(d_dqkv, 0xFF, n_gqa * sizeof(floatX)));  // NaN in fp32 and bf16
#ifdef ENABLE_BF16
        if (mma) attention_backward_mma(ctx, d_dmha, d_dout, d_mha, d_out, d_lse, B, T, C, NH);
        else
#endif
            attention_backward(ctx, d_dmha, d_dout, d_mha, d_out, d_lse, B, T, C, NH);
        gqa_reduce(ctx, d_dqkv, d_dmha, B, T, NH, NKV, HS);
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        dev_check(op, (w + " dqkv").c_str(), dev_download(d_dqkv, n_gqa), ref_dqkv, t_d);
    };
    attention_forward(ctx, d_out, d_lse, d_mha, B, T, C, NH);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    dev_check("gqa attention_forward", (w + " out").c_str(), dev_download(d_out, n_out), ref_out, t_out);
    backward_and_check("gqa attention_backward", false);
#ifdef ENABLE_BF16
    if (attention_mma_supported(HS)) {
        attention_forward_mma(ctx, d_out, d_lse, d_mha, B, T, C, NH);
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        dev_check("gqa attention_forward_mma", (w + " out").c_str(), dev_download(d_out, n_out), ref_out, t_out);
        backward_and_check("gqa attention_backward_mma", true);
    }
#endif
    for (floatX* p : {d_qkv, d_dout, d_mha, d_dmha, d_out, d_dqkv}) CHECK_CUDA(cudaFree(p));
    CHECK_CUDA(cudaFree(d_lse));
}

int main(int argc, char** argv) {
    dev_parse_args(argc, argv);
    CudaContext ctx;
    cuda_context_init(&ctx, 0);
    dev_print_device(ctx, "gqa");
    run_case(ctx, 2, 37, 4, 1, 16);   // one key/value head
    run_case(ctx, 1, 70, 6, 2, 64);   // 3 query heads per key/value head
    run_case(ctx, 1, 33, 2, 1, 128);  // head size 128
    run_case(ctx, 2, 20, 3, 3, 32);   // NKV = NH: the repeats are the heads themselves
    cuda_context_free(&ctx);
    return dev_finish("gqa");
}
