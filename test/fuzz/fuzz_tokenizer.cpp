// Fuzz target: the tokenizer decode-table reader (llmc/tokenizer.h): tokenizer_init, then
// every token decoded. The input is the whole file: 256 x uint32 header, then per token a
// uint8 length and its bytes.
#include "fuzz_common.h"           // defines: fuzz_write_file, fuzz_rejected
#include "../../llmc/tokenizer.h"  // defines: Tokenizer, tokenizer_init, tokenizer_decode

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string path = fuzz_write_file("tokenizer.bin", data, size);
    Tokenizer t;
    try {
        tokenizer_init(&t, path.c_str());
        size_t bytes = 0;
        for (uint32_t id = 0; id < t.vocab_size; id++) bytes += tokenizer_decode(&t, id).size();
        if (bytes > size) {
            fprintf(stderr, "%zu bytes of tokens from a %zu-byte file\n", bytes, size);
            abort();
        }
    } catch (const FailError& e) {
        fuzz_rejected(e, path);
    }
    tokenizer_free(&t);
    return 0;
}
