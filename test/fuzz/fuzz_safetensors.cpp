// Fuzz target: the safetensors reader (llmc/safetensors.h): safetensors_open (length, JSON
// header, every entry checked), then every float tensor read and widened to fp32.
// The input is the whole file.
#include "fuzz_common.h"             // defines: fuzz_write_file, fuzz_rejected
#include "../../llmc/safetensors.h"  // defines: safetensors_open, safetensors_read_f32

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string path = fuzz_write_file("model.safetensors", data, size);
    try {
        SafeTensorsFile st = safetensors_open(path.c_str());
        std::vector<float> out;
        for (const SafeTensor& t : st.tensors) {
            if (t.dtype != ST_F32 && t.dtype != ST_F16 && t.dtype != ST_BF16) continue;
            out.resize(t.numel());  // validated: numel x dtype size lies inside the file
            safetensors_read_f32(st, t, out.data());
        }
    } catch (const FailError& e) {
        fuzz_rejected(e, path);
    }
    return 0;
}
