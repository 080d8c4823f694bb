// schedule.h: learning-rate schedules with linear warmup (llm.c's formulas).
// defines: LRSchedule, lr_schedule_parse, lr_schedule_get
#pragma once
#include <cmath>
#include <cstring>

enum LRScheduleKind { LR_SCHEDULE_COSINE, LR_SCHEDULE_LINEAR, LR_SCHEDULE_CONSTANT, LR_SCHEDULE_WSD };

struct LRSchedule {
    LRScheduleKind kind;
    float max_lr;       // -l
    int warmup;         // -u: steps of linear warmup from lr/warmup to lr
    int total_steps;    // steps of the whole run
    float final_frac;   // -q: the lr at the end is max_lr * final_frac
};

inline bool lr_schedule_parse(const char* name, LRScheduleKind* kind) {
    if (!strcmp(name, "cosine")) *kind = LR_SCHEDULE_COSINE;
    else if (!strcmp(name, "linear")) *kind = LR_SCHEDULE_LINEAR;
    else if (!strcmp(name, "constant")) *kind = LR_SCHEDULE_CONSTANT;
    else if (!strcmp(name, "wsd")) *kind = LR_SCHEDULE_WSD;
    else return false;
    return true;
}

// lr at 0-based step. After warmup: cosine and linear decay from max_lr to max_lr*final_frac
// over the remaining steps; constant is max_lr throughout (llm.c ignores -u for it); wsd (warmup-stable-decay) holds max_lr
// until 80% of the steps and decays linearly to the final lr over the last 20%.
inline float lr_schedule_get(const LRSchedule& s, int step) {
    if (s.kind == LR_SCHEDULE_CONSTANT) return s.max_lr;  // as llm.c: no warmup either
    if (step < s.warmup) return s.max_lr * (float)(step + 1) / (float)s.warmup;
    float min_lr = s.max_lr * s.final_frac;
    int start = s.kind == LR_SCHEDULE_WSD ? (int)(0.8f * s.total_steps) : s.warmup;
    if (start < s.warmup) start = s.warmup;
    if (step < start) return s.max_lr;
    int span = s.total_steps - start;
    float ratio = span > 0 ? (float)(step - start) / (float)span : 1.0f;
    if (ratio > 1.0f) ratio = 1.0f;
    if (s.kind == LR_SCHEDULE_COSINE) {
        float coeff = 0.5f * (1.0f + cosf((float)M_PI * ratio));
        return min_lr + coeff * (s.max_lr - min_lr);
    }
    return s.max_lr - ratio * (s.max_lr - min_lr);  // linear, and wsd's decay phase
}
