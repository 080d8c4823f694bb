#!/usr/bin/python3
"""Independent checks of ./export_hf and ./import_hf (Hugging Face GPT-2 safetensors).

Nothing here uses the C++ reader or writer: safetensors files are parsed and written with
json + numpy, and the logits come from a GPT-2 written in Hugging Face's layout
(GPT2LMHeadModel's tensor names; Conv1D layers compute x @ W + b with W stored (in, out);
the LM head is tied to wte) from the safetensors tensors alone, then compared with the
llm.c-layout reference model of test/pytorch_reference.py loaded from the checkpoint.

Usage (Debian's python: torch 1.13 + numpy; no transformers or safetensors packages):
  hf_reference.py check-export DIR --checkpoint ORIG.bin --dtype F32|BF16 [--cpp build/test_hf_logits]
  hf_reference.py write-released DIR --checkpoint ORIG.bin      # OpenAI-repo style, F16
  hf_reference.py check-import IMPORTED.bin --safetensors FILE --checkpoint ORIG.bin --tol T
  hf_reference.py make-bad GOOD.safetensors DIR                  # broken files for the error tests
  hf_reference.py check-transformers DIR --checkpoint ORIG.bin --dtype F32|BF16 --cpp build/test_hf_logits
      # where the transformers package is (the lent GPU machines): its own GPT2LMHeadModel
      # .from_pretrained(DIR) against the C++ trainer's logits, on the CPU and on a GPU if any;
      # exits 77 when transformers does not import
Each prints one "ok ..." line per check and exits 1 on the first failure.
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_reference as ref  # noqa: E402  (the llm.c-layout GPT and checkpoint reader)

DTYPES = {"F32": ("<f4", 4), "F16": ("<f2", 2), "BF16": ("<u2", 2), "U8": ("u1", 1)}
LAYER_NAMES = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
               "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
               "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"]


def die(msg):
    print(f"FAIL {msg}")
    sys.exit(1)


def ok(msg):
    print(f"ok {msg}")


# ---- safetensors, by hand --------------------------------------------------------------
def read_safetensors(path):
    """Returns (header dict, {name: float32 numpy array}, {name: raw numpy array})."""
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    if n % 8 != 0:
        die(f"{path}: header length {n} is not a multiple of 8")
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = blob[8 + n:]
    tensors, raw = {}, {}
    end = 0
    for name, e in sorted(((k, v) for k, v in header.items() if k != "__metadata__"),
                          key=lambda kv: kv[1]["data_offsets"][0]):
        b, en = e["data_offsets"]
        npdt, size = DTYPES[e["dtype"]]
        if b != end or en - b != size * int(np.prod(e["shape"], dtype=np.int64)):
            die(f"{path}: {name}: offsets {b},{en} do not follow {end} / match its shape")
        end = en
        arr = np.frombuffer(data[b:en], dtype=npdt).reshape(e["shape"])
        raw[name] = arr
        if e["dtype"] == "BF16":
            tensors[name] = (arr.astype(np.uint32) << 16).view(np.float32)
        else:
            tensors[name] = arr.astype(np.float32)
    if end != len(data):
        die(f"{path}: data buffer {len(data)} bytes, tensors cover {end}")
    return header, tensors, raw


def write_safetensors(path, named, metadata=None):
    """named: list of (name, dtype string, numpy array already in that dtype)."""
    header, offset = {}, 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dt, arr in named:
        header[name] = {"dtype": dt, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + arr.nbytes]}
        offset += arr.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, _, arr in named:
            f.write(np.ascontiguousarray(arr).tobytes())


def bf16_bits_rne(x):
    """float32 -> bfloat16 bits, round to nearest even (finite inputs)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


# ---- the expected HF tensors of an llm.c model -----------------------------------------
def hf_tensors_from_llmc(model, prefix="transformer."):
    """{HF name: float32 array} from a pytorch_reference.GPT (llm.c layout)."""
    p = {n: getattr(model, n).detach().numpy() for n in ref.PARAM_NAMES}
    out = {prefix + "wte.weight": p["wte"][:model.V], prefix + "wpe.weight": p["wpe"]}
    for i in range(model.L):
        h = f"{prefix}h.{i}."
        vals = [p["ln1w"][i], p["ln1b"][i], p["qkvw"][i].T, p["qkvb"][i], p["attprojw"][i].T,
                p["attprojb"][i], p["ln2w"][i], p["ln2b"][i], p["fcw"][i].T, p["fcb"][i],
                p["fcprojw"][i].T, p["fcprojb"][i]]
        for name, v in zip(LAYER_NAMES, vals):
            out[h + name] = v
    out[prefix + "ln_f.weight"] = p["lnfw"]
    out[prefix + "ln_f.bias"] = p["lnfb"]
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in out.items()}


# ---- GPT-2 in Hugging Face's layout ----------------------------------------------------
def hf_logits(t, prefix, n_head, idx, eps=1e-5):
    """GPT2LMHeadModel's forward (eval, no cache) from the safetensors tensors alone."""
    W = {k[len(prefix):]: torch.from_numpy(np.array(v, dtype=np.float32)) for k, v in t.items()
         if k.startswith(prefix) and not k.endswith(".attn.bias")}
    B, T = idx.shape
    C = W["wte.weight"].shape[1]
    hs = C // n_head
    L = sum(1 for k in W if k.endswith(".ln_1.weight"))

    def conv1d(x, name):  # HF Conv1D: weight (in, out)
        return x @ W[name + ".weight"] + W[name + ".bias"]

    def gelu_new(x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))

    x = W["wte.weight"][idx] + W["wpe.weight"][torch.arange(T)]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for i in range(L):
        h = f"h.{i}."
        a = F.layer_norm(x, (C,), W[h + "ln_1.weight"], W[h + "ln_1.bias"], eps)
        q, k, v = conv1d(a, h + "attn.c_attn").split(C, dim=2)
        q, k, v = (z.view(B, T, n_head, hs).permute(0, 2, 1, 3) for z in (q, k, v))
        w = (q @ k.transpose(-1, -2)) / math.sqrt(hs)
        w = torch.where(mask, w, torch.tensor(torch.finfo(w.dtype).min))
        y = (torch.softmax(w, dim=-1) @ v).permute(0, 2, 1, 3).reshape(B, T, C)
        x = x + conv1d(y, h + "attn.c_proj")
        m = F.layer_norm(x, (C,), W[h + "ln_2.weight"], W[h + "ln_2.bias"], eps)
        x = x + conv1d(gelu_new(conv1d(m, h + "mlp.c_fc")), h + "mlp.c_proj")
    x = F.layer_norm(x, (C,), W["ln_f.weight"], W["ln_f.bias"], eps)
    return (x @ W["wte.weight"].T).numpy()  # tied head


def batch(V, maxT, seed=1234):
    g = torch.Generator().manual_seed(seed)
    B, T = 3, min(37, maxT)
    idx = torch.randint(0, V, (B, T), generator=g)
    idx[0, 0] = V - 1
    return idx


def ref_logits(ckpt, idx):
    model = ref.read_checkpoint(ckpt)
    with torch.no_grad():
        logits, _ = model(idx)
    return model, logits.numpy()


def cpp_logits(prog, ckpt, idx, V):
    with tempfile.TemporaryDirectory() as d:
        tok, out = os.path.join(d, "tokens.bin"), os.path.join(d, "logits.bin")
        idx.numpy().astype("<i4").tofile(tok)
        B, T = idx.shape
        subprocess.run([prog, ckpt, tok, str(B), str(T), out], check=True)
        return np.fromfile(out, dtype="<f4").reshape(B, T, V)


def rel_err(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def compare(what, got, want, tol):
    e = rel_err(got, want)
    if not e <= tol:
        die(f"{what}: max error {e:.2e} of max |logit| > {tol:g}")
    ok(f"{what}: max error {e:.2e} of max |logit| (tol {tol:g})")


# ---- commands --------------------------------------------------------------------------
def check_export(a):
    st_path, cfg_path = os.path.join(a.dir, "model.safetensors"), os.path.join(a.dir, "config.json")
    header, t, raw = read_safetensors(st_path)
    ok(f"{st_path}: parsed independently ({len(t)} tensors, {os.path.getsize(st_path)} bytes)")
    if header.get("__metadata__") != {"format": "pt"}:
        die(f"__metadata__ is {header.get('__metadata__')}")
    model = ref.read_checkpoint(a.checkpoint)
    want = hf_tensors_from_llmc(model)
    if set(t) != set(want):
        die(f"tensor names differ: extra {sorted(set(t) - set(want))} missing {sorted(set(want) - set(t))}")
    for name, w in want.items():
        if tuple(header[name]["shape"]) != w.shape or header[name]["dtype"] != a.dtype:
            die(f"{name}: {header[name]['dtype']} {header[name]['shape']}, expected {a.dtype} {list(w.shape)}")
        exact = raw[name].view(np.uint32) == w.view(np.uint32) if a.dtype == "F32" else raw[name] == bf16_bits_rne(w)
        if not exact.all():
            die(f"{name}: {np.count_nonzero(~exact)} values differ from the checkpoint's ({a.dtype})")
    ok(f"names, shapes, dtype {a.dtype}; every value bit-exact "
       f"{'(Conv1D transposed, wte unpadded)' if a.dtype == 'F32' else '(round-to-nearest-even bf16 of the checkpoint)'}; no lm_head.weight")
    cfg = json.load(open(cfg_path))
    expect = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": model.V,
              "n_positions": model.maxT, "n_ctx": model.maxT, "n_embd": model.C, "n_layer": model.L,
              "n_head": model.NH, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
              "n_inner": None, "tie_word_embeddings": True,
              "torch_dtype": "float32" if a.dtype == "F32" else "bfloat16"}
    for k, v in expect.items():
        if cfg.get(k, "<absent>") != v:
            die(f"config.json {k} = {cfg.get(k, '<absent>')!r}, expected {v!r}")
    if (model.V == 50257) != ("eos_token_id" in cfg):
        die("config.json: bos/eos ids should be there exactly when V == 50257")
    ok(f"config.json: {len(expect)} fields as expected")
    idx = batch(model.V, model.maxT)
    _, want_logits = ref_logits(a.checkpoint, idx)
    got = hf_logits(t, "transformer.", cfg["n_head"], idx)
    tol = 1e-5 if a.dtype == "F32" else 1e-2  # bf16 keeps 8 bits: weights off by up to 2^-9
    compare(f"HF-layout logits from the {a.dtype} safetensors vs PyTorch reference on the checkpoint", got, want_logits, tol)
    if a.cpp:
        compare("HF-layout logits vs the C++ trainer's forward on the checkpoint",
                got, cpp_logits(a.cpp, a.checkpoint, idx, model.V), tol)


def check_transformers(a):
    try:
        import transformers
    except ImportError:
        print("SKIP the transformers package does not import here")
        sys.exit(77)
    model = ref.read_checkpoint(a.checkpoint)
    idx = batch(model.V, model.maxT)
    want = cpp_logits(a.cpp, a.checkpoint, idx, model.V)
    # releases since 4.56 name the argument dtype (5.x warns on torch_dtype), older ones torch_dtype
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    dtype_arg = "dtype" if (major, minor) >= (4, 56) else "torch_dtype"
    hf = transformers.GPT2LMHeadModel.from_pretrained(a.dir, attn_implementation="eager", **{dtype_arg: torch.float32})
    hf = hf.float().eval()
    if hf.lm_head.weight.data_ptr() != hf.transformer.wte.weight.data_ptr():
        die("GPT2LMHeadModel did not tie lm_head.weight to transformer.wte.weight")
    tol = 1e-5 if a.dtype == "F32" else 1e-2  # as check-export: bf16 weights are off by up to 2^-9
    what = f"transformers {transformers.__version__} GPT2LMHeadModel.from_pretrained({a.dtype} export)"
    with torch.no_grad():
        got = hf(idx).logits.numpy()
    compare(f"{what} on the CPU vs the C++ trainer's forward on the checkpoint", got, want, tol)
    if torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = False
        with torch.no_grad():
            got = hf.cuda()(idx.cuda()).logits.cpu().numpy()
        compare(f"{what} on {torch.cuda.get_device_name()} vs the C++ trainer's forward", got, want, max(tol, 1e-4))


def write_released(a):
    """OpenAI's gpt2 repo style: no "transformer." prefix, h.{i}.attn.bias mask buffers, F16."""
    os.makedirs(a.dir, exist_ok=True)
    model = ref.read_checkpoint(a.checkpoint)
    named = []
    for name, v in hf_tensors_from_llmc(model, prefix="").items():
        named.append((name, "F16", v.astype("<f2")))
        if name.endswith("ln_1.weight"):
            mask = np.tril(np.ones((model.maxT, model.maxT), dtype="<f2"))[None, None]
            named.append((name.replace("ln_1.weight", "attn.bias"), "F16", mask))
    write_safetensors(os.path.join(a.dir, "model.safetensors"), named, {"format": "pt"})
    ok(f"wrote {a.dir}/model.safetensors: {len(named)} F16 tensors, no prefix, with attn.bias buffers")


def check_import(a):
    _, t, _ = read_safetensors(a.safetensors)
    prefix = "transformer." if "transformer.wte.weight" in t else ""
    blob = open(a.imported, "rb").read()
    h = np.frombuffer(blob[:1024], dtype="<i4")
    maxT, V, L, NH, C, Vp = (int(h[i]) for i in (2, 3, 4, 5, 6, 7))
    # the checkpoint we expect, assembled from the safetensors tensors by hand
    g = lambda n: t[prefix + n]  # noqa: E731
    wte = np.zeros((Vp, C), np.float32)
    wte[:V] = g("wte.weight")
    per = {k: [] for k in LAYER_NAMES}
    for i in range(L):
        for k in LAYER_NAMES:
            v = g(f"h.{i}.{k}")
            per[k].append(v.T if k.endswith("weight") and v.ndim == 2 else v)
    order = [wte, g("wpe.weight")] + [np.stack(per[k]) for k in LAYER_NAMES] + [g("ln_f.weight"), g("ln_f.bias")]
    hdr = np.zeros(256, "<i4")
    hdr[:8] = [ref.MODEL_MAGIC, ref.MODEL_VERSION_FP32, maxT, V, L, NH, C, Vp]
    expect = hdr.tobytes() + b"".join(np.ascontiguousarray(x, "<f4").tobytes() for x in order)
    if V != g("wte.weight").shape[0] or Vp != (V + 127) // 128 * 128 or NH != a.nh:
        die(f"{a.imported}: header V={V} Vp={Vp} NH={NH}, expected V={g('wte.weight').shape[0]} NH={a.nh}")
    if blob != expect:
        die(f"{a.imported}: differs from the checkpoint assembled from {a.safetensors} by hand")
    ok(f"{a.imported}: byte-identical to the llm.c checkpoint assembled by hand (L={L} C={C} NH={NH} V={V} Vp={Vp} maxT={maxT})")
    idx = batch(V, maxT)
    _, got = ref_logits(a.imported, idx)
    compare("PyTorch reference on the imported checkpoint vs HF-layout logits from the safetensors",
            got, hf_logits(t, prefix, NH, idx), 1e-5)
    if a.checkpoint:
        _, orig = ref_logits(a.checkpoint, idx)
        compare("imported vs original checkpoint logits", got, orig, a.tol)


def make_bad(a):
    os.makedirs(a.dir, exist_ok=True)
    blob = open(a.good, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]

    def put(name, b):
        open(os.path.join(a.dir, name), "wb").write(b)

    def with_header(hd):
        text = json.dumps(hd).encode()
        text += b" " * (-len(text) % 8)
        return struct.pack("<Q", len(text)) + text

    put("truncated.safetensors", blob[:len(blob) - 100])
    put("tiny.safetensors", blob[:5])
    put("header_past_end.safetensors", struct.pack("<Q", len(blob) * 2) + blob[8:])
    put("bad_json.safetensors", blob[:9] + b"{" + blob[10:])  # {{: a key must be a string
    name = "transformer.h.1.mlp.c_fc.bias"
    e = header[name]
    b0, b1 = e["data_offsets"]
    hd = {k: v for k, v in header.items() if k != name}  # drop it, close the gap it leaves
    for v in hd.values():
        if "data_offsets" in v and v["data_offsets"][0] >= b1:
            v["data_offsets"] = [v["data_offsets"][0] - (b1 - b0), v["data_offsets"][1] - (b1 - b0)]
    put("missing_tensor.safetensors", with_header(hd) + data[:b0] + data[b1:])
    hd = json.loads(blob[8:8 + n])  # same bytes, shape (4C,) relabelled (2, 2C)
    hd[name]["shape"] = [2, e["shape"][0] // 2]
    put("wrong_shape.safetensors", with_header(hd) + data)
    hd = json.loads(blob[8:8 + n])
    hd[name]["data_offsets"] = [b0, b1 + 4]
    put("bad_offsets.safetensors", with_header(hd) + data)
    _, t, _ = read_safetensors(a.good)  # an untied LM head: llm.c's GPT-2 cannot hold it
    named = [(k, "F32", v) for k, v in t.items()]
    named.append(("lm_head.weight", "F32", t["transformer.wte.weight"] * 0.5))
    write_safetensors(os.path.join(a.dir, "untied_head.safetensors"), named, {"format": "pt"})
    ok(f"wrote 8 broken files to {a.dir}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("check-export")
    p.add_argument("dir")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--dtype", choices=["F32", "BF16"], required=True)
    p.add_argument("--cpp")
    p = sub.add_parser("write-released")
    p.add_argument("dir")
    p.add_argument("--checkpoint", required=True)
    p = sub.add_parser("check-import")
    p.add_argument("imported")
    p.add_argument("--safetensors", required=True)
    p.add_argument("--checkpoint")
    p.add_argument("--nh", type=int, required=True)
    p.add_argument("--tol", type=float, default=1e-5)
    p = sub.add_parser("check-transformers")
    p.add_argument("dir")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--dtype", choices=["F32", "BF16"], required=True)
    p.add_argument("--cpp", required=True)
    p = sub.add_parser("make-bad")
    p.add_argument("good")
    p.add_argument("dir")
    a = ap.parse_args()
    torch.manual_seed(0)
    {"check-export": check_export, "write-released": write_released,
     "check-import": check_import, "make-bad": make_bad, "check-transformers": check_transformers}[a.cmd](a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
