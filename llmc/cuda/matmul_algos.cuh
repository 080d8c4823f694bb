// matmul_algos.cuh: -ma timed: each cuBLASLt product's algorithm chosen by timing the heuristic's
// candidates once per problem key, and the choices saved with each checkpoint so that a resumed
// run sums in the same orders and continues bit for bit.
// defines: MatmulLayout, MatmulTiming, MATMUL_TIMED_CANDIDATES, matmul_time_candidates, matmul_timing_report,
//          matmul_layout_name, matmul_algos_path, matmul_algos_write, matmul_algos_read, matmul_algos_load
//
// Why time at all: the heuristic's first answer is its estimate of the fastest ([H] cublasLt.h:
// "ordered in increasing estimated compute time"), not a measurement; llm.c and PyTorch both keep
// the first. Whether the measured fastest beats it on the trainer's shapes by enough to pay for
// the start-up is PREDICTED until a GPU measures it, so the default stays `-ma heuristic`.
// Why the choices are saved: two algorithms may split k differently and round in another order
// (the emulated cuBLASLt's split-K answers do, llmc/emu/cublaslt.cpp); timing again on resume
// could pick another, and the run would part from the one that never stopped.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "../checkpoint.h"   // defines: checksum64, side_file_write, side_file_open, side_file_remaining,
                             //          side_file_read_body, side_file_close
#include "../gpu_scratch.h"  // defines: matmul_timing_scratch_bytes
#include "common.cuh"        // defines: CudaContext, MatmulAlgo, CHECK_CUDA, CHECK_CUBLAS

// How a run's ranks are laid out: world = DP x PP x TP (-vp: each pipeline rank's chunks). It
// decides which products each rank meets (-tp's slices, -pp's stages), so a checkpoint's choices
// fit a run of the same layout only.
struct MatmulLayout {
    int world = 1, tp = 1, pp = 1, vp = 1;
    bool operator==(const MatmulLayout& o) const { return world == o.world && tp == o.tp && pp == o.pp && vp == o.vp; }
};

// What -ma timed did so far (CudaContext::matmul_timing; nullptr: -ma heuristic), and what the
// trainer told it at start-up.
struct MatmulTiming {
    int shapes = 0;      // problem keys timed
    int candidates = 0;  // candidates run, over all keys
    int non_first = 0;   // keys where a candidate other than the heuristic's first won
    int loaded = 0;      // keys whose choice came from a checkpoint's file instead
    bool reported = false;
    MatmulLayout layout;       // this run's, recorded in the choices' files
    size_t scratch_plan = 0;   // the memory plan's bound on one product's scratch outputs
                               // (gpu_scratch.h: model_matmul_timing_scratch_bytes)
    size_t scratch_most = 0;   // the largest a product took so far
};

// candidates asked of the heuristic: it orders them by its estimate, and the fastest is rarely
// far down the list; 16 take well under a second a shape on a GPU (the emulator offers up to 4)
constexpr int MATMUL_TIMED_CANDIDATES = 16;
// each candidate: one run to warm up (caches, lazy module loading), then this many timed one by
// one, the fastest counting: a run that another process or a clock change slowed says nothing
// of the algorithm
constexpr int MATMUL_TIMED_RUNS = 3;

// The index of the fastest of cand[0 .. count - 1] for the product desc, la, lb, ld describe,
// on the real inputs a and b (and, in desc, the real bias or GELU aux when they are inputs).
// Every output goes to scratch buffers, never to the caller's: D (C is D, so beta 1 reads the
// scratch, not the caller's D, which would otherwise be added to twice), and, with
// aux_out / bias_out, the GELU aux and the bias gradient, whose pointers in desc are swapped
// for the time and then restored to aux / bias. Candidates that need more workspace than
// ctx.workspace_bytes are skipped. The scratch (matmul_timing_scratch_bytes) must be within the
// memory plan's bound, which counted it before anything was allocated: a product it missed stops
// the run with one line rather than running out of memory somewhere the plan says it fits.
// Runs on ctx.stream; synchronizes it.
inline int matmul_time_candidates(const CudaContext& ctx, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la,
                                  cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t ld, const floatX* a,
                                  const floatX* b, int m, int n, float beta, floatX* aux, bool aux_out,
                                  const floatX* bias, bool bias_out, const cublasLtMatmulHeuristicResult_t* cand,
                                  int count) {
    cudaStreamCaptureStatus capture;
    CHECK_CUDA(cudaStreamIsCapturing(ctx.stream, &capture));
    CHECK(capture == cudaStreamCaptureStatusNone,
          "-ma timed: a matmul of a new shape (m=%d n=%d) first met while a CUDA graph is captured; run -cg 1 with "
          "-ma heuristic", m, n);
    MatmulTiming* t = ctx.matmul_timing;
    const size_t scratch = matmul_timing_scratch_bytes(m, n, aux_out, bias_out, sizeof(floatX));
    CHECK(scratch <= t->scratch_plan,
          "-ma timed: the scratch of m=%d n=%d (%zu bytes) is over the memory plan's bound of %zu: "
          "model_matmul_timing_scratch_bytes (llmc/gpu_scratch.h) misses this product", m, n, scratch, t->scratch_plan);
    t->scratch_most = std::max(t->scratch_most, scratch);
    const size_t mn = (size_t)m * n;
    floatX *d_scratch = nullptr, *aux_scratch = nullptr, *bias_scratch = nullptr;
    // separate allocations: each 256-byte aligned, as the heuristic may have assumed of the real ones
    CHECK_CUDA(cudaMalloc(&d_scratch, mn * sizeof(floatX)));
    CHECK_CUDA(cudaMemsetAsync(d_scratch, 0, mn * sizeof(floatX), ctx.stream));
    if (aux_out) CHECK_CUDA(cudaMalloc(&aux_scratch, mn * sizeof(floatX)));
    if (bias_out) CHECK_CUDA(cudaMalloc(&bias_scratch, (size_t)n * sizeof(floatX)));
    if (aux_out)
        CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux_scratch,
                                                    sizeof(aux_scratch)));
    if (bias_out)
        CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_scratch,
                                                    sizeof(bias_scratch)));
    cudaEvent_t start, stop;
    CHECK_CUDA(cudaEventCreate(&start));
    CHECK_CUDA(cudaEventCreate(&stop));
    const float alpha = 1.0f;
    int best = -1;
    float best_ms = 0.0f;
    for (int i = 0; i < count; i++) {
        if (cand[i].state != CUBLAS_STATUS_SUCCESS || cand[i].workspaceSize > ctx.workspace_bytes) continue;
        float ms = 0.0f;
        for (int r = 0; r <= MATMUL_TIMED_RUNS; r++) {
            CHECK_CUDA(cudaEventRecord(start, ctx.stream));
            CHECK_CUBLAS(cublasLtMatmul(ctx.lt, desc, &alpha, a, la, b, lb, &beta, d_scratch, ld, d_scratch, ld,
                                        &cand[i].algo, ctx.workspace, ctx.workspace_bytes, ctx.stream));
            CHECK_CUDA(cudaEventRecord(stop, ctx.stream));
            CHECK_CUDA(cudaEventSynchronize(stop));
            float run_ms = 0.0f;
            CHECK_CUDA(cudaEventElapsedTime(&run_ms, start, stop));
            if (r == 1 || (r > 1 && run_ms < ms)) ms = run_ms;  // run 0 warms up
        }
        t->candidates++;
        if (best < 0 || ms < best_ms) best = i, best_ms = ms;  // a tie keeps the heuristic's order
    }
    CHECK(best >= 0, "-ma timed: none of cuBLASLt's %d candidates for m=%d n=%d fits the workspace of %zu bytes",
          count, m, n, ctx.workspace_bytes);
    if (aux_out)
        CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)));
    if (bias_out)
        CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    CHECK_CUDA(cudaEventDestroy(start));
    CHECK_CUDA(cudaEventDestroy(stop));
    CHECK_CUDA(cudaFree(d_scratch));  // (cudaFree waits for the device: the runs above are done)
    if (aux_scratch) CHECK_CUDA(cudaFree(aux_scratch));
    if (bias_scratch) CHECK_CUDA(cudaFree(bias_scratch));
    t->shapes++;
    t->non_first += best != 0;
    return best;
}

// One line, once (the trainer calls it after its first step, when every training shape has
// been met): what -ma timed did, and the largest scratch it took beside the plan's bound for it.
// Nothing under -ma heuristic.
inline void matmul_timing_report(const CudaContext& ctx) {
    MatmulTiming* t = ctx.matmul_timing;
    if (t == nullptr || t->reported) return;
    t->reported = true;
    char loaded[96] = "", scratch[96] = "";
    if (t->loaded > 0) snprintf(loaded, sizeof(loaded), "%d shapes' algorithms loaded from the checkpoint; ", t->loaded);
    if (t->shapes > 0)
        snprintf(scratch, sizeof(scratch), "; scratch outputs up to %.1f MiB (planned: %.1f MiB)",
                 t->scratch_most / 1048576.0, t->scratch_plan / 1048576.0);
    printf("matmul: -ma timed: %stimed %d candidates for %d %sshapes, picked a non-first answer for %d%s\n", loaded,
           t->candidates, t->shapes, t->loaded > 0 ? "new " : "", t->non_first, scratch);
}

// ---------------------------------------------------------------------------------------
// The choices in a checkpoint: state_%08d_%05d_matmul.bin beside each rank's state file (ranks
// may meet different shapes: -tp's slices; checkpoint_prune takes it with them). Header of 12 x
// uint64: [0] magic, [1] version, [2] step, [3] entries, [4] bytes an entry, [5] cuBLASLt's
// version (an algorithm is that library's opaque data), [6] the entries' checksum64, [7]-[10] the
// layout that wrote it (world, tp, pp, vp), [11] the header's; then the entries: the key[3],
// found (0 or 1), the cublasLtMatmulAlgo_t. Version 1 had 8 words, no layout and the header's
// checksum in [7]; it still reads, as a file of this run's layout (what resuming did then). Only
// -ma timed runs write it; the heuristic's answers need no saving, the same library giving the same.
enum { MATMUL_ALGOS_MAGIC = 20261128, MATMUL_ALGOS_VERSION = 2, MATMUL_ALGOS_HEADER_WORDS = 12 };

struct MatmulAlgoEntry {
    uint64_t key[3];
    uint64_t found;
    cublasLtMatmulAlgo_t algo;
};

inline std::string matmul_algos_path(const std::string& dir, int step, int rank) {
    char name[64];
    snprintf(name, sizeof(name), "/state_%08d_%05d_matmul.bin", step, rank);
    return dir + name;
}

// "8 ranks", "1 process", "4 ranks at -tp 2 -pp 2"
inline std::string matmul_layout_name(const MatmulLayout& l) {
    if (l.world == 0) return "a run that did not record its layout (version 1)";
    char name[96];
    int n = snprintf(name, sizeof(name), l.world == 1 ? "1 process" : "%d ranks", l.world);
    if (l.tp > 1 || l.pp > 1) n += snprintf(name + n, sizeof(name) - n, " at -tp %d -pp %d", l.tp, l.pp);
    if (l.vp > 1) snprintf(name + n, sizeof(name) - n, " -vp %d", l.vp);
    return name;
}

// Writes this rank's choices so far for the checkpoint at `step`, durable on disk. Nothing under
// -ma heuristic.
inline void matmul_algos_write(const CudaContext& ctx, const std::string& dir, int step, int rank) {
    const MatmulTiming* t = ctx.matmul_timing;
    if (t == nullptr) return;
    std::vector<MatmulAlgoEntry> entries;
    for (const MatmulAlgo& e : *ctx.matmul_algos) {
        MatmulAlgoEntry r = {};
        for (int i = 0; i < 3; i++) r.key[i] = e.key[i];
        r.found = e.found ? 1 : 0;
        r.algo = e.algo;
        entries.push_back(r);
    }
    const size_t bytes = entries.size() * sizeof(MatmulAlgoEntry);
    const MatmulLayout& l = t->layout;
    uint64_t h[MATMUL_ALGOS_HEADER_WORDS] = {MATMUL_ALGOS_MAGIC, MATMUL_ALGOS_VERSION, (uint64_t)step,
                                             entries.size(), sizeof(MatmulAlgoEntry), (uint64_t)cublasLtGetVersion(),
                                             checksum64(entries.data(), bytes), (uint64_t)l.world, (uint64_t)l.tp,
                                             (uint64_t)l.pp, (uint64_t)l.vp, 0};
    side_file_write(dir, matmul_algos_path(dir, step, rank), h, MATMUL_ALGOS_HEADER_WORDS, {{entries.data(), bytes}});
}

// The problem with the choices file at path for `step` ("" if sound). When sound: *layout the
// layout that wrote it (world 0: a version 1 file, which does not say), *library the cuBLASLt
// version it was written with, and, unless entries is nullptr (the header alone read), its entries.
inline std::string matmul_algos_read(const std::string& path, int step, MatmulLayout* layout, uint64_t* library,
                                     std::vector<MatmulAlgoEntry>* entries) {
    static const int words_of_version[] = {8, MATMUL_ALGOS_HEADER_WORDS};  // version 1, 2
    uint64_t h[SIDE_FILE_MAX_WORDS];
    int words = 0;
    FILE* f = nullptr;
    std::string err = side_file_open(path, MATMUL_ALGOS_MAGIC, "matmul-algorithm", words_of_version,
                                     MATMUL_ALGOS_VERSION, step, h, &words, &f);
    if (!err.empty()) return err;
    if (h[4] != sizeof(MatmulAlgoEntry))
        err = "entries of " + std::to_string(h[4]) + " bytes, expected " + std::to_string(sizeof(MatmulAlgoEntry));
    *library = h[5];
    *layout = words == 8 ? MatmulLayout{0, 0, 0, 0} : MatmulLayout{(int)h[7], (int)h[8], (int)h[9], (int)h[10]};
    if (entries == nullptr || !err.empty()) {  // the header alone
        fclose(f);
        return err;
    }
    const size_t room = side_file_remaining(f) / sizeof(MatmulAlgoEntry);
    if (h[3] > room)
        return side_file_close(f, "holds " + std::to_string(h[3]) + " entries, more than its remaining bytes can (" +
                                      std::to_string(room) + ", corrupt)");
    entries->resize(h[3]);
    err = side_file_read_body(f, entries->data(), entries->size() * sizeof(MatmulAlgoEntry), h[6], "entries");
    return side_file_close(f, err);
}

// -ma timed, on resume: this rank's choices at `step` replace whatever was chosen so far, so
// every product sums as it did in the run that wrote them. Which layout wrote them rank 0's file
// says (every checkpoint has it): under another layout the ranks meet other products, or the
// same on other ranks, and the data-parallel sums change anyway, so nothing can continue bit for
// bit; the products are timed again, as in a fresh run, and rank 0 says so in one line. So with
// another cuBLASLt (an algorithm is its library's opaque data, and a new library sums its own
// way: a CUDA upgrade between the run and its resume). At the same layout and library a missing
// or unsound file stops the run with one line naming it (timing again could choose otherwise,
// silently), as does rank 0's when its header cannot be read. Nothing under -ma heuristic.
inline void matmul_algos_load(const CudaContext& ctx, const std::string& dir, int step, int rank) {
    MatmulTiming* t = ctx.matmul_timing;
    if (t == nullptr) return;
    const char* why = "-ma timed resumes the matmul algorithms its checkpoints saved, to continue bit for bit (a "
                      "checkpoint of a -ma heuristic run has none: resume it with -ma heuristic)";
    const std::string first = matmul_algos_path(dir, step, 0);
    MatmulLayout wrote;
    uint64_t library = 0;
    std::string err = matmul_algos_read(first, step, &wrote, &library, nullptr);
    if (!err.empty()) fail("%s: %s: %s", first.c_str(), err.c_str(), why);
    const uint64_t ours = (uint64_t)cublasLtGetVersion();
    if ((wrote.world > 0 && !(wrote == t->layout)) || library != ours) {
        if (rank == 0 && library != ours)
            printf("-ma timed: the checkpoint's algorithms are cuBLASLt %llu's, this is %llu: timing the products "
                   "again\n", (unsigned long long)library, (unsigned long long)ours);
        else if (rank == 0)
            printf("-ma timed: the checkpoint was written by %s, this run has %s: timing the products again\n",
                   matmul_layout_name(wrote).c_str(), matmul_layout_name(t->layout).c_str());
        return;
    }
    const std::string path = matmul_algos_path(dir, step, rank);
    MatmulLayout mine;
    uint64_t my_library = 0;
    std::vector<MatmulAlgoEntry> entries;
    err = matmul_algos_read(path, step, &mine, &my_library, &entries);
    if (err.empty() && (!(mine == wrote) || my_library != library))  // left over from another run here
        err = "written by " + matmul_layout_name(mine) + " with cuBLASLt " + std::to_string(my_library) +
              ", rank 0's by " + matmul_layout_name(wrote) + " with cuBLASLt " + std::to_string(library);
    if (!err.empty()) fail("%s: %s: %s", path.c_str(), err.c_str(), why);
    ctx.matmul_algos->clear();
    for (const MatmulAlgoEntry& r : entries)
        ctx.matmul_algos->push_back(MatmulAlgo{{r.key[0], r.key[1], r.key[2]}, r.algo, r.found != 0});
    t->loaded = (int)entries.size();
}
