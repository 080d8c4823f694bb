// global_norm.cu: llmc/cuda/global_norm.cuh against a double-precision sum on the CPU (the
// CPU trainer's gpt2_grad_norm sums in double too), then a benchmark.
// Tolerance: each GPU thread sums ~n/262144 squares in fp32 before the fp32 tree:
// relative error ~1e-6 at GPT-2 sizes; rtol 1e-5 in both builds (the bf16 build sums the
// same bf16 values the CPU sees, in fp32).
#include "dev_common.cuh"
#include "../../llmc/cuda/global_norm.cuh"

static double cpu_sum_squares(const std::vector<float>& x, size_t off, size_t n) {
    double s = 0.0;
#pragma omp parallel for reduction(+ : s)
    for (size_t i = off; i < off + n; i++) s += (double)x[i] * x[i];
    return s;
}

static void run_case(const CudaContext& ctx, size_t n, bool bench) {
    char what[64];
    snprintf(what, sizeof(what), "n=%zu", n);
    printf("-- global_norm %s\n", what);
    std::string w(what);
    DevRng rng(17 + n);
    std::vector<float> g = rand_vec(rng, n, 0.01f);
    round_to_floatX(g);
    floatX* d_g = dev_upload(g);
    float* d_out;
    CHECK_CUDA(cudaMalloc(&d_out, sizeof(float)));

    global_norm_squared(ctx, d_out, d_g, n, false);
    std::vector<float> got = dev_download_f32(d_out, 1);
    dev_check("global_norm", (w + " one buffer").c_str(), got, {(float)cpu_sum_squares(g, 0, n)}, {1e-5, 0});

    // two pieces chained with accumulate, the second starting at an aligned offset
    size_t first = (n / 2) / 16 * 16;
    if (first > 0 && first < n) {
        global_norm_squared(ctx, d_out, d_g, first, false);
        global_norm_squared(ctx, d_out, d_g + first, n - first, true);
        std::vector<float> got2 = dev_download_f32(d_out, 1);
        dev_check("global_norm", (w + " two pieces, accumulate").c_str(), got2, {(float)cpu_sum_squares(g, 0, n)},
                  {1e-5, 0});
    }
    global_norm_squared(ctx, d_out, d_g, n, false);
    std::vector<float> again = dev_download_f32(d_out, 1);
    dev_expect("global_norm", (w + " bitwise deterministic").c_str(), again[0] == got[0]);

    if (bench) {
        float ms = bench_ms(ctx, 20, [&] { global_norm_squared(ctx, d_out, d_g, n, false); });
        dev_report_gbs("global_norm", "gpt2_124M", (double)n * sizeof(floatX), ms);
    }
    CHECK_CUDA(cudaFree(d_g));
    CHECK_CUDA(cudaFree(d_out));
}

int main(int argc, char** argv) {
    dev_parse_args(argc, argv);
    CudaContext ctx;
    cuda_context_init(&ctx, 0);
    dev_print_device(ctx, "global_norm");
    run_case(ctx, (size_t)3 * 37 * 48 + 3, false);  // a tail that is not a whole 16-byte group
    run_case(ctx, 5, false);
    if (!g_dev_quick) run_case(ctx, (size_t)124475904, true);
    cuda_context_free(&ctx);
    return dev_finish("global_norm");
}
