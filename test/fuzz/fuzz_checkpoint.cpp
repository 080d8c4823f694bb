// Fuzz target: the model checkpoint reader (llmc/checkpoint.h): model_file_check, then
// gpt2_load_checkpoint on what passes it. The input is the whole file: 256 x int32 header,
// then the tensors in fp32 (version 3) or bf16 (version 5).
#include "fuzz_common.h"            // defines: fuzz_write_file, fuzz_rejected
#include "../../llmc/checkpoint.h"  // defines: model_file_check, gpt2_load_checkpoint

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string path = fuzz_write_file("model.bin", data, size);
    GPT2Config cfg;
    int version = 0;
    std::string problem = model_file_check(path.c_str(), &cfg, &version);
    GPT2 model = {};
    try {
        gpt2_load_checkpoint(&model, path.c_str());
        if (!problem.empty()) {  // the two must agree on what is a model file
            fprintf(stderr, "model_file_check says '%s' but the file loads\n", problem.c_str());
            abort();
        }
    } catch (const FailError& e) {
        fuzz_rejected(e, path);
    }
    gpt2_free(&model);
    return 0;
}
