// tokenizer_file_check.cpp: drives llmc/tokenizer.h for test/test_tokenizer.sh.
//   tokenizer_file_check FILE [ID...]   loads FILE, prints "ok V EOT" (or "missing"), then
//                                       the bytes of each ID, one per line, as hex
// Damaged files must make tokenizer_init exit non-zero with one "error: FILE: ..." line.
#include <cstdlib>

#include "../../llmc/tokenizer.h"  // defines: Tokenizer, tokenizer_init, tokenizer_decode, tokenizer_free

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE [ID...]\n", argv[0]);
        return 2;
    }
    Tokenizer t;
    tokenizer_init(&t, argv[1]);
    if (!t.ok) {
        printf("missing\n");
        return 0;
    }
    printf("ok %u %u\n", t.vocab_size, t.eot_token);
    for (int i = 2; i < argc; i++) {
        const std::string& piece = tokenizer_decode(&t, (uint32_t)strtoul(argv[i], nullptr, 10));
        for (unsigned char c : piece) printf("%02x", c);
        printf("\n");
    }
    tokenizer_free(&t);
    return 0;
}
