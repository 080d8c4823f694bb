// phases.h: where a training step's time goes (-pb 1), in the phases both trainers name the
// same way. The CPU trainer reads the wall clock wherever one phase of the step gives way to the
// next (PhaseClock, here); the GPU trainer records CUDA events there (llmc/cuda/phases.cuh).
// Both print the same table at the end.
// defines: Phase, phase_name, phase_table_print, PhaseClock, phase_clock_mark,
//          phase_clock_step_begin, phase_clock_step_end, phase_clock_report
#pragma once
#include <chrono>
#include <cstdio>

enum Phase {
    PHASE_ENCODER,        // embedding forward and backward
    PHASE_LAYERNORM,      // LayerNorms, with their residual adds, and their recompute
    PHASE_MATMUL,         // the layers' matmuls, with their bias and bias gradients
    PHASE_CLASSIFIER_MATMUL,  // logits = lnf @ wte^T and its two gradients (a third of d12's flops)
    PHASE_ATTENTION_FWD,
    PHASE_ATTENTION_BWD,
    PHASE_GELU,           // GELU forward, backward or recompute
    PHASE_CLASSIFIER,     // softmax + cross-entropy + dlogits
    PHASE_OPTIMIZER,      // gradient norm and AdamW
    PHASE_COMM,           // waiting for the gradient reduction; the parameter all-gather
    PHASE_OTHER,          // copies, memsets, the rest
    PHASE_PIPELINE,       // -pp: waiting for the stage before or after (the bubble, and the transfers)
    NUM_PHASES
};

inline const char* phase_name(int p) {
    static const char* const names[NUM_PHASES] = {
        "encoder", "layernorm", "matmul", "classifier matmul", "attention forward", "attention backward",
        "gelu", "classifier", "optimizer", "communication", "other", "pipeline wait"};
    return p >= 0 && p < NUM_PHASES ? names[p] : "?";
}

// The table: ms per step and share of the step's wall time, per phase, then what no phase
// covered (`outside_name`, outside_ms summed over the steps; nullptr: no such line) and the
// step's wall time.
inline void phase_table_print(const char* how, const double ms[NUM_PHASES], int steps, double wall_ms,
                              const char* outside_name, double outside_ms) {
    if (steps == 0) {
        printf("phase breakdown: no step counted (the first step is warm-up)\n");
        return;
    }
    const double wall = wall_ms / steps;
    printf("phase breakdown over %d steps (%s):\n", steps, how);
    printf("  %-22s %10s %7s\n", "phase", "ms/step", "share");
    for (int p = 0; p < NUM_PHASES; p++)
        if (ms[p] > 0.0) printf("  %-22s %10.3f %6.1f%%\n", phase_name(p), ms[p] / steps, 100.0 * ms[p] / steps / wall);
    if (outside_name != nullptr)
        printf("  %-22s %10.3f %6.1f%%\n", outside_name, outside_ms / steps, 100.0 * outside_ms / steps / wall);
    printf("  %-22s %10.3f\n", "step (wall)", wall);
}

// ---------------------------------------------------------------------------------------
// The CPU's clock: the time from one mark to the next counts towards the first mark's phase.
struct PhaseClock {
    double ms[NUM_PHASES] = {};  // summed over the counted steps
    double wall_ms = 0.0;        // the counted steps' wall time
    int steps = 0;
    // this step
    double step_ms[NUM_PHASES] = {};
    int current = -1;            // the phase running since `since` (-1: none, outside a step)
    double start = 0.0, since = 0.0;
};

inline double phase_clock_now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// From here on the step runs phase p (nothing when clock is nullptr, or outside a step).
inline void phase_clock_mark(PhaseClock* clock, Phase p) {
    if (clock == nullptr || clock->current < 0 || clock->current == p) return;
    const double now = phase_clock_now_ms();
    clock->step_ms[clock->current] += now - clock->since;
    clock->current = p;
    clock->since = now;
}

inline void phase_clock_step_begin(PhaseClock* clock) {
    if (clock == nullptr) return;
    for (double& m : clock->step_ms) m = 0.0;
    clock->start = clock->since = phase_clock_now_ms();
    clock->current = PHASE_OTHER;
}

// The step is over: its times join the sums, unless count is false (warm-up).
inline void phase_clock_step_end(PhaseClock* clock, bool count) {
    if (clock == nullptr || clock->current < 0) return;
    const double now = phase_clock_now_ms();
    clock->step_ms[clock->current] += now - clock->since;
    clock->current = -1;
    if (!count) return;
    for (int p = 0; p < NUM_PHASES; p++) clock->ms[p] += clock->step_ms[p];
    clock->wall_ms += now - clock->start;
    clock->steps++;
}

inline void phase_clock_report(const PhaseClock& clock) {
    phase_table_print("wall clock; the time from one phase's start to the next's", clock.ms, clock.steps,
                      clock.wall_ms, nullptr, 0.0);
}
