// bench_cpu.cpp: the CPU trainer's speed, in two parts.
//   1. The matmul kernel (llmc/cpu/matmul.h) at two shapes of the model's step, the qkv layer
//      (C -> 3C) and the classifier (C -> Vp), each of its three products: GFLOP/s and the
//      share of this machine's FMA peak, worked out from the CPU it runs on.
//   2. One full training step of train_gpt_cpu's model (forward, backward, AdamW) on random
//      tokens: ms/step (median), tokens/s and GFLOP/s, and where the time goes (as -pb 1).
// usage: build/bench_cpu [descriptor=d12] [B=4] [T=64] [steps=5] [kernels=1]
//        (steps=0: part 1 only; kernels=0: part 2 only)
// The machine may be shared: every figure is the best and the median of several runs.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../llmc/cpu/omp_wait.h"  // defines: omp_wait_setup
#include "../llmc/gpt2.h"  // defines: GPT2, gpt2_init, gpt2_forward, gpt2_backward, gpt2_update
                           // (and through llmc/cpu/matmul.h: gemm_f32, GEMM_KERNEL_NAME)

static int num_threads() {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

static double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// ----------------------------------------------------------------------------
// the machine's FMA peak: cores x clock x lanes x FMAs a cycle x 2 flop per FMA

// Floats per vector of the widest instruction set this build targets (the kernel's, and the
// plain loops' when the compiler vectorizes them).
static int simd_lanes() {
#if defined(__AVX512F__)
    return 16;
#elif defined(__AVX__)
    return 8;
#else
    return 4;  // SSE, NEON
#endif
}

// What /proc/cpuinfo (x86 Linux) says of the first CPU, 0 where it says nothing: its clock
// ("cpu MHz", which a VM often fixes at the base clock) and whether cores run two hardware
// threads ("siblings" per package over "cpu cores"), which share one core's FMA pipes.
struct CpuInfo {
    double mhz;
    int siblings, cores;
};
static CpuInfo read_cpuinfo() {
    CpuInfo info = {0.0, 0, 0};
    FILE* f = fopen("/proc/cpuinfo", "r");
    if (f == nullptr) return info;
    char line[512];
    while (fgets(line, sizeof(line), f) && line[0] != '\n') {  // the first CPU's block
        const char* colon = strchr(line, ':');
        if (colon == nullptr) continue;
        if (strncmp(line, "cpu MHz", 7) == 0) info.mhz = atof(colon + 1);
        if (strncmp(line, "siblings", 8) == 0) info.siblings = atoi(colon + 1);
        if (strncmp(line, "cpu cores", 9) == 0) info.cores = atoi(colon + 1);
    }
    fclose(f);
    return info;
}
// cpufreq's cpuinfo_max_freq (the boost clock) in MHz, where there is one
static double cpufreq_max_mhz() {
    FILE* f = fopen("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "r");
    if (f == nullptr) return 0.0;
    double khz = 0.0;
    if (fscanf(f, "%lf", &khz) != 1) khz = 0.0;
    fclose(f);
    return khz / 1000.0;
}

// The clock the cores run at while every thread is busy, in GHz (0 where it cannot be
// measured): each thread times a chain of dependent register adds, one cycle per add on every
// x86 core whatever the turbo does, in many windows of ~0.04 ms and keeps its best one (a
// window that the OS gave to another process for a while only looks slower); the slowest
// thread's best is the clock.
static double measured_ghz() {
#if defined(__x86_64__)
    const long iters = 1 << 14;  // x 8 adds: 128K cycles
    double slowest = 1e30;
#pragma omp parallel reduction(min : slowest)
    {
        double best = 0.0;
        for (int window = 0; window < 300; window++) {
            uint64_t x = 0, one = 1;
            double t0 = now_ms();
            for (long i = 0; i < iters; i++) {
                asm volatile("add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\t"
                             "add %1, %0\n\tadd %1, %0\n\tadd %1, %0\n\tadd %1, %0"
                             : "+r"(x) : "r"(one));
            }
            best = std::max(best, 8.0 * iters / (now_ms() - t0) * 1e-6);
        }
        slowest = std::min(slowest, best);
    }
    return slowest;
#else
    return 0.0;
#endif
}

// FMAs a core completes per cycle at this build's vector width, while every thread is busy (0
// where it cannot be measured): each thread times 12 independent chains of vector FMAs (more
// than latency x pipes on any x86 core, so only the pipes limit them) on zeroed registers (no
// denormals), in many windows, keeping its best; the slowest thread's best, over the clock.
// Two on most cores with AVX2 or AVX-512, but one at 512 bits where a core runs a 512-bit FMA
// as two halves on its two 256-bit pipes (AMD's Zen 4): that halves the AVX-512 peak.
static double measured_fma_per_cycle(double ghz) {
#if defined(__x86_64__) && (defined(__AVX512F__) || defined(__FMA__))
    if (ghz <= 0) return 0.0;
#if defined(__AVX512F__)
#define BENCH_FMA(n) "vfmadd231ps %%zmm12, %%zmm13, %%zmm" #n "\n\t"
#else
#define BENCH_FMA(n) "vfmadd231ps %%ymm12, %%ymm13, %%ymm" #n "\n\t"
#endif
#define BENCH_ZERO(n) "vxorps %%xmm" #n ", %%xmm" #n ", %%xmm" #n "\n\t"  // zeroes the whole zmm/ymm
    const long iters = 1 << 13;  // x 12 FMAs: about 100K cycles at one a cycle
    double slowest = 1e30;
#pragma omp parallel reduction(min : slowest)
    {
        double best = 0.0;
        for (int window = 0; window < 200; window++) {
            long n = iters;
            const double t0 = now_ms();
            asm volatile(BENCH_ZERO(0) BENCH_ZERO(1) BENCH_ZERO(2) BENCH_ZERO(3) BENCH_ZERO(4) BENCH_ZERO(5)
                         BENCH_ZERO(6) BENCH_ZERO(7) BENCH_ZERO(8) BENCH_ZERO(9) BENCH_ZERO(10) BENCH_ZERO(11)
                         BENCH_ZERO(12) BENCH_ZERO(13)
                         "1:\n\t"
                         BENCH_FMA(0) BENCH_FMA(1) BENCH_FMA(2) BENCH_FMA(3) BENCH_FMA(4) BENCH_FMA(5)
                         BENCH_FMA(6) BENCH_FMA(7) BENCH_FMA(8) BENCH_FMA(9) BENCH_FMA(10) BENCH_FMA(11)
                         "dec %0\n\t"
                         "jnz 1b"
                         : "+r"(n)
                         :
                         : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
                           "xmm10", "xmm11", "xmm12", "xmm13", "cc");
            best = std::max(best, 12.0 * iters / ((now_ms() - t0) * 1e-3) / (ghz * 1e9));
        }
        slowest = std::min(slowest, best);
    }
#undef BENCH_FMA
#undef BENCH_ZERO
    return slowest;
#else
    (void)ghz;
    return 0.0;
#endif
}

// ----------------------------------------------------------------------------
// part 1: the matmul kernel

struct Timing {
    double best, median, worst;  // GFLOP/s
};

// runs f once to warm up, then `runs` times; GFLOP/s of each run
template <typename F>
static Timing time_gflops(double flop, int runs, F f) {
    f();
    std::vector<double> rate;
    for (int r = 0; r < runs; r++) {
        double t0 = now_ms();
        f();
        rate.push_back(flop / (now_ms() - t0) * 1e-6);
    }
    std::sort(rate.begin(), rate.end());
    return {rate.back(), rate[rate.size() / 2], rate.front()};
}

static std::vector<float> filled(size_t n, uint32_t seed) {
    std::vector<float> v(n);
    for (float& x : v) { seed = seed * 1664525u + 1013904223u; x = (float)(seed >> 8) / (1 << 24) - 0.5f; }
    return v;
}

// The FMA peak of the cores the threads run on, printed with how it was worked out; GFLOP/s.
static double fma_peak_gflops() {
    // cores: the threads, but no more than the machine's cores (hardware threads of one core
    // share its FMA pipes)
    const CpuInfo info = read_cpuinfo();
    const int threads = num_threads();
    const int cpus = (int)std::thread::hardware_concurrency();
    const int per_core = info.cores > 0 && info.siblings > info.cores ? info.siblings / info.cores : 1;
    const int cores = cpus > 0 ? std::min(threads, cpus / per_core) : threads;
    // the clock: measured where it can be, else what the OS says
    const double ghz = measured_ghz(), max_mhz = cpufreq_max_mhz();
    const double clock_ghz = ghz > 0 ? ghz : (max_mhz > 0 ? max_mhz : info.mhz) / 1000.0;
    const int lanes = simd_lanes();
    // FMAs a cycle: measured with the clock (whole pipes, at least one), else the usual two
    const double fma_rate = measured_fma_per_cycle(ghz);
    const int pipes = fma_rate > 0 ? std::max(1, (int)std::lround(fma_rate)) : 2;
    auto peak_at = [&](double g) { return cores * g * lanes * pipes * 2; };
    const double peak = peak_at(clock_ghz);
    printf("matmul kernel: %s, %d threads, %d CPUs (%d per core)\n", GEMM_KERNEL_NAME, threads, cpus, per_core);
    printf("FMA peak: %d cores x %.2f GHz x %d lanes x %d FMA%s a cycle x 2 flop = %.0f GFLOP/s\n", cores,
           clock_ghz, lanes, pipes, pipes == 1 ? "" : "s", peak);
    if (fma_rate > 0) {
        printf("  FMAs a cycle measured (12 independent %d-bit FMA chains on every thread): %.2f", lanes * 32,
               fma_rate);
        if (pipes == 1 && lanes == 16) printf(": the core runs a 512-bit FMA as two 256-bit halves (as Zen 4 does)");
        if (pipes != 2) printf("; 2 a cycle would give %.0f", cores * clock_ghz * lanes * 2 * 2);
        printf("\n");
    } else {
        printf("  FMAs a cycle not measured (no x86 FMA build, or no clock): 2 assumed\n");
    }
    printf("  clock %s", ghz > 0 ? "measured (dependent adds on every thread)"
                         : max_mhz > 0 ? "from cpufreq's cpuinfo_max_freq" : "from /proc/cpuinfo's cpu MHz");
    if (info.mhz > 0) printf("; /proc/cpuinfo's cpu MHz %.0f would give %.0f", info.mhz, peak_at(info.mhz / 1000));
    if (max_mhz > 0) printf("; cpufreq max %.0f MHz would give %.0f", max_mhz, peak_at(max_mhz / 1000));
    printf("\n");
    return peak;
}

static void bench_matmul(int BT, int C, int V, double peak) {
    const int runs = 15;
    printf("%-20s %-28s %7s %7s %7s %10s\n", "M=B*T x K=C x N=OC", "product", "GFLOP/s", "median", "worst",
           "% of peak");
    const int OCs[] = {3 * C, V};
    for (int OC : OCs) {
        std::vector<float> inp = filled((size_t)BT * C, 1), w = filled((size_t)OC * C, 2);
        std::vector<float> dout = filled((size_t)BT * OC, 3), out((size_t)BT * OC);
        std::vector<float> dinp((size_t)BT * C, 0.0f), dw((size_t)OC * C, 0.0f);
        const double flop = 2.0 * BT * C * OC;
        char layer[64];
        snprintf(layer, sizeof(layer), "%d x %d x %d", BT, C, OC);
        // the three GEMMs of matmul_forward and matmul_backward, timed apart
        Timing t[3] = {
            time_gflops(flop, runs, [&] {
                gemm_f32(out.data(), OC, GemmView{inp.data(), (size_t)C, 1}, GemmView{w.data(), 1, (size_t)C},
                         nullptr, BT, OC, C, false);
            }),
            time_gflops(flop, runs, [&] {
                gemm_f32(dinp.data(), C, GemmView{dout.data(), (size_t)OC, 1}, GemmView{w.data(), (size_t)C, 1},
                         nullptr, BT, C, OC, true);
            }),
            time_gflops(flop, runs, [&] {
                gemm_f32(dw.data(), C, GemmView{dout.data(), 1, (size_t)OC}, GemmView{inp.data(), (size_t)C, 1},
                         nullptr, OC, C, BT, true);
            })};
        const char* names[3] = {"forward  out = inp @ W^T", "backward dinp += dout @ W", "backward dW += dout^T @ inp"};
        for (int i = 0; i < 3; i++) {
            printf("%-20s %-28s %7.1f %7.1f %7.1f %9.0f%%\n", i == 0 ? layer : "", names[i], t[i].best,
                   t[i].median, t[i].worst, 100.0 * t[i].best / peak);
        }
    }
    printf("\n");
}

// ----------------------------------------------------------------------------
// part 2: the training step

int main(int argc, char** argv) {
    omp_wait_setup(argv);  // as train_gpt_cpu: may start again with a short OpenMP spin
    const char* desc = argc > 1 ? argv[1] : "d12";
    int B = argc > 2 ? atoi(argv[2]) : 4;
    int T = argc > 3 ? atoi(argv[3]) : 64;
    int steps = argc > 4 ? atoi(argv[4]) : 5;
    const bool kernels = argc > 5 ? atoi(argv[5]) != 0 : true;
    GPT2Config cfg;
    if (!gpt2_config_from_descriptor(desc, &cfg)) fail("unknown model descriptor '%s'", desc);
    if (B < 1 || T < 1 || T > cfg.max_seq_len || steps < 0) fail("bad B=%d T=%d steps=%d", B, T, steps);
    const double peak = fma_peak_gflops();
    if (kernels) bench_matmul(B * T, cfg.channels, cfg.padded_vocab_size, peak);
    if (steps == 0) return 0;

    GPT2 model;
    gpt2_init(&model, cfg);
    gpt2_init_random(&model, 42);
    gpt2_alloc_state(&model, B, T);
    std::vector<int> tokens(B * T + 1);
    uint32_t x = 12345;
    for (int& t : tokens) { x = x * 1664525u + 1013904223u; t = (int)((x >> 8) % cfg.vocab_size); }

    size_t n = model.num_parameters;
    double tokens_per_step = (double)B * T;
    double flops_6n = 6.0 * n * tokens_per_step;
    double flops_attn = 6.0 * cfg.num_layers * cfg.channels * T * tokens_per_step;
    printf("bench_cpu: %s (%zu parameters), B=%d T=%d, %d threads, %d timed steps after 1 warmup\n",
           desc, n, B, T, num_threads(), steps);
    PhaseClock phases;
    model.phases = &phases;
    std::vector<double> ms;
    for (int s = 0; s <= steps; s++) {
        phase_clock_step_begin(&phases);
        auto t0 = std::chrono::steady_clock::now();
        gpt2_forward(&model, tokens.data(), tokens.data() + 1, B, T);
        auto t1 = std::chrono::steady_clock::now();
        gpt2_backward(&model, tokens.data(), tokens.data() + 1, 1.0f / (B * T));
        auto t2 = std::chrono::steady_clock::now();
        phase_clock_mark(&phases, PHASE_OPTIMIZER);
        float norm = gpt2_grad_norm(&model);
        gpt2_update(&model, 1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, grad_clip_scale(norm, 1.0f), s + 1);
        phase_clock_mark(&phases, PHASE_OTHER);
        gpt2_zero_grad(&model);
        auto t3 = std::chrono::steady_clock::now();
        phase_clock_step_end(&phases, s > 0);
        auto ms_between = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
        double dt = ms_between(t0, t3);
        printf("  step %d: loss %.4f, %.1f ms (forward %.1f, backward %.1f, norm+AdamW %.1f)%s\n", s,
               model.mean_loss, dt, ms_between(t0, t1), ms_between(t1, t2), ms_between(t2, t3),
               s == 0 ? " (warmup)" : "");
        if (s > 0) ms.push_back(dt);
    }
    std::sort(ms.begin(), ms.end());
    double med = ms[ms.size() / 2];
    phase_clock_report(phases);
    printf("median %.1f ms/step | %.0f tokens/s | %.1f GFLOP/s of 6N flops (%.0f%% of the FMA peak, %.0f GFLOP/s) | "
           "%.1f GFLOP/s of 6N+6LCT\n", med, tokens_per_step / med * 1000, flops_6n / med / 1e6,
           100.0 * flops_6n / med / 1e6 / peak, peak, (flops_6n + flops_attn) / med / 1e6);
    gpt2_free(&model);
    return 0;
}
