#!/usr/bin/env python3
"""Checks for test/test_tokenizer.sh. Each subcommand exits 0 when all is well, else 1
after printing what differs.

  check.py ids REF.ids GOT.ids VOCAB           token ids equal; else the first difference.
                                               VOCAB: GPT-2's directory or a tiktoken file
  check.py pretokens REF.txt GOT.txt TEXT     pre-token lengths equal; else the first
                                               difference, with the text there
  check.py classes REF.txt GOT.txt             character classes equal, except at code
                                               points newer than Debian's UnicodeData.txt
  check.py shards PREFIX DOCS.json SHARD_TOKENS VAL_RULE [EOT MAGIC]
                                               shards = EOT + ids of each doc, val split by
                                               VAL_RULE: "docs:N" or "fraction:F"; every file
                                               with header MAGIC (default 50256, 20240520:
                                               uint16 ids; 20240801: uint32)
  check.py tokenizer-file FILE VOCAB_DIR       llm.c tokenizer file matches encoder.json
"""
import base64
import glob
import json
import math
import os
import struct
import sys

EOT = 50256
UCD = "/usr/share/unicode/UnicodeData.txt"


def gpt2_byte_alphabet():
    """GPT-2's byte -> printable character table (encoder.py's bytes_to_unicode)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return {v: k for k, v in table.items()}


def load_pieces(vocab_dir):
    if os.path.isfile(vocab_dir):  # a tiktoken file: "BASE64 RANK" lines
        return {int(rank): base64.b64decode(tok) for tok, rank in (line.split() for line in open(vocab_dir))}
    enc = json.load(open(os.path.join(vocab_dir, "encoder.json"), encoding="utf-8"))
    u2b = gpt2_byte_alphabet()
    pieces = {}
    for tok, i in enc.items():
        pieces[i] = tok.encode() if tok == "<|endoftext|>" else bytes(u2b[c] for c in tok)
    return pieces


def read_ids(path):
    return [int(x) for x in open(path).read().split()]


def cmd_ids(ref_path, got_path, vocab_dir):
    ref, got = read_ids(ref_path), read_ids(got_path)
    if ref == got:
        print("  ids: %d tokens identical" % len(ref))
        return 0
    pieces = load_pieces(vocab_dir)
    i = next((k for k in range(min(len(ref), len(got))) if ref[k] != got[k]), min(len(ref), len(got)))
    offset = sum(len(pieces[t]) for t in ref[:i])
    show = lambda ids: " ".join("%d%r" % (t, pieces[t].decode("utf-8", "replace")) for t in ids)
    print("FAIL ids: %d reference tokens, %d from ./tokenize; first difference at token %d (byte %d)"
          % (len(ref), len(got), i, offset))
    print("  before:     " + show(ref[max(0, i - 5):i]))
    print("  reference:  " + show(ref[i:i + 8]))
    print("  ./tokenize: " + show(got[i:i + 8]))
    text = b"".join(pieces[t] for t in ref[max(0, i - 5):i + 8])
    print("  text there: %r" % text.decode("utf-8", "replace"))
    return 1


def cmd_pretokens(ref_path, got_path, text_path):
    ref, got = read_ids(ref_path), read_ids(got_path)
    if ref == got:
        print("  pretokens: %d pieces identical" % len(ref))
        return 0
    text = open(text_path, "rb").read()
    i = next((k for k in range(min(len(ref), len(got))) if ref[k] != got[k]), min(len(ref), len(got)))
    offset = sum(ref[:i])

    def pieces(lengths):
        out, pos = [], offset
        for n in lengths[i:i + 6]:
            out.append(text[pos:pos + n].decode("utf-8", "replace"))
            pos += n
        return " ".join(repr(p) for p in out)
    print("FAIL pretokens: %d pieces from Node's regex, %d from ./tokenize; first difference at piece %d (byte %d)"
          % (len(ref), len(got), i, offset))
    print("  Node:       " + pieces(ref))
    print("  ./tokenize: " + pieces(got))
    return 1


def expand_classes(path):
    cls = bytearray(b"?" * 0x110000)
    for line in open(path):
        lo, hi, c = line.split()
        lo, hi = int(lo, 16), int(hi, 16)
        cls[lo:hi + 1] = c.encode() * (hi - lo + 1)
    return cls


def assigned_code_points():
    assigned, first = set(), None
    for line in open(UCD, encoding="utf-8"):
        f = line.split(";")
        cp, name = int(f[0], 16), f[1]
        if name.endswith(", First>"):
            first = cp
        elif name.endswith(", Last>"):
            assigned.update(range(first, cp + 1))
        else:
            assigned.add(cp)
    return assigned


def cmd_classes(ref_path, got_path):
    ref, got = expand_classes(ref_path), expand_classes(got_path)
    if b"?" in ref or b"?" in got:
        print("FAIL classes: a listing does not cover every code point")
        return 1
    diff = [cp for cp in range(0x110000) if ref[cp] != got[cp]]
    assigned = assigned_code_points()
    bad = [cp for cp in diff if cp in assigned]
    for cp in bad[:10]:
        print("FAIL classes: U+%04X is %s in JavaScript but %s here" % (cp, chr(ref[cp]), chr(got[cp])))
    print("  classes: %d code points agree; %d differ, all assigned after Debian's Unicode data "
          "(Node knows a newer Unicode)" % (0x110000 - len(diff), len(diff) - len(bad)))
    return 1 if bad else 0


SHARD_LAYOUTS = {20240520: (1, "H"), 20240801: (7, "I")}  # magic: version, token type


def read_shard(path, want_magic):
    data = open(path, "rb").read()
    if len(data) < 1024:
        raise ValueError("%s: %d bytes, shorter than the header" % (path, len(data)))
    magic, version, ntok = struct.unpack("<3i", data[:12])
    want_version, kind = SHARD_LAYOUTS[want_magic]
    if (magic, version) != (want_magic, want_version):
        raise ValueError("%s: header magic/version %d/%d, want %d/%d" % (path, magic, version, want_magic, want_version))
    width = struct.calcsize(kind)
    if len(data) != 1024 + width * ntok:
        raise ValueError("%s: size %d != 1024 + %d*%d" % (path, len(data), width, ntok))
    return list(struct.unpack("<%d%s" % (ntok, kind), data[1024:])), ntok


def cmd_shards(prefix, docs_path, shard_tokens, rule, eot=EOT, magic=20240520):
    docs = json.load(open(docs_path))
    kind, value = rule.split(":")
    want = {"val": [], "train": []}
    for i, ids in enumerate(docs):
        if kind == "docs":
            val = i < int(value)
        else:
            f = float(value)
            val = math.floor((i + 1) * f) > math.floor(i * f)
        want["val" if val else "train"] += [eot] + ids
    status = 0
    for split in ("val", "train"):
        files = sorted(glob.glob("%s_%s_*.bin" % (prefix, split)))
        expect_files = math.ceil(len(want[split]) / shard_tokens)
        got = []
        try:
            for k, f in enumerate(files):
                toks, ntok = read_shard(f, magic)
                if f != "%s_%s_%06d.bin" % (prefix, split, k):
                    raise ValueError("%s: unexpected name (want index %d)" % (f, k))
                if k < len(files) - 1 and ntok != shard_tokens:
                    raise ValueError("%s: %d tokens, not a full shard of %d" % (f, ntok, shard_tokens))
                got += toks
        except ValueError as e:
            print("FAIL shards: %s" % e)
            status = 1
            continue
        if len(files) != expect_files or got != want[split]:
            i = next((k for k in range(min(len(got), len(want[split]))) if got[k] != want[split][k]), None)
            print("FAIL shards: %s split: %d files / %d tokens, want %d / %d; first difference at %s"
                  % (split, len(files), len(got), expect_files, len(want[split]), i))
            status = 1
        else:
            print("  shards: %s_%s_*: %d files, %d tokens as expected" % (prefix, split, len(files), len(got)))
    return status


def cmd_tokenizer_file(path, vocab_dir):
    pieces = load_pieces(vocab_dir)
    data = open(path, "rb").read()
    header = struct.unpack("<256I", data[:1024])
    if header[:4] != (20240328, 2, len(pieces), EOT):
        print("FAIL tokenizer-file: header %s" % (header[:4],))
        return 1
    pos = 1024
    for i in range(len(pieces)):
        n = data[pos]
        if data[pos + 1:pos + 1 + n] != pieces[i]:
            print("FAIL tokenizer-file: token %d is %r, want %r" % (i, data[pos + 1:pos + 1 + n], pieces[i]))
            return 1
        pos += 1 + n
    if pos != len(data):
        print("FAIL tokenizer-file: %d trailing bytes" % (len(data) - pos))
        return 1
    print("  tokenizer-file: %s: %d tokens match encoder.json" % (path, len(pieces)))
    return 0


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "ids":
        return cmd_ids(*args)
    if cmd == "pretokens":
        return cmd_pretokens(*args)
    if cmd == "classes":
        return cmd_classes(*args)
    if cmd == "shards":
        return cmd_shards(args[0], args[1], int(args[2]), args[3], *(int(a) for a in args[4:6]))
    if cmd == "tokenizer-file":
        return cmd_tokenizer_file(*args)
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
