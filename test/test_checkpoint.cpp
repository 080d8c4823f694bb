// test_checkpoint.cpp: model and state files round-trip exactly; bf16 files widen exactly;
// corruption in a state file is caught by its checksums; random init is seeded, has
// GPT-2's statistics and leaves the padded vocabulary rows at zero.
#include <cmath>
#include <string>
#include <vector>

#include "../llmc/gpt2.h"        // defines: GPT2, gpt2_init, gpt2_init_random
#include "../llmc/checkpoint.h"  // defines: gpt2_write_checkpoint, gpt2_load_checkpoint, state_write, state_read

static int failures = 0;
static void expect(bool ok, const std::string& what) {
    printf("%-4s %s\n", ok ? "ok" : "FAIL", what.c_str());
    if (!ok) failures++;
}

static double tensor_std(const float* x, size_t n) {
    double s = 0, s2 = 0;
    for (size_t i = 0; i < n; i++) { s += x[i]; s2 += (double)x[i] * x[i]; }
    double m = s / n;
    return std::sqrt(s2 / n - m * m);
}

int main() {
    char tmpl[] = "/tmp/gptrain_ckpt_XXXXXX";
    CHECK(mkdtemp(tmpl) != nullptr, "mkdtemp");
    std::string dir = tmpl;
    GPT2Config cfg = {64, 300, 384, 3, 4, 64};  // maxT V Vp L NH C

    GPT2 a, b, c;
    gpt2_init(&a, cfg);
    gpt2_init_random(&a, 42);
    gpt2_init(&c, cfg);
    gpt2_init_random(&c, 43);
    size_t n = a.num_parameters;
    expect(n == 384 * 64 + 64 * 64 + 3 * (2 * 64 + 3 * 64 * 64 + 3 * 64 + 64 * 64 + 64 + 2 * 64 + 4 * 64 * 64 + 4 * 64 + 4 * 64 * 64 + 64) + 2 * 64,
           "parameter count follows the table (" + std::to_string(n) + ")");
    expect(memcmp(a.params, c.params, n * 4) != 0, "different seeds give different weights");

    // GPT-2 init statistics
    const ParamTensor* t = a.tensors;
    double wte_std = tensor_std(a.p.wte, (size_t)300 * 64), fcw_std = tensor_std(a.p.fcw, t[10].numel);
    double proj_std = tensor_std(a.p.fcprojw, t[12].numel), want_proj = 0.02 / std::sqrt(6.0);
    expect(std::fabs(wte_std - 0.02) < 0.001 && std::fabs(fcw_std - 0.02) < 0.0005,
           "weights ~ N(0, 0.02): wte std " + std::to_string(wte_std) + ", fcw std " + std::to_string(fcw_std));
    expect(std::fabs(proj_std - want_proj) < 0.0005,
           "residual projections ~ N(0, 0.02/sqrt(2L)): std " + std::to_string(proj_std));
    bool pad_zero = true, ln_one = true, bias_zero = true;
    for (size_t i = (size_t)300 * 64; i < (size_t)384 * 64; i++) pad_zero &= a.p.wte[i] == 0.0f;
    for (size_t i = 0; i < t[2].numel; i++) ln_one &= a.p.ln1w[i] == 1.0f && a.p.ln1b[i] == 0.0f;
    for (size_t i = 0; i < t[5].numel; i++) bias_zero &= a.p.qkvb[i] == 0.0f;
    expect(pad_zero, "padded wte rows are zero");
    expect(ln_one && bias_zero, "LayerNorm weights 1, biases 0");

    // fp32 round trip
    std::string path = dir + "/model.bin";
    gpt2_write_checkpoint(&a, path);
    gpt2_load_checkpoint(&b, path.c_str());
    expect(memcmp(&a.config, &b.config, sizeof(cfg)) == 0 && memcmp(a.params, b.params, n * 4) == 0,
           "fp32 model file round-trips bit for bit");
    expect(access((path + ".tmp").c_str(), F_OK) != 0, "no temporary file left behind");
    gpt2_free(&b);

    // bf16 (version 5): round to nearest even, write, load widens exactly
    std::vector<uint16_t> half(n);
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &a.params[i], 4);
        half[i] = (uint16_t)((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
    }
    int32_t h[256] = {20240326, 5, 64, 300, 3, 4, 64, 384};
    FILE* f = fopen_or_fail((dir + "/bf16.bin").c_str(), "wb");
    fwrite(h, 4, 256, f);
    fwrite(half.data(), 2, n, f);
    fclose(f);
    gpt2_load_checkpoint(&b, (dir + "/bf16.bin").c_str());
    bool exact = true;
    double max_rel = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t bits = (uint32_t)half[i] << 16, got;
        memcpy(&got, &b.params[i], 4);
        exact &= got == bits;
        if (a.params[i] != 0) max_rel = std::fmax(max_rel, std::fabs(b.params[i] - a.params[i]) / std::fabs(a.params[i]));
    }
    expect(exact && max_rel <= 1.0 / 256, "bf16 model file loads as the exact widened values (max rel err " + std::to_string(max_rel) + ")");
    gpt2_free(&b);

    // state file round trip and corruption
    std::vector<float> m(n), v(n), m2(n), v2(n);
    for (size_t i = 0; i < n; i++) { m[i] = a.params[i] * 0.5f; v[i] = a.params[i] * a.params[i]; }
    TrainState s = {17, 0, 1, n, 2, 1, 5, 42, 1, 4, 32, 256, 0xDEADBEEFull};
    s.range_count = n;
    std::string spath = dir + "/state.bin";
    state_write(spath, s, m.data(), v.data());
    TrainState r;
    std::string err = state_read(spath.c_str(), &r, m2.data(), v2.data());
    expect(err.empty() && memcmp(&r, &s, sizeof(s)) == 0 && m == m2 && v == v2, "state file round-trips (step, loader, rng, m, v)");
    // flip one byte inside v
    FILE* g = fopen_or_fail(spath.c_str(), "r+b");
    fseek(g, 512 + n * 4 + 1000, SEEK_SET);
    int ch = fgetc(g);
    fseek(g, -1, SEEK_CUR);
    fputc(ch ^ 0x10, g);
    fclose(g);
    err = state_read(spath.c_str(), &r, m2.data(), v2.data());
    expect(err.find("checksum mismatch") != std::string::npos, "a flipped byte in v is caught: " + err);
    CHECK(truncate(spath.c_str(), 4000) == 0, "truncate");
    err = state_read(spath.c_str(), &r, m2.data(), v2.data());
    expect(err.find("truncated") != std::string::npos, "a truncated state file is caught: " + err);

    // three ranks' slices of m, v; any range reads back from the files it overlaps
    {
        std::string cdir = dir + "/ranks";
        CHECK(system(("mkdir -p " + cdir).c_str()) == 0, "mkdir");
        size_t cuts[4] = {0, n / 3 + 5, 2 * n / 3 - 7, n};
        for (int k = 0; k < 3; k++) {
            TrainState sk = s;
            sk.rank = k;
            sk.world = 3;
            sk.range_begin = cuts[k];
            sk.range_count = cuts[k + 1] - cuts[k];
            state_write(checkpoint_path(cdir, "state", 17, k), sk, m.data() + cuts[k], v.data() + cuts[k]);
        }
        size_t lo = n / 3 - 100, hi = 2 * n / 3 + 100;  // crosses both cuts
        std::vector<float> mr(hi - lo), vr(hi - lo);
        TrainState got;
        std::string e = state_read_range(cdir, 17, n, lo, hi, &got, mr.data(), vr.data());
        bool same = e.empty() && std::equal(mr.begin(), mr.end(), m.begin() + lo) &&
                    std::equal(vr.begin(), vr.end(), v.begin() + lo) && got.world == 3 && got.step == 17;
        expect(same, "a range across three ranks' state files reads back exactly " + e);
        remove(checkpoint_path(cdir, "state", 17, 1).c_str());
        e = state_read_range(cdir, 17, n, lo, hi, &got, mr.data(), vr.data());
        expect(e.find("state_00000017_00001.bin") != std::string::npos, "a missing rank's state file is named: " + e);
    }

    gpt2_free(&a);
    gpt2_free(&c);
    std::string cmd = "rm -rf " + dir;
    CHECK(system(cmd.c_str()) == 0, "cleanup");
    printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
