// bpe.h: byte-level BPE tokenizers (encode and decode), compatible token for token with
// tiktoken: GPT-2's (OpenAI's encoder.py, tiktoken's "gpt2") and tiktoken-format files
// such as cl100k_base's and Llama 3's.
// defines: Bpe, BpeCache, bpe_load, bpe_load_tiktoken, bpe_encode, bpe_decode, bpe_piece,
//          pretokenize_next, pretokenize_gpt2, pretokenize_cl100k, utf8_decode, char_class,
//          json_read_string
//
// Encoding a text is two stages:
//  1. Pre-tokenization splits the text into "words" with a regex, GPT-2's
//       's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//     or cl100k_base's (for tiktoken files; Llama 3 uses the same), see pretokenize_cl100k,
//     each matched by hand with the regex's leftmost-alternative-wins semantics. The
//     character classes come from unicode_tables.h.
//  2. Each word's UTF-8 bytes start as one token per byte and are merged pairwise, lowest
//     merge rank first, until no adjacent pair has a merge. GPT-2's ranks are the lines of
//     vocab.bpe; a tiktoken file's are those of the merged tokens.
//
// Invalid UTF-8 (the input is bytes, not checked text): every byte that does not start
// a well-formed sequence (overlong forms, surrogates, > U+10FFFF and truncated sequences
// included) is one character of class "other" on its own. Byte-level BPE can encode any
// byte, so decode(encode(x)) == x holds for every input, valid UTF-8 or not.
//
// GPT-2's files: encoder.json maps token strings to ids, where a token's bytes are spelled
// with GPT-2's printable byte->unicode alphabet (byte 0x20 is 'Ġ' U+0120 and so on);
// vocab.bpe lists the merges "A B" in rank order after a "#version" line. Tokens are kept
// here as their raw bytes; the alphabet only matters while loading. tiktoken's file format
// is described in its section below.
#pragma once
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "../llmc/utils.h"
#include "unicode_tables.h"

// ----------------------------------------------------------------------------------
// UTF-8 and character classes

const uint32_t UTF8_INVALID = 0xFFFFFFFFu;

// Decodes the code point starting at s[i] (i < n) into *cp and returns its byte length.
// Anything not well-formed gives length 1 and *cp = UTF8_INVALID.
inline int utf8_decode(const uint8_t* s, size_t n, size_t i, uint32_t* cp) {
    uint8_t c = s[i];
    if (c < 0x80) { *cp = c; return 1; }
    int len;
    uint32_t v;
    uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) { len = 2; v = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3; v = c & 0x0F;
        if (c == 0xE0) lo = 0xA0;  // overlong
        if (c == 0xED) hi = 0x9F;  // UTF-16 surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4; v = c & 0x07;
        if (c == 0xF0) lo = 0x90;  // overlong
        if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
        *cp = UTF8_INVALID;
        return 1;
    }
    if (i + len > n) { *cp = UTF8_INVALID; return 1; }
    for (int k = 1; k < len; k++) {
        uint8_t b = s[i + k];
        if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) { *cp = UTF8_INVALID; return 1; }
        v = (v << 6) | (b & 0x3F);
    }
    *cp = v;
    return len;
}

inline void utf8_append(std::string* out, uint32_t cp) {
    if (cp < 0x80) {
        out->push_back((char)cp);
    } else if (cp < 0x800) {
        out->push_back((char)(0xC0 | (cp >> 6)));
        out->push_back((char)(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out->push_back((char)(0xE0 | (cp >> 12)));
        out->push_back((char)(0x80 | ((cp >> 6) & 0x3F)));
        out->push_back((char)(0x80 | (cp & 0x3F)));
    } else {
        out->push_back((char)(0xF0 | (cp >> 18)));
        out->push_back((char)(0x80 | ((cp >> 12) & 0x3F)));
        out->push_back((char)(0x80 | ((cp >> 6) & 0x3F)));
        out->push_back((char)(0x80 | (cp & 0x3F)));
    }
}

enum CharClass : uint8_t { CHAR_OTHER = 0, CHAR_LETTER = 1, CHAR_NUMBER = 2, CHAR_SPACE = 3 };

template <size_t N>
inline bool unicode_in(const UnicodeRange (&r)[N], uint32_t cp) {
    size_t lo = 0, hi = N;  // binary search for the last range with r.lo <= cp
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r[mid].lo <= cp) lo = mid + 1; else hi = mid;
    }
    return lo > 0 && cp <= r[lo - 1].hi;
}

inline CharClass char_class_slow(uint32_t cp) {
    if (cp == UTF8_INVALID) return CHAR_OTHER;
    if (unicode_in(unicode_letter_ranges, cp)) return CHAR_LETTER;
    if (unicode_in(unicode_number_ranges, cp)) return CHAR_NUMBER;
    if (unicode_in(unicode_space_ranges, cp)) return CHAR_SPACE;
    return CHAR_OTHER;
}

// Nearly all text is in the Basic Multilingual Plane: one 64 KiB table answers those
// with a load instead of three binary searches. Built once, thread-safely (magic static).
inline CharClass char_class(uint32_t cp) {
    struct BmpTable {
        uint8_t cls[0x10000];
        BmpTable() { for (uint32_t c = 0; c < 0x10000; c++) cls[c] = char_class_slow(c); }
    };
    static const BmpTable table;
    return cp < 0x10000 ? (CharClass)table.cls[cp] : char_class_slow(cp);
}

// ----------------------------------------------------------------------------------
// Pre-tokenization: GPT-2's pattern and cl100k_base's, each matched by hand with the
// regex's semantics (the first alternative that matches wins; greedy runs give back
// characters only where a later part of the same alternative needs them).

enum BpePattern : uint8_t { BPE_PATTERN_GPT2 = 0, BPE_PATTERN_CL100K = 1 };

inline CharClass char_class_at(const uint8_t* s, size_t n, size_t i) {
    uint32_t cp;
    utf8_decode(s, n, i, &cp);
    return char_class(cp);
}

// End of the run of characters of class cls that starts at s[i].
inline size_t pretok_run_end(const uint8_t* s, size_t n, size_t i, CharClass cls) {
    while (i < n) {
        uint32_t cp;
        int len = utf8_decode(s, n, i, &cp);
        if (char_class(cp) != cls) break;
        i += len;
    }
    return i;
}

// `'s|'t|'re|'ve|'m|'ll|'d` at s[i]: the end of the contraction, or i if there is none.
// any_case: cl100k's (?i:...), which js-tiktoken spells out as every ASCII upper/lower
// mix ('S 'Re 'lL ...). Python's and Rust's (?i) would also take 'ſ (U+017F) for 's.
inline size_t pretok_contraction(const uint8_t* s, size_t n, size_t i, bool any_case) {
    if (s[i] != '\'' || i + 1 >= n) return i;
    auto lower = [&](size_t k) { return any_case && s[k] >= 'A' && s[k] <= 'Z' ? (uint8_t)(s[k] + 32) : s[k]; };
    uint8_t a = lower(i + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if (i + 2 < n) {
        uint8_t b = lower(i + 2);
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    }
    return i;
}

// The whitespace run that starts at s[i] (a \s character).
struct PretokSpaces {
    size_t end;          // first byte after the run
    size_t last;         // start of its last character
    size_t count;        // characters in it
    size_t newline_end;  // end of its last '\r' or '\n'; the run's start if it has none
};

inline PretokSpaces pretok_spaces(const uint8_t* s, size_t n, size_t i) {
    PretokSpaces r = {i, i, 0, i};
    while (r.end < n) {
        uint32_t cp;
        int len = utf8_decode(s, n, r.end, &cp);
        if (char_class(cp) != CHAR_SPACE) break;
        r.last = r.end;
        r.end += len;
        r.count++;
        if (cp == '\r' || cp == '\n') r.newline_end = r.end;
    }
    return r;
}

// `\s+(?!\S)|\s+` on a whitespace run: all of it if it ends the text, else all but its last
// character (which then becomes the optional space of the next word). When the run is a
// single character followed by non-space that leaves nothing, and `\s+` takes it.
inline size_t pretok_spaces_end(const PretokSpaces& r, size_t n) {
    return r.end == n || r.count == 1 ? r.end : r.last;
}

// GPT-2's pattern: the end of the pre-token ("word") that starts at s[i], i < n.
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
inline size_t pretokenize_gpt2(const uint8_t* s, size_t n, size_t i) {
    size_t j = pretok_contraction(s, n, i, false);  // lower case only, exactly as in the pattern
    if (j > i) return j;
    // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: one optional space, then a run
    if (s[i] == ' ' && i + 1 < n) {
        CharClass next = char_class_at(s, n, i + 1);
        if (next != CHAR_SPACE) return pretok_run_end(s, n, i + 1, next);
    }
    CharClass cls = char_class_at(s, n, i);
    if (cls != CHAR_SPACE) return pretok_run_end(s, n, i, cls);
    return pretok_spaces_end(pretok_spaces(s, n, i), n);
}

// cl100k_base's pattern (and Llama 3's, the same but for how (?i) is written), as
// js-tiktoken 1.0.21's cl100k_base pat_str has it:
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//    ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
inline size_t pretokenize_cl100k(const uint8_t* s, size_t n, size_t i) {
    size_t j = pretok_contraction(s, n, i, true);
    if (j > i) return j;
    uint32_t cp;
    size_t next = i + utf8_decode(s, n, i, &cp);
    CharClass cls = char_class(cp);
    // `[^\r\n\p{L}\p{N}]?\p{L}+`: letters, perhaps after one character that is neither a
    // letter, a number, '\r' nor '\n' (a space, a tab, punctuation, ...)
    if (cls == CHAR_LETTER) return pretok_run_end(s, n, i, CHAR_LETTER);
    if (cls != CHAR_NUMBER && cp != '\r' && cp != '\n' && next < n && char_class_at(s, n, next) == CHAR_LETTER)
        return pretok_run_end(s, n, next, CHAR_LETTER);
    // `\p{N}{1,3}`
    if (cls == CHAR_NUMBER) {
        j = next;
        for (int k = 1; k < 3 && j < n; k++) {
            int len = utf8_decode(s, n, j, &cp);
            if (char_class(cp) != CHAR_NUMBER) break;
            j += len;
        }
        return j;
    }
    // ` ?[^\s\p{L}\p{N}]+[\r\n]*`: a run of other characters, perhaps after one space, with
    // the line breaks right after it
    size_t run = cp == ' ' && next < n && char_class_at(s, n, next) == CHAR_OTHER ? next : i;
    if (char_class_at(s, n, run) == CHAR_OTHER) {
        j = pretok_run_end(s, n, run, CHAR_OTHER);
        while (j < n && (s[j] == '\r' || s[j] == '\n')) j++;
        return j;
    }
    // `\s*[\r\n]+`: a whitespace run through its last line break, if it has one; `\s*`
    // gives back characters until `[\r\n]+` matches, which is at the last '\r' or '\n'
    PretokSpaces r = pretok_spaces(s, n, i);
    if (r.newline_end > i) return r.newline_end;
    return pretok_spaces_end(r, n);
}

inline size_t pretokenize_next(BpePattern pattern, const uint8_t* s, size_t n, size_t i) {
    return pattern == BPE_PATTERN_CL100K ? pretokenize_cl100k(s, n, i) : pretokenize_gpt2(s, n, i);
}

// ----------------------------------------------------------------------------------
// JSON strings (encoder.json keys; the "text" field of .jsonl documents)

inline int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

inline bool json_read_hex4(const char* s, size_t n, size_t* pos, uint32_t* v) {
    if (*pos + 4 > n) return false;
    *v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hex_value(s[*pos + k]);
        if (h < 0) return false;
        *v = (*v << 4) | (uint32_t)h;
    }
    *pos += 4;
    return true;
}

// Reads the JSON string whose opening quote is s[*pos] into *out as UTF-8 and moves *pos
// past the closing quote. \uXXXX escapes may be surrogate pairs; a lone surrogate becomes
// U+FFFD, as JavaScript's TextEncoder would make it. Returns false on malformed input.
inline bool json_read_string(const char* s, size_t n, size_t* pos, std::string* out) {
    size_t i = *pos;
    if (i >= n || s[i] != '"') return false;
    i++;
    out->clear();
    while (i < n) {
        char c = s[i++];
        if (c == '"') { *pos = i; return true; }
        if (c != '\\') { out->push_back(c); continue; }
        if (i >= n) return false;
        char e = s[i++];
        switch (e) {
            case '"': out->push_back('"'); break;
            case '\\': out->push_back('\\'); break;
            case '/': out->push_back('/'); break;
            case 'b': out->push_back('\b'); break;
            case 'f': out->push_back('\f'); break;
            case 'n': out->push_back('\n'); break;
            case 'r': out->push_back('\r'); break;
            case 't': out->push_back('\t'); break;
            case 'u': {
                uint32_t v;
                if (!json_read_hex4(s, n, &i, &v)) return false;
                if (v >= 0xD800 && v <= 0xDBFF && i + 1 < n && s[i] == '\\' && s[i + 1] == 'u') {
                    size_t k = i + 2;
                    uint32_t w;
                    if (!json_read_hex4(s, n, &k, &w)) return false;
                    if (w >= 0xDC00 && w <= 0xDFFF) {
                        v = 0x10000 + ((v - 0xD800) << 10) + (w - 0xDC00);
                        i = k;
                    }
                }
                if (v >= 0xD800 && v <= 0xDFFF) v = 0xFFFD;
                utf8_append(out, v);
                break;
            }
            default: return false;
        }
    }
    return false;
}

inline size_t json_skip_space(const char* s, size_t n, size_t i) {
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    return i;
}

// ----------------------------------------------------------------------------------
// The vocabulary

struct BpeMerge {
    uint32_t rank;    // GPT-2: line of vocab.bpe (0 = first merge); tiktoken: the merged token's
                      // rank. Lower merges first.
    uint32_t merged;  // id of the concatenated token
};

struct Bpe {
    std::vector<std::string> pieces;                        // id -> raw bytes
    std::unordered_map<std::string, uint32_t> piece_to_id;  // raw bytes -> id (no EOT)
    std::unordered_map<uint64_t, BpeMerge> merges;          // (left id << 32 | right id)
    uint32_t byte_token[256];                               // the token of each single byte
    uint32_t eot_token;  // the document separator: "<|endoftext|>", 50256 for GPT-2; for a
                         // tiktoken file a special token past its ranks (UINT32_MAX: none known)
    std::string eot_text;  // what eot_token decodes to when it is not in pieces
    BpePattern pattern = BPE_PATTERN_GPT2;  // the pre-tokenization split pattern
};

// The token of each single byte: every byte must have one, or some texts cannot be encoded.
inline void bpe_set_byte_tokens(Bpe* b, const std::string& path) {
    for (int c = 0; c < 256; c++) {
        auto it = b->piece_to_id.find(std::string(1, (char)c));
        if (it == b->piece_to_id.end()) fail("%s: no token for byte 0x%02X", path.c_str(), c);
        b->byte_token[c] = it->second;
    }
}

// GPT-2 spells bytes as printable code points: bytes that are printable Latin-1 stand
// for themselves, the other 68 get U+0100, U+0101, ... in byte order. Returns the
// code point -> byte table (-1 where a code point spells no byte), for cp < 512.
inline std::vector<int> gpt2_unicode_to_byte() {
    std::vector<int> table(512, -1);
    uint32_t next = 256;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        table[printable ? b : next++] = b;
    }
    return table;
}

// Turns a token spelled in GPT-2's alphabet into its raw bytes; false if it is not
// spelled in that alphabet.
inline bool gpt2_spelling_to_bytes(const std::string& spelled, const std::vector<int>& u2b,
                                          std::string* bytes) {
    bytes->clear();
    const uint8_t* s = (const uint8_t*)spelled.data();
    for (size_t i = 0; i < spelled.size();) {
        uint32_t cp;
        i += utf8_decode(s, spelled.size(), i, &cp);
        if (cp >= u2b.size() || u2b[cp] < 0) return false;
        bytes->push_back((char)u2b[cp]);
    }
    return true;
}

inline std::string read_file_or_fail(const std::string& path) {
    size_t size = file_size_or_fail(path.c_str());
    std::string data(size, '\0');
    FILE* f = fopen_or_fail(path.c_str(), "rb");
    if (size > 0) fread_or_fail(&data[0], 1, size, f, path.c_str());
    fclose(f);
    return data;
}

inline void bpe_load_encoder(Bpe* b, const std::string& path, const std::vector<int>& u2b) {
    std::string data = read_file_or_fail(path);
    const char* s = data.data();
    size_t n = data.size(), i = json_skip_space(s, n, 0);
    if (i >= n || s[i] != '{') fail("%s: not a JSON object (expected '{' at byte %zu)", path.c_str(), i);
    i = json_skip_space(s, n, i + 1);
    std::vector<std::pair<std::string, uint32_t>> entries;
    std::string key;
    while (i < n && s[i] != '}') {
        size_t at = i;
        if (!json_read_string(s, n, &i, &key)) fail("%s: bad JSON string key at byte %zu", path.c_str(), at);
        i = json_skip_space(s, n, i);
        if (i >= n || s[i] != ':') fail("%s: expected ':' at byte %zu", path.c_str(), i);
        i = json_skip_space(s, n, i + 1);
        uint64_t v = 0;
        size_t digits = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9' && digits < 10) v = v * 10 + (uint64_t)(s[i++] - '0'), digits++;
        if (digits == 0 || v >= (1u << 24)) fail("%s: bad token id at byte %zu", path.c_str(), i);
        entries.emplace_back(key, (uint32_t)v);
        i = json_skip_space(s, n, i);
        if (i < n && s[i] == ',') i = json_skip_space(s, n, i + 1);
        else if (i >= n || s[i] != '}') fail("%s: expected ',' or '}' at byte %zu", path.c_str(), i);
    }
    if (i >= n) fail("%s: truncated JSON (no closing '}')", path.c_str());
    if (entries.empty()) fail("%s: empty vocabulary", path.c_str());

    // ids must be exactly 0..V-1, each once
    size_t V = entries.size();
    b->pieces.assign(V, std::string());
    std::vector<bool> seen(V, false);
    b->eot_token = UINT32_MAX;
    std::string bytes;
    for (auto& e : entries) {
        if (e.second >= V || seen[e.second]) fail("%s: token ids are not 0..%zu each once (id %u)", path.c_str(), V - 1, e.second);
        seen[e.second] = true;
        if (e.first == "<|endoftext|>") {
            b->eot_token = e.second;
            b->pieces[e.second] = e.first;
            continue;
        }
        if (!gpt2_spelling_to_bytes(e.first, u2b, &bytes) || bytes.empty())
            fail("%s: token %u is not spelled in GPT-2's byte alphabet", path.c_str(), e.second);
        b->pieces[e.second] = bytes;
        if (!b->piece_to_id.emplace(bytes, e.second).second) fail("%s: token %u is a duplicate", path.c_str(), e.second);
    }
    if (b->eot_token == UINT32_MAX) fail("%s: no \"<|endoftext|>\" token", path.c_str());
    bpe_set_byte_tokens(b, path);
}

inline void bpe_load_merges(Bpe* b, const std::string& path, const std::vector<int>& u2b) {
    std::string data = read_file_or_fail(path);
    size_t pos = 0, line_no = 0;
    uint32_t rank = 0;
    std::string left, right;
    while (pos < data.size()) {
        size_t end = data.find('\n', pos);
        if (end == std::string::npos) end = data.size();
        std::string line = data.substr(pos, end - pos);
        pos = end + 1;
        line_no++;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty() || line.compare(0, 9, "#version:") == 0) continue;
        size_t sp = line.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 == line.size() || line.find(' ', sp + 1) != std::string::npos)
            fail("%s:%zu: expected two tokens separated by one space", path.c_str(), line_no);
        if (!gpt2_spelling_to_bytes(line.substr(0, sp), u2b, &left) ||
            !gpt2_spelling_to_bytes(line.substr(sp + 1), u2b, &right))
            fail("%s:%zu: not spelled in GPT-2's byte alphabet", path.c_str(), line_no);
        auto l = b->piece_to_id.find(left), r = b->piece_to_id.find(right), m = b->piece_to_id.find(left + right);
        if (l == b->piece_to_id.end() || r == b->piece_to_id.end() || m == b->piece_to_id.end())
            fail("%s:%zu: merge uses a token missing from encoder.json", path.c_str(), line_no);
        uint64_t key = ((uint64_t)l->second << 32) | r->second;
        b->merges.emplace(key, BpeMerge{rank++, m->second});  // a repeated pair keeps its first rank
    }
    if (b->merges.empty()) fail("%s: no merges", path.c_str());
}

// Loads DIR/encoder.json and DIR/vocab.bpe; any problem is a one-line error naming the file.
inline void bpe_load(Bpe* b, const char* vocab_dir) {
    std::vector<int> u2b = gpt2_unicode_to_byte();
    std::string dir(vocab_dir);
    if (!dir.empty() && dir.back() != '/') dir += '/';
    bpe_load_encoder(b, dir + "encoder.json", u2b);
    bpe_load_merges(b, dir + "vocab.bpe", u2b);
}

// ----------------------------------------------------------------------------------
// tiktoken's vocabulary file (cl100k_base.tiktoken, Llama 3's tokenizer.model): one line
// per token, "BASE64BYTES RANK". The rank is the token id and the merge priority both:
// two adjacent pieces merge when their concatenated bytes are a token, lowest rank first.
// That is the same algorithm as GPT-2's, with the merge table derived from the ranks.

inline int base64_value(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

// Standard base64 with '=' padding (RFC 4648) into *out; false if s[0..n) is not that.
inline bool base64_decode(const char* s, size_t n, std::string* out) {
    out->clear();
    if (n == 0 || n % 4 != 0) return false;
    size_t pad = s[n - 1] != '=' ? 0 : s[n - 2] != '=' ? 1 : 2;
    uint32_t bits = 0;
    int nbits = 0;
    for (size_t i = 0; i < n - pad; i++) {
        int v = base64_value(s[i]);
        if (v < 0) return false;
        bits = ((bits << 6) | (uint32_t)v) & 0xFFFFF;  // at most 8 + 6 bits are pending
        nbits += 6;
        if (nbits >= 8) {
            nbits -= 8;
            out->push_back((char)(bits >> nbits));
        }
    }
    return true;
}

// Known tiktoken files, told apart by their number of ranks: the special token that
// separates documents, which is not in the file, and the vocabulary with all the special
// tokens (a model's V: tiktoken's n_vocab for cl100k_base, Llama 3's 128,256).
struct TiktokenSpecial {
    size_t ranks;
    uint32_t id;
    const char* text;
    uint32_t vocab;
};
static const TiktokenSpecial TIKTOKEN_KNOWN[] = {
    {100256, 100257, "<|endoftext|>", 100277},      // cl100k_base
    {128000, 128000, "<|begin_of_text|>", 128256},  // Llama 3
};

// Real vocabularies' longest tokens have 128 bytes (cl100k_base) or 256. The cap keeps
// deriving the merges, which looks up every split of every token, linear in the file size.
static const size_t TIKTOKEN_MAX_TOKEN_BYTES = 1024;

// Loads a tiktoken file. Ranks must be 0..N-1, each once (in any order), every token's
// bytes distinct and at most TIKTOKEN_MAX_TOKEN_BYTES long, and every single byte a token;
// anything else is a one-line error naming the file (and the line). The split pattern is
// cl100k_base's.
inline void bpe_load_tiktoken(Bpe* b, const char* path) {
    struct Entry { std::string bytes; uint32_t rank; size_t line; };
    std::vector<Entry> entries;
    std::string data = read_file_or_fail(path);
    size_t pos = 0, line_no = 0;
    while (pos < data.size()) {
        size_t end = data.find('\n', pos);
        if (end == std::string::npos) end = data.size();
        size_t len = end - pos;
        const char* line = data.data() + pos;
        pos = end + 1;
        line_no++;
        if (len > 0 && line[len - 1] == '\r') len--;
        if (len == 0) continue;  // tiktoken skips blank lines too
        const char* sp = (const char*)memchr(line, ' ', len);
        if (sp == nullptr || sp == line || sp + 1 == line + len || memchr(sp + 1, ' ', line + len - sp - 1))
            fail("%s:%zu: expected BASE64 RANK (one space between)", path, line_no);
        Entry e;
        if (!base64_decode(line, sp - line, &e.bytes))
            fail("%s:%zu: '%.*s' is not base64", path, line_no, (int)std::min<size_t>(sp - line, 40), line);
        if (e.bytes.size() > TIKTOKEN_MAX_TOKEN_BYTES)
            fail("%s:%zu: a token of %zu bytes (at most %zu here)", path, line_no, e.bytes.size(), TIKTOKEN_MAX_TOKEN_BYTES);
        long long rank;
        std::string rank_text(sp + 1, line + len);
        if (rank_text[0] < '0' || rank_text[0] > '9' || !parse_int(rank_text.c_str(), 0, INT32_MAX, &rank))
            fail("%s:%zu: rank '%.*s' is not an integer in 0..%d", path, line_no, 20, rank_text.c_str(), INT32_MAX);
        e.rank = (uint32_t)rank;
        e.line = line_no;
        entries.push_back(std::move(e));
    }
    size_t N = entries.size();
    if (N == 0) fail("%s: no tokens", path);
    std::vector<size_t> line_of(N, 0);  // line of each rank; 0: not seen (yet)
    for (const Entry& e : entries) {
        if (e.rank >= N) continue;
        if (line_of[e.rank] != 0) fail("%s:%zu: rank %u again (first on line %zu)", path, e.line, e.rank, line_of[e.rank]);
        line_of[e.rank] = e.line;
    }
    for (const Entry& e : entries) {
        if (e.rank < N) continue;
        size_t missing = std::find(line_of.begin(), line_of.end(), (size_t)0) - line_of.begin();
        fail("%s:%zu: rank %u, but %zu tokens must have ranks 0..%zu, each once (rank %zu is missing)", path, e.line,
             e.rank, N, N - 1, missing);
    }
    b->pieces.assign(N, std::string());
    b->piece_to_id.clear();
    b->piece_to_id.reserve(N);
    for (Entry& e : entries) {
        auto ins = b->piece_to_id.emplace(e.bytes, e.rank);
        if (!ins.second)
            fail("%s:%zu: the same bytes as rank %u (line %zu)", path, e.line, ins.first->second, line_of[ins.first->second]);
        b->pieces[e.rank] = std::move(e.bytes);
    }
    bpe_set_byte_tokens(b, path);
    // The merge table: every split of a token into two tokens merges into it, at its rank.
    b->merges.clear();
    b->merges.reserve(4 * N);
    std::string left, right;
    for (uint32_t id = 0; id < (uint32_t)N; id++) {
        const std::string& p = b->pieces[id];
        for (size_t k = 1; k < p.size(); k++) {
            left.assign(p, 0, k);
            right.assign(p, k, std::string::npos);
            auto l = b->piece_to_id.find(left);
            if (l == b->piece_to_id.end()) continue;
            auto r = b->piece_to_id.find(right);
            if (r == b->piece_to_id.end()) continue;
            b->merges.emplace(((uint64_t)l->second << 32) | r->second, BpeMerge{id, id});
        }
    }
    b->eot_token = UINT32_MAX;
    b->eot_text.clear();
    for (const TiktokenSpecial& k : TIKTOKEN_KNOWN) {
        if (k.ranks != N) continue;
        b->eot_token = k.id;
        b->eot_text = k.text;
    }
    b->pattern = BPE_PATTERN_CL100K;
}

// ----------------------------------------------------------------------------------
// Encoding

// Per-thread state: the merge results of words seen before, and scratch space.
struct BpeCache {
    std::unordered_map<std::string, std::vector<uint32_t>> words;
    std::string key;
    struct Sym { uint32_t id; int32_t prev, next; };
    struct Cand { uint32_t rank; int32_t left; uint32_t left_id, right_id, merged; };
    std::vector<Sym> syms;
    std::vector<Cand> heap;
};

static const size_t BPE_CACHE_MAX_WORDS = 1 << 18;  // then start over: bounded memory
static const size_t BPE_CACHE_MAX_LEN = 64;          // longer words are rare repeats

// Merges the bytes of one word. Pairs are merged one at a time, the lowest rank first
// and among equal ranks the leftmost; this is the same as encoder.py's "merge every
// occurrence of the best pair", because a merge can only create pairs of higher rank.
// A min-heap of candidate pairs with a linked list of symbols keeps long words (runs of
// '=' or whitespace in web text) at O(n log n) instead of O(n^2).
inline void bpe_merge_word(const Bpe* b, BpeCache* c, const uint8_t* s, size_t n, std::vector<uint32_t>* out) {
    CHECK(n < (size_t)INT32_MAX, "word of %zu bytes", n);  // symbols are linked by int32 index
    auto& syms = c->syms;
    auto& heap = c->heap;
    syms.resize(n);
    heap.clear();
    auto later = [](const BpeCache::Cand& x, const BpeCache::Cand& y) {
        return x.rank != y.rank ? x.rank > y.rank : x.left > y.left;
    };
    auto push_pair = [&](int32_t left) {
        if (left < 0 || syms[left].next < 0) return;
        int32_t right = syms[left].next;
        uint64_t key = ((uint64_t)syms[left].id << 32) | syms[right].id;
        auto it = b->merges.find(key);
        if (it == b->merges.end()) return;
        heap.push_back({it->second.rank, left, syms[left].id, syms[right].id, it->second.merged});
        std::push_heap(heap.begin(), heap.end(), later);
    };
    for (size_t i = 0; i < n; i++) syms[i] = {b->byte_token[s[i]], (int32_t)i - 1, i + 1 < n ? (int32_t)i + 1 : -1};
    for (size_t i = 0; i + 1 < n; i++) push_pair((int32_t)i);
    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), later);
        BpeCache::Cand cand = heap.back();
        heap.pop_back();
        // Stale if either symbol has merged since: token ids only ever grow longer, so a
        // symbol never gets its old id back; a merged-away symbol is marked UINT32_MAX.
        BpeCache::Sym& L = syms[cand.left];
        if (L.id != cand.left_id || L.next < 0 || syms[L.next].id != cand.right_id) continue;
        int32_t right = L.next;
        L.id = cand.merged;
        L.next = syms[right].next;
        if (L.next >= 0) syms[L.next].prev = cand.left;
        syms[right].id = UINT32_MAX;
        push_pair(L.prev);
        push_pair(cand.left);
    }
    for (int32_t i = 0; i >= 0; i = syms[i].next) out->push_back(syms[i].id);
}

// Appends the tokens of one pre-token.
inline void bpe_encode_word(const Bpe* b, BpeCache* c, const uint8_t* s, size_t n, std::vector<uint32_t>* out) {
    if (n == 1) { out->push_back(b->byte_token[s[0]]); return; }
    c->key.assign((const char*)s, n);
    auto v = b->piece_to_id.find(c->key);
    // Whole-word hit: every GPT-2 token merges back to itself from its bytes, so this
    // shortcut gives what merging would (the test suite checks the whole vocabulary);
    // tiktoken defines a word that is a token to be that token.
    if (v != b->piece_to_id.end()) { out->push_back(v->second); return; }
    if (n <= BPE_CACHE_MAX_LEN) {
        auto it = c->words.find(c->key);
        if (it != c->words.end()) { out->insert(out->end(), it->second.begin(), it->second.end()); return; }
    }
    size_t start = out->size();
    bpe_merge_word(b, c, s, n, out);
    if (n <= BPE_CACHE_MAX_LEN) {
        if (c->words.size() >= BPE_CACHE_MAX_WORDS) c->words.clear();
        c->words.emplace(c->key, std::vector<uint32_t>(out->begin() + start, out->end()));
    }
}

// Appends the tokens of text[0..n) to *out. No EOT is added; "<|endoftext|>" in the
// text is ordinary text (as tiktoken's encode_ordinary).
inline void bpe_encode(const Bpe* b, BpeCache* c, const char* text, size_t n, std::vector<uint32_t>* out) {
    const uint8_t* s = (const uint8_t*)text;
    for (size_t i = 0; i < n;) {
        size_t j = pretokenize_next(b->pattern, s, n, i);
        bpe_encode_word(b, c, s + i, j - i, out);
        i = j;
    }
}

// The bytes of token id, or nullptr if id is no token. A tiktoken file's special token
// (outside its ranks) decodes to its name, when the file is a known one.
inline const std::string* bpe_piece(const Bpe* b, uint32_t id) {
    if (id < b->pieces.size()) return &b->pieces[id];
    if (id == b->eot_token && !b->eot_text.empty()) return &b->eot_text;
    return nullptr;
}

// Appends the bytes of tokens ids[0..n) to *out; false if an id is out of range.
inline bool bpe_decode(const Bpe* b, const uint32_t* ids, size_t n, std::string* out) {
    for (size_t i = 0; i < n; i++) {
        const std::string* p = bpe_piece(b, ids[i]);
        if (p == nullptr) return false;
        out->append(*p);
    }
    return true;
}
