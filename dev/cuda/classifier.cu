// classifier.cu: llmc/cuda/classifier.cuh against llmc/cpu/crossentropy.h, the vocab-parallel
// one (-tp) over simulated ranks too, the row-in-shared-memory kernel against the two-pass one bit for bit,
// then a benchmark (--bench: with the grid's choices and the row in shared memory side by side).
// The padded columns V..Vp are filled with large values: if the kernel let them into the
// softmax the losses would be far off.
// Tolerances: losses are fp32 in both builds (the CPU sums in double, the GPU in fp32 over
// V terms): rtol 1e-5 + 1e-6*max. dlogits: fp32 rtol 1e-4 + 1e-6*max (exp of a slightly
// different lse); bf16 one rounding of the stored gradient: rtol 1e-2 + 1e-3*max.
#include "dev_common.cuh"
#include "../../llmc/cpu/crossentropy.h"
#include "../../llmc/cuda/classifier.cuh"

// A batch of N rows of logits (V real columns of Vp; the padding large, so that a kernel letting
// it into the softmax would be far off), rounded to floatX, targets including both ends of the
// vocabulary, and the CPU reference's losses and dlogits (scaled by dloss = 1/N).
struct Case {
    std::vector<float> logits;
    std::vector<int> targets;
    std::vector<float> ref_losses, ref_d;
    float dloss;
};
static Case make_case(uint64_t seed, int N, int V, int Vp) {
    Case c;
    DevRng rng(seed);
    c.logits = rand_vec(rng, (size_t)N * Vp, 4.0f);
    for (int i = 0; i < N; i++)
        for (int j = V; j < Vp; j++) c.logits[(size_t)i * Vp + j] = 60.0f;  // must never count
    round_to_floatX(c.logits);
    c.targets.resize(N);
    for (int i = 0; i < N; i++) c.targets[i] = rng.below(V);
    c.targets[0] = 0;
    c.targets[N - 1] = V - 1;
    c.dloss = 1.0f / N;
    c.ref_losses.resize(N);
    c.ref_d = c.logits;
    crossentropy_forward(c.ref_losses.data(), c.logits.data(), c.targets.data(), N, V, Vp);
    crossentropy_backward(c.ref_d.data(), c.targets.data(), c.dloss, N, V, Vp);
    return c;
}

// rows_in_flight: the grid (0: the launcher's choice, one block a row)
static void run_case(const CudaContext& ctx, int N, int V, int Vp, bool bench, int rows_in_flight = 0) {
    char what[64];
    snprintf(what, sizeof(what), "N=%d V=%d Vp=%d grid=%d", N, V, Vp, rows_in_flight);
    printf("-- classifier %s\n", what);
    std::string w(what);
    const Case c = make_case(11 + N + V, N, V, Vp);
    const std::vector<float>& logits = c.logits;
    const std::vector<int>& targets = c.targets;
    const std::vector<float>& ref_losses = c.ref_losses;
    const std::vector<float>& ref_d = c.ref_d;
    const float dloss = c.dloss;
    floatX* d_logits = dev_upload(logits);
    int* d_targets = dev_upload_raw(targets);
    float* d_losses;
    CHECK_CUDA(cudaMalloc(&d_losses, N * sizeof(float)));
    DevTol t_loss = {1e-5, 1e-6};
    DevTol t_d = tol_for({1e-4, 1e-6}, {1e-2, 1e-3});

    // forward only: logits untouched
    classifier_forward_backward(ctx, d_logits, d_losses, d_targets, dloss, N, V, Vp, false, rows_in_flight);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    dev_check("classifier", (w + " losses (forward only)").c_str(), dev_download_f32(d_losses, N), ref_losses, t_loss);
    dev_check("classifier", (w + " logits untouched").c_str(), dev_download(d_logits, (size_t)N * Vp), logits, {0, 0});
    // fused forward + backward
    CHECK_CUDA(cudaMemset(d_losses, 0, N * sizeof(float)));
    classifier_forward_backward(ctx, d_logits, d_losses, d_targets, dloss, N, V, Vp, true, rows_in_flight);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    const std::vector<float> losses = dev_download_f32(d_losses, N), d = dev_download(d_logits, (size_t)N * Vp);
    dev_check("classifier", (w + " losses").c_str(), losses, ref_losses, t_loss);
    dev_check("classifier", (w + " dlogits").c_str(), d, ref_d, t_d);
    // the row kept in shared memory (classifier_smem_kernel, where a row fits it): the same bits
    if (classifier_smem_fits(ctx, Vp)) {
        floatX* d_again = dev_upload(logits);
        CHECK_CUDA(cudaMemset(d_losses, 0, N * sizeof(float)));
        classifier_forward_backward(ctx, d_again, d_losses, d_targets, dloss, N, V, Vp, true, rows_in_flight, true);
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        dev_check("classifier", (w + " losses, row in shared memory = two passes").c_str(), dev_download_f32(d_losses, N),
                  losses, {0, 0});
        dev_check("classifier", (w + " dlogits, row in shared memory = two passes").c_str(),
                  dev_download(d_again, (size_t)N * Vp), d, {0, 0});
        CHECK_CUDA(cudaFree(d_again));
    }

    if (bench) {
        floatX* d_fresh = dev_upload(logits);
        const size_t bytes = (size_t)N * Vp * sizeof(floatX);
        // each run overwrites its input with gradients; copying fresh logits back would
        // dominate the timing, so time on whatever the buffer holds (same work either way)
        float ms = bench_ms(ctx, 10, [&] {
            classifier_forward_backward(ctx, d_fresh, d_losses, d_targets, dloss, N, V, Vp, true);
        });
        dev_report_gbs("classifier", "gpt2", 3.0 * bytes, ms);
        // the row in shared memory: the same bytes counted (3 x), so that GB/s compare as times do
        if (classifier_smem_fits(ctx, Vp)) {
            ms = bench_ms(ctx, 10, [&] {
                classifier_forward_backward(ctx, d_fresh, d_losses, d_targets, dloss, N, V, Vp, true, 0, true);
            });
            dev_report_gbs("classifier", "gpt2_row_in_smem", 3.0 * bytes, ms);
        }
        // the grid's other choices (--bench): a quarter, half, all and twice the L2 cache's
        // worth of rows in flight, each block taking rows gridDim.x apart
        const int l2_rows = (int)((size_t)ctx.props.l2CacheSize / (Vp * sizeof(floatX)));
        const int grids[] = {l2_rows / 4, l2_rows / 2, l2_rows, 2 * l2_rows};
        const char* names[] = {"gpt2_grid_l2x0.25", "gpt2_grid_l2x0.5", "gpt2_grid_l2x1", "gpt2_grid_l2x2"};
        for (int i = 0; g_dev_bench && i < 4; i++) {
            ms = bench_ms(ctx, 10, [&] {
                classifier_forward_backward(ctx, d_fresh, d_losses, d_targets, dloss, N, V, Vp, true, grids[i]);
            });
            dev_report_gbs("classifier", names[i], 3.0 * bytes, ms);
        }
        CHECK_CUDA(cudaFree(d_fresh));
    }
    CHECK_CUDA(cudaFree(d_logits));
    CHECK_CUDA(cudaFree(d_targets));
    CHECK_CUDA(cudaFree(d_losses));
}

// -tp: the vocab-parallel classifier (classifier_tp_stats, the all-gather, classifier_tp_finish)
// over `tp` ranks simulated on one device: rank r's columns [r Vl, (r+1) Vl) copied out, its
// stats written into its place of the gathered buffer (what NCCL's all-gather does), then each
// rank finishes its columns. The losses and the columns put back together must be the whole
// row's, from the same CPU reference, at the same tolerances (the merge order differs).
static void run_tp_case(const CudaContext& ctx, int N, int V, int Vp, int tp) {
    char what[64];
    snprintf(what, sizeof(what), "N=%d V=%d Vp=%d tp=%d", N, V, Vp, tp);
    printf("-- vocab-parallel classifier %s\n", what);
    std::string w(what);
    const Case c = make_case(29 + N + V + tp, N, V, Vp);
    const std::vector<float>& logits = c.logits;
    const std::vector<int>& targets = c.targets;
    const std::vector<float>& ref_losses = c.ref_losses;
    const std::vector<float>& ref_d = c.ref_d;
    const float dloss = c.dloss;

    const int Vl = Vp / tp;
    std::vector<floatX*> parts(tp);
    for (int r = 0; r < tp; r++) {
        std::vector<float> cols((size_t)N * Vl);
        for (int i = 0; i < N; i++)
            for (int j = 0; j < Vl; j++) cols[(size_t)i * Vl + j] = logits[(size_t)i * Vp + (size_t)r * Vl + j];
        parts[r] = dev_upload(cols);
    }
    int* d_targets = dev_upload_raw(targets);
    float *d_all, *d_losses;
    CHECK_CUDA(cudaMalloc(&d_all, (size_t)tp * N * 3 * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&d_losses, (size_t)tp * N * sizeof(float)));
    for (int r = 0; r < tp; r++)
        classifier_tp_stats(ctx, parts[r], d_targets, d_all + (size_t)r * N * 3, N, V, Vl, r * Vl);
    for (int r = 0; r < tp; r++)
        classifier_tp_finish(ctx, parts[r], d_losses + (size_t)r * N, d_targets, d_all, tp, dloss, N, V, Vl, r * Vl,
                             true);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    std::vector<float> d((size_t)N * Vp);
    for (int r = 0; r < tp; r++) {
        const std::vector<float> cols = dev_download(parts[r], (size_t)N * Vl);
        for (int i = 0; i < N; i++)
            for (int j = 0; j < Vl; j++) d[(size_t)i * Vp + (size_t)r * Vl + j] = cols[(size_t)i * Vl + j];
        const std::vector<float> losses = dev_download_f32(d_losses + (size_t)r * N, N);
        dev_check("classifier", (w + " losses on rank " + std::to_string(r)).c_str(), losses, ref_losses, {1e-5, 1e-6});
    }
    dev_check("classifier", (w + " dlogits, the ranks' columns together").c_str(), d, ref_d,
              tol_for({1e-4, 1e-6}, {1e-2, 1e-3}));
    for (floatX* p : parts) CHECK_CUDA(cudaFree(p));
    CHECK_CUDA(cudaFree(d_targets));
    CHECK_CUDA(cudaFree(d_all));
    CHECK_CUDA(cudaFree(d_losses));
}

int main(int argc, char** argv) {
    dev_parse_args(argc, argv);
    CudaContext ctx;
    cuda_context_init(&ctx, 0);
    dev_print_device(ctx, "classifier");
    run_case(ctx, 3 * 37, 1000, 1024, false);
    run_case(ctx, 5, 3, 8, false);                // V smaller than one 16-byte group
    run_case(ctx, 4, 50257, 50304, false);
    run_case(ctx, 3 * 37, 1000, 1024, false, 7);  // 7 blocks: each takes rows 16 apart, the last 15
    run_tp_case(ctx, 3 * 37, 1000, 1024, 2);
    run_tp_case(ctx, 37, 300, 384, 8);             // rank 6 holds 12 real columns, rank 7 padding only
    run_tp_case(ctx, 4, 50257, 50304, 8);
    if (g_dev_bench || !g_dev_quick) run_case(ctx, 8 * 1024, 50257, 50304, true);  // GPT-2, B=8 T=1024: 0.8 GB, 16x the L2
    cuda_context_free(&ctx);
    return dev_finish("classifier");
}
