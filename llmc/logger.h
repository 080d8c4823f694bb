// logger.h: the output directory's logs. main.log in llm.c's line format
// ("s:%d trl:%f lr:%f norm:%f", "s:%d tel:%f") and metrics.jsonl, one JSON object a line.
// On resume both are cut back to the lines before the resumed step, so a run that died
// after its last checkpoint does not leave duplicate steps behind. A line that cannot be
// written (a full disk) stops the run with an error naming the file: the logs are the record
// of the run, and the last checkpoint is intact, so a resume continues it once there is room.
// defines: Logger, logger_init, logger_log_train, logger_log_val, logger_log_eval, logger_flush,
//          logger_close
#pragma once
#include <string>
#include <vector>

#include "utils.h"  // defines: fail, fopen_or_fail

struct Logger {
    FILE* main_log = nullptr;
    FILE* metrics = nullptr;
    std::string main_path, metrics_path;  // for the error messages
};

// Keeps the lines of path whose step (parsed by key, "s:" or "\"step\":") is < before_step.
// A last line without its newline was cut short (the disk filled mid-write) and goes: its
// step number may be cut short too ("s:1" of "s:12 ...").
inline void log_truncate(const std::string& path, const char* key, int before_step) {
    FILE* f = fopen(path.c_str(), "r");
    if (f == nullptr) return;
    std::vector<std::string> keep;
    char* line = nullptr;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0) {
        const char* at = strstr(line, key);
        if (line[len - 1] == '\n' && at != nullptr && atoi(at + strlen(key)) < before_step) keep.push_back(line);
    }
    free(line);
    fclose(f);
    std::string tmp = path + ".tmp";
    FILE* out = fopen_or_fail(tmp.c_str(), "w");
    for (auto& l : keep) fputs(l.c_str(), out);
    if (ferror(out) || fclose(out) != 0) {
        int err = errno;
        remove(tmp.c_str());
        fail("%s: write failed (%s); %s is untouched", tmp.c_str(), strerror(err), path.c_str());
    }
    if (rename(tmp.c_str(), path.c_str()) != 0) fail("%s: rename failed (%s)", path.c_str(), strerror(errno));
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
    lg->main_path = main_path;
    lg->metrics_path = metrics_path;
}

// Pushes what was printed to the logs to the disk, or stops the run naming the file. Every
// writer of the logs calls it, or leaves a failed write in the stream's error flag, which
// the next call (or logger_close) reports.
inline void logger_flush(Logger* lg) {
    if (lg->main_log == nullptr) return;
    FILE* files[2] = {lg->main_log, lg->metrics};
    const std::string* paths[2] = {&lg->main_path, &lg->metrics_path};
    for (int i = 0; i < 2; i++)
        if (fflush(files[i]) != 0 || ferror(files[i]))
            fail("%s: write failed (%s); the last checkpoint is intact: make room, then resume with -y 1",
                 paths[i]->c_str(), strerror(errno));
}

// extra: more fields for the metrics object, each with its leading comma ("" for none)
inline void logger_log_train(Logger* lg, int step, float loss, float lr, float norm, double ms,
                             double tokens_per_s, long long tokens, const std::string& extra = "") {
    if (lg->main_log == nullptr) return;
    fprintf(lg->main_log, "s:%d trl:%f lr:%f norm:%f\n", step, loss, lr, norm);
    fprintf(lg->metrics,
            "{\"step\":%d,\"kind\":\"train\",\"loss\":%.7g,\"lr\":%.7g,\"grad_norm\":%.7g,"
            "\"ms\":%.3f,\"tokens_per_s\":%.1f,\"tokens\":%lld%s}\n",
            step, loss, lr, norm, ms, tokens_per_s, tokens, extra.c_str());
    logger_flush(lg);
}

inline void logger_log_val(Logger* lg, int step, float val_loss) {
    if (lg->main_log == nullptr) return;
    fprintf(lg->main_log, "s:%d tel:%f\n", step, val_loss);
    fprintf(lg->metrics, "{\"step\":%d,\"kind\":\"val\",\"loss\":%.7g}\n", step, val_loss);
    logger_flush(lg);
}

// A multiple-choice eval's accuracy (HellaSwag): llm.c's "s:%d eval:%.4f" line.
inline void logger_log_eval(Logger* lg, int step, float accuracy, int correct, int examples) {
    if (lg->main_log == nullptr) return;
    fprintf(lg->main_log, "s:%d eval:%.4f\n", step, accuracy);
    fprintf(lg->metrics, "{\"step\":%d,\"kind\":\"hellaswag\",\"accuracy\":%.7g,\"correct\":%d,\"examples\":%d}\n",
            step, accuracy, correct, examples);
    logger_flush(lg);
}

inline void logger_close(Logger* lg) {
    logger_flush(lg);
    if (lg->main_log) fclose(lg->main_log);
    if (lg->metrics) fclose(lg->metrics);
    lg->main_log = lg->metrics = nullptr;
}
