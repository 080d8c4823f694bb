// test_dataloader.cpp: checks llmc/dataloader.h on shards written here with known tokens.
// Token at position p of shard s is s*5000 + p, so every token names its own place and a
// batch's first token tells which window it came from.
// Run without arguments: prints one line per check, exits 1 if any failed.
// Helper modes (run as subprocesses by the failure checks):
//   --init PATTERN B T RANK WORLD VOCAB          dataloader_init, then exit 0
//   --set-state PATTERN B T EPOCH SHARD SAMPLE   init (world 1, shuffled) + set_state
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <sys/wait.h>
#include <utility>
#include <vector>

#include "../llmc/dataloader.h"

static const int VOCAB = 50257;
static const int B = 2, T = 8;  // BT = 16 tokens per rank per batch

static int token_at(int shard, size_t pos) { return shard * 5000 + (int)pos; }

// ----------------------------------------------------------------------------
// bookkeeping

struct Tally {
    int checks = 0, failures = 0;
};

static void check(Tally& t, bool ok, const std::string& what) {
    t.checks++;
    if (!ok) t.failures++;
    printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
    fflush(stdout);
}

// ----------------------------------------------------------------------------
// writing shards

struct ShardSpec {
    std::vector<uint16_t> tokens;
    int magic = DATALOADER_MAGIC;
    int version = DATALOADER_VERSION;
    long header_ntok = -1;  // -1: the true count
};

static void write_shard(const std::string& path, const ShardSpec& s) {
    int32_t header[256] = {0};
    header[0] = s.magic;
    header[1] = s.version;
    header[2] = (int32_t)(s.header_ntok >= 0 ? s.header_ntok : (long)s.tokens.size());
    FILE* f = fopen_or_fail(path.c_str(), "wb");
    fwrite_or_fail(header, sizeof(int32_t), 256, f, path.c_str());
    if (!s.tokens.empty()) fwrite_or_fail(s.tokens.data(), 2, s.tokens.size(), f, path.c_str());
    fclose_or_fail(f, path.c_str());
}

static ShardSpec pattern_shard(int shard, size_t ntok) {
    ShardSpec s;
    for (size_t p = 0; p < ntok; p++) s.tokens.push_back((uint16_t)token_at(shard, p));
    return s;
}

static void write_bytes(const std::string& path, size_t n) {
    FILE* f = fopen_or_fail(path.c_str(), "wb");
    std::vector<char> zeros(n, 0);
    if (n) fwrite_or_fail(zeros.data(), 1, n, f, path.c_str());
    fclose_or_fail(f, path.c_str());
}

// ----------------------------------------------------------------------------
// identifying batches

// A global sample: the shard (file index in sorted order) and its first token position.
typedef std::pair<int, size_t> Sample;

// llm.c's order, computed the plain way: in each shard, windows of W+1 tokens at 0, W,
// 2W, ... while the whole window fits.
static std::vector<Sample> llmc_order(const std::vector<size_t>& ntoks, size_t W) {
    std::vector<Sample> out;
    for (size_t s = 0; s < ntoks.size(); s++) {
        for (size_t start = 0; start + W + 1 <= ntoks[s]; start += W) out.push_back({(int)s, start});
    }
    return out;
}

// Which global sample this rank's batch belongs to; false if its content is not exactly
// the rank's window of some sample of the shards written.
static bool identify(const DataLoader* dl, const std::vector<size_t>& ntoks, Sample* out) {
    size_t BT = (size_t)dl->B * dl->T;
    int s = dl->inputs[0] / 5000;
    size_t p = (size_t)(dl->inputs[0] % 5000);
    if (s < 0 || s >= (int)ntoks.size()) return false;
    size_t offset = (size_t)dl->rank * BT;
    if (p < offset) return false;
    size_t start = p - offset;
    size_t W = BT * dl->world;
    if (start % W != 0 || start + W + 1 > ntoks[s]) return false;
    for (size_t i = 0; i < BT; i++) {
        if (dl->inputs[i] != token_at(s, p + i)) return false;
        if (dl->targets[i] != token_at(s, p + i + 1)) return false;
    }
    *out = {s, start};
    return true;
}

static std::string str(const Sample& s) {
    return "(shard " + std::to_string(s.first) + ", start " + std::to_string(s.second) + ")";
}

// The sequence of samples the next n batches come from (world 1 loaders).
static std::vector<Sample> take(DataLoader* dl, const std::vector<size_t>& ntoks, size_t n,
                                bool* ok) {
    std::vector<Sample> out;
    *ok = true;
    for (size_t i = 0; i < n; i++) {
        dataloader_next_batch(dl);
        Sample s{-1, 0};
        if (!identify(dl, ntoks, &s)) *ok = false;
        out.push_back(s);
    }
    return out;
}

// ----------------------------------------------------------------------------
// running this binary as a subprocess

struct ChildResult {
    int exit_code;  // -1 if it did not exit normally (crash, signal)
    std::string out, err;
};

static std::string slurp(const std::string& path) {
    std::string s;
    FILE* f = fopen(path.c_str(), "rb");
    if (!f) return s;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) s.append(buf, n);
    fclose(f);
    return s;
}

static ChildResult run_self(const std::string& dir, const std::vector<std::string>& args) {
    std::string out_path = dir + "/child.out", err_path = dir + "/child.err";
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork failed");
    if (pid == 0) {
        // exec at once: the child of an OpenMP process must not run OpenMP itself
        FILE* o = freopen(out_path.c_str(), "w", stdout);
        FILE* e = freopen(err_path.c_str(), "w", stderr);
        if (!o || !e) _exit(99);
        std::vector<char*> argv;
        argv.push_back((char*)"test_dataloader");
        for (const std::string& a : args) argv.push_back((char*)a.c_str());
        argv.push_back(nullptr);
        execv("/proc/self/exe", argv.data());
        _exit(98);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid failed");
    ChildResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out_path);
    r.err = slurp(err_path);
    return r;
}

static bool contains(const std::string& s, const std::string& what) {
    return s.find(what) != std::string::npos;
}

// A clean user-facing failure: exit 1, nothing on stdout, exactly one line on stderr that
// starts with "error: " and mentions every string in must_have.
static void check_fails(Tally& t, const std::string& name, const ChildResult& r,
                        const std::vector<std::string>& must_have) {
    bool one_line = !r.err.empty() && r.err.back() == '\n' &&
                    r.err.find('\n') == r.err.size() - 1;
    bool ok = r.exit_code == 1 && r.out.empty() && one_line && r.err.rfind("error: ", 0) == 0;
    std::string missing;
    for (const std::string& m : must_have) {
        if (!contains(r.err, m)) {
            ok = false;
            missing += " [" + m + "]";
        }
    }
    std::string msg = r.err;
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    std::string what = name + ": exit " + std::to_string(r.exit_code) + ", stderr \"" + msg + "\"";
    if (!missing.empty()) what += ", missing" + missing;
    check(t, ok, what);
}

// ----------------------------------------------------------------------------
// helper modes

static int helper_main(int argc, char** argv) {
    std::string mode = argv[1];
    if (mode == "--init" && argc == 8) {
        DataLoader dl;
        dataloader_init(&dl, argv[2], atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6]),
                        0, 0, atoi(argv[7]));
        dataloader_free(&dl);
        return 0;
    }
    if (mode == "--set-state" && argc == 8) {
        DataLoader dl;
        dataloader_init(&dl, argv[2], atoi(argv[3]), atoi(argv[4]), 0, 1, 1, 7, VOCAB);
        DataLoaderState s;
        s.epoch = strtoull(argv[5], nullptr, 10);
        s.shard_pos = strtoull(argv[6], nullptr, 10);
        s.sample_pos = strtoull(argv[7], nullptr, 10);
        dataloader_set_state(&dl, s);
        dataloader_free(&dl);
        return 0;
    }
    fprintf(stderr, "usage: test_dataloader [--init PATTERN B T RANK WORLD VOCAB | "
                    "--set-state PATTERN B T EPOCH SHARD SAMPLE]\n");
    return 2;
}

// ----------------------------------------------------------------------------
// the checks

// Without shuffling every rank sees llm.c's order: shards sorted, tail dropped, wrap.
static void test_sequential(Tally& t, const std::string& pattern, const std::vector<size_t>& ntoks) {
    for (int world : {1, 2, 4}) {
        size_t W = (size_t)world * B * T;
        std::vector<Sample> want = llmc_order(ntoks, W);
        size_t N = want.size();
        for (int rank = 0; rank < world; rank++) {
            DataLoader dl;
            dataloader_init(&dl, pattern.c_str(), B, T, rank, world, 0, 0, VOCAB);
            size_t total = 0;
            for (size_t n : ntoks) total += n;
            bool sizes_ok = dl.num_samples_per_epoch == N && dl.num_tokens == total &&
                            dl.num_shards == ntoks.size();
            bool order_ok = true, wrap_ok = true;
            std::string first_bad;
            for (size_t i = 0; i < 2 * N + 3; i++) {
                DataLoaderState st = dataloader_get_state(&dl);
                if (st.epoch != i / N) wrap_ok = false;
                dataloader_next_batch(&dl);
                Sample got{-1, 0};
                bool ok = identify(&dl, ntoks, &got) && got == want[i % N];
                if (!ok && order_ok) {
                    first_bad = " (batch " + std::to_string(i) + ": got " + str(got) +
                                ", want " + str(want[i % N]) + ")";
                }
                order_ok = order_ok && ok;
            }
            char buf[256];
            snprintf(buf, sizeof(buf),
                     "sequential world=%d rank=%d: %zu samples/epoch, llm.c order over 2 "
                     "epochs + 3, tails dropped, epoch counter",
                     world, rank, N);
            check(t, sizes_ok && order_ok && wrap_ok, buf + first_bad);
            dataloader_free(&dl);
        }
    }
}

// With shuffling, one epoch over all ranks in lockstep: every rank's slice belongs to the
// same global sample, the slices tile it exactly, and every sample comes exactly once.
static void test_shuffle_cover(Tally& t, const std::string& pattern, const std::vector<size_t>& ntoks) {
    for (int world : {1, 2, 4}) {
        size_t BT = (size_t)B * T, W = world * BT;
        std::vector<Sample> want = llmc_order(ntoks, W);
        size_t N = want.size();
        std::vector<DataLoader> dls(world);
        for (int r = 0; r < world; r++) {
            dataloader_init(&dls[r], pattern.c_str(), B, T, r, world, 1, 1234, VOCAB);
        }
        bool content_ok = true, same_sample = true, tiled = true;
        std::map<Sample, int> seen;
        for (size_t step = 0; step < N; step++) {
            Sample first{-1, 0};
            std::vector<int> in_cover(W + 1, 0), tg_cover(W + 1, 0);
            for (int r = 0; r < world; r++) {
                dataloader_next_batch(&dls[r]);
                Sample s{-1, 0};
                if (!identify(&dls[r], ntoks, &s)) {
                    content_ok = false;
                    continue;
                }
                if (r == 0) first = s;
                if (s != first) same_sample = false;
                // mark which tokens of the global window this rank's inputs/targets hold
                for (size_t i = 0; i < BT; i++) {
                    size_t pi = (size_t)(dls[r].inputs[i] % 5000) - first.second;
                    size_t pt = (size_t)(dls[r].targets[i] % 5000) - first.second;
                    if (pi <= W) in_cover[pi]++;
                    if (pt <= W) tg_cover[pt]++;
                }
            }
            for (size_t i = 0; i <= W; i++) {
                if (in_cover[i] != (i < W ? 1 : 0)) tiled = false;
                if (tg_cover[i] != (i > 0 ? 1 : 0)) tiled = false;
            }
            seen[first]++;
        }
        bool once = seen.size() == N;
        for (const Sample& s : want) once = once && seen.count(s) && seen[s] == 1;
        DataLoaderState st = dataloader_get_state(&dls[0]);
        bool next_epoch = st.epoch == 1 && st.shard_pos == 0 && st.sample_pos == 0;
        char buf[256];
        snprintf(buf, sizeof(buf),
                 "shuffled world=%d: one epoch = %zu samples, each exactly once; ranks in "
                 "step; slices disjoint and tile each window",
                 world, N);
        check(t, content_ok && same_sample && tiled && once && next_epoch, buf);
        for (int r = 0; r < world; r++) dataloader_free(&dls[r]);
    }
}

// Orders: shuffled differs from file order, epochs differ, same seed repeats, seeds differ.
static void test_shuffle_orders(Tally& t, const std::string& pattern, const std::vector<size_t>& ntoks) {
    std::vector<Sample> seq = llmc_order(ntoks, (size_t)B * T);
    size_t N = seq.size();
    const size_t EPOCHS = 6;
    DataLoader a, b, c;
    dataloader_init(&a, pattern.c_str(), B, T, 0, 1, 1, 42, VOCAB);
    dataloader_init(&b, pattern.c_str(), B, T, 0, 1, 1, 42, VOCAB);
    dataloader_init(&c, pattern.c_str(), B, T, 0, 1, 1, 43, VOCAB);
    bool oka, okb, okc;
    std::vector<Sample> sa = take(&a, ntoks, EPOCHS * N, &oka);
    std::vector<Sample> sb = take(&b, ntoks, EPOCHS * N, &okb);
    std::vector<Sample> sc = take(&c, ntoks, EPOCHS * N, &okc);
    check(t, oka && okb && okc, "shuffled batches are exact windows of the shards");
    std::vector<Sample> e0(sa.begin(), sa.begin() + N), e1(sa.begin() + N, sa.begin() + 2 * N);
    check(t, e0 != seq, "shuffled epoch 0 differs from file order");
    check(t, e0 != e1, "epoch 0 and epoch 1 orders differ");
    // each epoch is a permutation of the same samples
    bool perms = true;
    std::vector<Sample> sorted_seq = seq;
    std::sort(sorted_seq.begin(), sorted_seq.end());
    for (size_t e = 0; e < EPOCHS; e++) {
        std::vector<Sample> ep(sa.begin() + e * N, sa.begin() + (e + 1) * N);
        std::sort(ep.begin(), ep.end());
        perms = perms && ep == sorted_seq;
    }
    check(t, perms, "each of 6 shuffled epochs is a permutation of the epoch's samples");
    // the shards themselves are visited in different orders across epochs, each shard's
    // samples contiguously
    std::set<std::vector<int>> shard_orders;
    bool contiguous = true;
    for (size_t e = 0; e < EPOCHS; e++) {
        std::vector<int> order;
        for (size_t i = e * N; i < (e + 1) * N; i++) {
            if (order.empty() || order.back() != sa[i].first) order.push_back(sa[i].first);
        }
        contiguous = contiguous && order.size() == ntoks.size();
        shard_orders.insert(order);
    }
    check(t, contiguous && shard_orders.size() > 1,
          "shard order varies across epochs (" + std::to_string(shard_orders.size()) +
              " distinct in 6), each shard read contiguously");
    check(t, sa == sb, "same seed gives the same order over 6 epochs");
    check(t, sa != sc && std::vector<Sample>(sc.begin(), sc.begin() + N) != e0,
          "a different seed gives a different order");
    dataloader_free(&a);
    dataloader_free(&b);
    dataloader_free(&c);
}

// The shuffle's Fisher-Yates must be unbiased: every permutation of 4 equally likely.
static void test_permutation_uniform(Tally& t) {
    const int DRAWS = 24000;
    std::map<std::vector<uint32_t>, int> counts;
    for (int i = 0; i < DRAWS; i++) {
        std::mt19937 rng = dataloader_rng_(7, (uint64_t)i, 0);
        std::vector<uint32_t> p(4);
        dataloader_permutation_(p.data(), 4, rng);
        counts[p]++;
    }
    // expected 1000 each, standard deviation ~31: +-150 is ~5 sigma
    int lo = DRAWS, hi = 0;
    for (const auto& kv : counts) {
        lo = std::min(lo, kv.second);
        hi = std::max(hi, kv.second);
    }
    check(t, counts.size() == 24 && lo >= 850 && hi <= 1150,
          "Fisher-Yates is uniform: " + std::to_string(counts.size()) +
              " of 24 permutations of 4 seen in 24000 draws, counts in [" + std::to_string(lo) +
              ", " + std::to_string(hi) + "]");
}

// A loader set to a saved state continues exactly like the one that saved it.
static void test_state(Tally& t, const std::string& pattern, const std::vector<size_t>& ntoks) {
    for (int shuffle : {0, 1}) {
        for (int world : {1, 2}) {
            int rank = world - 1;
            size_t N = llmc_order(ntoks, (size_t)world * B * T).size();
            size_t BT = (size_t)B * T;
            bool ok = true;
            std::string bad;
            for (size_t k : {(size_t)0, (size_t)1, N - 1, N, N + 3, 2 * N - 1, 3 * N + 2}) {
                DataLoader a, b;
                dataloader_init(&a, pattern.c_str(), B, T, rank, world, shuffle, 99, VOCAB);
                dataloader_init(&b, pattern.c_str(), B, T, rank, world, shuffle, 99, VOCAB);
                for (size_t i = 0; i < k; i++) dataloader_next_batch(&a);
                // move b somewhere else first, so set_state must really reposition it
                for (size_t i = 0; i < (k * 7 + 5) % (2 * N); i++) dataloader_next_batch(&b);
                DataLoaderState s = dataloader_get_state(&a);
                dataloader_set_state(&b, s);
                DataLoaderState s2 = dataloader_get_state(&b);
                bool same = s2.epoch == s.epoch && s2.shard_pos == s.shard_pos &&
                            s2.sample_pos == s.sample_pos;
                for (size_t i = 0; i < N + 5; i++) {
                    dataloader_next_batch(&a);
                    dataloader_next_batch(&b);
                    same = same && memcmp(a.inputs, b.inputs, BT * sizeof(int)) == 0 &&
                           memcmp(a.targets, b.targets, BT * sizeof(int)) == 0;
                }
                if (!same && ok) bad = " (differs after k=" + std::to_string(k) + ")";
                ok = ok && same;
                dataloader_free(&a);
                dataloader_free(&b);
            }
            char buf[200];
            snprintf(buf, sizeof(buf),
                     "state round trip shuffle=%d world=%d rank=%d: saved at 7 points incl. "
                     "epoch ends, next %zu batches identical",
                     shuffle, world, rank, N + 5);
            check(t, ok, buf + bad);
        }
    }
    // reset returns to the very first batch
    for (int shuffle : {0, 1}) {
        DataLoader a, fresh;
        dataloader_init(&a, pattern.c_str(), B, T, 0, 1, shuffle, 5, VOCAB);
        dataloader_init(&fresh, pattern.c_str(), B, T, 0, 1, shuffle, 5, VOCAB);
        size_t N = a.num_samples_per_epoch;
        for (size_t i = 0; i < N + 4; i++) dataloader_next_batch(&a);
        dataloader_reset(&a);
        bool ok1, ok2;
        std::vector<Sample> x = take(&a, ntoks, 2 * N, &ok1);
        std::vector<Sample> y = take(&fresh, ntoks, 2 * N, &ok2);
        check(t, ok1 && ok2 && x == y,
              "reset (shuffle=" + std::to_string(shuffle) + ") replays from the first batch");
        dataloader_free(&a);
        dataloader_free(&fresh);
    }
}

// Every kind of bad input stops init with one clear line naming the file.
static void test_bad_inputs(Tally& t, const std::string& root) {
    const std::string BTs = std::to_string(B), Ts = std::to_string(T);
    auto setup = [&](const std::string& name) {
        std::string dir = root + "/" + name;
        CHECK(mkdir(dir.c_str(), 0700) == 0, "mkdir %s", dir.c_str());
        write_shard(dir + "/a_good.bin", pattern_shard(0, 200));
        return dir;
    };
    auto init_args = [&](const std::string& dir, int world) {
        return std::vector<std::string>{"--init", dir + "/*.bin", BTs, Ts, "0",
                                        std::to_string(world), std::to_string(VOCAB)};
    };
    {
        std::string dir = setup("magic");
        ShardSpec s = pattern_shard(1, 200);
        s.magic = 20240326;  // a model checkpoint's magic
        write_shard(dir + "/b_bad.bin", s);
        check_fails(t, "wrong magic", run_self(root, init_args(dir, 1)),
                    {dir + "/b_bad.bin", "magic", "20240326"});
    }
    {
        std::string dir = setup("version");
        ShardSpec s = pattern_shard(1, 200);
        s.version = 2;
        write_shard(dir + "/b_bad.bin", s);
        check_fails(t, "wrong version", run_self(root, init_args(dir, 1)),
                    {dir + "/b_bad.bin", "version 2"});
    }
    {
        std::string dir = setup("truncated");
        ShardSpec s = pattern_shard(1, 250);
        s.header_ntok = 300;  // the header promises 50 more tokens than the file has
        write_shard(dir + "/b_bad.bin", s);
        check_fails(t, "truncated shard", run_self(root, init_args(dir, 1)),
                    {dir + "/b_bad.bin", "1524 bytes", "1624 bytes"});
    }
    {
        std::string dir = setup("oversized");
        ShardSpec s = pattern_shard(1, 210);
        s.header_ntok = 200;  // 20 bytes of trailing junk after the last token
        write_shard(dir + "/b_bad.bin", s);
        check_fails(t, "file longer than its header says", run_self(root, init_args(dir, 1)),
                    {dir + "/b_bad.bin", "1444 bytes", "1424 bytes"});
    }
    {
        std::string dir = setup("short_header");
        write_bytes(dir + "/b_bad.bin", 100);
        check_fails(t, "file shorter than the header", run_self(root, init_args(dir, 1)),
                    {dir + "/b_bad.bin", "100 bytes"});
    }
    {
        std::string dir = setup("vocab");
        ShardSpec s = pattern_shard(1, 200);
        s.tokens[77] = (uint16_t)VOCAB;  // exactly vocab size: the first id out of range
        write_shard(dir + "/b_bad.bin", s);
        check_fails(t, "token id == vocab size", run_self(root, init_args(dir, 1)),
                    {dir + "/b_bad.bin", "position 77", "50257", "vocab"});
        s = pattern_shard(1, 200);
        s.tokens[120] = 60000;
        s.tokens[150] = 65535;
        write_shard(dir + "/b_bad.bin", s);
        check_fails(t, "token id > vocab size, first one reported",
                    run_self(root, init_args(dir, 1)),
                    {dir + "/b_bad.bin", "position 120", "60000"});
    }
    {
        std::string dir = setup("nomatch");
        std::string pattern = dir + "/nothing_*.bin";
        check_fails(t, "glob matching nothing",
                    run_self(root, {"--init", pattern, BTs, Ts, "0", "1", std::to_string(VOCAB)}),
                    {pattern, "no files match"});
    }
    {
        // world 4: one sample needs 4*2*8+1 = 65 tokens; give the bad shard 64
        std::string dir = setup("too_small");
        write_shard(dir + "/b_bad.bin", pattern_shard(1, 64));
        check_fails(t, "shard too small for one sample", run_self(root, init_args(dir, 4)),
                    {dir + "/b_bad.bin", "64 tokens", "65"});
        std::vector<std::string> ok_args = init_args(dir, 3);  // needs 49: fine
        ChildResult r = run_self(root, ok_args);
        check(t, r.exit_code == 0 && r.out.empty() && r.err.empty(),
              "same shards at world 3 (needs 49 tokens) load, stdout and stderr silent");
    }
    {
        // two bad shards: the message is always about the first in glob order
        std::string dir = setup("first_bad");
        for (int i = 0; i < 12; i++) {
            char name[64];
            snprintf(name, sizeof(name), "/c_%02d.bin", i);
            ShardSpec s = pattern_shard(1, 200);
            if (i == 5) s.version = 3;
            if (i == 9) s.magic = 1;
            write_shard(dir + name, s);
        }
        bool all_same = true;
        ChildResult first;
        for (int rep = 0; rep < 4; rep++) {
            ChildResult r = run_self(root, init_args(dir, 1));
            if (rep == 0) first = r;
            all_same = all_same && r.err == first.err && r.exit_code == first.exit_code;
        }
        check_fails(t, "first bad shard in glob order", first, {dir + "/c_05.bin", "version 3"});
        check(t, all_same, "the reported shard is the same in 4 runs (parallel validation)");
    }
    {
        // states that cannot exist
        std::string dir = setup("state");
        write_shard(dir + "/b_good.bin", pattern_shard(1, 100));  // 99/16 = 6 samples
        std::string pat = dir + "/*.bin";
        check_fails(t, "set_state shard position out of range",
                    run_self(root, {"--set-state", pat, BTs, Ts, "3", "2", "0"}),
                    {pat, "shard position 2", "2 shards"});
        check_fails(t, "set_state sample position out of range",
                    run_self(root, {"--set-state", pat, BTs, Ts, "0", "0", "12"}),
                    {"sample position 12"});
        ChildResult r = run_self(root, {"--set-state", pat, BTs, Ts, "1000000", "1", "5"});
        // shard 1 of that epoch has 12 or 6 samples, both > 5
        check(t, r.exit_code == 0 && r.err.empty(), "set_state accepts a valid far-away epoch");
    }
}

// ----------------------------------------------------------------------------

// llm.c's 32-bit shards ([20240801, 7, ntok], uint32 ids; Llama 3's 128,256-token vocabulary):
// ids past 65,535 come back whole, uint16 and uint32 shards of the same ids give the same
// batches, an id at or past the vocabulary is refused, and so are version 1 and a uint16-sized
// file under the 32-bit magic.
static void write_shard_u32(const std::string& path, const std::vector<uint32_t>& ids, int version = 7,
                            long header_ntok = -1) {
    int32_t header[256] = {0};
    header[0] = 20240801;
    header[1] = version;
    header[2] = (int32_t)(header_ntok >= 0 ? header_ntok : (long)ids.size());
    FILE* f = fopen_or_fail(path.c_str(), "wb");
    fwrite_or_fail(header, sizeof(int32_t), 256, f, path.c_str());
    fwrite_or_fail(ids.data(), 4, ids.size(), f, path.c_str());
    fclose_or_fail(f, path.c_str());
}

static void test_u32_shards(Tally& t, const std::string& root) {
    const int llama_vocab = 128256;
    std::string dir = root + "/u32";
    CHECK(mkdir(dir.c_str(), 0700) == 0, "mkdir %s", dir.c_str());
    std::vector<uint32_t> wide(300);
    for (size_t p = 0; p < wide.size(); p++) wide[p] = (uint32_t)((p * 40009u + 7u) % llama_vocab);
    write_shard_u32(dir + "/wide_000.bin", wide);
    DataLoader dl;
    dataloader_init(&dl, (dir + "/wide_*.bin").c_str(), B, T, 0, 1, 0, 0, llama_vocab);
    bool same = true, big = false;
    for (int batch = 0; batch < 3; batch++) {
        dataloader_next_batch(&dl);
        for (int i = 0; i < B * T; i++) {
            same = same && dl.inputs[i] == (int)wide[batch * B * T + i] && dl.targets[i] == (int)wide[batch * B * T + i + 1];
            big = big || dl.inputs[i] > 65535;
        }
    }
    dataloader_free(&dl);
    check(t, same && big, "32-bit shard: 3 batches give the written ids, ids past 65535 included");

    // the same ids in both widths: the same batches, shuffled, at world 2
    ShardSpec narrow = pattern_shard(3, 517);
    write_shard(dir + "/n_000.bin", narrow);
    write_shard_u32(dir + "/w_000.bin", std::vector<uint32_t>(narrow.tokens.begin(), narrow.tokens.end()));
    DataLoader a, b;
    dataloader_init(&a, (dir + "/n_*.bin").c_str(), B, T, 1, 2, 1, 7, VOCAB);
    dataloader_init(&b, (dir + "/w_*.bin").c_str(), B, T, 1, 2, 1, 7, VOCAB);
    bool equal = a.num_samples_per_epoch == b.num_samples_per_epoch;
    for (int batch = 0; batch < 12 && equal; batch++) {
        dataloader_next_batch(&a);
        dataloader_next_batch(&b);
        equal = memcmp(a.inputs, b.inputs, (size_t)B * T * sizeof(int)) == 0 && memcmp(a.targets, b.targets, (size_t)B * T * sizeof(int)) == 0;
    }
    dataloader_free(&a);
    dataloader_free(&b);
    check(t, equal, "uint16 and uint32 shards of the same ids: the same 12 shuffled batches at world 2");

    const std::string BTs = std::to_string(B), Ts = std::to_string(T);
    auto init_args = [&](const std::string& pat, int vocab) {
        return std::vector<std::string>{"--init", pat, BTs, Ts, "0", "1", std::to_string(vocab)};
    };
    std::vector<uint32_t> over(wide);
    over[123] = llama_vocab;
    write_shard_u32(dir + "/over_000.bin", over);
    check_fails(t, "32-bit shard: id == vocab size", run_self(root, init_args(dir + "/over_*.bin", llama_vocab)),
                {dir + "/over_000.bin", "token id 128256 at position 123", "vocab size 128256"});
    write_shard_u32(dir + "/v1_000.bin", wide, 1);
    check_fails(t, "32-bit magic with version 1", run_self(root, init_args(dir + "/v1_*.bin", llama_vocab)),
                {dir + "/v1_000.bin", "unsupported shard version 1", "7"});
    write_shard_u32(dir + "/half_000.bin", wide, 7, 600);  // a uint16 file's count under the 32-bit magic
    check_fails(t, "32-bit shard: size for uint16 tokens", run_self(root, init_args(dir + "/half_*.bin", llama_vocab)),
                {dir + "/half_000.bin", "truncated or corrupt"});
}

static void remove_tree(const std::string& dir) {
    std::string cmd = "rm -rf '" + dir + "'";
    if (system(cmd.c_str()) != 0) fprintf(stderr, "warning: could not remove %s\n", dir.c_str());
}

int main(int argc, char** argv) {
    if (argc > 1) return helper_main(argc, argv);

    const char* tmp = getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/test_dataloader_XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    CHECK(mkdtemp(buf.data()) != nullptr, "mkdtemp %s failed", templ.c_str());
    std::string root = buf.data();

    // Four shards with different tails, written out of order; a decoy the glob must skip.
    // At W=64 (world 4): 300 -> 4 samples, 43 tail tokens dropped; 129 = 2W+1 -> exactly 2;
    // 192 = 12*16 = 6*32 = 3*64 -> one sample less than 192/W, at every world size.
    std::string good = root + "/good";
    CHECK(mkdir(good.c_str(), 0700) == 0, "mkdir");
    std::vector<size_t> ntoks = {300, 129, 517, 192};
    for (int s : {2, 0, 3, 1}) {
        char name[64];
        snprintf(name, sizeof(name), "/shard_%02d.bin", s);
        write_shard(good + name, pattern_shard(s, ntoks[s]));
    }
    write_shard(good + "/decoy.dat", pattern_shard(9, 50));
    std::string pattern = good + "/shard_*.bin";

    DataLoader dl;
    dataloader_init(&dl, pattern.c_str(), B, T, 0, 1, 1, 42, VOCAB);
    dataloader_print_summary(&dl, "summary");
    dataloader_free(&dl);

    Tally t;
    test_sequential(t, pattern, ntoks);
    test_shuffle_cover(t, pattern, ntoks);
    test_shuffle_orders(t, pattern, ntoks);
    test_permutation_uniform(t);
    test_state(t, pattern, ntoks);
    test_bad_inputs(t, root);
    test_u32_shards(t, root);

    remove_tree(root);
    printf("%d checks, %d failed\n", t.checks, t.failures);
    return t.failures == 0 ? 0 : 1;
}
