// attention_kv.cu: llmc/cuda/attention_kv.cuh (new queries against a KV cache, for
// generation) against llmc/cpu/attention_kv.h, at odd positions and head sizes, then a
// benchmark of one GPT-2 124M decoding step's attention at T=1024.
// The GPU's out is prefilled with NaN bytes, so an element the kernel never writes fails.
// Tolerances (|err| <= atol_frac*max|ref| + rtol*|ref|), as for attention.cu's forward:
//   fp32: the online softmax and the 8 warps' partial sums reorder the fp32 sums over the
//         keys: rtol 1e-4 + 1e-5*max.
//   bf16: same inputs, the output rounded to bf16 (2^-9): rtol 1e-2 + 2e-3*max.
#include "dev_common.cuh"
#include "../../llmc/cpu/attention_kv.h"
#include "../../llmc/cuda/attention_kv.cuh"

// t0 cached positions, n new ones, NH heads of HS channels
static void run_case(const CudaContext& ctx, int t0, int n, int NH, int HS, bool bench) {
    const int C = NH * HS, T = t0 + n;
    char what[80];
    snprintf(what, sizeof(what), "t0=%d n=%d NH=%d HS=%d", t0, n, NH, HS);
    printf("-- attention_kv %s\n", what);
    DevRng rng(31 + t0 * 7 + n * 1000 + HS);
    const size_t n_qkv = (size_t)T * 3 * C, n_out = (size_t)n * C;
    std::vector<float> qkv = rand_vec(rng, n_qkv, 2.0f);
    round_to_floatX(qkv);
    floatX *d_qkv = dev_upload(qkv), *d_out;
    CHECK_CUDA(cudaMalloc(&d_out, n_out * sizeof(floatX)));
    CHECK_CUDA(cudaMemset(d_out, 0xFF, n_out * sizeof(floatX)));  // NaN in fp32 and bf16

    std::vector<float> ref(n_out);
    attention_kv_forward(ref.data(), qkv.data(), t0, n, C, NH);
    attention_kv_forward(ctx, d_out, d_qkv, t0, n, C, NH);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    std::vector<float> got = dev_download(d_out, n_out);
    dev_check("attention_kv_forward", what, got, ref, tol_for({1e-4, 1e-5}, {1e-2, 2e-3}));
    attention_kv_forward(ctx, d_out, d_qkv, t0, n, C, NH);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    std::vector<float> again = dev_download(d_out, n_out);
    dev_expect("attention_kv_forward", (std::string(what) + " bitwise deterministic").c_str(),
               memcmp(again.data(), got.data(), n_out * sizeof(float)) == 0);

    if (bench) {
        // each new query reads the keys and values of its t+1 positions once
        double bytes = 0.0;
        for (int i = 0; i < n; i++) bytes += 2.0 * (t0 + i + 1) * C * sizeof(floatX);
        float ms = bench_ms(ctx, 50, [&] { attention_kv_forward(ctx, d_out, d_qkv, t0, n, C, NH); });
        dev_report_gbs("attention_kv_forward", "gpt2-decode", bytes, ms);
    }
    CHECK_CUDA(cudaFree(d_qkv));
    CHECK_CUDA(cudaFree(d_out));
}

int main(int argc, char** argv) {
    dev_parse_args(argc, argv);
    CudaContext ctx;
    cuda_context_init(&ctx, 0);
    dev_print_device(ctx, "attention_kv");
    run_case(ctx, 0, 1, 1, 64, false);     // the first position: one key, 7 warps idle
    run_case(ctx, 3, 1, 4, 8, false);      // fewer keys than warps
    run_case(ctx, 5, 2, 3, 48, false);     // two new rows: the causal offset between them
    run_case(ctx, 0, 40, 2, 64, false);    // a whole prompt into an empty cache
    run_case(ctx, 100, 3, 2, 100, false);  // a head size that is no multiple of 32
    const int head_sizes[] = {8, 16, 32, 48, 64, 80, 96, 128};
    for (int hs : head_sizes) run_case(ctx, 69, 1, 2, hs, false);
    if (!g_dev_quick) {
        run_case(ctx, 1023, 1, 12, 64, true);  // GPT-2 124M, one decoding step at T=1024
        run_case(ctx, 2047, 1, 25, 64, true);  // GPT-2 1.5B at T=2048
    }
    cuda_context_free(&ctx);
    return dev_finish("attention_kv");
}
