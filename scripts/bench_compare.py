#!/usr/bin/env python3
"""bench_compare.py: a gpu_check.sh summary next to the last committed run on the same GPU.

    python3 scripts/bench_compare.py SUMMARY [RESULTS_DIR] [--threshold 3]

SUMMARY is this run's summary.txt (gpu_check.sh writes it under $OUT). RESULTS_DIR (default
dev/results) holds the committed runs, one file each, every one a copy of its run's
summary: a "device: NAME, DRIVER, ..." line, the kernel benchmark rows
("op:what  prec  PASS  value  unit  [share]") and the trainer benchmark rows
("model  prec  B  ms/step  tok/s  MFU  peak MiB"). The newest file (by name: they start with
the date) on the same GPU model is the baseline. For every kernel (GB/s, TFLOP/s) and every
trainer row (tok/s) in both, prints now, then, and the change; a drop of more than the
threshold (percent) is flagged DROP. Figures are compared, never asserted: the exit status
is 0 unless a file cannot be read.
Standard library only.
"""
import argparse
import os
import re
import sys


def parse_summary(text):
    """(device model, {key: (value, unit)}) of one summary's text."""
    device = None
    figures = {}
    for line in text.splitlines():
        if line.startswith("device:"):
            device = line[len("device:"):].split(",")[0].strip()
            continue
        f = line.split()
        # kernel benchmark: op:what prec PASS|FAIL value unit [share of the ceiling]
        if len(f) in (5, 6) and ":" in f[0] and f[2] in ("PASS", "FAIL") and f[4] in ("GB/s", "TFLOP/s"):
            try:
                figures[("kernel", f[0], f[1])] = (float(f[3]), f[4])
            except ValueError:
                pass
            continue
        # trainer benchmark: model prec B ms/step tok/s MFU peak-MiB [J/token]
        if len(f) in (7, 8) and f[1] in ("fp32", "bf16", "fp8") and f[2].isdigit():
            try:
                figures[("trainer", f[0], f[1], f[2])] = (float(f[4]), "tok/s")
            except ValueError:
                pass
    return device, figures


def newest_baseline(results_dir, device, exclude):
    """The newest committed summary (by file name) on the same device, or (None, {})."""
    if not os.path.isdir(results_dir):
        return None, {}
    for name in sorted(os.listdir(results_dir), reverse=True):
        path = os.path.join(results_dir, name)
        if not os.path.isfile(path) or os.path.abspath(path) == exclude:
            continue
        with open(path, encoding="utf-8", errors="replace") as fh:
            dev, figures = parse_summary(fh.read())
        if dev == device and figures:
            return name, figures
    return None, {}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("summary")
    ap.add_argument("results_dir", nargs="?", default="dev/results")
    ap.add_argument("--threshold", type=float, default=3.0, help="flag drops larger than this many percent")
    a = ap.parse_args()
    try:
        with open(a.summary, encoding="utf-8", errors="replace") as fh:
            device, now = parse_summary(fh.read())
    except OSError as e:
        print(f"error: {a.summary}: {e.strerror}", file=sys.stderr)
        return 1
    if device is None:
        print(f"compare: {a.summary} names no device: nothing to compare")
        return 0
    base_name, then = newest_baseline(a.results_dir, device, os.path.abspath(a.summary))
    if base_name is None:
        print(f"compare: no committed run on {device} in {a.results_dir}: nothing to compare")
        return 0
    print(f"compare with {os.path.join(a.results_dir, base_name)} ({device}); DROP: more than {a.threshold:g}% below")
    print(f"{'figure':<44} {'now':>12} {'then':>12} {'change':>8}")
    drops = 0
    for key in sorted(now, key=lambda k: tuple(str(x) for x in k)):
        if key not in then:
            continue
        (v_now, unit), (v_then, _) = now[key], then[key]
        label = " ".join(key[1:])
        change = 100.0 * (v_now - v_then) / v_then if v_then > 0 else 0.0
        flag = "  DROP" if change < -a.threshold else ""
        drops += flag != ""
        print(f"{label + ' (' + unit + ')':<44} {v_now:>12.6g} {v_then:>12.6g} {change:>+7.1f}%{flag}")
    print(f"compare: {drops} figure(s) dropped more than {a.threshold:g}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
