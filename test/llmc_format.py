#!/usr/bin/python3
"""llm.c's file formats in Python, for test/test_llmc_interop.sh: written the way llm.c's own
Python writers write them, and checked the way llm.c's C loaders check them. Written from a
reading of llm.c (github.com/karpathy/llm.c); none of its code is copied here.

Formats (little-endian; every header is 256 x int32):
  model      train_gpt2.py write_model: [20240326, version, maxT, V, L, NH, C, Vp], version 3 =
             fp32, 5 = bf16 (every tensor, the LayerNorms too, rounded by torch to nearest
             even); then the 16 tensors in pytorch_reference.PARAM_NAMES order. wte is padded
             from V to Vp = V rounded up to 128 with zero rows (pad_vocab).
  data shard dev/data/data_common.py write_datafile ("gpt-2"): [20240520, 1, ntok], then ntok x
             uint16 (llama-3's variant, [20240801, 7] and uint32, is not GPT-2's). Documents
             start with EOT (dev/data/fineweb.py).
  tokenizer  train_gpt2.py write_tokenizer: uint32 [20240328, 2, V, EOT] (version 1 had no EOT),
             then per token a uint8 length and the token's bytes.
  eval file  dev/data/data_common.py write_evalfile: [20240522, 1, examples, longest example in
             bytes], then the examples as uint16 words (test/hellaswag_reference.py's layout),
             each with exactly 4 completions.

The check_* functions return a Report of what llm.c does with a file:
  errors  llm.c refuses it (a "Bad ..." exit, an assert, a short fread), or would read out
          of bounds with it (Vp < V; an example larger than the header's longest)
  notes   llm.c reads it, but its own writers never write such a file (trailing bytes, Vp
          other than V rounded up to 128, non-zero padding rows, ...)
Where: train_gpt2.c gpt2_build_from_checkpoint (version 3 only), train_gpt2.cu
gpt2_build_from_checkpoint (3 or 5, and 5 only in the default BF16 build, 3 only with
PRECISION=FP32), llmc/dataloader.h dataloader_load_shard_ / dataloader_init /
evalloader_init / evalloader_next_example_, llmc/tokenizer.h tokenizer_init.

Command line:
  check [--strict] [--B B --T T --V V --eot E] KIND FILE... [KIND FILE...]...
        KIND: model shard tokenizer eval (--B --T --V --eot apply to the kinds they concern).
        One line per file, "FILE: ok: ..." or "FILE: rejected: ..."; exit 1 if any is rejected.
        --strict also rejects notes, and files that differ from what llm.c's writer writes
        for the same content (the file is parsed, written again, and compared byte for byte).
  fixtures DIR      the llm.c side of the interop test: files as llm.c writes them (checked
                    --strict), damaged copies, and the PyTorch results the trainer must
                    reproduce (DIR/expect.json)
  compare DIR       the trainer's runs on the fixtures (DIR/run_*) against DIR/expect.json
  compare-ours ...  a checkpoint the trainer wrote: checked (--strict), then read as llm.c reads
                    it, against the trainer's own val loss and greedy sample (see --help)
"""
import argparse
import glob
import json
import os
import struct
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

MODEL_MAGIC, MODEL_FP32, MODEL_BF16 = 20240326, 3, 5
SHARD_MAGIC, SHARD_VERSION = 20240520, 1
LLAMA3_SHARD_MAGIC = 20240801  # data_common.py's uint32 shards (version 7): not GPT-2's
TOKENIZER_MAGIC = 20240328
EVAL_MAGIC, EVAL_VERSION = 20240522, 1
EVAL_COMPLETIONS = 4  # llmc/dataloader.h ASSUMED_NUM_COMPLETIONS
HEADER_BYTES = 256 * 4


def padded_vocab(V, multiple=128):
    """train_gpt2.py pad_vocab: V rounded up to a multiple of 128."""
    return (V + multiple - 1) // multiple * multiple


def _ref():
    """test/pytorch_reference.py (imports torch, so only when a model's layout is needed)."""
    import pytorch_reference
    return pytorch_reference


class Report:
    def __init__(self, path, kind):
        self.path, self.kind = path, kind
        self.errors, self.notes = [], []
        self.summary = ""
        self.content = None  # what was read, for the caller (and the --strict rewrite)

    def fail(self, msg):
        self.errors.append(msg)
        return self

    def note(self, msg):
        self.notes.append(msg)

    @property
    def ok(self):
        return not self.errors

    def line(self):
        if self.errors:
            return f"{self.path}: rejected: {'; '.join(self.errors)}"
        text = f"{self.path}: ok: {self.summary}"
        return text + "".join(f"\n  note: {n}" for n in self.notes)


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _differs_at(a, b):
    """First byte offset where a and b differ, or None."""
    n = min(len(a), len(b))
    diff = np.nonzero(np.frombuffer(a[:n], np.uint8) != np.frombuffer(b[:n], np.uint8))[0]
    if diff.size:
        return int(diff[0])
    return None if len(a) == len(b) else n


def _written_by(writer, *args):
    """The bytes writer(path, *args) puts in a file."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "f.bin")
        writer(path, *args)
        return _read(path)


# ---------------------------------------------------------------------------------------
# model files

def model_layout(maxT, V, L, NH, C, Vp):
    """[(name, shape)] of the 16 tensors in file order."""
    ref = _ref()
    shapes = ref.param_shapes(V, Vp, maxT, L, NH, C)
    return [(name, shapes[name]) for name in ref.PARAM_NAMES]


def _bf16_bits(a):
    """torch's float32 -> bfloat16 conversion (round to nearest even), as llm.c's write_bf16."""
    import torch
    return torch.from_numpy(np.ascontiguousarray(a, np.float32)).to(torch.bfloat16).view(torch.int16).numpy()


def write_model(path, tensors, maxT, V, L, NH, C, dtype="float32"):
    """train_gpt2.py write_model. tensors: the 16 parameters by name, in the checkpoint's shapes
    except wte, which is (V, C) as in the PyTorch model; it is padded here with zero rows to
    Vp = V rounded up to 128. (llm.c's pad_vocab asserts V == 50257 "just being defensive";
    the rule it applies holds for any V.) Returns the parameters as stored, widened to fp32."""
    assert dtype in ("float32", "bfloat16")
    Vp = padded_vocab(V)
    header = np.zeros(256, "<i4")
    header[:8] = [MODEL_MAGIC, MODEL_FP32 if dtype == "float32" else MODEL_BF16, maxT, V, L, NH, C, Vp]
    stored = {}
    with open(path, "wb") as f:
        f.write(header.tobytes())
        for name, shape in model_layout(maxT, V, L, NH, C, Vp):
            t = np.asarray(tensors[name], np.float32)
            if name == "wte":
                assert t.shape == (V, C), f"wte is {t.shape}, expected (V, C) = {(V, C)}"
                t = np.concatenate([t, np.zeros((Vp - V, C), np.float32)])
            assert t.shape == tuple(shape), f"{name} is {t.shape}, expected {shape}"
            if dtype == "float32":
                f.write(t.astype("<f4").tobytes())
                stored[name] = t.copy()
            else:
                bits = _bf16_bits(t)
                f.write(bits.astype("<i2").tobytes())
                stored[name] = (bits.astype(np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(shape)
    return stored


def check_model(path):
    r = Report(path, "model")
    data = _read(path)
    if len(data) < HEADER_BYTES:
        return r.fail(f"{len(data)} bytes: the read of the 1024-byte header comes up short")
    h = np.frombuffer(data[:HEADER_BYTES], "<i4")
    if h[0] != MODEL_MAGIC:
        return r.fail(f"magic {h[0]}, not {MODEL_MAGIC} (llm.c: 'Bad magic model file')")
    version = int(h[1])
    if version not in (MODEL_FP32, MODEL_BF16):
        return r.fail(f"version {version} (llm.c: 'Bad version in model file'; train_gpt2.c takes 3, "
                      "train_gpt2.cu 3 or 5)")
    maxT, V, L, NH, C, Vp = (int(x) for x in h[2:8])
    if min(maxT, V, L, NH, C, Vp) < 1:
        return r.fail(f"a size < 1 in the header: maxT={maxT} V={V} L={L} NH={NH} C={C} Vp={Vp}")
    if C % NH:
        return r.fail(f"C={C} is not a multiple of NH={NH} (attention splits C into NH heads)")
    if Vp < V:
        return r.fail(f"padded vocab Vp={Vp} < V={V}: llm.c computes Vp logits per position and its "
                      "softmax reads the first V of them")
    layout = model_layout(maxT, V, L, NH, C, Vp)
    n = sum(int(np.prod(s)) for _, s in layout)
    elem = 4 if version == MODEL_FP32 else 2
    need = HEADER_BYTES + n * elem
    if len(data) < need:
        return r.fail(f"{len(data)} bytes, the header's shapes need {need}: llm.c's read of the "
                      f"{n} parameters comes up short")
    raw = data[HEADER_BYTES:need]
    if version == MODEL_FP32:
        flat = np.frombuffer(raw, "<f4").astype(np.float32)
    else:
        flat = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
    params, at = {}, 0
    for name, shape in layout:
        k = int(np.prod(shape))
        params[name] = flat[at:at + k].reshape(shape)
        at += k
    if Vp != padded_vocab(V):
        r.note(f"Vp={Vp}: llm.c's writer pads V={V} to {padded_vocab(V)}")
    if len(data) > need:
        r.note(f"{len(data) - need} bytes after the parameters (llm.c ignores them; its writers write none)")
    if np.any(h[8:]):
        r.note("header words 8..255 are not all zero")
    if np.any(params["wte"][V:]):
        r.note(f"padded wte rows {V}..{Vp - 1} are not zero (pad_vocab writes zeros)")
    if not np.all(np.isfinite(flat)):
        r.note(f"{int(np.sum(~np.isfinite(flat)))} non-finite parameters (llm.c loads them as they are)")
    programs = (["train_gpt2.c", "train_gpt2cu PRECISION=FP32"] if version == MODEL_FP32
                else ["train_gpt2cu (default BF16 build)"])
    r.summary = (f"version {version} ({'fp32' if version == MODEL_FP32 else 'bf16'}) maxT={maxT} V={V} L={L} "
                 f"NH={NH} C={C} Vp={Vp}, {n} parameters; llm.c's loaders that take it: {', '.join(programs)}")
    r.content = dict(version=version, maxT=maxT, V=V, L=L, NH=NH, C=C, Vp=Vp, params=params)
    return r


def read_model(path):
    """A model file as llm.c reads it: (config dict, params by name, widened to fp32)."""
    r = check_model(path)
    if not r.ok:
        raise ValueError(r.line())
    cfg = {k: v for k, v in r.content.items() if k != "params"}
    return cfg, r.content["params"]


def _rewrite_model(r):
    c = r.content
    tensors = dict(c["params"])
    tensors["wte"] = tensors["wte"][:c["V"]]
    dtype = "float32" if c["version"] == MODEL_FP32 else "bfloat16"
    return _written_by(write_model, tensors, c["maxT"], c["V"], c["L"], c["NH"], c["C"], dtype)


# ---------------------------------------------------------------------------------------
# data shards

def write_datafile(path, tokens):
    """dev/data/data_common.py write_datafile for "gpt-2" (with fineweb.py's range check
    before the uint16 cast); the bytes are test/make_test_data.py's write_shard."""
    import make_test_data
    toks = np.asarray(tokens, np.int64)
    assert 0 < len(toks) < 2**31, "token count"
    assert toks.min() >= 0 and toks.max() < 2**16, "token dictionary too large for uint16"
    make_test_data.write_shard(path, toks)


def write_datafile_llama3(path, tokens):
    """dev/data/data_common.py write_datafile for "llama-3": header [20240801, 7, ntok] and the
    rest of 256 int32 zero, then ntok x uint32 (Llama 3's 128,256 ids do not fit uint16)."""
    toks = np.asarray(tokens, np.int64)
    assert 0 < len(toks) < 2**31, "token count"
    assert toks.min() >= 0 and toks.max() < 2**32, "token ids out of uint32"
    header = np.zeros(256, dtype="<i4")
    header[0], header[1], header[2] = LLAMA3_SHARD_MAGIC, 7, len(toks)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(toks.astype("<u4").tobytes())


def widen_datafile(src, dst):
    """The GPT-2 shard src, its ids written again as a llama-3 (uint32) shard dst."""
    raw = _read(src)
    ntok = struct.unpack_from("<i", raw, 8)[0]
    write_datafile_llama3(dst, np.frombuffer(raw, dtype="<u2", count=ntok, offset=HEADER_BYTES))


def check_datafile(path, B=None, T=None, V=None, eot=None, processes=1):
    r = Report(path, "shard")
    data = _read(path)
    if len(data) < HEADER_BYTES:
        return r.fail(f"{len(data)} bytes: the read of the 1024-byte header comes up short")
    h = np.frombuffer(data[:HEADER_BYTES], "<i4")
    if h[0] != SHARD_MAGIC:
        what = " (llama-3's uint32 shard)" if h[0] == LLAMA3_SHARD_MAGIC else ""
        return r.fail(f"magic {h[0]}{what}, not {SHARD_MAGIC} (llm.c: 'Bad magic in the data file')")
    if h[1] != SHARD_VERSION:
        return r.fail(f"version {h[1]}, not {SHARD_VERSION} (llm.c: 'Bad version in data file')")
    ntok = int(h[2])
    if ntok <= 0:
        return r.fail(f"header says {ntok} tokens (llm.c asserts ntok > 0)")
    if len(data) != HEADER_BYTES + 2 * ntok:
        return r.fail(f"{len(data)} bytes, the header's {ntok} tokens make {HEADER_BYTES + 2 * ntok} "
                      "(llm.c: 'Error: file size is not as expected')")
    if B and T and ntok < processes * B * T + 1:
        return r.fail(f"{ntok} tokens, fewer than num_processes*B*T+1 = {processes * B * T + 1} "
                      "(llm.c's dataloader_init asserts it)")
    tokens = np.frombuffer(data[HEADER_BYTES:], "<u2")
    if V is not None and int(tokens.max()) >= V:
        i = int(np.argmax(tokens >= V))
        return r.fail(f"token {tokens[i]} at {i} is >= V={V} (llm.c's forward asserts 0 <= token < V)")
    if np.any(h[3:]):
        r.note("header words 3..255 are not all zero")
    if eot is not None and not np.any(tokens == eot):
        r.note(f"no EOT {eot} in the shard (llm.c's data scripts start every document with it)")
    r.summary = f"{ntok} tokens"
    if B and T:
        r.summary += f", {(ntok - 1) // (B * T)} windows of B*T+1 at B={B} T={T}"
    if eot is not None:
        r.summary += f", {int(np.sum(tokens == eot))} documents (EOT {eot})"
    r.content = tokens
    return r


# ---------------------------------------------------------------------------------------
# tokenizer files

def write_tokenizer(path, pieces, eot, version=2):
    """train_gpt2.py write_tokenizer (version 2); version 1 is the older file without EOT."""
    assert version in (1, 2)
    header = np.zeros(256, "<i4")
    header[:3] = [TOKENIZER_MAGIC, version, len(pieces)]
    if version == 2:
        header[3] = eot
    with open(path, "wb") as f:
        f.write(header.tobytes())
        for p in pieces:
            assert len(p) < 256, f"Token length exceeds 255: {len(p)}"
            f.write(struct.pack("<B", len(p)))
            f.write(p)


def check_tokenizer(path):
    r = Report(path, "tokenizer")
    data = _read(path)
    if len(data) < HEADER_BYTES:
        return r.fail(f"{len(data)} bytes: the read of the 1024-byte header comes up short")
    h = np.frombuffer(data[:HEADER_BYTES], "<u4")
    if h[0] != TOKENIZER_MAGIC:
        return r.fail(f"magic {h[0]}, not {TOKENIZER_MAGIC} (llm.c asserts it)")
    version, V = int(h[1]), int(h[2])
    if version == 1:
        if V != 50257:
            return r.fail(f"version 1 with V={V}: llm.c asserts V == 50257 (EOT 50256 is assumed)")
        eot = 50256
    elif version == 2:
        eot = int(h[3])
    else:
        return r.fail(f"version {version} (llm.c: 'Tokenizer model file ... has bad version')")
    pieces, at = [], HEADER_BYTES
    for i in range(V):
        if at >= len(data):
            return r.fail(f"truncated: token {i} of {V} is missing (llm.c's fread comes up short)")
        n = data[at]
        if n == 0:
            return r.fail(f"token {i} has length 0 (llm.c asserts every token is at least one byte)")
        if at + 1 + n > len(data):
            return r.fail(f"truncated inside token {i} of {V} (llm.c's fread comes up short)")
        pieces.append(data[at + 1:at + 1 + n])
        at += 1 + n
    if at < len(data):
        r.note(f"{len(data) - at} bytes after token {V - 1} (llm.c ignores them)")
    if np.any(h[3 if version == 1 else 4:]):
        r.note("unused header words are not all zero")
    if eot >= V:
        r.note(f"EOT {eot} >= V={V}: llm.c starts its samples with EOT, which its forward then refuses")
    r.summary = f"version {version}, V={V}, EOT {eot} = {pieces[eot] if eot < V else None!r}"
    r.content = dict(version=version, eot=eot, pieces=pieces)
    return r


def read_tokenizer(path):
    r = check_tokenizer(path)
    if not r.ok:
        raise ValueError(r.line())
    return r.content


# ---------------------------------------------------------------------------------------
# eval files (HellaSwag)

def write_evalfile(path, examples):
    """dev/data/data_common.py write_evalfile: its asserts, then the layout of
    test/hellaswag_reference.py write_file. examples: [(label, ctx, endings)]."""
    import hellaswag_reference
    assert len(examples) < 2**16, "too many examples?"
    for label, ctx, endings in examples:
        assert len(endings) == EVAL_COMPLETIONS, "expected 4 completions for now? can relax later"
        for toks in [ctx] + list(endings):
            assert all(0 <= t < 2**16 - 1 for t in toks), "bad token"
        nbytes = 2 * (6 + len(ctx) + sum(1 + len(e) for e in endings))
        assert nbytes < 2**16, "example too large?"
    hellaswag_reference.write_file(path, [(label, list(ctx), [list(e) for e in endings])
                                          for label, ctx, endings in examples])


def check_evalfile(path, T=1024, V=None, processes=1):
    """What llm.c's EvalLoader does with the file at sequence length T (its -t)."""
    r = Report(path, "eval")
    data = _read(path)
    if len(data) < HEADER_BYTES:
        return r.fail(f"{len(data)} bytes: the read of the 1024-byte header comes up short")
    h = np.frombuffer(data[:HEADER_BYTES], "<i4")
    if h[0] != EVAL_MAGIC:
        return r.fail(f"magic {h[0]}, not {EVAL_MAGIC} (llm.c: 'Bad magic in eval file')")
    if h[1] != EVAL_VERSION:
        return r.fail(f"version {h[1]}, not {EVAL_VERSION} (llm.c: 'Bad version in data file')")
    num, longest = int(h[2]), int(h[3])
    if num < processes:
        return r.fail(f"{num} examples, fewer than the {processes} process(es) (llm.c asserts it)")
    limit = (1 + EVAL_COMPLETIONS) * T * 2
    if not 0 < longest < limit:
        return r.fail(f"longest example {longest} bytes: llm.c asserts 0 < longest < (1+4)*T*2 = {limit} at T={T}")
    w = np.frombuffer(data[HEADER_BYTES:HEADER_BYTES + (len(data) - HEADER_BYTES) // 2 * 2], "<u2")
    examples, at = [], 0
    for i in range(num):
        if at + 3 > len(w):
            return r.fail(f"truncated: example {i} of {num} is missing (llm.c's fread comes up short)")
        start, nbytes, index = (int(x) for x in w[at:at + 3])
        if start != 65535:
            return r.fail(f"example {i} starts with {start}, not the 65535 delimiter (llm.c asserts it)")
        if index != i:
            return r.fail(f"example {i} has index {index} (llm.c asserts they count up from 0)")
        if nbytes < 12 or nbytes % 2:
            return r.fail(f"example {i} claims {nbytes} bytes, impossible")
        if nbytes - 6 > longest:
            return r.fail(f"example {i} is {nbytes} bytes: llm.c reads all but its first 6 into a buffer of "
                          f"the header's longest, {longest} bytes")
        if at + nbytes // 2 > len(w):
            return r.fail(f"truncated inside example {i} (llm.c's fread comes up short)")
        x = w[at + 3:at + nbytes // 2]
        label, ncomp, nctx = int(x[0]), int(x[1]), int(x[2])
        if not 0 <= label < EVAL_COMPLETIONS:
            return r.fail(f"example {i}: label {label} (llm.c asserts 0 <= label < 4)")
        if ncomp != EVAL_COMPLETIONS:
            return r.fail(f"example {i}: {ncomp} completions (llm.c asserts exactly 4)")
        if not 0 < nctx < T:
            return r.fail(f"example {i}: context of {nctx} tokens (llm.c asserts 0 < length < T={T})")
        j = 3 + nctx
        ctx, endings = x[3:j].tolist(), []
        for c in range(ncomp):
            m = int(x[j]) if j < len(x) else -1
            if m < 0 or j + 1 + m > len(x):
                return r.fail(f"example {i}: completion {c} runs past the example's {nbytes} bytes")
            if not (m > 0 and nctx + m < T):
                return r.fail(f"example {i}: completion {c} of {m} tokens after {nctx} of context (llm.c "
                              f"asserts length > 0 and context + length < T={T})")
            endings.append(x[j + 1:j + 1 + m].tolist())
            j += 1 + m
        if j < len(x):
            r.note(f"example {i}: {2 * (len(x) - j)} bytes after its completions (llm.c skips them)")
        if V is not None:
            bad = [t for t in ctx + sum(endings, []) if t >= V]
            if bad:
                return r.fail(f"example {i}: token {bad[0]} >= V={V} (llm.c's forward refuses it)")
        examples.append((label, ctx, endings))
        at += nbytes // 2
    if HEADER_BYTES + 2 * at < len(data):
        r.note(f"{len(data) - HEADER_BYTES - 2 * at} bytes after the last example (llm.c ignores them)")
    if np.any(h[4:]):
        r.note("header words 4..255 are not all zero")
    real_longest = max(2 * (6 + len(c) + sum(1 + len(e) for e in ends)) for _, c, ends in examples)
    if real_longest != longest:
        r.note(f"the header's longest example is {longest} bytes, the longest is {real_longest}")
    r.summary = f"{num} examples of 4 completions, longest {longest} bytes, loadable at T={T}"
    r.content = examples
    return r


# ---------------------------------------------------------------------------------------
# check: the command

CHECKERS = {"model": check_model, "shard": check_datafile, "tokenizer": check_tokenizer, "eval": check_evalfile}


def _rewrite(kind, r):
    """The bytes llm.c's writer writes for the content r read."""
    if kind == "model":
        return _rewrite_model(r)
    if kind == "shard":
        return _written_by(write_datafile, r.content)
    if kind == "tokenizer":
        c = r.content
        return _written_by(write_tokenizer, c["pieces"], c["eot"], c["version"])
    return _written_by(write_evalfile, r.content)


def check_file(kind, path, strict=False, B=None, T=None, V=None, eot=None):
    """CHECKERS[kind] on path; strict: notes, and differences from what llm.c's writer writes
    for the same content, are errors too."""
    kw = {}
    if kind == "shard":
        kw = dict(B=B, T=T, V=V, eot=eot)
    elif kind == "eval":
        kw = dict(T=T or 1024, V=V)
    r = CHECKERS[kind](path, **kw)
    if r.ok and strict:
        for n in r.notes:
            r.fail(f"(strict) {n}")
        if r.ok:
            at = _differs_at(_read(path), _rewrite(kind, r))
            if at is not None:
                r.fail(f"(strict) differs from what llm.c's writer writes for the same content, at byte {at}")
    return r


def cmd_check(args):
    all_ok, kind = True, None
    for arg in args.files:
        if arg in CHECKERS:
            kind = arg
            continue
        if kind is None:
            raise SystemExit(f"check: {arg}: name a kind ({' '.join(CHECKERS)}) before the files")
        r = check_file(kind, arg, args.strict, args.B, args.T, args.V, args.eot)
        print(r.line())
        all_ok &= r.ok
    return 0 if all_ok else 1


# ---------------------------------------------------------------------------------------
# PyTorch side of the interop test

def torch_model(cfg, params, dtype=None):
    """pytorch_reference.GPT holding params (checkpoint shapes, wte with its Vp rows)."""
    import torch
    ref = _ref()
    dtype = dtype or torch.float64
    m = ref.GPT(cfg["V"], cfg["maxT"], cfg["L"], cfg["NH"], cfg["C"], Vp=cfg["Vp"], dtype=dtype)
    with torch.no_grad():
        for name in ref.PARAM_NAMES:
            getattr(m, name).copy_(torch.from_numpy(np.asarray(params[name], np.float32)).to(dtype))
    return m


def val_loss(model, pattern, B, T, batches):
    """Mean loss over the first `batches` val windows in llm.c's order (pytorch_train's loader)."""
    import torch
    import pytorch_train
    loader = pytorch_train.SequentialLoader(pattern, B, T)
    total = 0.0
    with torch.no_grad():
        for _ in range(batches):
            x, y = loader.next_batch()
            total += float(model(x, y)[1])
    return total / batches


def greedy_text(model, V, pieces, eot, n, T):
    """The trainer's sample at -st 0: from EOT, n argmax tokens, the context sliding at T.
    Returns (decoded bytes, smallest gap between the best and second-best logit)."""
    import torch
    toks, gap = [eot], float("inf")
    with torch.no_grad():
        for t in range(1, n + 1):
            ctx = toks[max(0, t - T):t]
            row = model(torch.tensor([ctx]))[0][0, -1, :V].double()
            top = torch.topk(row, 2).values
            gap = min(gap, float(top[0] - top[1]))
            toks.append(int(torch.argmax(row)))
    return b"".join(pieces[i] for i in toks[1:]), gap


def sample_block(text):
    """How the trainer prints a sample (llmc/train_common.h sample_text)."""
    return b"generating:\n---\n" + text + b"\n---\n"


def synthetic_pieces(V, eot, seed):
    """A made-up vocabulary of printable pieces: ASCII characters, words, some UTF-8."""
    rng = np.random.default_rng(seed)
    extra = ["é", "ß", " 日本", "😀", " naïve", "\n", "\t"]
    letters = "abcdefghijklmnopqrstuvwxyz"
    pieces = []
    for i in range(V):
        if i == eot:
            p = "<|endoftext|>"
        elif i < 95:
            p = chr(32 + i)
        elif i < 95 + len(extra):
            p = extra[i - 95]
        else:
            p = " " * int(rng.integers(0, 2)) + "".join(rng.choice(list(letters), int(rng.integers(1, 7))))
        pieces.append(p.encode("utf-8"))
    return pieces


def _documents(rng, n, V, eot, min_len=20, max_len=200):
    """n tokens of documents, each [EOT] + random tokens (never EOT), as fineweb.py lays them out."""
    out = []
    while len(out) < n:
        doc = rng.integers(0, V - 1, int(rng.integers(min_len, max_len)))
        doc[doc >= eot] += 1
        out += [eot] + doc.tolist()
    return np.array(out[:n])


# The fixture run: the trainer's flags in test/test_llmc_interop.sh must match these.
FIX = dict(V=500, maxT=64, L=2, NH=4, C=64, seed=1234, scale=8, eot=256, B=4, T=32, val_batches=7,
           val_tokens=[700, 500], train_tokens=[4000, 4000], gen=12,
           gpt2=dict(V=50257, maxT=16, L=1, NH=2, C=32, seed=99), gpt2_T=16, gpt2_gen=20,
           train=dict(steps=3, lr=1e-3, warmup=1, final_frac=0.1, weight_decay=0.1, schedule="cosine"),
           hellaswag_examples=12)


def _random_tensors(V, maxT, L, NH, C, seed, scale):
    """pytorch_reference's GPT-2 init (fp32) with the weight matrices times scale (a fresh
    init predicts nearly uniformly, and bf16's rounding would hardly move its loss), as a
    PyTorch model holds them: wte is (V, C)."""
    ref = _ref()
    m = ref.GPT(V, maxT, L, NH, C)
    m.init_random(seed)
    t = {name: getattr(m, name).detach().numpy().copy() for name in ref.PARAM_NAMES}
    for name in ref.DECAY_NAMES:
        t[name] *= np.float32(scale)
    t["wte"] = t["wte"][:V]
    return t


def _hellaswag_examples(model, V, T, count, rng):
    """count examples of 4 completions that fit llm.c's T, with clear winners; labels are the
    winner for even indices, another completion for odd ones."""
    import hellaswag_reference
    examples, correct = [], 0
    while len(examples) < count:
        ctx = rng.integers(0, V, int(rng.integers(2, 12))).tolist()
        ends = [rng.integers(0, V, int(rng.integers(1, T - len(ctx)))).tolist() for _ in range(4)]
        s = hellaswag_reference.completion_scores(model, ctx, ends)
        order = sorted(range(4), key=lambda c: s[c])
        if s[order[1]] - s[order[0]] < 1e-3 * max(1.0, abs(s[order[0]])):
            continue  # the fp32 trainer could pick the other one
        label = order[0] if len(examples) % 2 == 0 else order[int(rng.integers(1, 4))]
        correct += label == order[0]
        examples.append((label, ctx, ends))
    return examples, correct


WORDS = ("the of and to in is was that for on with as by at from his her they we it this be are not "
         "river light stone market winter garden letter music engine harbor window mountain village "
         "quickly slowly quietly never always often café naïve 日本語 über 1984 3.14 don't it's").split()


def _text_documents(d, rng, count=8):
    """count made-up English documents for `./tokenize shards`, and HellaSwag-shaped
    records (4 endings each) for `./tokenize hellaswag`."""
    os.makedirs(f"{d}/docs", exist_ok=True)

    def sentence(lo=5, hi=16):
        words = [str(w) for w in rng.choice(WORDS, int(rng.integers(lo, hi)))]
        return " ".join(words).capitalize() + str(rng.choice([".", ".", "!", "?", ";"]))
    for i in range(count):
        paragraphs = ["\n".join(sentence() for _ in range(int(rng.integers(3, 7)))) for _ in range(6)]
        with open(f"{d}/docs/doc_{i:02d}.txt", "w", encoding="utf-8") as f:
            f.write("\n\n".join(paragraphs) + "\n")
    with open(f"{d}/hellaswag.jsonl", "w", encoding="utf-8") as f:
        for i in range(5):
            rec = {"ind": i, "ctx": sentence(), "endings": [sentence(2, 8) for _ in range(4)],
                   "label": int(rng.integers(0, 4)), "split": "val"}
            f.write(json.dumps(rec, ensure_ascii=i % 2 == 0) + "\n")


def cmd_fixtures(args):
    import pytorch_train
    F = FIX
    d = args.dir
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(F["seed"])
    V, maxT, L, NH, C, eot = F["V"], F["maxT"], F["L"], F["NH"], F["C"], F["eot"]
    cfg = dict(V=V, maxT=maxT, L=L, NH=NH, C=C, Vp=padded_vocab(V))
    tensors = _random_tensors(V, maxT, L, NH, C, F["seed"], F["scale"])
    fp32 = write_model(f"{d}/model_fp32.bin", tensors, maxT, V, L, NH, C, "float32")
    bf16 = write_model(f"{d}/model_bf16.bin", tensors, maxT, V, L, NH, C, "bfloat16")
    # shards named as dev/data/fineweb.py names them: val is shard 0, train 1, 2, ...
    index = 0
    for split in ("val", "train"):
        for n in F[f"{split}_tokens"]:
            write_datafile(f"{d}/llmc_{split}_{index:06d}.bin", _documents(rng, n, V, eot))
            index += 1
    pieces = synthetic_pieces(V, eot, F["seed"])
    write_tokenizer(f"{d}/tokenizer_v2.bin", pieces, eot, 2)
    g = F["gpt2"]
    gpt2_tensors = _random_tensors(g["V"], g["maxT"], g["L"], g["NH"], g["C"], g["seed"], F["scale"])
    gpt2_params = write_model(f"{d}/model_gpt2vocab.bin", gpt2_tensors, g["maxT"], g["V"], g["L"], g["NH"],
                              g["C"], "float32")
    gpt2_pieces = synthetic_pieces(g["V"], 50256, g["seed"])
    write_tokenizer(f"{d}/tokenizer_v1.bin", gpt2_pieces, 50256, 1)

    m32, m16 = torch_model(cfg, fp32), torch_model(cfg, bf16)
    examples, correct = _hellaswag_examples(m32, V, F["T"], F["hellaswag_examples"], rng)
    write_evalfile(f"{d}/hellaswag_llmc.bin", examples)
    val = f"{d}/llmc_val_*.bin"
    text, gap = greedy_text(m32, V, pieces, eot, F["gen"], F["T"])
    gcfg = dict(g, Vp=padded_vocab(g["V"]))
    gtext, ggap = greedy_text(torch_model(gcfg, gpt2_params), g["V"], gpt2_pieces, 50256, F["gpt2_gen"],
                              F["gpt2_T"])
    tr = F["train"]
    pytorch_train.main(["--model", f"{d}/model_bf16.bin", "--train", f"{d}/llmc_train_*.bin", "--B", str(F["B"]),
                        "--T", str(F["T"]), "--steps", str(tr["steps"]), "--lr", str(tr["lr"]), "--warmup",
                        str(tr["warmup"]), "--final-frac", str(tr["final_frac"]), "--weight-decay",
                        str(tr["weight_decay"]), "--schedule", tr["schedule"], "--quiet", "--out",
                        f"{d}/train_bf16.ref"])
    expect = dict(val_fp32=val_loss(m32, val, F["B"], F["T"], F["val_batches"]),
                  val_bf16=val_loss(m16, val, F["B"], F["T"], F["val_batches"]),
                  sample_v2=text.hex(), sample_v2_gap=gap, sample_v1=gtext.hex(), sample_v1_gap=ggap,
                  hellaswag_correct=int(correct), hellaswag_examples=len(examples),
                  bf16_max_rounding=float(max(np.max(np.abs(bf16[k] - fp32[k])) for k in fp32)))
    with open(f"{d}/expect.json", "w") as f:
        json.dump(expect, f, indent=1)
    _damaged_copies(d)
    _text_documents(d, rng)
    print(f"fixtures in {d}: PyTorch val loss fp32 {expect['val_fp32']:.6f}, bf16 {expect['val_bf16']:.6f}; "
          f"HellaSwag {correct}/{len(examples)}; greedy gaps {gap:.2e} {ggap:.2e}")
    # what was written here is what llm.c's writers write, and its loaders take it
    ok = True
    for kind, pattern in (("model", "model_*.bin"), ("shard", "llmc_*.bin"), ("tokenizer", "tokenizer_v*.bin"),
                          ("eval", "hellaswag_llmc.bin")):
        for path in sorted(glob.glob(f"{d}/{pattern}")):
            r = check_file(kind, path, strict=True, B=F["B"], T=F["T"], V=V, eot=eot)
            print(f"  {r.line()}")
            ok &= r.ok
    return 0 if ok else 1


def _damaged_copies(d):
    """Files that break one of llm.c's rules each: bad_<kind>_<what>.bin."""
    def patch(src, dst, offset, fmt, value, cut=None):
        data = bytearray(_read(f"{d}/{src}"))
        if offset is not None:
            struct.pack_into(fmt, data, offset, value)
        if cut is not None:
            data = data[:cut]
        with open(f"{d}/{dst}", "wb") as f:
            f.write(data)
    model = _read(f"{d}/model_fp32.bin")
    patch("model_fp32.bin", "bad_model_version.bin", 4, "<i", 4)
    patch("model_fp32.bin", "bad_model_magic.bin", 0, "<i", MODEL_MAGIC + 1)
    patch("model_fp32.bin", "bad_model_truncated.bin", None, None, None, len(model) - 256)
    patch("model_fp32.bin", "bad_model_fp32_as_bf16.bin", 4, "<i", MODEL_BF16)  # 2x the bytes of v5
    # Vp = 384 < V = 500, the file cut to match that header: only the padded vocab is wrong
    C, Vp, V = FIX["C"], padded_vocab(FIX["V"]), 384
    data = bytearray(model[:HEADER_BYTES] + model[HEADER_BYTES:HEADER_BYTES + 4 * V * C] +
                     model[HEADER_BYTES + 4 * Vp * C:])
    struct.pack_into("<i", data, 28, V)
    with open(f"{d}/bad_model_vp.bin", "wb") as f:
        f.write(data)
    shard = "llmc_val_000000.bin"
    patch(shard, "bad_shard_version.bin", 4, "<i", 2)
    patch(shard, "bad_shard_magic.bin", 0, "<i", LLAMA3_SHARD_MAGIC)
    patch(shard, "bad_shard_size.bin", 8, "<i", FIX["val_tokens"][0] + 1)
    tok = _read(f"{d}/tokenizer_v2.bin")
    patch("tokenizer_v2.bin", "bad_tokenizer_version.bin", 4, "<I", 3)
    patch("tokenizer_v2.bin", "bad_tokenizer_v1_vocab.bin", 4, "<I", 1)  # version 1 needs V = 50257
    patch("tokenizer_v2.bin", "bad_tokenizer_truncated.bin", None, None, None, len(tok) - 3)
    patch("tokenizer_v2.bin", "bad_tokenizer_empty_token.bin", HEADER_BYTES, "<B", 0)
    patch("hellaswag_llmc.bin", "bad_eval_version.bin", 4, "<i", 2)
    patch("hellaswag_llmc.bin", "bad_eval_marker.bin", HEADER_BYTES, "<H", 7)
    patch("hellaswag_llmc.bin", "bad_eval_index.bin", HEADER_BYTES + 4, "<H", 3)


def _log_values(path, kind, key="loss"):
    """{step: value} of one kind of line in the trainer's metrics.jsonl."""
    out = {}
    for line in open(path):
        rec = json.loads(line)
        if rec.get("kind") == kind:
            out[rec["step"]] = rec[key]
    return out


def _rel(got, want):
    return abs(got - want) / abs(want)


def cmd_compare(args):
    d, F = args.dir, FIX
    ex = json.load(open(f"{d}/expect.json"))
    problems, tol = [], 1e-5

    def close(what, got, want, tol=tol):
        rel = _rel(got, want)
        print(f"  {what}: trainer {got:.7f}, PyTorch {want:.7f} (rel {rel:.1e})")
        if rel > tol:
            problems.append(f"{what}: trainer {got}, PyTorch {want}, rel {rel:.2e} > {tol}")

    def sample(what, stdout, hexed, gap):
        out, want = _read(stdout), sample_block(bytes.fromhex(hexed))
        ok = want in out
        print(f"  {what}: {'same' if ok else 'DIFFERENT'} greedy text, {len(bytes.fromhex(hexed))} bytes "
              f"(smallest top-2 logit gap {gap:.1e})")
        if not ok:
            problems.append(f"{what}: {stdout} lacks {want!r}")
    close("fp32 v3 model, val loss", _log_values(f"{d}/run_fp32/metrics.jsonl", "val")[0], ex["val_fp32"])
    close("bf16 v5 model, val loss", _log_values(f"{d}/run_bf16/metrics.jsonl", "val")[0], ex["val_bf16"])
    apart = _rel(ex["val_bf16"], ex["val_fp32"])
    print(f"  (bf16's rounding moved weights by up to {ex['bf16_max_rounding']:.1e} and the val loss by {apart:.1e}, "
          f"relative: the check tells bf16 from fp32 weights)")
    if apart < 3 * tol:
        problems.append(f"the fp32 and bf16 val losses are only {apart:.1e} apart: too close to tell apart")
    ours = _log_values(f"{d}/run_bf16/metrics.jsonl", "train")
    refs = [line.split() for line in open(f"{d}/train_bf16.ref") if line.strip()]
    if len(ours) != len(refs):
        problems.append(f"bf16 training: {len(ours)} steps logged, PyTorch ran {len(refs)}")
    for step, loss, norm, lr in refs:
        got = ours.get(int(step), float("nan"))
        close(f"bf16 v5 model, train loss step {step}", got, float(loss))
    hs = _log_values(f"{d}/run_fp32/metrics.jsonl", "hellaswag", "correct")[0]
    print(f"  llm.c eval file: trainer {hs}/{ex['hellaswag_examples']} right, PyTorch {ex['hellaswag_correct']}")
    if hs != ex["hellaswag_correct"]:
        problems.append(f"HellaSwag: trainer {hs} right, PyTorch {ex['hellaswag_correct']}")
    sample("tokenizer v2 (V=500, EOT 256)", f"{d}/run_fp32.stdout", ex["sample_v2"], ex["sample_v2_gap"])
    sample("tokenizer v1 (V=50257, no EOT)", f"{d}/run_v1.stdout", ex["sample_v1"], ex["sample_v1_gap"])
    for p in problems:
        print(f"FAIL: {p}")
    return 1 if problems else 0


def cmd_compare_ours(args):
    """A checkpoint of the trainer, read as llm.c reads it: its val loss and greedy sample in
    PyTorch against what the trainer printed at the step it was written."""
    r = check_file("model", args.model, strict=True)
    print(f"  {r.line()}")
    if not r.ok:
        print("FAIL: llm.c's loader (or writer) disagrees with the checkpoint")
        return 1
    cfg, params = read_model(args.model)
    model = torch_model(cfg, params)
    want = val_loss(model, args.val, args.B, args.T, args.batches)
    got = _log_values(args.metrics, "val")[args.step]
    rel = _rel(got, want)
    print(f"  {os.path.basename(args.model)} read as llm.c reads it: val loss PyTorch {want:.7f}, "
          f"trainer {got:.7f} (rel {rel:.1e})")
    problems = [] if rel <= 1e-5 else [f"val loss: trainer {got}, PyTorch {want}, rel {rel:.2e}"]
    tok = read_tokenizer(args.tokenizer)
    text, gap = greedy_text(model, cfg["V"], tok["pieces"], tok["eot"], args.gen, args.T)
    same = sample_block(text) in _read(args.stdout)
    print(f"  greedy sample decoded with {os.path.basename(args.tokenizer)}: {'same' if same else 'DIFFERENT'} "
          f"text, {len(text)} bytes (smallest top-2 logit gap {gap:.1e}): {text[:60]!r}...")
    if not same:
        problems.append(f"{args.stdout} lacks the sample {sample_block(text)!r}")
    for p in problems:
        print(f"FAIL: {p}")
    return 1 if problems else 0


def cmd_widen(args):
    if len(args.pairs) % 2:
        raise SystemExit("widen: SRC DST pairs")
    for src, dst in zip(args.pairs[::2], args.pairs[1::2]):
        widen_datafile(src, dst)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("widen", help="GPT-2 shards written again as llama-3 (uint32) shards")
    w.add_argument("pairs", nargs="+", help="SRC DST pairs")
    c = sub.add_parser("check", help="check files against llm.c's loaders")
    c.add_argument("files", nargs="+", metavar="KIND FILE...", help="a kind (model shard tokenizer eval), its "
                   "files, another kind, its files, ...")
    c.add_argument("--strict", action="store_true", help="notes and differences from llm.c's writer fail too")
    c.add_argument("--B", type=int)
    c.add_argument("--T", type=int)
    c.add_argument("--V", type=int)
    c.add_argument("--eot", type=int)
    f = sub.add_parser("fixtures", help="write the llm.c side of the interop test")
    f.add_argument("dir")
    m = sub.add_parser("compare", help="the trainer's runs on the fixtures against PyTorch")
    m.add_argument("dir")
    o = sub.add_parser("compare-ours", help="a checkpoint of the trainer against its own printed results")
    for flag, kind, what in (("model", str, "the checkpoint"), ("val", str, "the run's val shard glob (-j)"),
                             ("B", int, "-b"), ("T", int, "-t"), ("batches", int, "-m"),
                             ("metrics", str, "the run's metrics.jsonl"), ("step", int, "the checkpoint's step"),
                             ("tokenizer", str, "-tf"), ("gen", int, "-g (sampled at -st 0)"),
                             ("stdout", str, "the run's standard output")):
        o.add_argument(f"--{flag}", type=kind, required=True, help=what)
    args = ap.parse_args(argv)
    return {"check": cmd_check, "fixtures": cmd_fixtures, "compare": cmd_compare,
            "compare-ours": cmd_compare_ours, "widen": cmd_widen}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
