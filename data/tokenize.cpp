// tokenize.cpp: the tokenizer tool, GPT-2's vocabulary or a tiktoken file (cl100k_base,
// Llama 3). Encodes and decodes text, writes llm.c's tokenizer file, and turns text
// corpora into llm.c data shards.
//   ./tokenize encode | decode | tokenizer-file OUT.bin | shards --out PREFIX INPUT... |
//              hellaswag IN.jsonl OUT.bin
// Every subcommand takes --help. The BPE itself is in bpe.h.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "../llmc/utils.h"  // defines: fail, CHECK, checked file I/O, parse_int, parse_float
#include "../llmc/tokenizer.h"  // defines: TOKENIZER_MAGIC, TOKENIZER_MAX_VOCAB (the file the trainers read)
#include "bpe.h"            // defines: Bpe, bpe_load, bpe_load_tiktoken, bpe_encode, bpe_piece, json_read_string

static const int32_t SHARD_MAGIC = 20240520;  // uint16 tokens
static const int32_t SHARD_VERSION = 1;
static const int32_t SHARD_MAGIC_U32 = 20240801;  // uint32 tokens: llm.c's Llama 3 shards
static const int32_t SHARD_VERSION_U32 = 7;

static double now_seconds() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

static std::string read_all_stdin() {
    std::string data;
    char buf[1 << 16];
    size_t got;
    while ((got = fread(buf, 1, sizeof(buf), stdin)) > 0) data.append(buf, got);
    if (ferror(stdin)) fail("stdin: read error (%s)", strerror(errno));
    return data;
}

// data/gpt2_vocab, relative to the current directory, or else next to this binary (the
// repo root), so that ./tokenize works from anywhere in a checkout.
static const char* default_vocab_dir() {
    static std::string dir = "data/gpt2_vocab";
    struct stat st;
    if (stat((dir + "/encoder.json").c_str(), &st) == 0) return dir.c_str();
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        std::string near = std::filesystem::path(exe).parent_path().string() + "/data/gpt2_vocab";
        if (stat((near + "/encoder.json").c_str(), &st) == 0) dir = near;
    }
    return dir.c_str();
}

// The vocabulary a command uses: GPT-2's (--vocab-dir) or a tiktoken file (--tiktoken).
struct VocabFlags {
    const char* dir = nullptr;       // --vocab-dir DIR; nullptr: default_vocab_dir()
    const char* tiktoken = nullptr;  // --tiktoken FILE
};

static const char* const VOCAB_HELP =
    "  --vocab-dir DIR      directory with GPT-2's encoder.json and vocab.bpe (default\n"
    "                       data/gpt2_vocab, here or next to this binary)\n"
    "  --tiktoken FILE      a tiktoken vocabulary instead: lines \"BASE64BYTES RANK\" with ranks\n"
    "                       0..N-1 (cl100k_base.tiktoken, Llama 3's tokenizer.model), text\n"
    "                       split with cl100k_base's pattern\n";

// Takes argv[*i] (and its value) if it is a vocabulary flag; false if it is not one.
static bool vocab_flag(int argc, char** argv, int* i, VocabFlags* v, const char* cmd) {
    const char* a = argv[*i];
    const char** dst = !strcmp(a, "--vocab-dir") ? &v->dir : !strcmp(a, "--tiktoken") ? &v->tiktoken : nullptr;
    if (dst == nullptr) return false;
    if (*i + 1 >= argc) fail("%s: %s needs a value", cmd, a);
    *dst = argv[++*i];
    return true;
}

static void vocab_load(Bpe* b, const VocabFlags& v, const char* cmd) {
    if (v.dir != nullptr && v.tiktoken != nullptr) fail("%s: give --vocab-dir or --tiktoken, not both", cmd);
    if (v.tiktoken != nullptr) {
        bpe_load_tiktoken(b, v.tiktoken);
        return;
    }
    const char* dir = v.dir != nullptr ? v.dir : default_vocab_dir();
    std::string d(dir);
    for (const char* name : {"/encoder.json", "/vocab.bpe"}) {
        struct stat st;
        if (stat((d + name).c_str(), &st) != 0)
            fail("%s%s: missing (run data/get_vocab.sh, or pass --vocab-dir DIR)", dir, name);
    }
    bpe_load(b, dir);
}

// Writes with a temporary name, flushes to disk, then renames: a reader never sees half a file.
struct AtomicFile {
    std::string path, tmp;
    FILE* f;
};

static void atomic_open(AtomicFile* a, const std::string& path) {
    a->path = path;
    a->tmp = path + ".tmp";
    a->f = fopen_or_fail(a->tmp.c_str(), "wb");
}

static void atomic_commit(AtomicFile* a) {
    if (fflush(a->f) != 0 || fsync(fileno(a->f)) != 0) fail("%s: flush failed (%s)", a->tmp.c_str(), strerror(errno));
    fclose_or_fail(a->f, a->tmp.c_str());
    if (rename(a->tmp.c_str(), a->path.c_str()) != 0)
        fail("%s: cannot rename to %s (%s)", a->tmp.c_str(), a->path.c_str(), strerror(errno));
}

// ----------------------------------------------------------------------------------
// encode, decode, tokenizer-file

// encode's and decode's flags: --help (usage, then VOCAB_HELP) and the vocabulary flags.
static VocabFlags vocab_flags(int argc, char** argv, const char* cmd, const char* usage) {
    VocabFlags v;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { printf("%s%s", usage, VOCAB_HELP); exit(0); }
        if (!vocab_flag(argc, argv, &i, &v, cmd)) fail("%s: unknown argument '%s' (see --help)", cmd, argv[i]);
    }
    return v;
}

static int cmd_encode(int argc, char** argv) {
    VocabFlags v = vocab_flags(argc, argv, "encode",
        "usage: ./tokenize encode [--vocab-dir DIR | --tiktoken FILE]\n"
        "  Reads UTF-8 text on stdin, writes its token ids on stdout separated by spaces, with\n"
        "  a newline at the end. No EOT/BOS is added; \"<|endoftext|>\" and other special tokens\n"
        "  in the text are plain text (tiktoken's encode_ordinary).\n");
    Bpe bpe;
    vocab_load(&bpe, v, "encode");
    std::string text = read_all_stdin();
    BpeCache cache;
    std::vector<uint32_t> ids;
    bpe_encode(&bpe, &cache, text.data(), text.size(), &ids);
    std::string out;
    out.reserve(ids.size() * 6 + 1);
    char num[16];
    for (size_t i = 0; i < ids.size(); i++) {
        int len = snprintf(num, sizeof(num), i == 0 ? "%u" : " %u", ids[i]);
        out.append(num, len);
    }
    out.push_back('\n');
    fwrite_or_fail(out.data(), 1, out.size(), stdout, "stdout");
    return 0;
}

static int cmd_decode(int argc, char** argv) {
    VocabFlags flags = vocab_flags(argc, argv, "decode",
        "usage: ./tokenize decode [--vocab-dir DIR | --tiktoken FILE]\n"
        "  Reads token ids (separated by whitespace) on stdin, writes the text they spell on stdout.\n"
        "  With --tiktoken, the ids are the file's ranks, and for cl100k_base (100,256 ranks) and\n"
        "  Llama 3 (128,000) also the document separator 100257 \"<|endoftext|>\" or 128000\n"
        "  \"<|begin_of_text|>\".\n");
    Bpe bpe;
    vocab_load(&bpe, flags, "decode");
    std::string in = read_all_stdin(), out;
    size_t i = 0, n = in.size();
    while (true) {
        while (i < n && isspace((unsigned char)in[i])) i++;
        if (i >= n) break;
        size_t start = i;
        uint64_t v = 0;
        while (i < n && !isspace((unsigned char)in[i])) {
            char c = in[i++];
            if (c < '0' || c > '9' || v > UINT32_MAX) v = UINT64_MAX;
            else v = v * 10 + (uint64_t)(c - '0');
        }
        const std::string* piece = v <= UINT32_MAX ? bpe_piece(&bpe, (uint32_t)v) : nullptr;
        if (piece == nullptr) {
            bool special = bpe.eot_token >= bpe.pieces.size() && !bpe.eot_text.empty();
            std::string also = special ? " or " + std::to_string(bpe.eot_token) : "";
            fail("stdin: '%.*s' is not a token id in 0..%zu%s", (int)std::min<size_t>(i - start, 40), in.data() + start,
                 bpe.pieces.size() - 1, also.c_str());
        }
        out.append(*piece);
    }
    fwrite_or_fail(out.data(), 1, out.size(), stdout, "stdout");
    return 0;
}

static int cmd_tokenizer_file(int argc, char** argv) {
    const char* usage =
        "usage: ./tokenize tokenizer-file OUT.bin [--vocab-dir DIR | --tiktoken FILE] [--vocab-size V]\n"
        "  Writes llm.c's tokenizer file (version 2): 256 x uint32 header [20240328, 2, V, EOT],\n"
        "  then per token a uint8 length and its bytes. Trainers read it to print samples, when\n"
        "  its V is the model's.\n"
        "  With --tiktoken, EOT is the document separator (100257 <|endoftext|> for cl100k_base,\n"
        "  128000 <|begin_of_text|> for Llama 3) and V the vocabulary with its special tokens\n"
        "  (100277, 128256); the other special tokens are written as \"<|special N|>\", and a\n"
        "  token longer than 255 bytes (the format's limit) as its first 255, with a warning.\n"
        "  --vocab-size V        write V tokens (a model's vocabulary; at least the file's ranks)\n";
    const char* out = nullptr;
    VocabFlags v;
    long long vocab_size = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { printf("%s", usage); return 0; }
        if (vocab_flag(argc, argv, &i, &v, "tokenizer-file")) continue;
        if (!strcmp(argv[i], "--vocab-size")) {
            if (i + 1 >= argc) fail("tokenizer-file: --vocab-size needs a value");
            if (!parse_int(argv[++i], 1, TOKENIZER_MAX_VOCAB, &vocab_size))
                fail("tokenizer-file: --vocab-size '%s': expected 1..%u", argv[i], TOKENIZER_MAX_VOCAB);
        } else if (argv[i][0] == '-') {
            fail("tokenizer-file: unknown option '%s' (see --help)", argv[i]);
        } else if (out == nullptr) {
            out = argv[i];
        } else {
            fail("tokenizer-file: one OUT.bin only, got '%s' too", argv[i]);
        }
    }
    if (out == nullptr) fail("tokenizer-file: missing OUT.bin (see --help)");
    Bpe bpe;
    vocab_load(&bpe, v, "tokenizer-file");
    const char* source = v.tiktoken != nullptr ? v.tiktoken : v.dir != nullptr ? v.dir : default_vocab_dir();
    if (bpe.eot_token == UINT32_MAX)
        fail("%s: %zu ranks, not a vocabulary whose document separator is known, so no EOT for the file", source,
             bpe.pieces.size());
    // V: the vocabulary with its special tokens, as a model of it has
    size_t V = std::max(bpe.pieces.size(), (size_t)bpe.eot_token + 1);
    for (const TiktokenSpecial& k : TIKTOKEN_KNOWN)
        if (v.tiktoken != nullptr && k.ranks == bpe.pieces.size()) V = k.vocab;
    if (vocab_size > 0) {
        if ((size_t)vocab_size < bpe.pieces.size() || (size_t)vocab_size <= bpe.eot_token)
            fail("tokenizer-file: --vocab-size %lld is below the vocabulary's %zu tokens (EOT %u)", vocab_size,
                 std::max(bpe.pieces.size(), (size_t)bpe.eot_token + 1), bpe.eot_token);
        V = (size_t)vocab_size;
    }
    uint32_t header[256] = {0};
    header[0] = TOKENIZER_MAGIC;
    header[1] = 2;
    header[2] = (uint32_t)V;
    header[3] = bpe.eot_token;
    AtomicFile f;
    atomic_open(&f, out);
    fwrite_or_fail(header, sizeof(header), 1, f.f, f.tmp.c_str());
    size_t cut = 0;
    for (size_t id = 0; id < V; id++) {
        const std::string* piece = bpe_piece(&bpe, (uint32_t)id);
        std::string special = "<|special " + std::to_string(id) + "|>";
        const std::string& p = piece != nullptr ? *piece : special;
        if (p.empty()) fail("%s: token %zu has no bytes; the file stores 1..255", source, id);
        if (p.size() > 255 && cut++ == 0)
            fprintf(stderr, "warning: %s: token %zu has %zu bytes, the file keeps its first 255 (samples print it "
                    "short)\n", source, id, p.size());
        uint8_t len = (uint8_t)std::min<size_t>(p.size(), 255);
        fwrite_or_fail(&len, 1, 1, f.f, f.tmp.c_str());
        fwrite_or_fail(p.data(), 1, len, f.f, f.tmp.c_str());
    }
    atomic_commit(&f);
    printf("wrote %s: %zu tokens, EOT %u%s\n", out, V, bpe.eot_token,
           cut > 1 ? (", " + std::to_string(cut) + " of them cut to 255 bytes").c_str() : "");
    return 0;
}

// Debug aid for the tests: the byte length of each pre-token of stdin's text, one a line,
// split with GPT-2's pattern or (--cl100k) cl100k_base's. test/tokenizer/ compares them to
// what Node's regex engine makes of the pattern.
static int cmd_pretokens(int argc, char** argv) {
    BpePattern pattern = argc > 2 && !strcmp(argv[2], "--cl100k") ? BPE_PATTERN_CL100K : BPE_PATTERN_GPT2;
    std::string text = read_all_stdin(), out;
    const uint8_t* s = (const uint8_t*)text.data();
    for (size_t i = 0, j; i < text.size(); i = j) {
        j = pretokenize_next(pattern, s, text.size(), i);
        out += std::to_string(j - i) + "\n";
    }
    fwrite_or_fail(out.data(), 1, out.size(), stdout, "stdout");
    return 0;
}

// Debug aid for the tests: the character class of every code point, as maximal runs
// "FIRST LAST CLASS" in hex, CLASS one of L N S O. test/tokenizer/ compares it to Node.
static int cmd_unicode_classes() {
    const char names[] = {'O', 'L', 'N', 'S'};
    uint32_t start = 0;
    CharClass cur = char_class(0);
    for (uint32_t cp = 1; cp <= 0x110000; cp++) {
        CharClass c = cp < 0x110000 ? char_class(cp) : CHAR_OTHER;
        if (cp == 0x110000 || c != cur) {
            printf("%X %X %c\n", start, cp - 1, names[cur]);
            start = cp;
            cur = c;
        }
    }
    return 0;
}

// ----------------------------------------------------------------------------------
// shards: documents in, llm.c data shards out

// Where documents come from: text files (one document each, or split at --doc-sep
// lines) and .jsonl files (one document per line, its "text" field).
struct DocSource {
    std::vector<std::string> files;
    size_t next_file = 0;
    std::string doc_sep;
    bool split_at_sep = false;
    // the file being read
    std::string path;
    FILE* jsonl = nullptr;  // streamed line by line: JSONL corpora can be far larger than RAM
    size_t line_no = 0;
    std::string text;  // a text file, whole
    size_t text_pos = 0;
    bool in_text = false;
    // counters
    uint64_t total_bytes = 0, bytes_done = 0, empty_docs = 0;
    bool stdin_input = false;  // total_bytes is then unknown
};

static bool is_jsonl(const std::string& p) {
    return p.size() >= 6 && p.compare(p.size() - 6, 6, ".jsonl") == 0;
}

static void doc_source_init(DocSource* s, const std::vector<std::string>& inputs) {
    namespace fs = std::filesystem;
    for (const std::string& in : inputs) {
        std::error_code ec;
        if (fs::is_directory(in, ec)) {
            std::vector<std::string> found;
            for (auto it = fs::recursive_directory_iterator(in, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
                if (it->is_regular_file(ec)) found.push_back(it->path().string());
            if (ec) fail("%s: cannot list directory (%s)", in.c_str(), ec.message().c_str());
            std::sort(found.begin(), found.end());
            if (found.empty()) fail("%s: directory has no files", in.c_str());
            s->files.insert(s->files.end(), found.begin(), found.end());
        } else if (in == "-") {
            s->files.push_back(in);  // JSONL on stdin, e.g. from a parquet converter
            s->stdin_input = true;
        } else {
            file_size_or_fail(in.c_str());  // exists and is a regular file
            s->files.push_back(in);
        }
    }
    for (const std::string& f : s->files)
        if (f != "-") s->total_bytes += file_size_or_fail(f.c_str());
}

// Moves *pos past one JSON value starting at s[*pos]; false if malformed.
static bool json_skip_value(const char* s, size_t n, size_t* pos) {
    size_t i = json_skip_space(s, n, *pos);
    if (i >= n) return false;
    std::string scratch;
    if (s[i] == '"') {
        if (!json_read_string(s, n, &i, &scratch)) return false;
    } else if (s[i] == '{' || s[i] == '[') {
        int depth = 0;  // strings may hold brackets: step over them whole
        while (i < n) {
            char c = s[i];
            if (c == '"') { if (!json_read_string(s, n, &i, &scratch)) return false; continue; }
            if (c == '{' || c == '[') depth++;
            if (c == '}' || c == ']') depth--;
            i++;
            if (depth == 0) break;
        }
        if (depth != 0) return false;
    } else {
        size_t start = i;  // number, true, false, null
        while (i < n && s[i] != ',' && s[i] != '}' && s[i] != ']' && !isspace((unsigned char)s[i])) i++;
        if (i == start) return false;
    }
    *pos = i;
    return true;
}

// Walks the fields of one JSONL record: calls field(key, &i) with i at the start of the
// value; field moves i past the value and returns true, or returns false to have it skipped.
template <typename Field>
static void jsonl_fields(const char* s, size_t n, const std::string& path, size_t line_no, Field field) {
    size_t i = json_skip_space(s, n, 0);
    if (i >= n || s[i] != '{') fail("%s:%zu: not a JSON object", path.c_str(), line_no);
    i = json_skip_space(s, n, i + 1);
    std::string key;
    while (i < n && s[i] != '}') {
        if (!json_read_string(s, n, &i, &key)) fail("%s:%zu: bad JSON key at byte %zu", path.c_str(), line_no, i);
        i = json_skip_space(s, n, i);
        if (i >= n || s[i] != ':') fail("%s:%zu: expected ':' at byte %zu", path.c_str(), line_no, i);
        i = json_skip_space(s, n, i + 1);
        if (!field(key, &i) && !json_skip_value(s, n, &i))
            fail("%s:%zu: bad JSON value at byte %zu", path.c_str(), line_no, i);
        i = json_skip_space(s, n, i);
        if (i < n && s[i] == ',') i = json_skip_space(s, n, i + 1);
        else if (i >= n || s[i] != '}') fail("%s:%zu: expected ',' or '}' at byte %zu", path.c_str(), line_no, i);
    }
    if (i >= n) fail("%s:%zu: truncated JSON object", path.c_str(), line_no);
}

// A string field's value at s[*i] into *out; fails naming the field.
static void jsonl_string(const char* s, size_t n, size_t* i, const char* name, const std::string& path,
                         size_t line_no, std::string* out) {
    if (*i >= n || s[*i] != '"') fail("%s:%zu: \"%s\" is not a string", path.c_str(), line_no, name);
    if (!json_read_string(s, n, i, out)) fail("%s:%zu: bad \"%s\" string", path.c_str(), line_no, name);
}

// The "text" field of one JSONL record.
static void jsonl_text(const char* s, size_t n, const std::string& path, size_t line_no, std::string* text) {
    bool found = false;
    jsonl_fields(s, n, path, line_no, [&](const std::string& key, size_t* i) {
        if (key != "text" || found) return false;
        jsonl_string(s, n, i, "text", path, line_no, text);
        return found = true;
    });
    if (!found) fail("%s:%zu: record has no \"text\" field", path.c_str(), line_no);
}

// Next document into *doc; false when every input is used up. Empty documents are skipped.
static bool doc_source_next(DocSource* s, std::string* doc) {
    while (true) {
        if (s->jsonl != nullptr) {
            char* line = nullptr;
            size_t cap = 0;
            ssize_t len = getline(&line, &cap, s->jsonl);
            if (len < 0) {
                free(line);
                if (ferror(s->jsonl)) fail("%s: read error (%s)", s->path.c_str(), strerror(errno));
                if (s->jsonl != stdin) fclose(s->jsonl);
                s->jsonl = nullptr;
                continue;
            }
            s->line_no++;
            s->bytes_done += (uint64_t)len;
            size_t n = (size_t)len;
            while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' ')) n--;
            if (n > 0) jsonl_text(line, n, s->path, s->line_no, doc);
            free(line);
            if (n == 0) continue;  // blank line
            if (doc->empty()) { s->empty_docs++; continue; }
            return true;
        }
        if (s->in_text) {
            size_t start = s->text_pos, end = s->text.size(), next = end;
            if (s->split_at_sep) {
                // the document runs to the next line that equals the separator (a CR before
                // the newline is ignored, so CRLF files work); that line is dropped
                for (size_t p = start; p < s->text.size();) {
                    size_t nl = s->text.find('\n', p);
                    size_t line_end = nl == std::string::npos ? s->text.size() : nl;
                    size_t cmp_end = line_end > p && s->text[line_end - 1] == '\r' ? line_end - 1 : line_end;
                    if (s->text.compare(p, cmp_end - p, s->doc_sep) == 0) {
                        end = p;
                        next = nl == std::string::npos ? s->text.size() : nl + 1;
                        break;
                    }
                    p = nl == std::string::npos ? s->text.size() : nl + 1;
                }
            }
            doc->assign(s->text, start, end - start);
            s->text_pos = next;
            if (next >= s->text.size()) {
                s->in_text = false;
                s->text.clear();
                s->text.shrink_to_fit();
            }
            if (doc->empty()) { s->empty_docs++; continue; }
            return true;
        }
        if (s->next_file >= s->files.size()) return false;
        s->path = s->files[s->next_file++];
        s->line_no = 0;
        if (s->path == "-") {
            s->jsonl = stdin;
        } else if (is_jsonl(s->path)) {
            s->jsonl = fopen_or_fail(s->path.c_str(), "rb");
        } else {
            s->text = read_file_or_fail(s->path);
            s->bytes_done += s->text.size();
            s->text_pos = 0;
            s->in_text = true;
            if (s->text.empty()) { s->in_text = false; s->empty_docs++; }
        }
    }
}

// Collects tokens of one split (val or train) and writes PREFIX_SPLIT_%06d.bin shards
// of exactly shard_tokens tokens each (the last one shorter). Documents may straddle two
// shards, as in llm.c's own preprocessing.
struct ShardWriter {
    std::string prefix, split;
    size_t shard_tokens;
    int token_bytes;  // 2: uint16 ids (magic 20240520); 4: uint32 ids (20240801), for ids past 65535
    std::string buf;  // the tokens, little-endian as the file stores them
    int next_index = 0;
    uint64_t total_tokens = 0;
    std::vector<std::pair<std::string, size_t>> written;  // path, tokens
};

static void shard_writer_flush(ShardWriter* w) {
    if (w->buf.empty()) return;
    char name[64];
    snprintf(name, sizeof(name), "_%s_%06d.bin", w->split.c_str(), w->next_index++);
    AtomicFile f;
    atomic_open(&f, w->prefix + name);
    size_t ntok = w->buf.size() / w->token_bytes;
    int32_t header[256] = {0};
    header[0] = w->token_bytes == 4 ? SHARD_MAGIC_U32 : SHARD_MAGIC;
    header[1] = w->token_bytes == 4 ? SHARD_VERSION_U32 : SHARD_VERSION;
    header[2] = (int32_t)ntok;
    fwrite_or_fail(header, sizeof(header), 1, f.f, f.tmp.c_str());
    fwrite_or_fail(w->buf.data(), 1, w->buf.size(), f.f, f.tmp.c_str());
    atomic_commit(&f);
    w->written.emplace_back(f.path, ntok);
    w->buf.clear();
}

static void shard_writer_push(ShardWriter* w, uint32_t token) {
    uint8_t le[4] = {(uint8_t)token, (uint8_t)(token >> 8), (uint8_t)(token >> 16), (uint8_t)(token >> 24)};
    w->buf.append((const char*)le, w->token_bytes);
    w->total_tokens++;
    if (w->buf.size() == w->shard_tokens * w->token_bytes) shard_writer_flush(w);
}

static void print_progress(const DocSource* src, uint64_t docs, uint64_t tokens, double t0, bool final) {
    double dt = std::max(now_seconds() - t0, 1e-9);
    if (src->stdin_input) {
        fprintf(stderr, "\r[stdin]");  // no total to show progress against
    } else {
        double frac = src->total_bytes ? (double)src->bytes_done / (double)src->total_bytes : 1.0;
        const int width = 30;
        int filled = std::min(width, (int)(frac * width));
        fprintf(stderr, "\r[%.*s%*s] %5.1f%%", filled, "##############################", width - filled, "", 100.0 * frac);
    }
    fprintf(stderr, " %llu docs %.1fM tokens | %.0f docs/s %.2f MB/s%s", (unsigned long long)docs, tokens / 1e6,
            docs / dt, src->bytes_done / 1e6 / dt, final ? "\n" : "");
    fflush(stderr);
}

static int cmd_shards(int argc, char** argv) {
    const char* usage =
        "usage: ./tokenize shards --out PREFIX [options] INPUT...\n"
        "  Tokenizes documents into llm.c data shards: 256 x int32 header [20240520, 1, ntok],\n"
        "  then ntok x uint16; when the vocabulary has ids past 65535 (--tiktoken with cl100k_base\n"
        "  or Llama 3), llm.c's Llama 3 layout: header [20240801, 7, ntok], then ntok x uint32.\n"
        "  Every document is preceded by the separator: EOT (50256) for GPT-2, --bos-id for\n"
        "  --tiktoken. The val split goes to PREFIX_val_000000.bin (...), the rest to\n"
        "  PREFIX_train_000000.bin, _000001.bin, ...\n"
        "  INPUT: a text file (one document), a .jsonl file (one document per line: its \"text\"),\n"
        "  or a directory (every regular file below it, in sorted order); - reads JSONL on stdin.\n"
        "options:\n"
        "  --out PREFIX         output path prefix, e.g. data/bible/bible (required)\n"
        "  --val-docs N         the first N documents are the val split (default 0)\n"
        "  --val-fraction F     instead: every document i with floor((i+1)F) > floor(iF), i.e. an\n"
        "                       evenly spread fraction F of the documents (default 0: no val split)\n"
        "  --shard-tokens M     tokens per shard file (default 100000000, as llm.c)\n"
        "  --threads K          encoding threads (default: all cores)\n"
        "  --doc-sep LINE       in text files, a line equal to LINE ends a document (the line is\n"
        "                       dropped); '' splits at blank lines\n"
        "  --bos-id N           with --tiktoken: the id that precedes every document (default:\n"
        "                       100257 <|endoftext|> for a file of 100,256 ranks (cl100k_base),\n"
        "                       128000 <|begin_of_text|> for 128,000 ranks (Llama 3); other\n"
        "                       files need it)\n";
    std::string prefix, doc_sep;
    bool has_sep = false;
    VocabFlags vocab;
    long long bos_id = -1, val_docs = 0, shard_tokens = 100000000, threads = std::max(1u, std::thread::hardware_concurrency());
    double val_fraction = 0.0;
    bool use_fraction = false;
    std::vector<std::string> inputs;
    for (int i = 2; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--help" || a == "-h") { printf("%s%s", usage, VOCAB_HELP); return 0; }
        if (vocab_flag(argc, argv, &i, &vocab, "shards")) continue;
        bool is_option = a.size() > 1 && a[0] == '-';
        if (is_option && i + 1 >= argc) fail("shards: %s: unknown, or missing its value (see --help)", a.c_str());
        const char* v = is_option ? argv[i + 1] : nullptr;
        if (a == "--out") { prefix = v; i++; }
        else if (a == "--doc-sep") { doc_sep = v; has_sep = true; i++; }
        else if (a == "--val-docs") {
            if (!parse_int(v, 0, INT64_MAX, &val_docs)) fail("shards: --val-docs '%s': expected an integer >= 0", v);
            i++;
        } else if (a == "--val-fraction") {
            if (!parse_float(v, &val_fraction) || val_fraction < 0 || val_fraction > 1)
                fail("shards: --val-fraction '%s': expected a number in [0, 1]", v);
            use_fraction = true;
            i++;
        } else if (a == "--shard-tokens") {
            if (!parse_int(v, 1, INT32_MAX, &shard_tokens)) fail("shards: --shard-tokens '%s': expected 1..%d", v, INT32_MAX);
            i++;
        } else if (a == "--bos-id") {
            if (!parse_int(v, 0, INT32_MAX, &bos_id)) fail("shards: --bos-id '%s': expected 0..%d", v, INT32_MAX);
            i++;
        } else if (a == "--threads") {
            if (!parse_int(v, 1, 1024, &threads)) fail("shards: --threads '%s': expected 1..1024", v);
            i++;
        } else if (is_option) {
            fail("shards: unknown option '%s' (see --help)", a.c_str());
        } else {
            inputs.push_back(a);
        }
    }
    if (prefix.empty()) fail("shards: --out PREFIX is required (see --help)");
    if (inputs.empty()) fail("shards: no INPUT files (see --help)");
    if (use_fraction && val_docs > 0) fail("shards: give --val-docs or --val-fraction, not both");

    if (bos_id >= 0 && vocab.tiktoken == nullptr) fail("shards: --bos-id goes with --tiktoken (GPT-2's EOT is 50256)");
    Bpe bpe;
    vocab_load(&bpe, vocab, "shards");
    if (bos_id >= 0) bpe.eot_token = (uint32_t)bos_id;
    if (bpe.eot_token == UINT32_MAX)
        fail("shards: %s has %zu ranks, not a file whose separator is known: pass --bos-id N", vocab.tiktoken,
             bpe.pieces.size());
    // ids past 65535 need llm.c's 32-bit layout
    int token_bytes = std::max<size_t>(bpe.pieces.size() - 1, bpe.eot_token) > 65535 ? 4 : 2;
    DocSource src;
    src.doc_sep = doc_sep;
    src.split_at_sep = has_sep;
    doc_source_init(&src, inputs);
    std::string parent = std::filesystem::path(prefix).parent_path().string();
    if (!parent.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(parent, ec);
        if (ec) fail("%s: cannot create directory (%s)", parent.c_str(), ec.message().c_str());
    }

    ShardWriter val, train;
    val.prefix = train.prefix = prefix;
    val.split = "val";
    train.split = "train";
    val.shard_tokens = train.shard_tokens = (size_t)shard_tokens;
    val.token_bytes = train.token_bytes = token_bytes;
    std::vector<BpeCache> caches((size_t)threads);
    bool tty = isatty(fileno(stderr));
    double t0 = now_seconds(), last_report = t0;
    uint64_t docs = 0, val_doc_count = 0;

    // Batches of documents: read in order, encode in parallel, written in order, so the
    // output does not depend on the thread count.
    const size_t BATCH_BYTES = 32u << 20, BATCH_DOCS = 1u << 16;
    std::vector<std::string> batch;
    std::vector<std::vector<uint32_t>> tokens;
    bool more = true;
    while (more) {
        size_t nbytes = 0, n = 0;
        while (n < BATCH_DOCS && nbytes < BATCH_BYTES) {
            if (batch.size() <= n) batch.emplace_back();
            if (!doc_source_next(&src, &batch[n])) { more = false; break; }
            nbytes += batch[n].size();
            n++;
        }
        if (tokens.size() < n) tokens.resize(n);
        std::atomic<size_t> next_doc{0};
        auto work = [&](size_t t) {
            for (size_t d; (d = next_doc.fetch_add(1)) < n;) {
                tokens[d].clear();
                bpe_encode(&bpe, &caches[t], batch[d].data(), batch[d].size(), &tokens[d]);
            }
        };
        std::vector<std::thread> pool;
        for (size_t t = 1; t < (size_t)threads && t < n; t++) pool.emplace_back(work, t);
        work(0);
        for (auto& th : pool) th.join();
        for (size_t d = 0; d < n; d++, docs++) {
            bool to_val = use_fraction ? std::floor((double)(docs + 1) * val_fraction) > std::floor((double)docs * val_fraction)
                                       : docs < (uint64_t)val_docs;
            ShardWriter* w = to_val ? &val : &train;
            val_doc_count += to_val;
            shard_writer_push(w, bpe.eot_token);
            for (uint32_t id : tokens[d]) shard_writer_push(w, id);
        }
        double now = now_seconds();
        if (now - last_report > (tty ? 0.25 : 10.0)) {
            print_progress(&src, docs, val.total_tokens + train.total_tokens, t0, !tty);
            last_report = now;
        }
    }
    shard_writer_flush(&val);
    shard_writer_flush(&train);
    if (tty) print_progress(&src, docs, val.total_tokens + train.total_tokens, t0, true);
    if (docs == 0) fail("shards: the inputs hold no documents (all empty?)");

    double dt = std::max(now_seconds() - t0, 1e-9);
    for (auto* w : {&val, &train}) {
        for (auto& p : w->written) printf("  %s: %zu tokens\n", p.first.c_str(), p.second);
        if (w->written.empty()) continue;  // e.g. val and train written by two runs
        // A shard left over from an earlier, bigger run would be picked up by a glob.
        char name[64];
        snprintf(name, sizeof(name), "_%s_%06d.bin", w->split.c_str(), w->next_index);
        struct stat st;
        if (stat((prefix + name).c_str(), &st) == 0)
            fprintf(stderr, "warning: %s%s is left from an earlier run; delete it\n", prefix.c_str(), name);
    }
    printf("shards: %llu docs (%llu val, %llu empty skipped), %llu tokens (val %llu in %zu files, train %llu in %zu files), "
           "%.1f MB in %.1f s (%.2f MB/s, %.0f tokens/s, %lld threads)%s\n",
           (unsigned long long)docs, (unsigned long long)val_doc_count, (unsigned long long)src.empty_docs,
           (unsigned long long)(val.total_tokens + train.total_tokens), (unsigned long long)val.total_tokens,
           val.written.size(), (unsigned long long)train.total_tokens, train.written.size(), src.bytes_done / 1e6, dt,
           src.bytes_done / 1e6 / dt, (val.total_tokens + train.total_tokens) / dt, threads,
           token_bytes == 4 ? ", uint32 ids (magic 20240801)" : "");
    return 0;
}

// ----------------------------------------------------------------------------------
// hellaswag: HellaSwag's JSONL (ctx, endings, label) -> llm.c's eval file (llmc/hellaswag.h)

static int cmd_hellaswag(int argc, char** argv) {
    const char* usage =
        "usage: ./tokenize hellaswag IN.jsonl OUT.bin [--vocab-dir DIR]\n"
        "  Turns HellaSwag records ({\"ctx\": ..., \"endings\": [...], \"label\": N}, one a line) into\n"
        "  llm.c's eval file for the trainers' -h 1: the context's tokens, and each ending encoded\n"
        "  with a leading space, as GPT-2 sees a continuation. data/prepare_hellaswag.sh uses it.\n";
    std::vector<const char*> files;
    VocabFlags v;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { printf("%s", usage); return 0; }
        if (vocab_flag(argc, argv, &i, &v, "hellaswag")) continue;
        if (argv[i][0] == '-') {
            fail("hellaswag: unknown option '%s' (see --help)", argv[i]);
        } else {
            files.push_back(argv[i]);
        }
    }
    if (files.size() != 2) fail("hellaswag: expected IN.jsonl OUT.bin (see --help)");
    if (v.tiktoken != nullptr) fail("hellaswag: --tiktoken: not supported (llm.c's eval file holds 16-bit ids)");
    const std::string in = files[0];
    Bpe bpe;
    vocab_load(&bpe, v, "hellaswag");
    BpeCache cache;
    FILE* f = fopen_or_fail(in.c_str(), "r");
    std::vector<uint16_t> words;  // every example, as the file stores them
    size_t longest = 0, line_no = 0, count = 0, not_four = 0;
    char* line = nullptr;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) >= 0) {
        line_no++;
        if (json_skip_space(line, len, 0) >= (size_t)len) continue;  // blank line
        std::string ctx, piece;
        std::vector<std::string> endings;
        long long label = -1;
        jsonl_fields(line, len, in, line_no, [&](const std::string& key, size_t* i) {
            if (key == "ctx") {
                jsonl_string(line, len, i, "ctx", in, line_no, &ctx);
            } else if (key == "label") {
                size_t start = *i;
                if (!json_skip_value(line, len, i) || !parse_int(std::string(line + start, *i - start).c_str(), 0, 255, &label))
                    fail("%s:%zu: \"label\" is not an integer in 0..255", in.c_str(), line_no);
            } else if (key == "endings") {
                if (*i >= (size_t)len || line[*i] != '[') fail("%s:%zu: \"endings\" is not an array", in.c_str(), line_no);
                *i = json_skip_space(line, len, *i + 1);
                while (*i < (size_t)len && line[*i] != ']') {
                    jsonl_string(line, len, i, "endings", in, line_no, &piece);
                    endings.push_back(piece);
                    *i = json_skip_space(line, len, *i);
                    if (*i < (size_t)len && line[*i] == ',') *i = json_skip_space(line, len, *i + 1);
                }
                if (*i >= (size_t)len) fail("%s:%zu: unterminated \"endings\"", in.c_str(), line_no);
                (*i)++;
            } else {
                return false;
            }
            return true;
        });
        if (ctx.empty() || endings.empty() || label < 0)
            fail("%s:%zu: a record needs \"ctx\", \"endings\" and \"label\"", in.c_str(), line_no);
        if (label >= (long long)endings.size())
            fail("%s:%zu: label %lld but %zu endings", in.c_str(), line_no, label, endings.size());
        not_four += endings.size() != 4;
        if (count >= 65535) fail("%s: more than 65535 examples (the file's example index is 16 bits)", in.c_str());
        std::vector<uint32_t> ids;
        size_t begin = words.size();
        words.insert(words.end(), {65535, 0, (uint16_t)count, (uint16_t)label, (uint16_t)endings.size()});
        auto add_tokens = [&](const std::string& text) {
            ids.clear();
            bpe_encode(&bpe, &cache, text.data(), text.size(), &ids);
            if (ids.empty() || ids.size() > 65535) fail("%s:%zu: a text of %zu tokens", in.c_str(), line_no, ids.size());
            words.push_back((uint16_t)ids.size());
            for (uint32_t id : ids) words.push_back((uint16_t)id);
        };
        add_tokens(ctx);
        for (const std::string& e : endings) add_tokens(" " + e);
        size_t bytes = 2 * (words.size() - begin);
        if (bytes > 65535) fail("%s:%zu: the example takes %zu bytes; the file allows 65535", in.c_str(), line_no, bytes);
        words[begin + 1] = (uint16_t)bytes;
        longest = std::max(longest, bytes);
        count++;
    }
    free(line);
    if (ferror(f)) fail("%s: read error (%s)", in.c_str(), strerror(errno));
    fclose(f);
    if (count == 0) fail("%s: no records", in.c_str());
    int32_t header[256] = {0};
    header[0] = 20240522;  // llm.c's eval file, version 1
    header[1] = 1;
    header[2] = (int32_t)count;
    header[3] = (int32_t)longest;
    AtomicFile out;
    atomic_open(&out, files[1]);
    fwrite_or_fail(header, sizeof(header), 1, out.f, out.tmp.c_str());
    fwrite_or_fail(words.data(), sizeof(uint16_t), words.size(), out.f, out.tmp.c_str());
    atomic_commit(&out);
    printf("wrote %s: %zu examples, longest %zu bytes\n", files[1], count, longest);
    if (not_four > 0)
        printf("note: %zu examples do not have 4 endings: the trainers here score them, llm.c's loader "
               "accepts exactly 4\n", not_four);
    return 0;
}

int main(int argc, char** argv) {
    const char* usage =
        "usage: ./tokenize COMMAND [--help]\n"
        "  encode          text on stdin -> token ids on stdout\n"
        "  decode          token ids on stdin -> text on stdout\n"
        "  tokenizer-file  write llm.c's tokenizer file (for printing samples while training)\n"
        "  shards          text / .jsonl corpora -> llm.c data shards\n"
        "  hellaswag       HellaSwag's .jsonl -> llm.c's eval file (for -h 1)\n"
        "GPT-2's vocabulary (encoder.json, vocab.bpe) is read from data/gpt2_vocab unless --vocab-dir\n"
        "says otherwise; data/get_vocab.sh fetches it. encode, decode and shards take --tiktoken FILE\n"
        "instead: a tiktoken vocabulary (cl100k_base, Llama 3's tokenizer.model), split with\n"
        "cl100k_base's pattern.\n";
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        printf("%s", usage);
        return argc < 2 ? 1 : 0;
    }
    std::string cmd = argv[1];
    if (cmd == "encode") return cmd_encode(argc, argv);
    if (cmd == "decode") return cmd_decode(argc, argv);
    if (cmd == "tokenizer-file") return cmd_tokenizer_file(argc, argv);
    if (cmd == "shards") return cmd_shards(argc, argv);
    if (cmd == "hellaswag") return cmd_hellaswag(argc, argv);
    if (cmd == "unicode-classes") return cmd_unicode_classes();
    if (cmd == "pretokens") return cmd_pretokens(argc, argv);
    fail("unknown command '%s' (see ./tokenize --help)", cmd.c_str());
}
