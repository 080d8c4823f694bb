// train_loop.h: the training loop, one implementation for the CPU trainer (train_gpt.cpp) and
// the GPU trainer (train_gpt.cu): validate, sample, checkpoint (pruning old ones, -nk), one
// optimizer step over the micro-batches, the step guard's verdict, the step line, the logs,
// the -fk reload of the last good checkpoint, preemption and the final summary. What differs
// between the trainers is a Backend, a small struct in each main with these members:
//   float micro_step(inputs, targets, B, T, dloss, last_micro)
//                                                  forward + backward of one micro-batch,
//                                                  gradients accumulate; returns its mean loss.
//                                                  With several ranks the backward starts each
//                                                  layer's reduction as it finishes the layer
//                                                  (ZeRO 2: every micro-step; else the last)
//   void reduce_grads(bool last_micro)              waits for that communication to end
//   float eval_loss(inputs, targets, B, T)          forward only; the batch's mean loss
//   const float* token_losses(inputs, targets, B, T) forward only; the loss at each position (B*T)
//   const float* last_logits(tokens, ctx)           forward of one row of ctx tokens; the
//                                                  logits (Vp floats) of the last position
//   float grad_norm()                               the global norm of the reduced gradients
//   void update(lr, wd, clip_scale, t)              AdamW on this rank's values, then (ZeRO >= 1)
//                                                  the all-gather of the updated parameters
//   void zero_grad()
//   void sync()                                     waits for queued device work (the timer)
//   void poison_grad(); void poison_weight()        TEST HOOK: one gradient / weight := NaN
//   void write_checkpoint(dir, step, state)         refuses non-finite weights, then writes the
//                                                  model file (rank 0) and this rank's state file
//   void load_state(dir, step, &state)              this rank's AdamW moments (+ master weights),
//                                                  from however many state files, and rank 0's header
//   void load_weights(path)                         the weights of a checkpoint's model file
//   void step_done(step)                            after each timed step (peak memory)
//   std::string step_column(tok_s)                  the step line's device column
//   std::string summary_extras(tok_s)               after the summary's tok/s (-1: none timed)
//   std::string step_metrics(tok_s)                 more fields for the step's metrics.jsonl record
//                                                  ("" or ',"mfu":0.52,"watts":310.2,...')
//   double energy_joules()                          the job's energy since the start (all ranks;
//                                                  a collective), -1 if not measured
//   int vocab_size(); size_t num_parameters()
// defines: train_loop
#pragma once
#include <string>

#include "args.h"          // defines: TrainConfig
#include "checkpoint.h"    // defines: checkpoint_path, checkpoint_prune, checkpoint_mark_done, TrainState
#include "dataloader.h"    // defines: DataLoader, dataloader_reset, dataloader_next_batch, dataloader_set_state
#include "schedule.h"      // defines: LRSchedule, lr_schedule_get
#include "logger.h"        // defines: Logger, logger_init, logger_log_val, logger_close
#include "tokenizer.h"     // defines: Tokenizer
#include "gpt2.h"          // defines: grad_clip_scale
#include "faults.h"        // defines: StepGuard, step_guard_judge, FaultInject, fault_inject_fire
#include "train_common.h"  // defines: TrainData, train_state_make, sample_text, train_log_step, ...
#include "comm.h"          // defines: Comm, comm_sum, comm_barrier
#include "hellaswag.h"     // defines: EvalSet, evalset_load, EvalRows, evalset_rows_fill, evalset_rows_score

// Mean loss over num_batches validation batches from the start of the val split (each rank
// evaluates its slice of every batch; the mean is over all of them).
// loss_ranks: the ranks whose eval_loss is a loss (-pp: the last stage's; the others give 0).
template <typename Backend>
float train_validate(Backend& be, DataLoader* val, int num_batches, Comm* comm, int loss_ranks) {
    dataloader_reset(val);
    double sum = 0.0;
    for (int i = 0; i < num_batches; i++) {
        dataloader_next_batch(val);
        sum += be.eval_loss(val->inputs, val->targets, val->B, val->T);
    }
    return (float)(comm_sum(comm, sum) / ((double)num_batches * loss_ranks));
}

// HellaSwag accuracy: each of `replicas` model replicas scores a contiguous share of the
// examples, B rows per forward; the counts of right choices are summed over ranks, each
// replica's once (counts: this rank's enters the sum). *correct gets the sum. Without -tp and
// -pp a replica is a rank. lockstep (ZeRO 3, -tp, -pp, whose forwards talk to other ranks):
// every rank runs as many forwards as the replica with the most, the extra ones over its first
// rows again, their scores dropped.
template <typename Backend>
float train_hellaswag(Backend& be, const EvalSet& set, int B, Comm* comm, int* correct, bool lockstep, int replica,
                      int replicas, bool counts) {
    int num = (int)set.examples.size();
    int per = (num + replicas - 1) / replicas;
    auto share = [&](int r, int* begin, int* end) {
        *begin = std::min(num, r * per);
        *end = std::min(num, *begin + per);
    };
    int begin, end;
    share(replica, &begin, &end);
    int forwards = 0;  // lockstep: the most forwards any replica's share needs
    EvalRows rows;
    for (int r = 0; lockstep && r < replicas; r++) {
        int b, e, count = 0;
        share(r, &b, &e);
        for (EvalCursor at = {b, 0}; evalset_rows_fill(set, e, &at, B, &rows) > 0;) count++;
        forwards = std::max(forwards, count);
    }
    std::vector<std::vector<double>> scores(num);
    for (int e = begin; e < end; e++) scores[e].assign(set.examples[e].completions.size(), 0.0);
    EvalCursor at = {begin, 0};
    for (; evalset_rows_fill(set, end, &at, B, &rows) > 0; forwards--)
        evalset_rows_score(set, rows, be.token_losses(rows.inputs.data(), rows.targets.data(), rows.B, rows.T), &scores);
    for (EvalCursor again = {0, 0}; forwards > 0 && evalset_rows_fill(set, num, &again, B, &rows) > 0; forwards--)
        be.token_losses(rows.inputs.data(), rows.targets.data(), rows.B, rows.T);
    double right = 0.0;
    for (int e = begin; e < end && counts; e++) right += evalset_choice(scores[e]) == set.examples[e].label;
    *correct = (int)comm_sum(comm, right);
    return (float)*correct / (float)num;
}

// Trains from resume_step's checkpoint (-1: the weights the backend holds) to data.num_steps;
// returns the exit status (0, or what train_preempt_exit says for a preempted run). The
// logger lives here; the caller frees the data, tokenizer and model afterwards.
template <typename Backend>
int train_loop(Backend& be, const TrainConfig& cfg, TrainData& data, const Tokenizer* tokenizer,
               const LRSchedule& sched, FaultInject* inject, int resume_step, Comm* comm) {
    const std::string& dir = cfg.output_dir;
    const int rank = comm->rank, world = comm->world;
    const int B = cfg.B, T = cfg.T, num_steps = data.num_steps, grad_accum = data.grad_accum;
    const size_t n = be.num_parameters();
    // ZeRO 3: a forward gathers its layers from every rank, so every rank runs each one: the
    // samples too (rank 0 prints them), and the HellaSwag forwards in step
    // -tp and -pp likewise: a tensor-parallel group runs every forward together, a pipeline
    // passes it from stage to stage
    const bool lockstep = world > 1 && (cfg.zero_stage == 3 || cfg.tensor_parallel > 1 || cfg.pipeline_parallel > 1);
    // the ranks that report a loss: the last pipeline stage's (every rank without -pp)
    const int loss_ranks = world / cfg.pipeline_parallel;

    // --- resume the optimizer, data position, RNG and step guard (also after -fk faults)
    int step = 0;
    uint64_t sample_rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)cfg.seed;
    StepGuard guard;
    auto restore_state = [&](int from) {
        std::string path = checkpoint_path(dir, "state", from, 0);
        TrainState s;
        be.load_state(dir, from, &s);
        train_state_check(s, path, n, cfg, world / (cfg.tensor_parallel * cfg.pipeline_parallel));  // data-parallel
        dataloader_set_state(&data.train, {s.dl_epoch, s.dl_shard_pos, s.dl_sample_pos});
        sample_rng = s.sample_rng;
        train_state_restore_guard(&guard, s, path, cfg);
        step = (int)s.step;
        printf("resumed from %s at step %d\n", checkpoint_path(dir, "model", step).c_str(), step);
    };
    if (resume_step >= 0) {
        restore_state(resume_step);
        // what a kill during the last run's checkpoint write or -nk deletion left behind
        if (rank == 0) checkpoint_prune(dir, cfg.checkpoints_keep, cfg.checkpoint_major);
    }
    Logger logger;  // main.log and metrics.jsonl: rank 0 writes them
    EvalSet hellaswag;
    if (cfg.hellaswag) {
        evalset_load(&hellaswag, cfg.hellaswag_path.c_str(), be.vocab_size(), T);
        printf("HellaSwag: %zu examples, %zu rows of context + completion, from %s\n", hellaswag.examples.size(),
               hellaswag.rows, cfg.hellaswag_path.c_str());
    }
    const std::string log_dir = rank == 0 ? dir : "";
    logger_init(&logger, log_dir, resume_step);
    int checkpointed = resume_step;  // the step of the newest checkpoint on disk from this run (-1: none)
    auto write_checkpoint = [&]() {
        be.write_checkpoint(dir, step, train_state_make(step, rank, world, n, &data.train, cfg, sample_rng, guard));
        comm_barrier(comm);  // every rank's files are on disk: now the checkpoint exists
        if (rank == 0) checkpoint_mark_done(dir, step, world);
        checkpointed = step;
        printf("checkpoint: %s\n", checkpoint_path(dir, "model", step).c_str());
    };

    // --- the loop: step counts optimizer steps done; the last iteration only evaluates
    bool just_resumed = resume_step >= 0;
    double train_seconds = 0.0, run_start = now_seconds();
    int timed_steps = 0;
    long long tokens_done = (long long)step * cfg.total_batch;
    float last_val = -1.0f, last_loss = -1.0f, best_val = -1.0f, last_eval = -1.0f;
    int best_val_step = -1, last_eval_correct = 0, target_step = -1;
    double target_wall = 0.0;
    bool preempted = false;
    int last_reload = -1;
    const int slow_step_ms = fault_inject_pause_ms(FAULT_SLOW_STEP);  // TEST HOOK, 0 in real runs
    for (; step <= num_steps; step++) {
        if ((preempted = train_preempt_requested(comm))) break;
        bool last = step == num_steps;
        bool evaluate = (cfg.val_every > 0 && step % cfg.val_every == 0) || last;
        if (data.do_val && evaluate) {
            last_val = train_validate(be, &data.val, data.val_batches, comm, loss_ranks);
            printf("val loss %f\n", last_val);
            logger_log_val(&logger, step, last_val);
            if (best_val < 0 || last_val < best_val) { best_val = last_val; best_val_step = step; }
            // time to target (MLPerf style): the run ends here, checkpointed and summarized
            if (cfg.target_val_loss > 0 && last_val <= cfg.target_val_loss) {
                target_step = step;
                target_wall = now_seconds() - run_start;
                printf("target val loss %g reached at step %d: %.2f s since the start of training, %lld tokens\n",
                       cfg.target_val_loss, step, target_wall, tokens_done);
                char detail[96];
                snprintf(detail, sizeof(detail), "val loss %.6g <= %g after %.3f s", last_val, cfg.target_val_loss,
                         target_wall);
                train_log_event(&logger, step, "target_reached", detail);
                last = true;
            }
        }
        if (cfg.hellaswag && evaluate) {
            // a replica is tp x pp ranks (the data-parallel rank outermost); its last stage's
            // tensor-parallel rank 0 counts
            const int model_ranks = cfg.tensor_parallel * cfg.pipeline_parallel;
            last_eval = train_hellaswag(be, hellaswag, B, comm, &last_eval_correct, lockstep, rank / model_ranks,
                                        world / model_ranks,
                                        rank % model_ranks == (cfg.pipeline_parallel - 1) * cfg.tensor_parallel);
            printf("HellaSwag: %d/%zu = %.4f\n", last_eval_correct, hellaswag.examples.size(), last_eval);
            logger_log_eval(&logger, step, last_eval, last_eval_correct, (int)hellaswag.examples.size());
        }
        if ((rank == 0 || lockstep) && cfg.sample_every > 0 && ((step > 0 && step % cfg.sample_every == 0) || last))
            sample_text(cfg, tokenizer, be.vocab_size(), T, &sample_rng,
                        [&](const int* tokens, int ctx) { return be.last_logits(tokens, ctx); });
        if (cfg.checkpoint_every > 0 && !dir.empty() && !just_resumed && step > 0 &&
            (step % cfg.checkpoint_every == 0 || last)) {
            write_checkpoint();
            if (rank == 0) checkpoint_prune(dir, cfg.checkpoints_keep, cfg.checkpoint_major);
        }
        just_resumed = false;
        if (last) break;
        if ((preempted = train_preempt_requested(comm))) break;
        if (world > 1 && rank == world - 1) {
            if (fault_inject_fire(inject, FAULT_RANK_EXIT, step)) exit(3);
            if (fault_inject_fire(inject, FAULT_RANK_HANG, step)) for (;;) sleep(1000);
        }

        // one optimizer step over grad_accum micro-batches on each of the world ranks; the
        // gradients are scaled so that their sum over ranks is the mean over the whole batch
        be.sync();
        double t0 = now_seconds();
        double loss_sum = 0.0;
        float dloss = 1.0f / ((float)B * T * grad_accum * (world / (cfg.tensor_parallel * cfg.pipeline_parallel)));  // the data-parallel ranks' batches
        for (int micro = 0; micro < grad_accum; micro++) {
            if (!cfg.overfit_batch || (step == 0 && micro == 0)) dataloader_next_batch(&data.train);
            bool last_micro = micro == grad_accum - 1;
            loss_sum += be.micro_step(data.train.inputs, data.train.targets, B, T, dloss, last_micro);
            be.reduce_grads(last_micro);
        }
        float loss = (float)(comm_sum(comm, loss_sum) / ((double)grad_accum * loss_ranks));
        if (fault_inject_fire(inject, FAULT_NAN_LOSS, step)) loss = NAN;
        if (fault_inject_fire(inject, FAULT_SPIKE_LOSS, step)) loss *= 100.0f;
        if (fault_inject_fire(inject, FAULT_NAN_GRAD, step)) be.poison_grad();
        float lr = lr_schedule_get(sched, step);
        float norm = be.grad_norm();
        if (fault_inject_fire(inject, FAULT_SPIKE_GRAD, step)) norm *= 100.0f;
        // a non-finite or outlier step leaves weights and AdamW moments as they were
        StepVerdict verdict = step_guard_judge(&guard, loss, norm, cfg.skip_loss_z, cfg.skip_grad_z);
        if (verdict == STEP_VERDICT_UPDATE) be.update(lr, cfg.weight_decay, grad_clip_scale(norm, 1.0f), step + 1);
        if (fault_inject_fire(inject, FAULT_NAN_WEIGHT, step)) be.poison_weight();
        be.zero_grad();
        be.sync();
        double dt = now_seconds() - t0;
        be.step_done(step);

        tokens_done += cfg.total_batch;
        if (step > 0 || num_steps == 1) { train_seconds += dt; timed_steps++; }
        double tok_s = cfg.total_batch / dt;
        double eta = (timed_steps > 0 ? train_seconds / timed_steps : dt) * (num_steps - step - 1);
        printf("step %5d/%d | loss %.6f | norm %.4f | lr %.2e | %.1f ms | %.0f tok/s | %s | ETA %s%s\n", step + 1,
               num_steps, loss, norm, lr, dt * 1000, tok_s, be.step_column(tok_s).c_str(),
               format_duration(eta).c_str(), train_step_note(verdict, guard, cfg).c_str());
        fflush(stdout);
        train_log_step(&logger, step, loss, lr, norm, dt * 1000, tok_s, tokens_done, verdict, guard,
                       be.step_metrics(tok_s));
        if (verdict == STEP_VERDICT_UPDATE) last_loss = loss;
        if (slow_step_ms > 0) usleep((useconds_t)slow_step_ms * 1000);  // TEST HOOK (slow_step)

        // -fk non-finite steps in a row: back to the last good checkpoint, as a resume would
        // (logs cut back to it, so they tell the history of the weights in hand)
        if (guard.bad_streak >= cfg.fault_streak) {
            int from = train_fault_reload_step(cfg, guard, step, comm, last_reload);
            last_reload = from;
            be.load_weights(checkpoint_path(dir, "model", from));
            restore_state(from);
            tokens_done = (long long)step * cfg.total_batch;
            logger_close(&logger);
            logger_init(&logger, dir, from);
            checkpointed = from;
            just_resumed = true;
            step--;  // the loop's step++ lands back on the checkpoint's step
        }
    }
    if (preempted) {
        // finish the step in progress (done), checkpoint it unless it is on disk, stop
        if (!dir.empty() && checkpointed != step) write_checkpoint();
        int status = train_preempt_exit(cfg, step, &logger);
        logger_close(&logger);
        return status;
    }
    double wall = now_seconds() - run_start;
    printf("done: %d steps, %lld tokens, %s wall", step, tokens_done, format_duration(wall).c_str());
    double tok_s = -1.0;
    if (timed_steps > 0) {
        tok_s = cfg.total_batch * timed_steps / train_seconds;
        printf(", %.1f ms/step, %.0f tok/s", 1000 * train_seconds / timed_steps, tok_s);
    }
    printf("%s", be.summary_extras(tok_s).c_str());
    if (last_loss >= 0) printf(", final train loss %.4f", last_loss);
    if (last_val >= 0) printf(", final val loss %.4f", last_val);
    printf("%s%s\n", dir.empty() ? "" : "; logs in ", dir.c_str());
    // the rest of the summary: best val loss, evals, time to target, energy, checkpoints
    if (best_val >= 0) printf("  best val loss %.4f at step %d\n", best_val, best_val_step);
    if (last_eval >= 0)
        printf("  HellaSwag accuracy %.4f (%d/%zu)\n", last_eval, last_eval_correct, hellaswag.examples.size());
    if (cfg.target_val_loss > 0) {
        if (target_step >= 0)
            printf("  time to target val loss %g: %.2f s (%s), %d steps, %lld tokens%s\n", cfg.target_val_loss,
                   target_wall, format_duration(target_wall).c_str(), target_step, (long long)target_step * cfg.total_batch,
                   resume_step >= 0 ? " (the time counts this process only: it resumed)" : "");
        else
            printf("  target val loss %g not reached in %d steps (best %.4f)\n", cfg.target_val_loss, step, best_val);
    }
    double joules = be.energy_joules();
    long long tokens_here = tokens_done - (long long)std::max(resume_step, 0) * cfg.total_batch;
    if (joules >= 0)
        printf("  energy: %.1f kJ = %.4f kWh over %s, %.0f W average, %.3f J/token\n", joules / 1e3,
               joules / 3.6e6, format_duration(wall).c_str(), joules / wall,
               tokens_here > 0 ? joules / tokens_here : 0.0);
    train_log_summary(&logger, step, tokens_done, wall, tok_s, best_val, last_val, joules);
    if (checkpointed >= 0) printf("  newest checkpoint: %s\n", checkpoint_path(dir, "model", checkpointed).c_str());
    logger_close(&logger);
    return 0;
}
