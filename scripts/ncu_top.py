#!/usr/bin/env python3
"""ncu_top.py: where a run's GPU time goes, from Nsight Compute's raw CSV.

    python3 scripts/ncu_top.py PASS1.csv [--out-dir DIR] [--top 15]
    python3 scripts/ncu_top.py --details NCU_DETAILS.txt
    python3 scripts/ncu_top.py --launches RAW.csv

The first form reads what `ncu --metrics gpu__time_duration.sum --csv --page raw` wrote
(scripts/ncu_profile.sh's pass 1): a header row naming "Kernel Name" and the metric, a
units row, one row per kernel launch; the tool's own lines (==PROF==, ==WARNING==) and rows
without a number are skipped. It sums the durations per kernel name and prints, longest
first: rank, name (cut to 60 characters), launches, total ms, share of all kernel time,
mean us. With --out-dir it writes DIR/top.tsv (rank, launches, total ms, share %, mean us,
name: every kernel, tab-separated) and DIR/top3.txt (the three longest, one per line, as
regular expressions matching exactly that name, for `ncu -k regex:...`).

The second form reads one kernel's `ncu --page details` text and prints one tab-separated
line: duration (value and unit), Compute (SM) Throughput %, Memory Throughput %, DRAM
Throughput %, Achieved Occupancy %, Registers Per Thread; "n/a" for any line not found.

The third reads `ncu --import REPORT --csv --page raw --print-units base` of a report whose
launches were profiled with a section set (dev/bench_device.sh's attention kernels, "detailed"):
a header row, a units row, one row per launch, a column per metric. It prints a line per
launch: kernel (cut to 60 characters), duration in us, Compute (SM) throughput %, issue slots
busy %, the busiest tensor pipe's % (the largest column named sm__pipe_tensor..._pct_of_peak_
sustained_active, whichever pipes this GPU's ncu names), shared-memory bank conflicts per
shared-memory wavefront, and the three largest stall reasons in warp cycles per issued
instruction (columns smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio). A
metric the report lacks prints as "-". Standard library only.
"""
import argparse
import csv
import os
import re
import sys

METRIC = "gpu__time_duration.sum"
NAME_COLUMN = "Kernel Name"
NAME_WIDTH = 60

# nanoseconds per unit, as ncu spells the units row (base units, or the short forms)
UNIT_NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6,
           "second": 1e9, "s": 1e9, "": 1.0}

# the characters that mean something in a regular expression (POSIX extended, ECMAScript
# and PCRE alike); everything else stands for itself
REGEX_SPECIAL = set("\\.^$|?*+()[]{}")


def regex_escape(name):
    """A regular expression that matches exactly `name` (anchored)."""
    return "^" + "".join("\\" + ch if ch in REGEX_SPECIAL else ch for ch in name) + "$"


def parse_number(text):
    """The float in a CSV cell ("12.5", "1,234.5"), or None."""
    try:
        return float(text.replace(",", "").strip())
    except ValueError:
        return None


def raw_page(lines, required):
    """(header, units, rows) of a raw CSV page: the first row naming every column in `required`,
    the units row right under it as {column: unit} (empty where there is none), then each row
    of the header's width with a kernel name. The tool's own lines (==PROF==, ==WARNING==) are
    skipped. Raises ValueError without such a header row."""
    reader = csv.reader(line for line in lines if not line.startswith("=="))
    header = None
    units = {}
    rows = []
    for row in reader:
        if header is None:
            if all(col in row for col in required):
                header, name_col = row, row.index(NAME_COLUMN)
                after_header = True
            continue
        if len(row) != len(header):
            continue  # a blank line, a cut row
        if after_header and row[name_col] == "":
            units = {col: unit.strip().lower() for col, unit in zip(header, row)}
        elif row[name_col] != "":
            rows.append(row)
        after_header = False
    if header is None:
        raise ValueError("no header row with " + " and ".join(f"\"{col}\"" for col in required))
    return header, units, rows


def to_ns(units, column):
    """The factor from `column`'s unit to nanoseconds (1 without a units row). Raises ValueError
    for a unit that is not a time."""
    unit = units.get(column, "")
    if unit not in UNIT_NS:
        raise ValueError(f"unknown unit {unit!r} for {column}")
    return UNIT_NS[unit]


def read_durations(lines):
    """{kernel name: [launches, total ns]} from the raw CSV's lines, in first-seen order; rows
    without a number ("n/a", a repeated header) are skipped. Raises ValueError when no header
    row names both the kernel and the metric, or the metric's unit is not a time."""
    header, units, rows = raw_page(lines, [NAME_COLUMN, METRIC])
    name_col, metric_col = header.index(NAME_COLUMN), header.index(METRIC)
    scale = to_ns(units, METRIC)
    kernels = {}
    for row in rows:
        value = parse_number(row[metric_col])
        if value is None:
            continue
        entry = kernels.setdefault(row[name_col], [0, 0.0])
        entry[0] += 1
        entry[1] += value * scale
    return kernels


def ranked(kernels):
    """[(rank, name, launches, total ms, share %, mean us)], longest total first (ties by name)."""
    grand = sum(total for _, total in kernels.values())
    order = sorted(kernels.items(), key=lambda kv: (-kv[1][1], kv[0]))
    out = []
    for i, (name, (launches, total_ns)) in enumerate(order, 1):
        share = 100.0 * total_ns / grand if grand > 0 else 0.0
        out.append((i, name, launches, total_ns / 1e6, share, total_ns / 1e3 / launches))
    return out


def short(name, width=NAME_WIDTH):
    return name if len(name) <= width else name[:width - 3] + "..."


def print_table(table, top):
    total_ms = sum(r[3] for r in table)
    launches = sum(r[2] for r in table)
    print(f"{len(table)} kernels, {launches} launches, {total_ms:.3f} ms of kernel time")
    print(f"{'rank':>4}  {'kernel':<{NAME_WIDTH}} {'launches':>8} {'total ms':>10} {'share':>7} {'mean us':>10}")
    for rank, name, n, ms, share, mean_us in table[:top]:
        print(f"{rank:>4}  {short(name):<{NAME_WIDTH}} {n:>8} {ms:>10.3f} {share:>6.2f}% {mean_us:>10.2f}")
    rest = table[top:]
    if rest:
        print(f"      ({len(rest)} more kernels: {sum(r[3] for r in rest):.3f} ms, "
              f"{sum(r[4] for r in rest):.2f}%)")


def write_outputs(table, out_dir):
    with open(os.path.join(out_dir, "top.tsv"), "w", encoding="utf-8") as fh:
        for rank, name, n, ms, share, mean_us in table:
            fh.write(f"{rank}\t{n}\t{ms:.6f}\t{share:.4f}\t{mean_us:.4f}\t{name}\n")
    with open(os.path.join(out_dir, "top3.txt"), "w", encoding="utf-8") as fh:
        for row in table[:3]:
            fh.write(regex_escape(row[1]) + "\n")


# ---------------------------------------------------------------------------------------
# one kernel's details page

# (label on the page, how it is printed); the first matching line of each wins
DETAIL_LINES = [("Duration", "duration"), ("Compute (SM) Throughput", "sm"), ("Memory Throughput", "mem"),
                ("DRAM Throughput", "dram"), ("Achieved Occupancy", "occupancy"),
                ("Registers Per Thread", "regs")]


def read_details(lines):
    """{key: text} from a details page: "<label>  <unit>  <value>" lines; n/a when missing."""
    found = {}
    for line in lines:
        text = line.strip()
        for label, key in DETAIL_LINES:
            if key in found or not text.startswith(label):
                continue
            rest = text[len(label):]
            m = re.match(r"^\s{2,}(\S+)\s+([0-9][0-9,]*(?:\.[0-9]+)?)$", rest)
            if m is None:
                continue
            unit, value = m.group(1), m.group(2).replace(",", "")
            if key == "duration":
                found[key] = f"{value} {unit}"
            elif key == "regs":
                found[key] = value
            else:
                found[key] = f"{value}%" if unit == "%" else f"{value} {unit}"
    return [found.get(key, "n/a") for _, key in DETAIL_LINES]


# ---------------------------------------------------------------------------------------
# every profiled launch of a report: throughput, pipes, shared memory, stall reasons

STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")
TENSOR = re.compile(r"^sm__pipe_tensor\w*\.avg\.pct_of_peak_sustained_active$")
LAUNCH_COLUMNS = {"duration": "gpu__time_duration.sum", "sm": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
                  "issue": "smsp__issue_active.avg.pct_of_peak_sustained_active",
                  "conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
                  "wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"}


def read_launches(lines):
    """[(kernel, {metric: float})] per launch row of a raw page, the duration in nanoseconds.
    Raises ValueError without a header row naming the kernel."""
    header, units, rows = raw_page(lines, [NAME_COLUMN])
    name_col = header.index(NAME_COLUMN)
    duration = LAUNCH_COLUMNS["duration"]
    scale = to_ns(units, duration) if duration in header else 1.0
    out = []
    for row in rows:
        values = {}
        for col, cell in zip(header, row):
            v = parse_number(cell)
            if v is not None:
                values[col] = v * (scale if col == duration else 1.0)
        out.append((row[name_col], values))
    return out


def launch_line(name, values):
    """One printed line for a launch (see the module's docstring)."""
    def pct(key):
        v = values.get(LAUNCH_COLUMNS[key])
        return "-" if v is None else f"{v:.1f}"
    dur = values.get(LAUNCH_COLUMNS["duration"])
    tensor = [v for col, v in values.items() if TENSOR.match(col)]
    conf, wave = values.get(LAUNCH_COLUMNS["conflicts"]), values.get(LAUNCH_COLUMNS["wavefronts"])
    stalls = sorted(((v, STALL.match(col).group(1)) for col, v in values.items() if STALL.match(col)),
                    key=lambda vr: (-vr[0], vr[1]))
    return (f"{short(name):<{NAME_WIDTH}} {'-' if dur is None else f'{dur / 1e3:.1f}':>9} {pct('sm'):>6} "
            f"{pct('issue'):>6} {'-' if not tensor else f'{max(tensor):.1f}':>7} "
            f"{'-' if conf is None or not wave else f'{conf / wave:.2f}':>9}  "
            + (", ".join(f"{r} {v:.1f}" for v, r in stalls[:3]) if stalls else "-"))


def parsed(reader, lines, path, none_found):
    """reader(lines), or None after one error line (no header row, or nothing found)."""
    try:
        found = reader(lines)
    except ValueError as e:
        print(f"error: {path}: {e}", file=sys.stderr)
        return None
    if not found:
        print(f"error: {path}: {none_found}", file=sys.stderr)
        return None
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="?", help="ncu --csv --page raw output with " + METRIC)
    ap.add_argument("--out-dir", help="write top.tsv and top3.txt here")
    ap.add_argument("--top", type=int, default=15, help="rows to print (default 15)")
    ap.add_argument("--details", metavar="TXT", help="summarize one kernel's --page details text instead")
    ap.add_argument("--launches", metavar="CSV", help="a line per launch of a report's --page raw instead")
    a = ap.parse_args()
    path = a.details or a.launches or a.csv
    if path is None:
        ap.error("give a CSV file, --details TXT or --launches CSV")
    try:
        with open(path, encoding="utf-8", errors="replace", newline="") as fh:
            lines = fh.read().splitlines()
    except OSError as e:
        print(f"error: {path}: {e.strerror}", file=sys.stderr)
        return 1
    if a.details:
        print("\t".join(read_details(lines)))
        return 0
    if a.launches:
        launches = parsed(read_launches, lines, path, "no launches")
        if launches is None:
            return 1
        print(f"{'kernel':<{NAME_WIDTH}} {'us':>9} {'SM %':>6} {'issue%':>6} {'tensor%':>7} {'conflicts':>9}  "
              "stalls (warp cycles per issued instruction)")
        for name, values in launches:
            print(launch_line(name, values))
        return 0
    kernels = parsed(read_durations, lines, path, f"no kernel launches with a {METRIC} value")
    if kernels is None:
        return 1
    table = ranked(kernels)
    print_table(table, a.top)
    if a.out_dir:
        write_outputs(table, a.out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
