// matmul_algos.cuh: -ma timed: each cuBLASLt product's algorithm chosen by timing the heuristic's
// candidates once per problem key, and the choices saved with each checkpoint so that a resumed
// run sums in the same orders and continues bit for bit.
// defines: MatmulTiming, MATMUL_TIMED_CANDIDATES, matmul_time_candidates, matmul_timing_report,
//          matmul_algos_write, matmul_algos_load (the choices file's format and reader: llmc/side_files.h)
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
#include <cstring>
#include <string>
#include <vector>

#include "../gpu_scratch.h"  // defines: matmul_timing_scratch_bytes
#include "../side_files.h"   // defines: MatmulLayout, MatmulAlgoEntry, matmul_algos_path, matmul_layout_name,
                             //          matmul_algos_file_write, matmul_algos_read
#include "common.cuh"        // defines: CudaContext, MatmulAlgo, CHECK_CUDA, CHECK_CUBLAS


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
// aux_out / bias_out (its length), the GELU aux and the bias gradient, whose pointers in desc are swapped
// for the time and then restored to aux / bias. Candidates that need more workspace than
// ctx.workspace_bytes are skipped. The scratch (matmul_timing_scratch_bytes) must be within the
// memory plan's bound, which counted it before anything was allocated: a product it missed stops
// the run with one line rather than running out of memory somewhere the plan says it fits.
// Runs on ctx.stream; synchronizes it.
inline int matmul_time_candidates(const CudaContext& ctx, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la,
                                  cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t ld, const floatX* a,
                                  const floatX* b, int m, int n, float beta, floatX* aux, bool aux_out,
                                  const floatX* bias, size_t bias_out, const cublasLtMatmulHeuristicResult_t* cand,
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
    if (bias_out) CHECK_CUDA(cudaMalloc(&bias_scratch, bias_out * sizeof(floatX)));
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
// may meet different shapes: -tp's slices; checkpoint_prune takes it with them); its format,
// writer and reader are llmc/side_files.h's.
// Writes this rank's choices so far for the checkpoint at `step`, durable on disk. Nothing under
// -ma heuristic.
static_assert(sizeof(cublasLtMatmulAlgo_t) == sizeof(MatmulAlgoEntry::algo), "a cuBLASLt algorithm is 64 bytes");
inline void matmul_algos_write(const CudaContext& ctx, const std::string& dir, int step, int rank) {
    const MatmulTiming* t = ctx.matmul_timing;
    if (t == nullptr) return;
    std::vector<MatmulAlgoEntry> entries;
    for (const MatmulAlgo& e : *ctx.matmul_algos) {
        MatmulAlgoEntry r = {};
        for (int i = 0; i < 3; i++) r.key[i] = e.key[i];
        r.found = e.found ? 1 : 0;
        memcpy(r.algo, &e.algo, sizeof(r.algo));
        entries.push_back(r);
    }
    matmul_algos_file_write(dir, step, rank, entries, (uint64_t)cublasLtGetVersion(), t->layout);
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
    for (const MatmulAlgoEntry& r : entries) {
        MatmulAlgo e = {{r.key[0], r.key[1], r.key[2]}, {}, r.found != 0};
        memcpy(&e.algo, r.algo, sizeof(r.algo));
        ctx.matmul_algos->push_back(e);
    }
    t->loaded = (int)entries.size();
}
