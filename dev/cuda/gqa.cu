// gqa.cu: grouped-query attention on the GPU (attention_forward_gqa / attention_backward_gqa and
// their tensor-core twins: each query head reads its key/value head in place, and the dK/dV
// kernels sum a key/value head's gradient over its group) against llmc/cpu/attention.h's
// attention_forward_gqa / attention_backward_gqa: the CUDA-core kernels and, in the bf16 build,
// the tensor-core ones (the two-kernel backward; -ak 2's, dq by atomics; on sm_90 dq by bulk
// reductions). Every output is prefilled with NaN bytes, so an element never written fails.
// Tolerances as attention.cu's: out fp32 rtol 1e-4 + 1e-5*max, bf16 1e-2 + 2e-3*max; dqkv
// fp32 rtol 1e-4 + 2e-5*max + 1e-5, bf16 2e-2 + 5e-3*max + 1e-3 (a key/value head's gradient
// sums its group's heads in fp32, then rounds once).
#include "dev_common.cuh"
#include "../../llmc/cpu/attention.h"
#include "../../llmc/cuda/attention.cuh"
#include "../../llmc/cuda/attention_mma.cuh"

static void run_case(const CudaContext& ctx, int B, int T, int NH, int NKV, int HS) {
    char what[96];
    snprintf(what, sizeof(what), "B=%d T=%d NH=%d NKV=%d HS=%d", B, T, NH, NKV, HS);
    printf("-- gqa %s\n", what);
    const std::string w(what);
    const int C = NH * HS;
    DevRng rng(41 + B * 100 + T + NH * 7 + HS);
    const size_t n_qkv = (size_t)B * T * (NH + 2 * NKV) * HS, n_out = (size_t)B * T * C;
    std::vector<float> qkv = rand_vec(rng, n_qkv, 2.0f), dout = rand_vec(rng, n_out);
    round_to_floatX(qkv);
    round_to_floatX(dout);
    floatX *d_qkv = dev_upload(qkv), *d_dout = dev_upload(dout), *d_out, *d_dqkv;
    float* d_lse;
    CHECK_CUDA(cudaMalloc(&d_out, n_out * sizeof(floatX)));
    CHECK_CUDA(cudaMalloc(&d_dqkv, n_qkv * sizeof(floatX)));
    CHECK_CUDA(cudaMalloc(&d_lse, (size_t)B * NH * T * sizeof(float)));

    std::vector<float> ref_out(n_out), att((size_t)B * NH * T * T), ref_dqkv(n_qkv, 0.0f);
    attention_forward_gqa(ref_out.data(), att.data(), qkv.data(), B, T, NH, NKV, HS);
    attention_backward_gqa(ref_dqkv.data(), dout.data(), qkv.data(), att.data(), B, T, NH, NKV, HS);
    const DevTol t_out = tol_for({1e-4, 1e-5}, {1e-2, 2e-3}), t_d = tol_for({1e-4, 2e-5, 1e-5}, {2e-2, 5e-3, 1e-3});
    // a forward into NaN-filled out and lse, checked; the backward below reads them
    auto forward_and_check = [&](const char* op, bool mma) {
        CHECK_CUDA(cudaMemset(d_out, 0xFF, n_out * sizeof(floatX)));  // NaN in fp32 and bf16
        CHECK_CUDA(cudaMemset(d_lse, 0xFF, (size_t)B * NH * T * sizeof(float)));
#ifdef ENABLE_BF16
        if (mma) attention_forward_mma_gqa(ctx, d_out, d_lse, d_qkv, B, T, NH, NKV, HS);
        else
#endif
            attention_forward_gqa(ctx, d_out, d_lse, d_qkv, B, T, NH, NKV, HS);
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        dev_check(op, (w + " out").c_str(), dev_download(d_out, n_out), ref_out, t_out);
    };
    // a backward (run) into a NaN-filled dqkv, checked; returns what it wrote
    auto backward_and_check = [&](const char* op, auto run) {
        CHECK_CUDA(cudaMemset(d_dqkv, 0xFF, n_qkv * sizeof(floatX)));
        run();
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        std::vector<float> got = dev_download(d_dqkv, n_qkv);
        dev_check(op, (w + " dqkv").c_str(), got, ref_dqkv, t_d);
        return got;
    };
    forward_and_check("gqa attention_forward", false);
    const std::vector<float> got = backward_and_check("gqa attention_backward", [&] {
        attention_backward_gqa(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, NH, NKV, HS);
    });
    attention_backward_gqa(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, NH, NKV, HS);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    dev_expect("gqa attention_backward", (w + " bitwise deterministic").c_str(),
               memcmp(dev_download(d_dqkv, n_qkv).data(), got.data(), n_qkv * sizeof(float)) == 0);
#ifdef ENABLE_BF16
    if (attention_mma_supported(HS)) {
        forward_and_check("gqa attention_forward_mma", true);
        const std::vector<float> got_mma = backward_and_check("gqa attention_backward_mma", [&] {
            attention_backward_mma_gqa(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, NH, NKV, HS);
        });
        attention_backward_mma_gqa(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, NH, NKV, HS);
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        dev_expect("gqa attention_backward_mma", (w + " bitwise deterministic").c_str(),
                   memcmp(dev_download(d_dqkv, n_qkv).data(), got_mma.data(), n_qkv * sizeof(float)) == 0);
        // dq from inside the dk/dv kernel (each query head's dq added by the key/value head's blocks)
        float* d_dq_accum;
        CHECK_CUDA(cudaMalloc(&d_dq_accum, n_out * sizeof(float)));
        backward_and_check("gqa attention_backward_mma_fused", [&] {
            attention_backward_mma_gqa(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, NH, NKV, HS, d_dq_accum);
        });
        if (ctx.props.major >= 9) {
            backward_and_check("gqa attention_backward_mma_bulk", [&] {
                attention_backward_mma_launch<true>(ctx, d_dqkv, d_dout, d_qkv, d_out, d_lse, B, T, NH, NKV, HS,
                                                    d_dq_accum);
            });
        }
        CHECK_CUDA(cudaFree(d_dq_accum));
    }
#endif
    for (floatX* p : {d_qkv, d_dout, d_out, d_dqkv}) CHECK_CUDA(cudaFree(p));
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
    run_case(ctx, 2, 20, 3, 3, 32);   // NKV = NH: multi-head attention
    run_case(ctx, 1, 150, 8, 2, 64);  // 4 heads a group over 3 key tiles (the last of 22 rows)
    cuda_context_free(&ctx);
    return dev_finish("gqa");
}
