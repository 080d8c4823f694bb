// Fuzz target: GPT-2's BPE vocabulary reader (data/bpe.h): bpe_load of encoder.json and
// vocab.bpe, then a text encoded with it and decoded back, which must give the text again
// (byte-level BPE encodes any bytes, with any vocabulary the loader accepts).
// Input: three parts (fuzz_split): encoder.json, vocab.bpe, the text.
#include "fuzz_common.h"     // defines: fuzz_write_file, fuzz_split, fuzz_rejected
#include "../../data/bpe.h"  // defines: Bpe, BpeCache, bpe_load, bpe_encode, bpe_decode

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::vector<FuzzPart> parts = fuzz_split(data, size, 3);
    std::string encoder = fuzz_write_file("encoder.json", parts[0].data, parts[0].size);
    std::string merges = fuzz_write_file("vocab.bpe", parts[1].data, parts[1].size);
    Bpe bpe;
    try {
        bpe_load(&bpe, fuzz_dir().c_str());
    } catch (const FailError& e) {
        fuzz_rejected(e, strstr(e.message, encoder.c_str()) != nullptr ? encoder : merges);
        return 0;
    }
    BpeCache cache;
    std::vector<uint32_t> ids;
    const char* text = (const char*)parts[2].data;
    bpe_encode(&bpe, &cache, text, parts[2].size, &ids);
    std::string back;
    if (!bpe_decode(&bpe, ids.data(), ids.size(), &back) || back != std::string(text, parts[2].size)) {
        fprintf(stderr, "decode(encode(text)) != text for a %zu-byte text\n", parts[2].size);
        abort();
    }
    return 0;
}
