#!/usr/bin/env python3
"""sass_count.py: each kernel's machine code size at sm_90a, in instructions, without a GPU and
without a disassembler (this machine's CUDA has nvcc and ptxas, not cuobjdump or nvdisasm).

    python3 dev/sass_count.py [-k REGEX] [-p fp32|bf16] SOURCE... [-- NVCC_FLAG...]
    python3 dev/sass_count.py --cubin FILE [-k REGEX]

Compiles each SOURCE's device code for sm_90a (nvcc -cubin, kernel_resources.py's flags) and
reads the cubin's ELF section headers: a kernel's code is the section .text.<its mangled name>,
and every Volta-and-later SASS instruction is 16 bytes, so its size / 16 is the kernel's static
instruction count (the padding at its end included: a few NOPs). One line a kernel: count and
demangled name, sorted by name. A static count is not a speed: it says what a change did to the
code (an exp2f's expansion gone, a mask specialized away) where the loop bodies are unrolled,
which the attention kernels' are. Standard library only, and c++filt.
"""
import argparse
import os
import re
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import kernel_resources  # noqa: E402  (nvcc_path, NVCC_FLAGS, PRECISIONS, demangle)

SASS_BYTES = 16  # one instruction, sm_70 and later


def text_sections(data):
    """{mangled kernel name: code bytes} of an ELF64 little-endian cubin."""
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = headers[shstrndx]
    names = data[strtab[4]:strtab[4] + strtab[5]]
    out = {}
    for h in headers:
        end = names.index(b"\0", h[0])
        name = names[h[0]:end].decode()
        if name.startswith(".text."):
            out[name[len(".text."):]] = h[5]
    return out


def counts_of_cubin(path):
    try:
        with open(path, "rb") as f:
            sections = text_sections(f.read())
    except (OSError, ValueError, struct.error) as e:
        sys.exit("sass_count: %s: %s" % (path, e))
    names = list(sections)
    readable = kernel_resources.demangle(names)
    return {readable[n]: sections[n] // SASS_BYTES for n in names}


def compile_cubin(source, precision, extra, workdir):
    nvcc = kernel_resources.nvcc_path()
    if nvcc is None:
        sys.exit("sass_count: nvcc not found (set NVCC)")
    out = os.path.join(workdir, "%s_%s.cubin" % (os.path.basename(source), precision))
    cmd = [nvcc] + kernel_resources.NVCC_FLAGS + kernel_resources.PRECISIONS[precision] + extra + ["-cubin", "-o", out, source]
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit("sass_count: %s failed:\n%s%s" % (" ".join(cmd), res.stdout, res.stderr))
    return out


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    ap = argparse.ArgumentParser(description="static SASS instruction counts per kernel (sm_90a)")
    ap.add_argument("sources", nargs="*")
    ap.add_argument("--cubin", help="read this cubin instead of compiling")
    ap.add_argument("-k", "--kernels", default="", help="only kernels whose demangled name matches")
    ap.add_argument("-p", "--precision", default="bf16", choices=sorted(kernel_resources.PRECISIONS))
    args = ap.parse_args(argv)
    if not args.sources and not args.cubin:
        ap.error("give a SOURCE or --cubin")
    pattern = re.compile(args.kernels)
    counts = {}
    if args.cubin:
        counts.update(counts_of_cubin(args.cubin))
    with tempfile.TemporaryDirectory() as workdir:
        for src in args.sources:
            counts.update(counts_of_cubin(compile_cubin(os.path.abspath(src), args.precision, extra, workdir)))
    for name in sorted(counts):
        if pattern.search(name):
            print("%7d  %s" % (counts[name], name))


if __name__ == "__main__":
    main()
