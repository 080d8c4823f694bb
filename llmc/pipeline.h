// pipeline.h: the order in which a pipeline stage runs a step's micro-batches (-pp, -vp), as
// Megatron-LM schedules them. train_gpt_cpu (train_gpt.cpp: CpuBackend::pipeline_step) walks it,
// receiving each input from the stage before and each gradient from the stage after by MPI tag;
// the GPU trainers (llmc/gpu_backend.cuh) walk it in rounds (pipeline_rounds, below).
// defines: ScheduleStep, pipeline_schedule, pipeline_select_chunk, pipeline_check_micro_batches,
//          pipeline_in_flight, PipeMessage, PipeRound, pipeline_rounds, pipeline_round_sets
#pragma once
#include <algorithm>
#include <vector>

#include "utils.h"  // defines: CHECK, fail

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
// -pp: the model (the CPU's or a GPU one: run_lo, run_hi, pp_first, pp_last) runs chunk c of
// this stage's layers (-vp: virtual stage c pp + stage; one chunk, the stage, without -vp),
// chunks[c] to chunks[c + 1] among them, the first or last of the model's where it is
template <typename M>
inline void pipeline_select_chunk(M* model, const std::vector<int>& chunks, int c, int pp, int vp, int stage) {
    model->run_lo = chunks[c];
    model->run_hi = chunks[c + 1];
    const int v = c * pp + stage;
    model->pp_first = v == 0;
    model->pp_last = v == pp * vp - 1;
}
// -vp: the interleaved schedule takes the micro-batches pp at a time
inline void pipeline_check_micro_batches(int pp, int vp, int m) {
    if (vp > 1 && m % pp != 0)
        fail("flag -vp %d: the %d micro-batches of a step (-d / (-b x -t x data-parallel ranks)) are not a multiple "
             "of -pp %d, as the interleaved schedule needs", vp, m, pp);
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

// -pp on the GPU trainers (llmc/gpu_backend.cuh): NCCL's sends have no tags, the k-th send from
// one rank to another meets the other's k-th receive from it, and a send finishes only when its
// receive runs. The MPI tags that order the CPU trainer's messages are replaced by rounds: every
// stage runs the schedule's ops in order, each as early as its input allows, one op a round (the
// pipeline drawn with ops of equal length), and after round r's op a stage exchanges, in one NCCL
// group, every message a round-r op sent or will receive: each message is in the same round on
// both of its sides, so no round waits for a later one. A stage sends at most one message a
// round (its op's output or its input's gradient), so from one rank to another the k-th send
// meets the k-th receive even where, with -vp at pp 2, activations and gradients go both ways
// between the same two ranks (Megatron-LM asks for more than two stages when it interleaves).
struct PipeMessage {
    bool send;        // else a receive
    bool grad;        // the gradient of a virtual stage's input (backward), else its output (forward)
    int micro, chunk; // the micro-batch, and this stage's chunk that made it (send) or takes it (receive)
    int peer;         // the stage at the other end
};
struct PipeRound {
    bool has_op = false;  // a round of the bubble runs no op
    ScheduleStep op{};
    std::vector<PipeMessage> messages;
};
inline std::vector<PipeRound> pipeline_rounds(int pp, int vp, int stage, int m) {
    const int V = pp * vp;
    std::vector<std::vector<ScheduleStep>> sched(pp);
    for (int s = 0; s < pp; s++) sched[s] = pipeline_schedule(pp, vp, s, m);
    // the round each (virtual stage, micro-batch)'s forward and backward ran in; -1: not yet
    std::vector<int> fwd_round((size_t)V * m, -1), bwd_round((size_t)V * m, -1);
    std::vector<size_t> next(pp, 0);
    std::vector<PipeRound> out;
    size_t left = (size_t)pp * 2 * vp * m;
    for (int r = 0; left > 0; r++) {
        PipeRound round;
        bool progressed = false;
        // the ops that run in round r: each stage's next, when its input came in an earlier round
        for (int s = 0; s < pp; s++) {
            if (next[s] == sched[s].size()) continue;
            const ScheduleStep st = sched[s][next[s]];
            const int v = st.chunk * pp + s;
            auto done = [&](const std::vector<int>& at, int vs) {
                const int t = at[(size_t)vs * m + st.micro];
                return t >= 0 && t < r;
            };
            bool ready = st.forward ? (v == 0 || done(fwd_round, v - 1)) : (v == V - 1 || done(bwd_round, v + 1));
            if (!ready) continue;
            (st.forward ? fwd_round : bwd_round)[(size_t)v * m + st.micro] = r;
            next[s]++;
            left--;
            progressed = true;
            if (s == stage) {
                round.has_op = true;
                round.op = st;
            }
            const int to = st.forward ? v + 1 : v - 1;  // the virtual stage it feeds
            if (to < 0 || to >= V) continue;
            if (s == stage) round.messages.push_back({true, !st.forward, st.micro, st.chunk, to % pp});
            if (to % pp == stage) round.messages.push_back({false, !st.forward, st.micro, to / pp, s});
        }
        CHECK(progressed, "pipeline_rounds: pp=%d vp=%d m=%d: no stage can run in round %d", pp, vp, m, r);
        out.push_back(std::move(round));
    }
    return out;
}
// the activation sets the rounds need at once on their stage: a micro-batch holds one from the
// first message or op that touches it to its first chunk's backward
inline int pipeline_round_sets(const std::vector<PipeRound>& rounds, int m) {
    std::vector<char> open(m, 0);
    int count = 0, most = 0;
    auto touch = [&](int i) {
        if (!open[i]) open[i] = 1, count++;
        most = std::max(most, count);
    };
    for (const PipeRound& r : rounds) {
        if (r.has_op) touch(r.op.micro);
        for (const PipeMessage& x : r.messages) touch(x.micro);
        if (r.has_op && !r.op.forward && r.op.chunk == 0) open[r.op.micro] = 0, count--;
    }
    return most;
}
