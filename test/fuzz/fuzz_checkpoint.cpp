// Fuzz target: the model checkpoint reader (llmc/checkpoint.h): model_file_check, then
// model_load_checkpoint on what passes it. The input is the whole file: 256 x int32 header
// (GPT-2's or Llama 3's), then the tensors in fp32 (version 3) or bf16 (version 5).
#include "fuzz_common.h"            // defines: fuzz_write_file, fuzz_rejected
#include "../../llmc/checkpoint.h"  // defines: model_file_check, model_load_checkpoint, model_delete

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string path = fuzz_write_file("model.bin", data, size);
    ModelConfig cfg;
    int version = 0;
    std::string problem = model_file_check(path.c_str(), &cfg, &version);
    ModelBase* model = nullptr;
    try {
        model = model_load_checkpoint(path.c_str());
        if (!problem.empty()) {  // the two must agree on what is a model file
            fprintf(stderr, "model_file_check says '%s' but the file loads\n", problem.c_str());
            abort();
        }
    } catch (const FailError& e) {
        fuzz_rejected(e, path);
    }
    model_delete(model);
    return 0;
}
