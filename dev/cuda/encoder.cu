// encoder.cu: llmc/cuda/encoder.cuh against llmc/cpu/encoder.h, then a benchmark.
// build: make -f cuda.mk cuda-dev   (build/cuda/encoder_fp32, build/cuda/encoder_bf16)
// Tolerances: forward is one add per element: fp32 exact up to 1 ulp (rtol 1e-6);
// bf16 one rounding of the sum (rtol 8e-3 ~ 2 bf16 ulps). Backward sums up to B*T rows
// in fp32 in a different order than the CPU: fp32 rtol 1e-5 + 1e-6*max; bf16 the final
// rounding of the accumulated gradient dominates (rtol 1e-2).
#include "dev_common.cuh"
#include "../../llmc/cpu/encoder.h"
#include "../../llmc/cuda/encoder.cuh"

static void run_case(const CudaContext& ctx, int B, int T, int C, int V, int Vp, int maxT, bool bench) {
    char what[96];
    snprintf(what, sizeof(what), "B=%d T=%d C=%d V=%d", B, T, C, V);
    printf("-- encoder %s\n", what);
    DevRng rng(1000 + C);
    const size_t N = (size_t)B * T;
    std::vector<float> wte = rand_vec(rng, (size_t)Vp * C), wpe = rand_vec(rng, (size_t)maxT * C);
    std::vector<float> dout = rand_vec(rng, N * C), dwte = rand_vec(rng, (size_t)Vp * C, 0.1f);
    std::vector<float> dwpe = rand_vec(rng, (size_t)maxT * C, 0.1f);
    round_to_floatX(wte); round_to_floatX(wpe); round_to_floatX(dout);
    round_to_floatX(dwte); round_to_floatX(dwpe);
    // skewed tokens: a third from a handful of ids (long buckets), the rest anywhere in V
    std::vector<int> inp(N);
    for (size_t i = 0; i < N; i++) inp[i] = (i % 3 == 0) ? rng.below(std::min(5, V)) : rng.below(V);
    inp[N - 1] = V - 1;

    floatX* d_out; CHECK_CUDA(cudaMalloc(&d_out, N * C * sizeof(floatX)));
    floatX* d_wte = dev_upload(wte); floatX* d_wpe = dev_upload(wpe); floatX* d_dout = dev_upload(dout);
    floatX* d_dwte = dev_upload(dwte); floatX* d_dwpe = dev_upload(dwpe);
    int* d_inp = dev_upload_raw(inp);

    // forward
    std::vector<float> ref(N * C);
    encoder_forward(ref.data(), inp.data(), wte.data(), wpe.data(), B, T, C);
    encoder_forward(ctx, d_out, d_inp, d_wte, d_wpe, B, T, C);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    dev_check("encoder_forward", what, dev_download(d_out, N * C), ref,
              tol_for({1e-6, 1e-7}, {8e-3, 1e-3}));

    // backward (+= into random prior values)
    EncoderBuckets eb;
    encoder_buckets_init(&eb, (int)N);
    encoder_buckets_build(ctx, &eb, inp.data(), B, T);
    encoder_backward(ctx, d_dwte, d_dwpe, d_dout, eb, B, T, C);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    std::vector<float> ref_dwte = dwte, ref_dwpe = dwpe;
    encoder_backward(ref_dwte.data(), ref_dwpe.data(), dout.data(), inp.data(), B, T, C);
    std::vector<float> got_dwte = dev_download(d_dwte, (size_t)Vp * C);
    std::vector<float> got_dwpe = dev_download(d_dwpe, (size_t)maxT * C);
    DevTol tb = tol_for({1e-5, 1e-6}, {1e-2, 2e-3});
    dev_check("encoder_backward", (std::string(what) + " dwte").c_str(), got_dwte, ref_dwte, tb);
    dev_check("encoder_backward", (std::string(what) + " dwpe").c_str(), got_dwpe, ref_dwpe, tb);
    printf("   %d buckets, largest %d positions\n", eb.num_buckets, eb.max_bucket);

    // determinism: a second run from the same start gives the same bits
    floatX* d_dwte2 = dev_upload(dwte);
    floatX* d_dwpe2 = dev_upload(dwpe);
    encoder_backward(ctx, d_dwte2, d_dwpe2, d_dout, eb, B, T, C);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    std::vector<float> again = dev_download(d_dwte2, (size_t)Vp * C);
    bool same = memcmp(again.data(), got_dwte.data(), again.size() * sizeof(float)) == 0;
    dev_expect("encoder_backward", (std::string(what) + " bitwise deterministic").c_str(), same);

    if (bench) {
        float ms = bench_ms(ctx, 20, [&] { encoder_forward(ctx, d_out, d_inp, d_wte, d_wpe, B, T, C); });
        dev_report_gbs("encoder_forward", "gpt2", 3.0 * N * C * sizeof(floatX), ms);
        ms = bench_ms(ctx, 20, [&] { encoder_backward(ctx, d_dwte2, d_dwpe2, d_dout, eb, B, T, C); });
        double bytes = (2.0 * N * C + 2.0 * eb.num_buckets * C + 2.0 * T * C) * sizeof(floatX);
        dev_report_gbs("encoder_backward", "gpt2", bytes, ms);
    }
    encoder_buckets_free(&eb);
    for (floatX* p : {d_out, d_wte, d_wpe, d_dout, d_dwte, d_dwpe, d_dwte2, d_dwpe2}) CHECK_CUDA(cudaFree(p));
    CHECK_CUDA(cudaFree(d_inp));
}

int main(int argc, char** argv) {
    dev_parse_args(argc, argv);
    CudaContext ctx;
    cuda_context_init(&ctx, 0);
    dev_print_device(ctx, "encoder");
    run_case(ctx, 3, 37, 48, 1000, 1024, 64, false);
    run_case(ctx, 1, 1, 8, 1, 128, 1, false);           // the smallest legal shapes
    if (!g_dev_quick) run_case(ctx, 8, 1024, 768, 50257, 50304, 1024, true);
    cuda_context_free(&ctx);
    return dev_finish("encoder");
}
