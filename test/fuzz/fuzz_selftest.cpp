// Not a reader: a target with a planted bug (a read one byte past the input when it starts
// with "FUZZ"), which test_fuzz.sh must see found within seconds, so that a quiet run of the
// real targets means something.
#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size >= 4 && data[0] == 'F' && data[1] == 'U' && data[2] == 'Z' && data[3] == 'Z')
        return data[size];  // the planted bug: out of bounds
    return 0;
}
