// adamw.cu: llmc/cuda/adamw.cuh against llmc/cpu/adamw.h, the stochastic rounding's
// statistics, then a benchmark.
// Tolerances: elementwise fp32 arithmetic in both, differing only by FMA contraction:
// m, v, master and fp32 params rtol 1e-5 + 1e-7*max. bf16 params are the master value
// stochastically rounded: within one bf16 ulp, rtol 8e-3 (2^-7).
#include "dev_common.cuh"
#include "../../llmc/cpu/adamw.h"
#include "../../llmc/cuda/adamw.cuh"

// rounds the same value x at n indices; the mean of the results is returned in *out
__global__ void stochastic_round_mean_kernel(float* out, float x, int n, uint32_t seed) {
    __shared__ float shared[32];
    float sum = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        floatX r;
        stochastic_round(x, &r, random_u32(seed, (size_t)i));
        sum += to_float(r) - x;  // the rounding error, so the sum stays small and exact
    }
    sum = block_reduce_sum(sum, shared);
    if (threadIdx.x == 0) *out = x + sum / n;
}

static void run_case(const CudaContext& ctx, size_t n, bool bench) {
    char what[64];
    snprintf(what, sizeof(what), "n=%zu", n);
    printf("-- adamw %s\n", what);
    std::string w(what);
    DevRng rng(3 + n);
    std::vector<float> params = rand_vec(rng, n), grads = rand_vec(rng, n, 0.01f);
    std::vector<float> m = rand_vec(rng, n, 0.001f), v = rand_vec(rng, n, 1e-5f);
    for (float& x : v) x = std::fabs(x);
    round_to_floatX(params);
    round_to_floatX(grads);
    const float lr = 3e-4f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, scale = 0.7f;
    const int t = 7;
    const uint32_t seed = 12345;
    // the first half decays, the second does not (two tensors)
    const size_t half = n / 2;

    floatX* d_params = dev_upload(params);
    floatX* d_grads = dev_upload(grads);
    float *d_m = dev_upload_f32(m), *d_v = dev_upload_f32(v), *d_master = nullptr;
#ifdef ENABLE_BF16
    d_master = dev_upload_f32(params);
#endif
    auto gpu_step = [&] {
        if (half > 0)
            adamw_update(ctx, d_params, d_master, d_grads, d_m, d_v, half, lr, b1, b2, eps, wd, scale, t, seed);
        adamw_update(ctx, d_params + half, d_master ? d_master + half : nullptr, d_grads + half, d_m + half,
                     d_v + half, n - half, lr, b1, b2, eps, 0.0f, scale, t, seed + 1);
    };
    gpu_step();
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));

    std::vector<float> rp = params, rm = m, rv = v;
    adamw_update(rp.data(), grads.data(), rm.data(), rv.data(), half, lr, b1, b2, eps, wd, scale, t);
    adamw_update(rp.data() + half, grads.data() + half, rm.data() + half, rv.data() + half, n - half, lr, b1, b2,
                 eps, 0.0f, scale, t);
    DevTol tight = {1e-5, 1e-7};
    dev_check("adamw", (w + " m").c_str(), dev_download_f32(d_m, n), rm, tight);
    dev_check("adamw", (w + " v").c_str(), dev_download_f32(d_v, n), rv, tight);
    std::vector<float> got_params = dev_download(d_params, n);
#ifdef ENABLE_BF16
    dev_check("adamw", (w + " master").c_str(), dev_download_f32(d_master, n), rp, tight);
    dev_check("adamw", (w + " params (stochastic bf16)").c_str(), got_params, rp, {8e-3, 1e-7});
#else
    dev_check("adamw", (w + " params").c_str(), got_params, rp, tight);
#endif

    // same seed, same start: same bits
    CHECK_CUDA(cudaFree(d_params));
    CHECK_CUDA(cudaFree(d_m));
    CHECK_CUDA(cudaFree(d_v));
    d_params = dev_upload(params);
    d_m = dev_upload_f32(m);
    d_v = dev_upload_f32(v);
#ifdef ENABLE_BF16
    CHECK_CUDA(cudaMemcpy(d_master, params.data(), n * sizeof(float), cudaMemcpyHostToDevice));
#endif
    gpu_step();
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    std::vector<float> again = dev_download(d_params, n);
    dev_expect("adamw", (w + " bitwise deterministic for a seed").c_str(),
               memcmp(again.data(), got_params.data(), n * sizeof(float)) == 0);

    // the vectorised kernel (aligned arrays, whole groups of 4) and the one-element kernel (the
    // same arrays one element further on: misaligned) give the same bits for the same element
    // (its index in the tensor fixes the rounding bits)
    if (n >= 9) {
        const size_t k = n - 1;  // elements 1 .. n-1, as a tensor starting at element 1
        std::vector<float> pa(params.begin() + 1, params.end()), ga(grads.begin() + 1, grads.end());
        std::vector<float> ma(m.begin() + 1, m.end()), va(v.begin() + 1, v.end());
        floatX* a_p = dev_upload(pa);
        floatX* a_g = dev_upload(ga);
        float *a_m = dev_upload_f32(ma), *a_v = dev_upload_f32(va), *a_master = nullptr;
        floatX* b_p = dev_upload(params);  // the same values at +1: 4-byte (fp32) or 2-byte (bf16) offsets
        floatX* b_g = dev_upload(grads);
        float *b_m = dev_upload_f32(m), *b_v = dev_upload_f32(v), *b_master = nullptr;
#ifdef ENABLE_BF16
        a_master = dev_upload_f32(pa);
        b_master = dev_upload_f32(params);
#endif
        adamw_update(ctx, a_p, a_master, a_g, a_m, a_v, k, lr, b1, b2, eps, wd, scale, t, seed, 1);
        adamw_update(ctx, b_p + 1, b_master ? b_master + 1 : nullptr, b_g + 1, b_m + 1, b_v + 1, k, lr, b1, b2, eps,
                     wd, scale, t, seed, 1);
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        std::vector<float> pa2 = dev_download(a_p, k), pb2 = dev_download(b_p, n), ma2 = dev_download_f32(a_m, k),
                           mb2 = dev_download_f32(b_m, n), va2 = dev_download_f32(a_v, k), vb2 = dev_download_f32(b_v, n);
        const bool same = memcmp(pa2.data(), pb2.data() + 1, k * sizeof(float)) == 0 &&
                          memcmp(ma2.data(), mb2.data() + 1, k * sizeof(float)) == 0 &&
                          memcmp(va2.data(), vb2.data() + 1, k * sizeof(float)) == 0;
        dev_expect("adamw", (w + " vectorised (aligned) and one by one (misaligned): the same bits").c_str(), same);
        for (floatX* q : {a_p, a_g, b_p, b_g}) CHECK_CUDA(cudaFree(q));
        for (float* q : {a_m, a_v, a_master, b_m, b_v, b_master})
            if (q != nullptr) CHECK_CUDA(cudaFree(q));
    }

    if (bench) {
        // read grad, m, v, param (or master), write m, v, param (and master)
        double bytes = n * (2.0 * sizeof(floatX) + 4.0 * sizeof(float));
#ifdef ENABLE_BF16
        bytes += n * 2.0 * sizeof(float);
#endif
        float ms = bench_ms(ctx, 20, [&] {
            adamw_update(ctx, d_params, d_master, d_grads, d_m, d_v, n, lr, b1, b2, eps, wd, scale, t, seed);
        });
        dev_report_gbs("adamw", "gpt2_124M", bytes, ms);
    }
    CHECK_CUDA(cudaFree(d_params));
    CHECK_CUDA(cudaFree(d_grads));
    CHECK_CUDA(cudaFree(d_m));
    CHECK_CUDA(cudaFree(d_v));
    if (d_master) CHECK_CUDA(cudaFree(d_master));
}

int main(int argc, char** argv) {
    dev_parse_args(argc, argv);
    CudaContext ctx;
    cuda_context_init(&ctx, 0);
    dev_print_device(ctx, "adamw");
    run_case(ctx, (size_t)3 * 37 * 48 + 1, false);
    run_case(ctx, 1, false);
    if (!g_dev_quick) run_case(ctx, (size_t)124475904, true);  // GPT-2 124M's parameter count (Vp = 50304)
#ifdef ENABLE_BF16
    // stochastic rounding is unbiased: 1 + 2^-9 sits a quarter of the way from 1 to the
    // next bf16 (1 + 2^-7); round-to-nearest would give a mean of exactly 1
    float* d_mean;
    CHECK_CUDA(cudaMalloc(&d_mean, sizeof(float)));
    const float x = 1.0f + 1.0f / 512.0f;
    stochastic_round_mean_kernel<<<1, 1024>>>(d_mean, x, 1 << 22, 777);
    CHECK_LAUNCH();
    float mean = 0.0f;
    CHECK_CUDA(cudaMemcpy(&mean, d_mean, sizeof(float), cudaMemcpyDeviceToHost));
    printf("   stochastic rounding of %.8f over 2^22 draws: mean %.8f\n", x, mean);
    dev_expect("stochastic_round", "unbiased (|mean - x| < 1e-5)", std::fabs(mean - x) < 1e-5f);
    CHECK_CUDA(cudaFree(d_mean));
#endif
    cuda_context_free(&ctx);
    return dev_finish("adamw");
}
