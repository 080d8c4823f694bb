// debug_checks.h: the comparisons of a CPU model against a PyTorch debug state, one line
// each, as test_gpt2_debug.cpp and test_llama_debug.cpp make them: logits (max abs error over
// the largest logit, 1e-5), loss (1e-5), each gradient tensor (relative L2, 1e-4), each AdamW
// step's loss (1e-5) and pre-clip gradient norm (1e-4).
// defines: debug_failures, debug_expect, debug_check_logits, debug_check_loss, debug_check_grads,
//          debug_check_step
#pragma once
#include <cmath>
#include <cstdio>
#include <vector>

#include "../llmc/gpt2.h"  // defines: ParamTensor

inline int& debug_failures() {
    static int failures = 0;
    return failures;
}

inline void debug_expect(bool ok, const char* what, double err, double tol) {
    printf("%-4s %-28s err %.3e (tol %.0e)\n", ok ? "ok" : "FAIL", what, err, tol);
    if (!ok) debug_failures()++;
}

// got (BT, Vp): the model's padded logits; want (BT, V)
inline void debug_check_logits(const float* got, int Vp, const std::vector<float>& want, size_t BT, int V) {
    double max_err = 0.0, max_ref = 0.0;
    for (size_t i = 0; i < BT; i++) {
        for (int j = 0; j < V; j++) {
            double ref = want[i * V + j], g = got[i * Vp + j];
            max_err = std::fmax(max_err, std::fabs(g - ref));
            max_ref = std::fmax(max_ref, std::fabs(ref));
        }
    }
    debug_expect(max_err / max_ref <= 1e-5, "logits (max rel)", max_err / max_ref, 1e-5);
}

inline void debug_check_loss(float got, float want) {
    double err = std::fabs(got - want) / std::fabs(want);
    debug_expect(err <= 1e-5, "loss", err, 1e-5);
}

// every tensor of the table: got and want in its layout
inline void debug_check_grads(const ParamTensor* table, int n, const float* got, const float* want) {
    for (int t = 0; t < n; t++) {
        const ParamTensor& pt = table[t];
        double diff = 0.0, ref = 0.0;
        for (size_t i = pt.offset; i < pt.offset + pt.numel; i++) {
            double d = (double)got[i] - want[i];
            diff += d * d;
            ref += (double)want[i] * want[i];
        }
        double rel = ref > 0 ? std::sqrt(diff / ref) : std::sqrt(diff);
        char what[64];
        snprintf(what, sizeof(what), "grad %s (rel L2)", pt.name);
        debug_expect(rel <= 1e-4, what, rel, 1e-4);
    }
}

// AdamW step s: its loss and its gradient norm before clipping
inline void debug_check_step(int s, float loss, float want_loss, float norm, float want_norm) {
    double lerr = std::fabs(loss - want_loss) / std::fabs(want_loss);
    double nerr = std::fabs(norm - want_norm) / std::fabs(want_norm);
    char what[64];
    snprintf(what, sizeof(what), "step %d loss %.6f", s, loss);
    debug_expect(lerr <= 1e-5, what, lerr, 1e-5);
    snprintf(what, sizeof(what), "step %d grad norm %.4f", s, norm);
    debug_expect(nerr <= 1e-4, what, nerr, 1e-4);
}
