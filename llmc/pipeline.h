// pipeline.h: the order in which a pipeline stage runs a step's micro-batches (-pp, -vp), as
// Megatron-LM schedules them. The trainer (train_gpt.cpp: CpuBackend::pipeline_step) walks it,
// receiving each input from the stage before and each gradient from the stage after.
// defines: ScheduleStep, pipeline_schedule, pipeline_in_flight
#pragma once
#include <algorithm>
#include <vector>

// -pp: the schedule of a step's m micro-batches on pipeline stage `stage` of pp with vp chunks
// a stage, as Megatron-LM orders them: the k-th forward runs chunk (k / pp) % vp of
// micro-batch (k / (pp vp)) pp + k % pp, the k-th backward the same micro-batch's chunk
// vp - 1 - (k / pp) % vp; `warm` forwards run ahead, then one forward and one backward at a
// time. vp 1: 1F1B (PipeDream-Flush), stage s pp - s - 1 forwards ahead; vp > 1: interleaved
// 1F1B, 2 (pp - s - 1) + (vp - 1) pp ahead (all of them when m is pp).
struct ScheduleStep {
    bool forward;
    int chunk, micro;
};
inline std::vector<ScheduleStep> pipeline_schedule(int pp, int vp, int stage, int m) {
    const int total = m * vp;
    auto micro = [&](int k) { return (k / (pp * vp)) * pp + k % pp; };
    int warm = vp == 1 ? pp - stage - 1 : (m == pp ? total : 2 * (pp - stage - 1) + (vp - 1) * pp);
    warm = std::min(warm, total);
    std::vector<ScheduleStep> out;
    int nf = 0, nb = 0;
    auto f = [&] { out.push_back({true, (nf / pp) % vp, micro(nf)}); nf++; };
    auto b = [&] { out.push_back({false, vp - 1 - (nb / pp) % vp, micro(nb)}); nb++; };
    while (nf < warm) f();
    while (nf < total) {
        f();
        b();
    }
    while (nb < total) b();
    return out;
}
// the most micro-batches whose activations the schedule keeps at once (from the first chunk's
// forward to its backward): the activation sets a stage allocates
inline int pipeline_in_flight(const std::vector<ScheduleStep>& sched) {
    int open = 0, most = 0;
    for (const ScheduleStep& st : sched) {
        if (st.chunk == 0) open += st.forward ? 1 : -1;
        most = std::max(most, open);
    }
    return most;
}
