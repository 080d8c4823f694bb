#!/usr/bin/env python3
"""check_int_widening.py: no int multiplication may reach an offset or a size.

Runs clang-tidy's bugprone-implicit-widening-of-multiplication-result over every translation
unit of the project: the CPU programs, tests, benchmarks, fuzz targets and the emulated GPU's
runtime as they are, and the GPU programs (train_gpt.cu, generate.cu, dev/cuda/*.cu, test/*.cu)
as the emulated build compiles them, from scripts/cu2cpp.py's plain-C++ copies (in fp32 and in
bf16). The check flags an int (or unsigned) product that is then widened to a pointer offset or
a size_t, the way `a.fch + l * N * 2 * F` wrapped past 2^31 in the Llama backward on an H200.

A flagged line passes only with a waiver naming an asserted bound: `// int-bound(NAME)` on the
line, where NAME is defined by an assertion somewhere in the sources that carries
`// int-bound: NAME` (a static_assert, CHECK or assert on the line, e.g. the tile size a kernel
is instantiated with). Anything else is reported, file:line and the source line, and the exit
code is 1.

usage: check_int_widening.py EMU_SRC   (EMU_SRC: cu2cpp.py's output, build/emu/src)
       check_int_widening.py --only FILE.cpp   (one file alone: the test's planted cases)
Environment: CLANG_TIDY (default clang-tidy), MPICXX (its include flags, when there is one),
JOBS (parallel clang-tidy runs, default the CPU count).
"""
import concurrent.futures
import glob
import os
import re
import shutil
import subprocess
import sys

CHECK = "bugprone-implicit-widening-of-multiplication-result"
CPU_FLAGS = ["-std=c++17", "-fopenmp", "-I."]
WAIVER = re.compile(r"//.*\bint-bound\((\w+)\)")
BOUND = re.compile(r"\b(static_assert|CHECK|assert)\s*\(.*//.*\bint-bound:\s*(\w+)")
DIAG = re.compile(r"^(.+?):(\d+):(\d+): warning: .*\[" + re.escape(CHECK) + r"\]$")


def mpi_flags():
    mpicxx = os.environ.get("MPICXX") or shutil.which("mpicxx")
    if not mpicxx:
        return []
    out = subprocess.run([mpicxx, "--showme:compile"], capture_output=True, text=True)
    return ["-DUSE_MPI"] + out.stdout.split() if out.returncode == 0 else []


def cuda_include():
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    inc = os.path.join(os.path.dirname(os.path.realpath(nvcc)), "..", "include")
    return os.path.normpath(inc) if os.path.exists(os.path.join(inc, "cuda_occupancy.h")) else None


def plain_copy(emu_src, dst):
    """cu2cpp's output without the `#line` each file starts with, so that clang-tidy's line
    numbers are the original files' (it reports some diagnostics at presumed, some at physical
    locations)."""
    for root, _, files in os.walk(emu_src):
        for f in files:
            src = os.path.join(root, f)
            out = os.path.join(dst, os.path.relpath(src, emu_src))
            with open(src) as fh:
                text = fh.read()
            if text.startswith("#line 1 "):
                text = text[text.index("\n") + 1:]
            os.makedirs(os.path.dirname(out), exist_ok=True)
            if os.path.exists(out):
                with open(out) as fh:
                    if fh.read() == text:
                        continue
            with open(out, "w") as fh:
                fh.write(text)


def units(plain):
    """(source, working directory, compiler flags, path prefix to strip) for every unit."""
    tidy = os.environ.get("CLANG_TIDY", "clang-tidy")
    mpi = mpi_flags()
    emu_inc = ["-I", os.path.abspath("llmc/emu/include"), "-include", os.path.abspath("llmc/emu/emu.h")]
    out = []
    cpu = ["train_gpt.cpp", "generate.cpp", "import_hf.cpp", "export_hf.cpp", "plan.cpp", "data/tokenize.cpp"]
    cpu += sorted(glob.glob("dev/*.cpp"))
    cpu += [t for t in sorted(glob.glob("test/*.cpp")) if not os.path.basename(t).startswith("test_emu_")]
    cuda_inc = cuda_include()
    for f in cpu:
        # built against the CUDA toolkit's own headers (occupancy: as test_kernel_resources.sh builds it;
        # FP8: as emu.mk builds test_emu_fp8's reference table), where there is a toolkit
        if f in ("test/kernel_occupancy_ref.cpp", "test/fp8_reference.cpp"):
            if cuda_inc:
                out.append((tidy, f, ".", CPU_FLAGS + ["-I", cuda_inc]))
            continue
        out.append((tidy, f, ".", CPU_FLAGS + mpi))
    for f in sorted(glob.glob("test/fuzz/*.cpp")):  # as test_fuzz.sh builds them
        out.append((tidy, f, ".", CPU_FLAGS + ["-DGPTRAIN_FUZZ"]))
    # the emulated GPU's own runtime and tests (plain C++ against emu.h)
    for f in sorted(glob.glob("llmc/emu/*.cpp")) + sorted(glob.glob("test/test_emu_*.cpp")):
        out.append((tidy, f, ".", CPU_FLAGS + emu_inc))
    # the GPU programs as the emulated build compiles them
    gpu = ["train_gpt.cu", "generate.cu"] + sorted(os.path.relpath(p, plain) for p in
                                                   glob.glob(os.path.join(plain, "dev/cuda/*.cu")) +
                                                   glob.glob(os.path.join(plain, "test/*.cu")))
    for f in gpu:
        for prec in ([], ["-DENABLE_BF16"]):
            flags = ["-x", "c++"] + CPU_FLAGS + ["-I", os.path.abspath(".")] + emu_inc + ["-DUSE_NCCL"] + mpi + prec
            out.append((tidy, f, plain, flags))
    return out


def run_unit(u):
    tidy, src, cwd, flags = u
    cmd = [tidy, "-quiet", "-checks=-*," + CHECK, "--header-filter=.*", "--system-headers=false", src, "--"] + flags
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    found = []
    for line in r.stdout.splitlines():
        m = DIAG.match(line)
        if not m:
            continue
        path = os.path.normpath(os.path.join(cwd, m.group(1)))
        found.append((path, int(m.group(2)), int(m.group(3))))
    errors = [l for l in r.stdout.splitlines() + r.stderr.splitlines() if ": error: " in l]
    return src, cwd, found, errors


def original(path, plain):
    """The repository file a diagnostic's path stands for (plain copies map back)."""
    rel = os.path.relpath(path)
    prefix = os.path.relpath(plain) if plain else None
    if prefix and rel.startswith(prefix + os.sep):
        rel = os.path.relpath(rel, prefix)
    return rel


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--only":
        # one C++ file alone (test_int_widening.sh's planted cases), its own bounds included
        todo, plain, extra = [(os.environ.get("CLANG_TIDY", "clang-tidy"), sys.argv[2], ".", CPU_FLAGS)], "", [sys.argv[2]]
    elif len(sys.argv) == 2:
        plain = os.path.join(os.path.dirname(os.path.normpath(sys.argv[1])), "tidy_src")
        plain_copy(sys.argv[1], plain)
        todo, extra = units(plain), []
    else:
        sys.exit("usage: check_int_widening.py EMU_SRC | --only FILE.cpp")
    jobs = int(os.environ.get("JOBS", os.cpu_count() or 1))
    sites, failed_units = {}, []
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as ex:
        for src, cwd, found, errors in ex.map(run_unit, todo):
            if errors:
                failed_units.append((os.path.join(cwd, src), errors[:3]))
            for path, line, col in found:
                f = original(path, plain)
                if f.startswith("/") or f.startswith(".."):
                    continue  # a system header
                sites.setdefault((f, line), col)
    # the bounds the sources assert
    bounds = set()
    for f in glob.glob("**/*", recursive=True) + extra:
        if (f.startswith("build") and f not in extra) or not f.endswith((".h", ".cuh", ".cu", ".cpp")):
            continue
        with open(f, errors="replace") as fh:
            for line in fh:
                m = BOUND.search(line)
                if m:
                    bounds.add(m.group(2))
    bad, waived = [], 0
    for (f, line), col in sorted(sites.items()):
        with open(f, errors="replace") as fh:
            text = fh.read().split("\n")[line - 1]
        m = WAIVER.search(text)
        if m and m.group(1) in bounds:
            waived += 1
            continue
        why = f" (int-bound({m.group(1)}) names no asserted bound)" if m else ""
        bad.append(f"{f}:{line}:{col}: {text.strip()}{why}")
    for src, errors in failed_units:
        print(f"error: clang-tidy could not compile {src}: " + " | ".join(errors))
    for b in bad:
        print(b)
    print(f"{len(bad)} int products widened into an offset or a size, {waived} waived by an asserted bound, "
          f"{len(failed_units)} units clang-tidy could not compile")
    sys.exit(1 if bad or failed_units else 0)


if __name__ == "__main__":
    main()
