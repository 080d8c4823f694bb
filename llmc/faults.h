// faults.h: what keeps a run alive, shared by both trainers. Preemption (SIGTERM, SIGINT,
// SIGUSR1 ask the trainer to finish the step, checkpoint and exit 0), the step guard that
// skips an update whose loss or gradient norm is non-finite or an outlier (llm.c's -sl/-sg
// z-score detectors over the last 128 values), the finite-weights check that keeps a bad
// model out of a checkpoint, and the fault-injection test hook (GPTRAIN_FAULT_INJECT).
// defines: preempt_install_handlers, preempt_signal, signal_name, OutlierDetector,
//          outlier_detector_update, StepGuard, StepVerdict, step_guard_judge,
//          step_guard_save, step_guard_load, weights_find_nonfinite, FaultInject,
//          fault_inject_from_env, fault_inject_fire, fault_inject_write_pause_ms
#pragma once
#include <signal.h>
#include <unistd.h>
#include <cmath>
#include <string>
#include <vector>

#include "utils.h"  // defines: fail, parse_int
#include "model.h"  // defines: ParamTensor

// ---------------------------------------------------------------------------------------
// Preemption. A signal handler can reach nothing but static storage, so this flag is the
// one piece of global state in gptrain; it is only ever set here and read through
// preempt_signal(). The handler is async-signal-safe: it stores an int and calls write(2).
inline volatile sig_atomic_t preempt_signal_received = 0;

inline void preempt_handler(int sig) {
    if (preempt_signal_received == 0) {
        preempt_signal_received = sig;
        static const char msg[] = "\nsignal received: finishing this step, then checkpointing and exiting\n";
        ssize_t r = write(STDERR_FILENO, msg, sizeof(msg) - 1);
        (void)r;
    } else {
        // a second signal must not interrupt the save: the files are written atomically,
        // and the trainer exits as soon as they are on disk (SIGKILL still works)
        static const char msg[] = "signal received again: still saving, exiting when the checkpoint is on disk\n";
        ssize_t r = write(STDERR_FILENO, msg, sizeof(msg) - 1);
        (void)r;
    }
}

// SIGTERM (cluster preemption, `kill`), SIGINT (Ctrl-C), SIGUSR1 (Slurm's --signal).
// SA_RESTART: a write or fsync that the signal interrupts is restarted, not failed.
inline void preempt_install_handlers() {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = preempt_handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    const int sigs[] = {SIGTERM, SIGINT, SIGUSR1};
    for (int s : sigs)
        if (sigaction(s, &sa, nullptr) != 0) fail("sigaction(%d) failed (%s)", s, strerror(errno));
}

// The signal that asked this process to stop, or 0. With several processes the trainer
// must all-reduce (max) this value before acting on it, so every rank stops at the same step.
inline int preempt_signal() { return preempt_signal_received; }

inline const char* signal_name(int sig) {
    switch (sig) {
        case SIGTERM: return "SIGTERM";
        case SIGINT: return "SIGINT";
        case SIGUSR1: return "SIGUSR1";
        default: return "signal";
    }
}

// ---------------------------------------------------------------------------------------
// Outlier detection, as llm.c's outlier_detector.h: a window of the last 128 values with
// running sums. Until the window is full the z-score is NaN (never an outlier); after that
// it is the new value's z-score against the window that includes it. The running sums are
// part of the resume state: recomputing them from the window would round differently.
enum { OUTLIER_WINDOW = 128 };

struct OutlierDetector {
    double buffer[OUTLIER_WINDOW] = {0};
    int count = 0;      // values seen, up to OUTLIER_WINDOW
    int index = 0;      // the oldest value once the window is full
    double sum = 0.0, sum_sq = 0.0;
};

inline double outlier_detector_update(OutlierDetector* d, double x) {
    if (d->count < OUTLIER_WINDOW) {
        d->buffer[d->count++] = x;
        d->sum += x;
        d->sum_sq += x * x;
        return NAN;  // not enough data yet
    }
    double old = d->buffer[d->index];
    d->sum -= old;
    d->sum_sq -= old * old;
    d->buffer[d->index] = x;
    d->sum += x;
    d->sum_sq += x * x;
    d->index = (d->index + 1) % OUTLIER_WINDOW;
    double mean = d->sum / OUTLIER_WINDOW;
    double var = d->sum_sq / OUTLIER_WINDOW - mean * mean;
    double sd = std::sqrt(var);
    if (sd == 0.0) return 0.0;
    return (x - mean) / sd;
}

// ---------------------------------------------------------------------------------------
// The step guard: decides whether this step's update is applied.
enum StepVerdict {
    STEP_VERDICT_UPDATE,        // apply the AdamW step
    STEP_VERDICT_NONFINITE,     // loss or gradient norm is NaN/inf: skip, counts toward -fk
    STEP_VERDICT_LOSS_OUTLIER,  // loss z-score above -sl: skip
    STEP_VERDICT_GRAD_OUTLIER,  // grad-norm z-score above -sg: skip
};

inline const char* step_verdict_name(StepVerdict v) {
    switch (v) {
        case STEP_VERDICT_NONFINITE: return "nonfinite";
        case STEP_VERDICT_LOSS_OUTLIER: return "loss_outlier";
        case STEP_VERDICT_GRAD_OUTLIER: return "grad_outlier";
        default: return "";
    }
}

struct StepGuard {
    OutlierDetector loss, grad_norm;
    long long bad_streak = 0;         // consecutive non-finite steps up to now
    long long skipped_nonfinite = 0;  // totals over the run (resumes included)
    long long skipped_outlier = 0;
    double zloss = NAN, zgrad = NAN;  // this step's z-scores (NaN until the window is full)
};

// Non-finite values never enter the windows (one NaN would poison the running sums for
// good, which llm.c's detector allows); every finite value does, skipped or not, as in llm.c.
// skip_loss_z / skip_grad_z: -sl / -sg, 0 disables. With several processes, loss and
// grad_norm must be the all-reduced values, so that every rank reaches the same verdict.
inline StepVerdict step_guard_judge(StepGuard* g, float loss, float grad_norm, float skip_loss_z,
                                    float skip_grad_z) {
    g->zloss = g->zgrad = NAN;
    if (!std::isfinite(loss) || !std::isfinite(grad_norm)) {
        g->bad_streak++;
        g->skipped_nonfinite++;
        return STEP_VERDICT_NONFINITE;
    }
    g->bad_streak = 0;
    g->zloss = outlier_detector_update(&g->loss, loss);
    g->zgrad = outlier_detector_update(&g->grad_norm, grad_norm);
    StepVerdict v = STEP_VERDICT_UPDATE;
    // a NaN z-score (window not full) compares false: never an outlier
    if (skip_loss_z != 0.0f && g->zloss > skip_loss_z) v = STEP_VERDICT_LOSS_OUTLIER;
    else if (skip_grad_z != 0.0f && g->zgrad > skip_grad_z) v = STEP_VERDICT_GRAD_OUTLIER;
    if (v != STEP_VERDICT_UPDATE) g->skipped_outlier++;
    return v;
}

// The guard as the doubles of the state file's optional step-guard section (every count is
// far below 2^53, so exact): [format 1, window, bad_streak, skipped_nonfinite,
// skipped_outlier, then per detector (loss, grad norm): count, index, sum, sum_sq, buffer].
enum { STEP_GUARD_FORMAT = 1, STEP_GUARD_DOUBLES = 5 + 2 * (4 + OUTLIER_WINDOW) };

inline std::vector<double> step_guard_save(const StepGuard& g) {
    std::vector<double> out = {(double)STEP_GUARD_FORMAT, (double)OUTLIER_WINDOW, (double)g.bad_streak,
                               (double)g.skipped_nonfinite, (double)g.skipped_outlier};
    for (const OutlierDetector* d : {&g.loss, &g.grad_norm}) {
        out.push_back(d->count);
        out.push_back(d->index);
        out.push_back(d->sum);
        out.push_back(d->sum_sq);
        out.insert(out.end(), d->buffer, d->buffer + OUTLIER_WINDOW);
    }
    return out;
}

// Returns "" if the section was sound and is now in *g, else the problem (*g is untouched).
inline std::string step_guard_load(StepGuard* g, const std::vector<double>& in) {
    if (in.size() != STEP_GUARD_DOUBLES || in[0] != STEP_GUARD_FORMAT || in[1] != OUTLIER_WINDOW)
        return "step-guard section of an unknown layout (" + std::to_string(in.size()) + " values)";
    StepGuard r;
    r.bad_streak = (long long)in[2];
    r.skipped_nonfinite = (long long)in[3];
    r.skipped_outlier = (long long)in[4];
    size_t at = 5;
    for (OutlierDetector* d : {&r.loss, &r.grad_norm}) {
        d->count = (int)in[at];
        d->index = (int)in[at + 1];
        d->sum = in[at + 2];
        d->sum_sq = in[at + 3];
        if (d->count < 0 || d->count > OUTLIER_WINDOW || d->index < 0 || d->index >= OUTLIER_WINDOW)
            return "step-guard section: corrupt detector position";
        for (int i = 0; i < OUTLIER_WINDOW; i++) d->buffer[i] = in[at + 4 + i];
        at += 4 + OUTLIER_WINDOW;
    }
    *g = r;
    return "";
}

// ---------------------------------------------------------------------------------------
// Non-finite weights never go into a checkpoint. Returns the tensor holding the first
// non-finite value of params (laid out by the table) and its index in *index, or nullptr.
inline const char* weights_find_nonfinite(const float* params, size_t n, const ParamTensor* tensors, int count,
                                          size_t* index) {
    size_t first = n;
    #pragma omp parallel for reduction(min : first)
    for (size_t i = 0; i < n; i++)
        if (!std::isfinite(params[i]) && i < first) first = i;
    if (first == n) return nullptr;
    ParamLayout table;
    table.tensors = tensors;
    table.count = count;
    const ParamTensor& t = table.tensor_at(first);
    *index = first - t.offset;
    return t.name;
}

// ---------------------------------------------------------------------------------------
// TEST HOOK, read in this one place: GPTRAIN_FAULT_INJECT="kind@STEP[-LAST],..." poisons the
// training step(s) logged as s:STEP (0-based). Kinds: nan_loss (the step's loss is NaN),
// nan_grad (one gradient is NaN, so the norm is), nan_weight (one weight is NaN after the
// step's update), spike_loss / spike_grad (the loss / grad norm the detectors see is x100).
// Each item fires once per process, as a transient hardware fault would: a step that runs
// again after a reload of the last good checkpoint runs clean. Unset in real runs.
// rank_exit / rank_hang act on the last rank of a multi-process run only: it exits (status 3)
// or stops answering at the start of the step, and the other ranks must notice.
// slow_write@MS and slow_step@MS are no step faults but pauses (fault_inject_pause_ms):
// every file written through AtomicFile (llmc/checkpoint.h) pauses MS milliseconds once its
// data is on disk, before the rename, so that a test's kill -9 lands inside checkpoint
// writes; every training step pauses MS milliseconds after it is logged, so that a GPU,
// whose small test runs take a millisecond a step, leaves a test's signals and kills time
// to land mid-run.
enum FaultKind { FAULT_NAN_LOSS, FAULT_NAN_GRAD, FAULT_NAN_WEIGHT, FAULT_SPIKE_LOSS, FAULT_SPIKE_GRAD,
                 FAULT_RANK_EXIT, FAULT_RANK_HANG, FAULT_SLOW_WRITE, FAULT_SLOW_STEP, FAULT_KINDS };
inline constexpr const char* FAULT_KIND_NAMES[FAULT_KINDS] = {
    "nan_loss", "nan_grad", "nan_weight", "spike_loss", "spike_grad", "rank_exit", "rank_hang", "slow_write", "slow_step"};

struct FaultInject {
    struct Entry { FaultKind kind = FAULT_KINDS; long long first = 0, last = 0; std::vector<bool> fired; };
    std::vector<Entry> entries;
};

inline FaultInject fault_inject_from_env() {
    FaultInject fi;
    const char* env = getenv("GPTRAIN_FAULT_INJECT");
    if (env == nullptr || *env == '\0') return fi;
    std::string spec = env;
    size_t start = 0;
    while (start <= spec.size()) {
        size_t end = spec.find(',', start);
        if (end == std::string::npos) end = spec.size();
        std::string item = spec.substr(start, end - start);
        size_t at = item.find('@');
        std::string kind = item.substr(0, at == std::string::npos ? item.size() : at);
        std::string steps = at == std::string::npos ? "" : item.substr(at + 1);
        size_t dash = steps.find('-');
        FaultInject::Entry e;
        for (int k = 0; k < FAULT_KINDS; k++)
            if (kind == FAULT_KIND_NAMES[k]) e.kind = (FaultKind)k;
        bool ok = e.kind != FAULT_KINDS && parse_int(steps.substr(0, dash).c_str(), 0, 2000000000, &e.first);
        e.last = e.first;
        if (ok && dash != std::string::npos)
            ok = parse_int(steps.substr(dash + 1).c_str(), e.first, 2000000000, &e.last);
        if (!ok)
            fail("GPTRAIN_FAULT_INJECT: bad item '%s' (kind@STEP or kind@FIRST-LAST; kinds: nan_loss nan_grad "
                 "nan_weight spike_loss spike_grad rank_exit rank_hang slow_write slow_step)", item.c_str());
        e.fired.assign((size_t)(e.last - e.first + 1), false);
        fi.entries.push_back(e);
        start = end + 1;
    }
    fprintf(stderr, "warning: GPTRAIN_FAULT_INJECT=%s: test hook active, this run is poisoned on purpose\n", env);
    return fi;
}

// True if fault `kind` is to be injected at `step`, and prints so. Each call uses up one
// matching item, so naming a step twice ("nan_loss@5,nan_loss@5") makes its fault come back
// once after a reload: a fault that repeats.
inline bool fault_inject_fire(FaultInject* fi, FaultKind kind, int step) {
    for (FaultInject::Entry& e : fi->entries) {
        if (e.kind != kind || step < e.first || step > e.last || e.fired[step - e.first]) continue;
        e.fired[step - e.first] = true;
        printf("fault injection: %s at step %d\n", FAULT_KIND_NAMES[kind], step);
        return true;
    }
    return false;
}

// slow_write@MS / slow_step@MS (kind FAULT_SLOW_WRITE or FAULT_SLOW_STEP): the pause in
// milliseconds, 0 when not asked for. Read from the environment, as where a file is written
// there is no FaultInject at hand; fault_inject_from_env has already rejected a malformed
// item at startup.
inline int fault_inject_pause_ms(FaultKind kind) {
    const char* env = getenv("GPTRAIN_FAULT_INJECT");
    std::string key = std::string(FAULT_KIND_NAMES[kind]) + "@";
    const char* at = env == nullptr ? nullptr : strstr(env, key.c_str());
    return at == nullptr ? 0 : atoi(at + key.size());
}
