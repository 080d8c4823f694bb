// Fuzz target: the tiktoken-format BPE reader (data/bpe.h): bpe_load_tiktoken of a ranks file
// (one "BASE64 RANK" line per token), then a text encoded with cl100k's pattern and decoded
// back, which must give the text again (every byte is a token of an accepted file).
// Input: two parts (fuzz_split): the ranks file, the text.
#include "fuzz_common.h"     // defines: fuzz_write_file, fuzz_split, fuzz_rejected
#include "../../data/bpe.h"  // defines: Bpe, BpeCache, bpe_load_tiktoken, bpe_encode, bpe_decode

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::vector<FuzzPart> parts = fuzz_split(data, size, 2);
    std::string ranks = fuzz_write_file("ranks.tiktoken", parts[0].data, parts[0].size);
    Bpe bpe;
    try {
        bpe_load_tiktoken(&bpe, ranks.c_str());
    } catch (const FailError& e) {
        fuzz_rejected(e, ranks);
        return 0;
    }
    BpeCache cache;
    std::vector<uint32_t> ids;
    const char* text = (const char*)parts[1].data;
    bpe_encode(&bpe, &cache, text, parts[1].size, &ids);
    std::string back;
    if (!bpe_decode(&bpe, ids.data(), ids.size(), &back) || back != std::string(text, parts[1].size)) {
        fprintf(stderr, "decode(encode(text)) != text for a %zu-byte text\n", parts[1].size);
        abort();
    }
    return 0;
}
