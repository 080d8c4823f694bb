// Fuzz target: the trainers' command line (llmc/args.h): args_parse on argv tokens made from
// the input split at NUL bytes, then the -e value through the model descriptor parser.
// --help is left out: it prints the table and exits 0, as it should.
#include "fuzz_common.h"      // defines: FailError (via utils.h)
#include "../../llmc/args.h"  // defines: TrainConfig, args_parse
#include "../../llmc/gpt2.h"  // defines: GPT2Config, gpt2_config_from_descriptor, gpt2_config_problem

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::vector<std::string> tokens = {"train_gpt"};
    std::string cur;
    for (size_t i = 0; i < size; i++) {
        if (data[i] != 0) { cur += (char)data[i]; continue; }
        tokens.push_back(cur);
        cur.clear();
    }
    tokens.push_back(cur);
    std::vector<char*> argv;
    for (std::string& t : tokens) {
        if (t == "--help" || t == "-help") return 0;
        argv.push_back(&t[0]);
    }
    argv.push_back(nullptr);
    TrainConfig cfg;
    try {
        args_parse((int)tokens.size(), argv.data(), &cfg);
    } catch (const FailError&) {
        return 0;  // a clean rejection of a bad flag or value
    }
    GPT2Config c;
    if (gpt2_config_from_descriptor(cfg.init.c_str(), &c) && gpt2_config_problem(c) != nullptr) {
        fprintf(stderr, "descriptor '%s' accepted but gives a bad config: %s\n", cfg.init.c_str(), gpt2_config_problem(c));
        abort();
    }
    return 0;
}
