// test_hf_logits: the CPU trainer's forward logits for a batch, so test/hf_reference.py can
// compare them with a Hugging Face-layout GPT-2 built from an exported model.safetensors.
//
//   build/test_hf_logits model.bin tokens.bin B T out.bin
//
// tokens.bin: B*T int32; out.bin: B*T*V float32 (the real vocabulary, padding dropped).
#include <vector>

#include "../llmc/utils.h"       // defines: fail, parse_int, fopen_or_fail
#include "../llmc/gpt2.h"        // defines: GPT2, gpt2_alloc_state, gpt2_forward
#include "../llmc/checkpoint.h"  // defines: gpt2_load_checkpoint

int main(int argc, char** argv) {
    long long B, T;
    if (argc != 6 || !parse_int(argv[3], 1, 1 << 16, &B) || !parse_int(argv[4], 1, 1 << 20, &T))
        fail("usage: build/test_hf_logits model.bin tokens.bin B T out.bin");
    GPT2 model;
    gpt2_load_checkpoint(&model, argv[1]);
    int V = model.config.vocab_size, Vp = model.config.padded_vocab_size;
    if (T > model.config.max_seq_len) fail("T=%lld exceeds maxT=%d", T, model.config.max_seq_len);
    std::vector<int> tokens(B * T);
    FILE* f = fopen_or_fail(argv[2], "rb");
    fread_or_fail(tokens.data(), sizeof(int), tokens.size(), f, argv[2]);
    fclose(f);
    for (int t : tokens) if (t < 0 || t >= V) fail("%s: token %d outside vocab %d", argv[2], t, V);
    gpt2_alloc_state(&model, (int)B, (int)T);
    gpt2_forward(&model, tokens.data(), nullptr, (int)B, (int)T);
    FILE* out = fopen_or_fail(argv[5], "wb");
    for (long long i = 0; i < B * T; i++) fwrite_or_fail(model.acts.logits + i * Vp, sizeof(float), V, out, argv[5]);
    fclose_or_fail(out, argv[5]);
    return 0;
}
