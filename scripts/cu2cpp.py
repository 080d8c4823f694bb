#!/usr/bin/env python3
"""cu2cpp.py OUTDIR: the CUDA sources as C++ for the emulated GPU (llmc/emu/emu.h).

Writes every source the GPU programs include (train_gpt.cu, generate.cu, llmc/, dev/cuda/,
data/*.h, test/*.cu and test/*.h) under OUTDIR with the same relative paths, changing only CUDA's syntax that a
host compiler cannot read; kernels and launchers are otherwise the same text:
  kernel<<<grid, block, smem, stream>>>(args)
      -> ::emu::launch_named("kernel", kernel, grid, block, smem, stream)(args)
  __shared__ [alignas(N)] T a[X], b;
      -> static char emu_site_a; auto& a = ::emu::shared_static<T[X], N>(&emu_site_a); ...
  extern __shared__ [alignas(N)] T name[];
      -> T* const name = ::emu::shared_dynamic<T>();
Line numbers are kept, and each file starts with a #line naming the original, so compiler
messages and sanitizer reports point at the real sources. A file is rewritten only when its
output changes, so make's timestamps stay meaningful.
"""
import os
import re
import sys

SOURCES = [("train_gpt.cu", None), ("generate.cu", None), ("llmc", (".h", ".cuh")), ("dev/cuda", (".cu", ".cuh")),
           ("data", (".h",)), ("test", (".cu", ".h"))]
SKIP_DIRS = {os.path.join("llmc", "emu")}


def kernel_start(text, end):
    """Index where the kernel expression ending just before text[end] begins: names, ::
    and balanced template argument lists, e.g. attention_forward_kernel<H>."""
    i = end
    while True:
        while i > 0 and text[i - 1] in " \t":
            i -= 1
        if i > 0 and text[i - 1] == ">":
            depth = 0
            while i > 0:
                i -= 1
                if text[i] == ">":
                    depth += 1
                elif text[i] == "<":
                    depth -= 1
                    if depth == 0:
                        break
            else:
                raise ValueError("unbalanced template arguments before <<<")
        j = i
        while j > 0 and (text[j - 1].isalnum() or text[j - 1] == "_"):
            j -= 1
        if j == i:
            raise ValueError("no kernel name before <<<")
        i = j
        if text[max(0, i - 2):i] == "::":
            i -= 2
            continue
        return i


def rewrite_launches(text, path):
    out, pos = [], 0
    while True:
        k = text.find("<<<", pos)
        if k < 0:
            out.append(text[pos:])
            return "".join(out)
        e = text.find(">>>", k)
        if e < 0:
            raise ValueError(f"{path}: <<< without >>>")
        s = kernel_start(text, k)
        expr = text[s:k].strip()
        name = " ".join(expr.split())
        out.append(text[pos:s])
        out.append(f'::emu::launch_named("{name}", {expr}, ')
        out.append(text[k + 3:e])
        out.append(")")
        pos = e + 3


SHARED = re.compile(r"(?P<ext>\bextern\s+)?__shared__\s+(?:(?:alignas|__align__)\((?P<align>\d+)\)\s+)?"
                    r"(?P<type>[A-Za-z_][\w:]*(?:\s*<[^;>]*>)?)\s+(?P<decls>[^;]+);")


def rewrite_shared(text, path):
    def one(m):
        typ, align = m.group("type"), m.group("align")
        if m.group("ext"):
            name = m.group("decls").strip()
            if not name.endswith("[]"):
                raise ValueError(f"{path}: extern __shared__ {name}: expected name[]")
            return f"{typ}* const {name[:-2].strip()} = ::emu::shared_dynamic<{typ}>();"
        parts = []
        for d in m.group("decls").split(","):
            d = d.strip()
            dm = re.fullmatch(r"([A-Za-z_]\w*)\s*((?:\[[^\]]+\]\s*)*)", d)
            if not dm or "=" in d:
                raise ValueError(f"{path}: __shared__ declarator {d!r} not understood")
            name, dims = dm.group(1), dm.group(2).replace(" ", "")
            targs = f"{typ}{dims}" + (f", {align}" if align else "")
            parts.append(f"static char emu_site_{name}; "
                         f"auto& {name} = ::emu::shared_static<{targs}>(&emu_site_{name});")
        return " ".join(parts)
    return SHARED.sub(one, text)


def convert(path):
    with open(path) as f:
        text = f.read()
    if path.endswith((".cu", ".cuh")):
        text = rewrite_shared(rewrite_launches(text, path), path)
    return f'#line 1 "{path}"\n' + text


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: cu2cpp.py OUTDIR")
    outdir = sys.argv[1]
    paths = []
    for root, exts in SOURCES:
        if exts is None:
            paths.append(root)
            continue
        for dirpath, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if os.path.join(dirpath, d) not in SKIP_DIRS]
            paths += [os.path.join(dirpath, f) for f in sorted(files) if f.endswith(exts)]
    for p in paths:
        try:
            text = convert(p)
        except ValueError as e:
            sys.exit(f"cu2cpp: {e}")
        dst = os.path.join(outdir, p)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if os.path.exists(dst):
            with open(dst) as f:
                if f.read() == text:
                    continue
        with open(dst, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
