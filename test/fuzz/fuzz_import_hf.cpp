// Fuzz target: ./import_hf (import_hf.cpp), the whole Hugging Face import: the
// safetensors file, config.json, the GPT-2 shapes inferred from them, the tensors read and
// transposed, the checkpoint written.
// Input: two parts (fuzz_split): model.safetensors, and config.json next to it (none when
// that part is empty).
#include "fuzz_common.h"  // defines: fuzz_write_file, fuzz_remove_file, fuzz_split, fuzz_rejected

#define main import_hf_main  // the tool's main() becomes a function this target calls
#include "../../import_hf.cpp"
#undef main

// the tool reports each model it writes on stdout: not in the fuzzer's log
extern "C" int LLVMFuzzerInitialize(int*, char***) {
    if (freopen("/dev/null", "w", stdout) == nullptr) abort();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::vector<FuzzPart> parts = fuzz_split(data, size, 2);
    std::string st_path = fuzz_write_file("model.safetensors", parts[0].data, parts[0].size);
    std::string cfg_path = fuzz_dir() + "/config.json";
    if (parts[1].size > 0) fuzz_write_file("config.json", parts[1].data, parts[1].size);
    else fuzz_remove_file("config.json");
    std::string out_path = fuzz_dir() + "/imported.bin";
    char* argv[] = {(char*)"import_hf", (char*)st_path.c_str(), (char*)out_path.c_str(), nullptr};
    try {
        import_hf_main(3, argv);
    } catch (const FailError& e) {
        // a bad config.json is named instead of the safetensors file
        fuzz_rejected(e, strstr(e.message, cfg_path.c_str()) != nullptr ? cfg_path : st_path);
    }
    return 0;
}
