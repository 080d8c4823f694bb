// Fuzz target: the HellaSwag eval-file reader (llmc/hellaswag.h): evalset_load, then every
// (example, completion) row laid out in batches as the evaluation does.
// Input: one byte for T (the trainer's -t), then the whole file.
#include "fuzz_common.h"           // defines: fuzz_write_file, fuzz_rejected
#include "../../llmc/hellaswag.h"  // defines: EvalSet, evalset_load, evalset_rows_fill

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    int T = 1 + data[0];
    std::string path = fuzz_write_file("eval.bin", data + 1, size - 1);
    EvalSet set;
    try {
        evalset_load(&set, path.c_str(), 1000, T);
        EvalRows rows;
        EvalCursor at;
        while (evalset_rows_fill(set, (int)set.examples.size(), &at, 3, &rows) > 0) {
            if (rows.T > T) {
                fprintf(stderr, "a row of %d tokens passed the check against T=%d\n", rows.T, T);
                abort();
            }
        }
    } catch (const FailError& e) {
        fuzz_rejected(e, path);
    }
    return 0;
}
