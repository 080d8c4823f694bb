// encoder.cu: llmc/cuda/encoder.cuh against llmc/cpu/encoder.h, then a benchmark.
// build: make -f cuda.mk cuda-dev   (build/cuda/encoder_fp32, build/cuda/encoder_bf16)
// Tolerances: forward is one add per element: fp32 exact up to 1 ulp (rtol 1e-6);
// bf16 one rounding of the sum (rtol 8e-3 ~ 2 bf16 ulps). Backward sums up to B*T rows
// in fp32 in a different order than the CPU: fp32 rtol 1e-5 + 1e-6*max; bf16 the final
// rounding of the accumulated gradient dominates (rtol 1e-2). dwte is also checked bit for
// bit against the kernels' own fixed order computed here (dwte_in_kernel_order): that order is
// the contract that makes the backward deterministic, heavy buckets' chunks included. The fp32
// build is the one that pins the order of the adds: bf16's final rounding hides most of it.
// --bench: a GPT-2 batch and a skewed one (one token in half of 65,536 positions), the latter
// split into chunks and in one pass.
#include <climits>
#include "dev_common.cuh"
#include "../../llmc/cpu/encoder.h"
#include "../../llmc/cuda/encoder.cuh"

// What encoder_backward must write into dwte, bit for bit: each token's rows summed in fp32 in
// position order from zero, or (a bucket over heavy_rows rows) in chunks of ENCODER_CHUNK_ROWS
// whose sums are added in chunk order; then added to the prior value and rounded to floatX once.
static std::vector<float> dwte_in_kernel_order(const std::vector<float>& dwte, const std::vector<float>& dout,
                                               const std::vector<int>& inp, int C, int heavy_rows) {
    std::vector<std::vector<int>> positions(dwte.size() / C);
    for (size_t i = 0; i < inp.size(); i++) positions[inp[i]].push_back((int)i);
    std::vector<float> out = dwte;
    for (size_t tok = 0; tok < positions.size(); tok++) {
        const std::vector<int>& P = positions[tok];
        if (P.empty()) continue;
        const int chunk = (int)P.size() > heavy_rows ? ENCODER_CHUNK_ROWS : (int)P.size();
        for (int c = 0; c < C; c++) {
            float acc = 0.0f;
            for (size_t k = 0; k < P.size(); k += chunk) {
                float part = 0.0f;
                for (size_t j = k; j < std::min(P.size(), k + chunk); j++) part += dout[(size_t)P[j] * C + c];
                acc += part;
            }
            out[tok * C + c] = dwte[tok * C + c] + acc;
        }
    }
    round_to_floatX(out);
    return out;
}

// 32-bit FNV-1a of the values' bits: equal across runs and thread orders (EMU_ORDER) or not
static uint32_t bits_hash(const std::vector<float>& v) {
    uint32_t h = 2166136261u;
    const unsigned char* p = (const unsigned char*)v.data();
    for (size_t i = 0; i < v.size() * sizeof(float); i++) h = (h ^ p[i]) * 16777619u;
    return h;
}

static size_t bits_differ(const std::vector<float>& a, const std::vector<float>& b) {
    size_t n = 0;
    for (size_t i = 0; i < a.size(); i++) n += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return n;
}

// inp: B*T token ids below V; label says how they were drawn; want_heavy: the buckets that
// must be split (-1: any number, the case is not about splitting)
static void run_case(const CudaContext& ctx, int B, int T, int C, int V, int Vp, int maxT, const std::vector<int>& inp,
                     const char* label, int want_heavy, bool bench) {
    char what[128];
    snprintf(what, sizeof(what), "B=%d T=%d C=%d V=%d %s", B, T, C, V, label);
    printf("-- encoder %s\n", what);
    DevRng rng(1000 + C);
    const size_t N = (size_t)B * T;
    CHECK(inp.size() == N, "%zu tokens for B*T=%zu", inp.size(), N);
    std::vector<float> wte = rand_vec(rng, (size_t)Vp * C), wpe = rand_vec(rng, (size_t)maxT * C);
    std::vector<float> dout = rand_vec(rng, N * C), dwte = rand_vec(rng, (size_t)Vp * C, 0.1f);
    std::vector<float> dwpe = rand_vec(rng, (size_t)maxT * C, 0.1f);
    round_to_floatX(wte); round_to_floatX(wpe); round_to_floatX(dout);
    round_to_floatX(dwte); round_to_floatX(dwpe);

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
    encoder_buckets_init(&eb, (int)N, C);
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
    printf("   %d buckets, largest %d positions; %d split into %d chunks; dwte bits %08x\n", eb.num_buckets,
           eb.max_bucket, eb.num_heavy, eb.num_chunks, bits_hash(got_dwte));
    if (want_heavy >= 0) {
        char split[64];
        snprintf(split, sizeof(split), " %d of %d buckets split", eb.num_heavy, want_heavy);
        dev_expect("encoder_backward", (std::string(what) + split).c_str(), eb.num_heavy == want_heavy);
    }
    size_t differ = bits_differ(got_dwte, dwte_in_kernel_order(dwte, dout, inp, C, eb.heavy_rows));
    char order[96];
    snprintf(order, sizeof(order), " dwte bits as the fixed order gives (%zu differ)", differ);
    dev_expect("encoder_backward", (std::string(what) + order).c_str(), differ == 0);

    // determinism: a second run from the same start gives the same bits
    floatX* d_dwte2 = dev_upload(dwte);
    floatX* d_dwpe2 = dev_upload(dwpe);
    encoder_backward(ctx, d_dwte2, d_dwpe2, d_dout, eb, B, T, C);
    CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    std::vector<float> again = dev_download(d_dwte2, (size_t)Vp * C);
    dev_expect("encoder_backward", (std::string(what) + " bitwise deterministic").c_str(),
               bits_differ(again, got_dwte) == 0);

    // one pass (nothing split): the kernel as it was before heavy buckets were split, whose
    // light buckets' bits the split run must share
    EncoderBuckets one;
    encoder_buckets_init(&one, (int)N, C);
    one.heavy_rows = INT_MAX;
    encoder_buckets_build(ctx, &one, inp.data(), B, T);
    if (eb.num_heavy > 0) {
        dev_upload_into(d_dwte2, dwte);
        encoder_backward(ctx, d_dwte2, nullptr, d_dout, one, B, T, C);
        CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
        std::vector<float> whole = dev_download(d_dwte2, (size_t)Vp * C);
        differ = bits_differ(whole, dwte_in_kernel_order(dwte, dout, inp, C, INT_MAX));
        snprintf(order, sizeof(order), " one pass: dwte bits as the serial order gives (%zu differ)", differ);
        dev_expect("encoder_backward", (std::string(what) + order).c_str(), differ == 0);
    }

    if (bench) {
        float ms = bench_ms(ctx, 20, [&] { encoder_forward(ctx, d_out, d_inp, d_wte, d_wpe, B, T, C); });
        dev_report_gbs("encoder_forward", label, 3.0 * N * C * sizeof(floatX), ms);
        ms = bench_ms(ctx, 20, [&] { encoder_backward(ctx, d_dwte2, d_dwpe2, d_dout, eb, B, T, C); });
        double bytes = (2.0 * N * C + 2.0 * eb.num_buckets * C + 2.0 * T * C) * sizeof(floatX);
        dev_report_gbs("encoder_backward", label, bytes, ms);
        if (eb.num_heavy > 0) {  // the same batch in one pass: what the split gains
            ms = bench_ms(ctx, 20, [&] { encoder_backward(ctx, d_dwte2, d_dwpe2, d_dout, one, B, T, C); });
            dev_report_gbs("encoder_backward_one_pass", label, bytes, ms);
        }
    }
    encoder_buckets_free(&eb);
    encoder_buckets_free(&one);
    for (floatX* p : {d_out, d_wte, d_wpe, d_dout, d_dwte, d_dwpe, d_dwte2, d_dwpe2}) CHECK_CUDA(cudaFree(p));
    CHECK_CUDA(cudaFree(d_inp));
}

// a third from a handful of ids (long buckets), the rest anywhere in V, the last V - 1
static std::vector<int> tokens_mixed(size_t N, int V) {
    DevRng rng(7 + N);
    std::vector<int> inp(N);
    for (size_t i = 0; i < N; i++) inp[i] = (i % 3 == 0) ? rng.below(std::min(5, V)) : rng.below(V);
    inp[N - 1] = V - 1;
    return inp;
}

// token `hot` at a fraction of the positions (spread over the batch), the rest anywhere in V
// but hot: a padding or EOT token, or GPT-2's "\n", taking over a batch
static std::vector<int> tokens_hot(size_t N, int V, int hot, double fraction) {
    DevRng rng(11 + N);
    std::vector<int> inp(N);
    for (size_t i = 0; i < N; i++) {
        bool is_hot = std::floor((double)(i + 1) * fraction) > std::floor((double)i * fraction);
        int t = rng.below(V - 1);
        inp[i] = is_hot ? hot : t + (t >= hot);
    }
    return inp;
}

// tokens with bucket sizes given, at random positions; the rest from the other ids of V
static std::vector<int> tokens_sized(size_t N, int V, const std::vector<int>& sizes) {
    DevRng rng(13 + N);
    std::vector<int> inp(N, -1), free_pos(N);
    for (size_t i = 0; i < N; i++) free_pos[i] = (int)i;
    const int k = (int)sizes.size();
    for (int tok = 0; tok < k; tok++)
        for (int j = 0; j < sizes[tok]; j++) {  // draw without replacement
            size_t r = rng.below((int)free_pos.size());
            inp[free_pos[r]] = tok;
            free_pos[r] = free_pos.back();
            free_pos.pop_back();
        }
    for (int p : free_pos) inp[p] = k + rng.below(V - k);
    return inp;
}

int main(int argc, char** argv) {
    dev_parse_args(argc, argv);
    CudaContext ctx;
    cuda_context_init(&ctx, 0);
    dev_print_device(ctx, "encoder");
    run_case(ctx, 3, 37, 48, 1000, 1024, 64, tokens_mixed((size_t)3 * 37, 1000), "mixed", 0, false);
    run_case(ctx, 1, 1, 8, 1, 128, 1, tokens_mixed(1, 1), "mixed", 0, false);  // the smallest legal shapes
    // heavy buckets: one token in half and in all of 1,200 positions (10 and 19 chunks, the
    // last one short), odd C
    run_case(ctx, 4, 300, 40, 500, 512, 300, tokens_hot(1200, 500, 7, 0.5), "hot 50%", 1, false);
    run_case(ctx, 4, 300, 40, 500, 512, 300, tokens_hot(1200, 500, 499, 1.0), "hot 100%", 1, false);
    // the boundary: a bucket at the threshold stays whole, one row over is split (3 chunks, the
    // last of 1 row), 3 whole chunks, and a bucket just under a chunk boundary
    const int H = ENCODER_HEAVY_ROWS, K = ENCODER_CHUNK_ROWS;
    run_case(ctx, 2, 512, 64, 300, 384, 512, tokens_sized(1024, 300, {H, H + 1, 3 * K, 4 * K - 1}),
             "threshold", 3, false);
    if (g_dev_bench || !g_dev_quick) {
        const int b = g_dev_bench ? 64 : 8;  // GPT-2 124M, B=64 (--bench) or 8, T=1024
        run_case(ctx, b, 1024, 768, 50257, 50304, 1024, tokens_mixed((size_t)b * 1024, 50257), "gpt2", -1, true);
        // the skewed batch of 65,536 positions: one token in half of them (1 bucket of 512 chunks)
        run_case(ctx, 64, 1024, 768, 50257, 50304, 1024, tokens_hot(65536, 50257, 198, 0.5), "gpt2_hot50", 1, true);
    }
    cuda_context_free(&ctx);
    return dev_finish("encoder");
}
