// phases.cuh: where a training step's time goes on the GPU (-pb 1): the trainer records a CUDA
// event on its stream wherever one phase of the step gives way to the next (gpt2_cuda.cuh's
// forward, backward and update, the gradient wait), and after each step adds the time between
// consecutive events to the phase that began at the first of them. Idle time on the stream
// between two events (the host not keeping up) counts towards the phase before it; the time
// before the step's first event and after its last (host work, synchronization) is reported
// apart, as the step's wall time minus the events' span.
// defines: PhaseTimer, phase_mark, phase_step_begin, phase_step_end, phase_report,
//          phase_timer_free
#pragma once
#include <cstdio>
#include <vector>

#include "common.cuh"    // defines: CudaContext, CHECK_CUDA
#include "../phases.h"  // defines: Phase, phase_name, phase_table_print

struct PhaseTimer {
    std::vector<cudaEvent_t> events;  // a pool; the first `used` are this step's marks
    std::vector<int> phases;          // the phase that starts at each mark
    size_t used = 0;
    double ms[NUM_PHASES] = {};       // summed over the counted steps
    double span_ms = 0.0, wall_ms = 0.0;
    int steps = 0;
};

// From here on the stream runs phase p (nothing when ctx has no timer).
inline void phase_mark(const CudaContext& ctx, Phase p) {
    PhaseTimer* t = ctx.phases;
    if (t == nullptr) return;
    if (t->used == t->events.size()) {
        cudaEvent_t e;
        CHECK_CUDA(cudaEventCreate(&e));
        t->events.push_back(e);
        t->phases.push_back(0);
    }
    CHECK_CUDA(cudaEventRecord(t->events[t->used], ctx.stream));
    t->phases[t->used++] = p;
}

// A step starts: marks from before (evaluation, sampling) do not count.
inline void phase_step_begin(const CudaContext& ctx) {
    if (ctx.phases != nullptr) ctx.phases->used = 0;
}

// The step is over (its work done; wall_ms measured by the host): its marks join the sums,
// unless count is false (the first step, which warms up).
inline void phase_step_end(const CudaContext& ctx, double wall_ms, bool count) {
    PhaseTimer* t = ctx.phases;
    if (t == nullptr) return;
    if (count && t->used >= 2) {
        CHECK_CUDA(cudaEventSynchronize(t->events[t->used - 1]));
        for (size_t i = 0; i + 1 < t->used; i++) {
            float ms = 0.0f;
            CHECK_CUDA(cudaEventElapsedTime(&ms, t->events[i], t->events[i + 1]));
            t->ms[t->phases[i]] += ms;
        }
        float span = 0.0f;
        CHECK_CUDA(cudaEventElapsedTime(&span, t->events[0], t->events[t->used - 1]));
        t->span_ms += span;
        t->wall_ms += wall_ms;
        t->steps++;
    }
    t->used = 0;
}

// The table: ms per step and share of the step's wall time, per phase.
inline void phase_report(const PhaseTimer& t) {
    phase_table_print("CUDA events; idle stream time counts towards the phase before it", t.ms, t.steps,
                      t.wall_ms, "host, outside events", t.wall_ms - t.span_ms);
}

inline void phase_timer_free(PhaseTimer* t) {
    for (cudaEvent_t e : t->events) CHECK_CUDA(cudaEventDestroy(e));
    t->events.clear();
    t->phases.clear();
    t->used = 0;
}
