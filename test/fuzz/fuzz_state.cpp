// Fuzz target: the resume-state reader (llmc/checkpoint.h): state_read of one file, then
// state_read_range over the files of a checkpoint of one or two ranks.
// Input: a flags byte, then two parts (fuzz_split): rank 0's state file and rank 1's (no
// rank 1 file when that part is empty). Flag bit 0 makes this target write correct checksums
// into each file first, so the fuzzer gets past them to everything they guard.
#include <algorithm>

#include "fuzz_common.h"            // defines: fuzz_write_file, fuzz_remove_file, fuzz_split
#include "../../llmc/checkpoint.h"  // defines: state_read, state_read_range, checksum64

// Sets the checksums of a state file (header words 15, 16, 18, 20 and 63) to match its bytes,
// wherever the sections the header describes lie inside the file.
static void set_checksums(std::vector<uint8_t>* file) {
    std::vector<uint8_t>& b = *file;
    if (b.size() < (size_t)STATE_HEADER_WORDS * 8) return;
    uint64_t h[STATE_HEADER_WORDS];
    memcpy(h, b.data(), sizeof(h));
    uint64_t count = h[21] == 0 && h[22] == 0 ? h[5] : h[22];
    size_t at = sizeof(h);
    auto sum = [&](uint64_t bytes) {  // checksum of the next section, if it is in the file
        if (bytes > b.size() - at) return (uint64_t)0;
        uint64_t s = checksum64(b.data() + at, bytes);
        at += bytes;
        return s;
    };
    uint64_t bytes = count < (1ull << 40) ? count * 4 : UINT64_MAX;
    h[15] = sum(bytes);
    h[16] = sum(bytes);
    if (h[17] == 1) h[18] = sum(bytes);
    h[20] = sum(h[19] < (1ull << 40) ? h[19] * 8 : UINT64_MAX);
    h[63] = checksum64(h, 63 * sizeof(uint64_t));
    memcpy(b.data(), h, sizeof(h));
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    bool fix = data[0] & 1;
    std::vector<FuzzPart> parts = fuzz_split(data + 1, size - 1, 2);
    std::string paths[2];
    for (int k = 0; k < 2; k++) {
        char name[64];
        snprintf(name, sizeof(name), "state_%08d_%05d.bin", 1, k);
        if (k == 1 && parts[1].size == 0) { fuzz_remove_file(name); continue; }
        std::vector<uint8_t> b(parts[k].data, parts[k].data + parts[k].size);
        if (fix) set_checksums(&b);
        paths[k] = fuzz_write_file(name, b.data(), b.size());
    }

    // one file: the header first, then everything into buffers of the size it gives
    TrainState s;
    if (!state_read(paths[0].c_str(), &s, nullptr, nullptr).empty()) return 0;
    std::vector<float> m(s.range_count), v(s.range_count), master(s.range_count);
    bool has_master = false;
    state_read(paths[0].c_str(), &s, m.data(), v.data(), master.data(), &has_master);

    // the checkpoint: verify every file, then gather a window of at most 1000 parameters
    size_t n = s.num_parameters;
    state_read_range(fuzz_dir(), 1, n, 0, n, &s, nullptr, nullptr);
    size_t begin = n / 3, end = std::min(n, begin + 1000);
    std::vector<float> wm(end - begin), wv(end - begin), wmaster(end - begin);
    state_read_range(fuzz_dir(), 1, n, begin, end, &s, wm.data(), wv.data(), wmaster.data(), &has_master);
    return 0;
}
