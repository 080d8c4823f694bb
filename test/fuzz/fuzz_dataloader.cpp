// Fuzz target: the data shard reader (llmc/dataloader.h). dataloader_init finds the shards by
// glob, validates and maps each; then a few batches are drawn and a position is restored.
// Input: two config bytes (B, T, world, rank, shuffle; vocab size), then two parts
// (fuzz_split): shard_0.bin and shard_1.bin (only shard_0 when the second part is empty).
#include "fuzz_common.h"            // defines: fuzz_write_file, fuzz_remove_file, fuzz_split, ...
#include "../../llmc/dataloader.h"  // defines: dataloader_init, dataloader_next_batch, ...

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 2) return 0;
    int B = 1 + (data[0] & 3), T = 1 + ((data[0] >> 2) & 7), world = 1 + ((data[0] >> 5) & 1);
    int rank = ((data[0] >> 6) & 1) % world, shuffle = data[0] >> 7;
    int vocab = data[1] < 255 ? 1 + data[1] * 4 : 100000;  // 100000: past what uint16 tokens can name
    std::vector<FuzzPart> parts = fuzz_split(data + 2, size - 2, 2);
    fuzz_write_file("shard_0.bin", parts[0].data, parts[0].size);
    if (parts[1].size > 0) fuzz_write_file("shard_1.bin", parts[1].data, parts[1].size);
    else fuzz_remove_file("shard_1.bin");
    std::string pattern = fuzz_dir() + "/shard_*.bin";

    DataLoader dl;
    bool open = false;
    try {
        dataloader_init(&dl, pattern.c_str(), B, T, rank, world, shuffle, 1234, vocab);
        open = true;
        for (size_t i = 0; i < dl.num_samples_per_epoch + 2 && i < 64; i++) {
            dataloader_next_batch(&dl);
            for (int k = 0; k < B * T; k++) {
                if (dl.inputs[k] >= vocab || dl.targets[k] >= vocab) {
                    fprintf(stderr, "batch holds a token >= vocab size %d: validation missed it\n", vocab);
                    abort();
                }
            }
        }
        DataLoaderState s = dataloader_get_state(&dl);
        dataloader_reset(&dl);
        dataloader_set_state(&dl, s);
        s.sample_pos += data[0];  // a saved position that may not exist for these shards
        s.shard_pos += data[1] & 1;
        dataloader_set_state(&dl, s);
    } catch (const FailError& e) {
        fuzz_close_leaked_files();
        if (!open) {  // a bad shard after a good one leaves the good one mapped (a real run exits)
            for (size_t i = 0; dl.shards != nullptr && i < dl.num_shards; i++)
                if (dl.shards[i].map != nullptr) munmap(dl.shards[i].map, dl.shards[i].file_bytes);
        }
        // the glob names no one file; every message names the pattern or a shard
        if (strstr(e.message, fuzz_dir().c_str()) == nullptr || strchr(e.message, '\n') != nullptr) {
            fprintf(stderr, "rejection is not one line naming the file:\nerror: %s\n", e.message);
            abort();
        }
    }
    if (open) dataloader_free(&dl);
    return 0;
}
