// safetensors.h: Hugging Face's safetensors files, read and written, plus the small JSON
// parser their header (and config.json) needs.
// defines: JsonValue, json_parse, json_get, ST_DType, st_dtype_from_name, st_dtype_size,
//          SafeTensor, SafeTensorsFile, safetensors_open, safetensors_find,
//          safetensors_read_f32, safetensors_header, float_to_bf16, half_to_float, json_double,
//          HfName, hf_gpt2_names
//
// The format: 8-byte little-endian u64 N, then N bytes of JSON (an object mapping each
// tensor name to {"dtype", "shape", "data_offsets": [begin, end]}, plus an optional
// "__metadata__" object of strings), padded with spaces, then the data buffer. Offsets are
// relative to the start of the buffer; tensors are little-endian, row-major ('C' order).
// A file is untrusted input: every number in the header is checked before it is used.
#pragma once
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "utils.h"  // defines: fail, fopen_or_fail, fread_or_fail, file_size_or_fail
#include "gpt2.h"   // defines: ParamTensor, NUM_PARAM_TENSORS (for the GPT-2 name table)

// ---------------------------------------------------------------------------------------
// JSON: enough for safetensors headers and config.json. Numbers keep their text, so
// integers up to 2^64 are read exactly (a double would round past 2^53).
struct JsonValue {
    enum Kind { NUL, BOOL, NUMBER, STRING, ARRAY, OBJECT } kind = NUL;
    bool b = false;
    std::string str;  // STRING: the decoded string; NUMBER: the literal text
    std::vector<JsonValue> items;                              // ARRAY
    std::vector<std::pair<std::string, JsonValue>> members;    // OBJECT, in file order
};

struct JsonParser {
    const char* p;
    const char* end;
    std::string err;  // first problem, with the byte offset
    const char* begin;
    bool bad(const char* what) {
        if (err.empty()) err = std::string(what) + " at byte " + std::to_string(p - begin);
        return false;
    }
    void ws() { while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++; }
    bool lit(const char* s) {
        size_t n = strlen(s);
        if ((size_t)(end - p) < n || memcmp(p, s, n) != 0) return bad("invalid literal");
        p += n;
        return true;
    }
    static void put_utf8(std::string& s, uint32_t c) {
        if (c < 0x80) { s += (char)c; }
        else if (c < 0x800) { s += (char)(0xC0 | (c >> 6)); s += (char)(0x80 | (c & 63)); }
        else if (c < 0x10000) { s += (char)(0xE0 | (c >> 12)); s += (char)(0x80 | ((c >> 6) & 63)); s += (char)(0x80 | (c & 63)); }
        else { s += (char)(0xF0 | (c >> 18)); s += (char)(0x80 | ((c >> 12) & 63)); s += (char)(0x80 | ((c >> 6) & 63)); s += (char)(0x80 | (c & 63)); }
    }
    bool hex4(uint32_t* out) {
        if (end - p < 4) return bad("short \\u escape");
        uint32_t v = 0;
        for (int i = 0; i < 4; i++, p++) {
            char c = *p;
            int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
            if (d < 0) return bad("bad \\u escape");
            v = v * 16 + d;
        }
        *out = v;
        return true;
    }
    bool string(std::string* out) {
        p++;  // opening quote
        while (true) {
            if (p >= end) return bad("unterminated string");
            unsigned char c = (unsigned char)*p++;
            if (c == '"') return true;
            if (c < 0x20) return bad("control character in string");
            if (c != '\\') { *out += (char)c; continue; }
            if (p >= end) return bad("unterminated string");
            char e = *p++;
            switch (e) {
                case '"': *out += '"'; break;   case '\\': *out += '\\'; break;
                case '/': *out += '/'; break;   case 'b': *out += '\b'; break;
                case 'f': *out += '\f'; break;  case 'n': *out += '\n'; break;
                case 'r': *out += '\r'; break;  case 't': *out += '\t'; break;
                case 'u': {
                    uint32_t c1 = 0;
                    if (!hex4(&c1)) return false;
                    if (c1 >= 0xD800 && c1 < 0xDC00) {  // a surrogate pair
                        uint32_t c2 = 0;
                        if (end - p < 2 || p[0] != '\\' || p[1] != 'u') return bad("lone surrogate");
                        p += 2;
                        if (!hex4(&c2) || c2 < 0xDC00 || c2 > 0xDFFF) return bad("bad surrogate pair");
                        c1 = 0x10000 + ((c1 - 0xD800) << 10) + (c2 - 0xDC00);
                    }
                    put_utf8(*out, c1);
                    break;
                }
                default: return bad("bad escape in string");
            }
        }
    }
    bool number(JsonValue* v) {
        const char* s = p;
        if (p < end && *p == '-') p++;
        if (p >= end || !(*p >= '0' && *p <= '9')) return bad("bad number");
        while (p < end && ((*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' || *p == 'E' || *p == '+' || *p == '-')) p++;
        v->kind = JsonValue::NUMBER;
        v->str.assign(s, p - s);
        char* stop = nullptr;
        strtod(v->str.c_str(), &stop);  // validates the whole literal
        if (*stop != '\0') return bad("bad number");
        return true;
    }
    bool value(JsonValue* v, int depth) {
        if (depth > 64) return bad("nested too deeply");
        ws();
        if (p >= end) return bad("unexpected end");
        char c = *p;
        if (c == '{') {
            v->kind = JsonValue::OBJECT;
            p++; ws();
            if (p < end && *p == '}') { p++; return true; }
            while (true) {
                ws();
                if (p >= end || *p != '"') return bad("expected a string key");
                std::string key;
                if (!string(&key)) return false;
                for (auto& m : v->members)
                    if (m.first == key) return bad(("duplicate key \"" + key + "\"").c_str());
                ws();
                if (p >= end || *p != ':') return bad("expected ':'");
                p++;
                v->members.emplace_back(key, JsonValue());
                if (!value(&v->members.back().second, depth + 1)) return false;
                ws();
                if (p < end && *p == ',') { p++; continue; }
                if (p < end && *p == '}') { p++; return true; }
                return bad("expected ',' or '}'");
            }
        }
        if (c == '[') {
            v->kind = JsonValue::ARRAY;
            p++; ws();
            if (p < end && *p == ']') { p++; return true; }
            while (true) {
                v->items.emplace_back();
                if (!value(&v->items.back(), depth + 1)) return false;
                ws();
                if (p < end && *p == ',') { p++; continue; }
                if (p < end && *p == ']') { p++; return true; }
                return bad("expected ',' or ']'");
            }
        }
        if (c == '"') { v->kind = JsonValue::STRING; return string(&v->str); }
        if (c == 't') { v->kind = JsonValue::BOOL; v->b = true; return lit("true"); }
        if (c == 'f') { v->kind = JsonValue::BOOL; return lit("false"); }
        if (c == 'n') { v->kind = JsonValue::NUL; return lit("null"); }
        return number(v);
    }
};

// Parses text[0..n). Returns "" on success, else the problem (with the byte offset).
inline std::string json_parse(const char* text, size_t n, JsonValue* out) {
    JsonParser jp{text, text + n, "", text};
    if (!jp.value(out, 0)) return jp.err;
    jp.ws();
    if (jp.p != jp.end) { jp.bad("trailing characters after the JSON value"); return jp.err; }
    return "";
}

// Member of an object by key, or nullptr.
inline const JsonValue* json_get(const JsonValue& obj, const char* key) {
    if (obj.kind != JsonValue::OBJECT) return nullptr;
    for (auto& m : obj.members) if (m.first == key) return &m.second;
    return nullptr;
}

// A non-negative integer literal (no sign, fraction or exponent) that fits in uint64.
inline bool json_uint(const JsonValue& v, uint64_t* out) {
    if (v.kind != JsonValue::NUMBER || v.str.empty()) return false;
    uint64_t x = 0;
    for (char c : v.str) {
        if (c < '0' || c > '9') return false;
        if (x > (UINT64_MAX - (c - '0')) / 10) return false;
        x = x * 10 + (c - '0');
    }
    *out = x;
    return true;
}

// A number (any JSON number literal) as a double.
inline bool json_double(const JsonValue& v, double* out) {
    if (v.kind != JsonValue::NUMBER || v.str.empty()) return false;
    char* end = nullptr;
    double x = strtod(v.str.c_str(), &end);
    if (end != v.str.c_str() + v.str.size() || !std::isfinite(x)) return false;
    *out = x;
    return true;
}

// ---------------------------------------------------------------------------------------
// Element types. The ones that convert to fp32 are the float types; the others are only
// recognised so that a file holding them still validates (e.g. a U8 mask buffer).
enum ST_DType { ST_F32, ST_F16, ST_BF16, ST_F64, ST_I64, ST_I32, ST_I16, ST_I8, ST_U8, ST_BOOL, ST_UNKNOWN };

inline ST_DType st_dtype_from_name(const std::string& s) {
    static const char* names[] = {"F32", "F16", "BF16", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL"};
    for (int i = 0; i < ST_UNKNOWN; i++) if (s == names[i]) return (ST_DType)i;
    return ST_UNKNOWN;
}
inline size_t st_dtype_size(ST_DType d) {
    static const size_t sizes[] = {4, 2, 2, 8, 8, 4, 2, 1, 1, 1};
    return d < ST_UNKNOWN ? sizes[d] : 0;
}

// fp32 -> bf16 bits, round to nearest even; NaN stays a (quiet) NaN.
inline uint16_t float_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

// IEEE half bits -> fp32, exact (subnormals, inf and NaN included).
inline float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 31, man = h & 0x3ff, u;
    if (exp == 31) u = sign | 0x7f800000u | (man << 13);
    else if (exp != 0) u = sign | ((exp + 112) << 23) | (man << 13);
    else if (man == 0) u = sign;
    else {  // subnormal: renormalise
        int e = -1;
        do { man <<= 1; e++; } while ((man & 0x400) == 0);
        u = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ff) << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// ---------------------------------------------------------------------------------------
// Reading.
struct SafeTensor {
    std::string name, dtype_name;
    ST_DType dtype;
    std::vector<uint64_t> shape;
    uint64_t begin, end;  // byte range in the data buffer
    uint64_t numel() const { uint64_t n = 1; for (uint64_t s : shape) n *= s; return n; }
};

struct SafeTensorsFile {
    std::string path;
    uint64_t data_start = 0;  // absolute file offset of the data buffer: 8 + N
    uint64_t data_size = 0;
    std::vector<SafeTensor> tensors;  // in header order
    std::map<std::string, std::string> metadata;
};

// Opens and validates path; any problem is one "error: <path>: <problem>" line, exit 1.
// Checked: the header length against the file size, the JSON, each entry's dtype, shape and
// offsets (in range, begin <= end, end - begin == numel * dtype size, no overflow), and
// that the tensors tile the data buffer exactly (no overlap, no hole, nothing after).
inline SafeTensorsFile safetensors_open(const char* path) {
    SafeTensorsFile st;
    st.path = path;
    uint64_t size = file_size_or_fail(path);
    if (size < 8) fail("%s: truncated safetensors file: %llu bytes, shorter than the 8-byte header length", path, (unsigned long long)size);
    FILE* f = fopen_or_fail(path, "rb");
    unsigned char lenbuf[8];
    fread_or_fail(lenbuf, 1, 8, f, path);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | lenbuf[i];
    if (n > size - 8)
        fail("%s: header length %llu runs past the end of the file (%llu bytes): truncated or not a safetensors file",
             path, (unsigned long long)n, (unsigned long long)size);
    if (n < 2 || n > (100ull << 20)) fail("%s: implausible header length %llu (not a safetensors file?)", path, (unsigned long long)n);
    std::string text(n, '\0');
    fread_or_fail(&text[0], 1, n, f, path);
    fclose(f);
    JsonValue root;
    std::string err = json_parse(text.data(), text.size(), &root);
    if (!err.empty()) fail("%s: header is not valid JSON: %s", path, err.c_str());
    if (root.kind != JsonValue::OBJECT) fail("%s: header is not a JSON object", path);
    st.data_start = 8 + n;
    st.data_size = size - 8 - n;
    for (auto& m : root.members) {
        const char* name = m.first.c_str();
        const JsonValue& v = m.second;
        if (m.first == "__metadata__") {
            if (v.kind != JsonValue::OBJECT) fail("%s: __metadata__ is not an object", path);
            for (auto& kv : v.members) {
                if (kv.second.kind != JsonValue::STRING) fail("%s: __metadata__ value \"%s\" is not a string", path, kv.first.c_str());
                st.metadata[kv.first] = kv.second.str;
            }
            continue;
        }
        if (v.kind != JsonValue::OBJECT) fail("%s: tensor \"%s\": entry is not an object", path, name);
        const JsonValue *dt = json_get(v, "dtype"), *sh = json_get(v, "shape"), *off = json_get(v, "data_offsets");
        if (!dt || !sh || !off) fail("%s: tensor \"%s\": missing dtype, shape or data_offsets", path, name);
        SafeTensor t;
        t.name = m.first;
        if (dt->kind != JsonValue::STRING) fail("%s: tensor \"%s\": dtype is not a string", path, name);
        t.dtype_name = dt->str;
        t.dtype = st_dtype_from_name(dt->str);
        if (t.dtype == ST_UNKNOWN) fail("%s: tensor \"%s\": unsupported dtype \"%s\"", path, name, dt->str.c_str());
        if (sh->kind != JsonValue::ARRAY || sh->items.size() > 8) fail("%s: tensor \"%s\": shape is not an array of at most 8 dims", path, name);
        unsigned __int128 bytes = st_dtype_size(t.dtype);
        for (auto& d : sh->items) {
            uint64_t x;
            if (!json_uint(d, &x)) fail("%s: tensor \"%s\": shape entry is not a non-negative integer", path, name);
            t.shape.push_back(x);
            bytes *= x;
            if (bytes > ((unsigned __int128)1 << 64) - 1) fail("%s: tensor \"%s\": shape overflows", path, name);
        }
        if (off->kind != JsonValue::ARRAY || off->items.size() != 2 || !json_uint(off->items[0], &t.begin) ||
            !json_uint(off->items[1], &t.end))
            fail("%s: tensor \"%s\": data_offsets is not [begin, end] of non-negative integers", path, name);
        if (t.begin > t.end || t.end > st.data_size)
            fail("%s: tensor \"%s\": data_offsets [%llu, %llu] outside the %llu-byte data buffer (truncated file?)", path, name,
                 (unsigned long long)t.begin, (unsigned long long)t.end, (unsigned long long)st.data_size);
        if ((unsigned __int128)(t.end - t.begin) != bytes)
            fail("%s: tensor \"%s\": data_offsets span %llu bytes but %s x shape needs %llu", path, name,
                 (unsigned long long)(t.end - t.begin), t.dtype_name.c_str(), (unsigned long long)bytes);
        st.tensors.push_back(t);
    }
    // the tensors must tile the buffer: sorted by begin, each starts where the last ended
    std::vector<const SafeTensor*> order;
    for (auto& t : st.tensors) order.push_back(&t);
    std::sort(order.begin(), order.end(), [](const SafeTensor* a, const SafeTensor* b) {
        return a->begin != b->begin ? a->begin < b->begin : a->end < b->end; });
    uint64_t at = 0;
    for (const SafeTensor* t : order) {
        if (t->begin < at) fail("%s: tensor \"%s\" overlaps the tensor before it", path, t->name.c_str());
        if (t->begin > at) fail("%s: hole in the data buffer before tensor \"%s\" (bytes %llu..%llu)", path, t->name.c_str(),
                                (unsigned long long)at, (unsigned long long)t->begin);
        at = t->end;
    }
    if (at != st.data_size)
        fail("%s: data buffer is %llu bytes but the tensors cover %llu (trailing bytes)", path,
             (unsigned long long)st.data_size, (unsigned long long)at);
    return st;
}

inline const SafeTensor* safetensors_find(const SafeTensorsFile& st, const std::string& name) {
    for (auto& t : st.tensors) if (t.name == name) return &t;
    return nullptr;
}

// Reads tensor t (F32, F16 or BF16) into out (t.numel() floats), widened to fp32.
inline void safetensors_read_f32(const SafeTensorsFile& st, const SafeTensor& t, float* out) {
    if (t.dtype != ST_F32 && t.dtype != ST_F16 && t.dtype != ST_BF16)
        fail("%s: tensor \"%s\" has dtype %s; expected F32, F16 or BF16", st.path.c_str(), t.name.c_str(), t.dtype_name.c_str());
    FILE* f = fopen_or_fail(st.path.c_str(), "rb");
    if (fseeko(f, (off_t)(st.data_start + t.begin), SEEK_SET) != 0) fail("%s: seek failed", st.path.c_str());
    size_t n = t.numel();
    if (t.dtype == ST_F32) {
        fread_or_fail(out, 4, n, f, st.path.c_str());
    } else {
        std::vector<uint16_t> buf(n);
        fread_or_fail(buf.data(), 2, n, f, st.path.c_str());
        for (size_t i = 0; i < n; i++) {
            if (t.dtype == ST_F16) { out[i] = half_to_float(buf[i]); continue; }
            uint32_t bits = (uint32_t)buf[i] << 16;
            memcpy(&out[i], &bits, 4);
        }
    }
    fclose(f);
}

// ---------------------------------------------------------------------------------------
// Writing: the caller lists the tensors (name, dtype, shape) in the order their bytes will
// follow; this returns the 8-byte length plus the header JSON, padded with spaces to a
// multiple of 8 so every tensor starts 8-byte aligned in the file.
struct SafeTensorSpec {
    std::string name, dtype;  // "F32" or "BF16"
    std::vector<uint64_t> shape;
};

inline std::string safetensors_header(const std::vector<SafeTensorSpec>& specs,
                                      const std::map<std::string, std::string>& metadata) {
    std::string j = "{\"__metadata__\":{";
    bool first = true;
    for (auto& kv : metadata) {  // keys and values here are plain ASCII: no escaping needed
        j += (first ? "\"" : ",\"") + kv.first + "\":\"" + kv.second + "\"";
        first = false;
    }
    j += "}";
    uint64_t off = 0;
    for (auto& s : specs) {
        uint64_t bytes = st_dtype_size(st_dtype_from_name(s.dtype));
        j += ",\"" + s.name + "\":{\"dtype\":\"" + s.dtype + "\",\"shape\":[";
        for (size_t i = 0; i < s.shape.size(); i++) {
            j += (i ? "," : "") + std::to_string(s.shape[i]);
            bytes *= s.shape[i];
        }
        j += "],\"data_offsets\":[" + std::to_string(off) + "," + std::to_string(off + bytes) + "]}";
        off += bytes;
    }
    j += "}";
    while (j.size() % 8 != 0) j += ' ';
    std::string out(8, '\0');
    uint64_t n = j.size();
    for (int i = 0; i < 8; i++) out[i] = (char)((n >> (8 * i)) & 0xff);
    return out + j;
}

// ---------------------------------------------------------------------------------------
// GPT-2 in Hugging Face's layout (GPT2LMHeadModel), one row per llm.c tensor in checkpoint
// order. Per-layer tensors are "h.{i}.<name>"; the whole thing sits under "transformer."
// in transformers' own files, and without the prefix in OpenAI's released gpt2 repos.
// HF's Conv1D stores a linear layer's weight as (in, out), llm.c as (out, in): transposed.
// wte has V rows there (no padding); the LM head is tied to wte, so there is no lm_head.
struct HfName {
    const char* name;
    bool per_layer;
    bool transposed;
};

inline const HfName* hf_gpt2_names() {
    static const HfName names[NUM_PARAM_TENSORS] = {
        {"wte.weight", false, false},         {"wpe.weight", false, false},
        {"ln_1.weight", true, false},         {"ln_1.bias", true, false},
        {"attn.c_attn.weight", true, true},   {"attn.c_attn.bias", true, false},
        {"attn.c_proj.weight", true, true},   {"attn.c_proj.bias", true, false},
        {"ln_2.weight", true, false},         {"ln_2.bias", true, false},
        {"mlp.c_fc.weight", true, true},      {"mlp.c_fc.bias", true, false},
        {"mlp.c_proj.weight", true, true},    {"mlp.c_proj.bias", true, false},
        {"ln_f.weight", false, false},        {"ln_f.bias", false, false},
    };
    return names;
}

inline std::string hf_tensor_name(const std::string& prefix, const HfName& h, int layer) {
    return prefix + (h.per_layer ? "h." + std::to_string(layer) + "." : std::string()) + h.name;
}

// The HF shape of one layer's slice of llm.c tensor t (V rows for wte).
inline std::vector<uint64_t> hf_tensor_shape(const ParamTensor& t, const HfName& h, int V) {
    std::vector<uint64_t> s(t.shape + (h.per_layer ? 1 : 0), t.shape + t.ndim);
    if (h.transposed) std::swap(s[0], s[1]);
    if (!h.per_layer && !strcmp(t.name, "wte")) s[0] = (uint64_t)V;
    return s;
}
