// logger.h: the output directory's logs. main.log in llm.c's line format
// ("s:%d trl:%f lr:%f norm:%f", "s:%d tel:%f") and metrics.jsonl, one JSON object a line.
// On resume both are cut back to the lines before the resumed step, so a run that died
// after its last checkpoint does not leave duplicate steps behind.
// defines: Logger, logger_init, logger_log_train, logger_log_val, logger_close
#pragma once
#include <string>
#include <vector>

#include "utils.h"  // defines: fail, fopen_or_fail

struct Logger {
    FILE* main_log = nullptr;
    FILE* metrics = nullptr;
};

// Keeps the lines of path whose step (parsed by key, "s:" or "\"step\":") is < before_step.
inline void log_truncate(const std::string& path, const char* key, int before_step) {
    FILE* f = fopen(path.c_str(), "r");
    if (f == nullptr) return;
    std::vector<std::string> keep;
    char line[4096];
    while (fgets(line, sizeof(line), f)) {
        const char* at = strstr(line, key);
        if (at != nullptr && atoi(at + strlen(key)) < before_step) keep.push_back(line);
    }
    fclose(f);
    std::string tmp = path + ".tmp";
    FILE* out = fopen_or_fail(tmp.c_str(), "w");
    for (auto& l : keep) fputs(l.c_str(), out);
    fclose_or_fail(out, tmp.c_str());
    if (rename(tmp.c_str(), path.c_str()) != 0) fail("%s: rename failed", path.c_str());
}

// dir empty: no logging. resume_step < 0: a fresh run, the logs start empty.
inline void logger_init(Logger* lg, const std::string& dir, int resume_step) {
    if (dir.empty()) return;
    std::string main_path = dir + "/main.log", metrics_path = dir + "/metrics.jsonl";
    if (resume_step >= 0) {
        log_truncate(main_path, "s:", resume_step);
        log_truncate(metrics_path, "\"step\":", resume_step);
    }
    const char* mode = resume_step >= 0 ? "a" : "w";
    lg->main_log = fopen_or_fail(main_path.c_str(), mode);
    lg->metrics = fopen_or_fail(metrics_path.c_str(), mode);
}

inline void logger_log_train(Logger* lg, int step, float loss, float lr, float norm, double ms,
                             double tokens_per_s, long long tokens) {
    if (lg->main_log == nullptr) return;
    fprintf(lg->main_log, "s:%d trl:%f lr:%f norm:%f\n", step, loss, lr, norm);
    fprintf(lg->metrics,
            "{\"step\":%d,\"kind\":\"train\",\"loss\":%.7g,\"lr\":%.7g,\"grad_norm\":%.7g,"
            "\"ms\":%.3f,\"tokens_per_s\":%.1f,\"tokens\":%lld}\n",
            step, loss, lr, norm, ms, tokens_per_s, tokens);
    fflush(lg->main_log);
    fflush(lg->metrics);
}

inline void logger_log_val(Logger* lg, int step, float val_loss) {
    if (lg->main_log == nullptr) return;
    fprintf(lg->main_log, "s:%d tel:%f\n", step, val_loss);
    fprintf(lg->metrics, "{\"step\":%d,\"kind\":\"val\",\"loss\":%.7g}\n", step, val_loss);
    fflush(lg->main_log);
    fflush(lg->metrics);
}

inline void logger_close(Logger* lg) {
    if (lg->main_log) fclose(lg->main_log);
    if (lg->metrics) fclose(lg->metrics);
    lg->main_log = lg->metrics = nullptr;
}
