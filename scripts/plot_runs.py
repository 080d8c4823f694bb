#!/usr/bin/python3
"""Charts of gptrain runs from their metrics.jsonl, several runs side by side.

Usage (Debian's python with python3-matplotlib: apt-get install python3-matplotlib):
  /usr/bin/python3 scripts/plot_runs.py OUTDIR [OUTDIR ...] [--out DIR]

Each OUTDIR is a trainer's -o directory; its metrics.jsonl holds one JSON object a line:
  {"step", "kind": "train", "loss", "lr", "grad_norm", "ms", "tokens_per_s", "tokens"[, "mfu",
   "energy_j", "watts"]}
  {"step", "kind": "val", "loss"}
  {"step", "kind": "hellaswag", "accuracy", ...}
  other kinds (event, summary) are not plotted
Writes PNGs to --out (default: OUTDIR/plots for one run, ./plots for several):
  loss_vs_step.png    train loss (faint: every step; solid: smoothed) and val loss (dots)
  loss_vs_tokens.png  the same against tokens trained on before the step
  lr.png, grad_norm.png, tokens_per_s.png, and mfu.png when a run logs "mfu"
                      (a fraction, shown in percent; values above 1 are taken as percent),
                      power.png when a run logs "watts" (the GPU trainer, through NVML),
                      hellaswag.png when a run logs HellaSwag accuracy (-h 1)
  overview.png        all of them on one page
Every run is labelled with its directory. A missing, empty or malformed metrics.jsonl is
one "error:" line and exit 1.
"""
import argparse
import json
import math
import os
import sys


def fail(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(1)


def import_pyplot():
    try:
        import matplotlib
    except ImportError:
        # the pyenv/venv python3 on PATH may lack it: Debian's python has it
        if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") and os.path.exists("/usr/bin/python3"):
            os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
        fail(f"matplotlib is not importable by {sys.executable} (apt-get install python3-matplotlib)")
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter
    globals()["EngFormatter"] = EngFormatter
    return plt


class Run:
    def __init__(self, label):
        self.label = label
        self.train = {}  # step -> record (a resumed run's repeated step: the last one wins)
        self.val = {}
        self.hellaswag = {}

    def series(self, key, kind="train"):
        recs = {"train": self.train, "val": self.val, "hellaswag": self.hellaswag}[kind]
        pts = [(s, r[key]) for s, r in sorted(recs.items()) if isinstance(r.get(key), (int, float))]
        return [p[0] for p in pts], [p[1] for p in pts]

    def tokens_per_step(self):
        """Tokens of one optimizer step: a train line's "tokens" is the total after it."""
        for s, r in sorted(self.train.items()):
            if isinstance(r.get("tokens"), (int, float)) and r["tokens"] > 0:
                return r["tokens"] / (s + 1)
        return None


def read_run(d):
    path = os.path.join(d, "metrics.jsonl")
    if not os.path.isdir(d):
        fail(f"{d}: no such directory")
    if not os.path.isfile(path):
        fail(f"{path}: not found (is {d} a trainer's -o output directory?)")
    run = Run(os.path.normpath(d))
    with open(path, encoding="utf-8", errors="replace") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                fail(f"{path}:{i}: not a JSON object ({e.msg})")
            if not isinstance(rec, dict) or not isinstance(rec.get("step"), int) or not isinstance(rec.get("kind"), str):
                fail(f"{path}:{i}: expected an object with an integer \"step\" and a \"kind\"")
            if rec["kind"] == "hellaswag":
                run.hellaswag[rec["step"]] = rec
                continue
            if rec["kind"] not in ("train", "val"):
                continue  # events, the summary
            if not isinstance(rec.get("loss"), (int, float)):
                fail(f"{path}:{i}: no numeric \"loss\"")
            (run.train if rec["kind"] == "train" else run.val)[rec["step"]] = rec
    if not run.train and not run.val:
        fail(f"{path}: empty: no train or val lines yet")
    return run


def smooth(ys, n):
    """Exponential moving average with a window of about n points, bias-corrected."""
    a, out, m, w = 2.0 / (n + 1), [], 0.0, 0.0
    for y in ys:
        m, w = (1 - a) * m + a * y, (1 - a) * w + a
        out.append(m / w)
    return out


def plot_loss(ax, runs, colors, by_tokens):
    for run, c in zip(runs, colors):
        scale = run.tokens_per_step() if by_tokens else 1.0
        if scale is None:
            continue
        xs, ys = run.series("loss")
        xs = [x * scale for x in xs]
        if xs:
            if len(xs) > 20:
                ax.plot(xs, ys, color=c, alpha=0.25, linewidth=0.8)
                ax.plot(xs, smooth(ys, max(5, len(xs) // 50)), color=c, linewidth=1.6, label=f"{run.label} train")
            else:
                ax.plot(xs, ys, color=c, linewidth=1.6, label=f"{run.label} train")
        vx, vy = run.series("loss", "val")
        if vx:
            ax.plot([x * scale for x in vx], vy, color=c, linestyle="--", marker="o", markersize=4,
                    linewidth=1.2, label=f"{run.label} val")
    ax.set_xlabel("tokens" if by_tokens else "step")
    if by_tokens:
        ax.xaxis.set_major_formatter(EngFormatter())  # 3.8k, 120M, 10G
    ax.set_ylabel("loss")
    ax.set_title("loss vs " + ("tokens" if by_tokens else "step"))


def plot_metric(ax, runs, colors, key, title, log=False, eng=False, percent=False, kind="train"):
    for run, c in zip(runs, colors):
        xs, ys = run.series(key, kind)
        if percent and ys and max(ys) <= 1.0:  # a fraction: show it in percent
            ys = [100.0 * y for y in ys]
        if xs:
            ax.plot(xs, ys, color=c, linewidth=1.4, label=run.label, marker="." if len(xs) <= 30 else None)
    ax.set_xlabel("step")
    ax.set_ylabel(key + (" (%)" if percent else ""))
    ax.set_title(title)
    ys = [y for r in runs for y in r.series(key, kind)[1]]
    if log and ys and min(ys) > 0 and max(ys) > 20 * min(ys):  # log only when it spans decades
        ax.set_yscale("log")
    if eng:
        ax.yaxis.set_major_formatter(EngFormatter())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+", metavar="OUTDIR")
    ap.add_argument("--out", help="directory for the PNGs")
    a = ap.parse_args()
    runs = [read_run(d) for d in a.dirs]
    plt = import_pyplot()
    out = a.out or (os.path.join(a.dirs[0], "plots") if len(a.dirs) == 1 else "plots")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        fail(f"{out}: cannot create directory ({e.strerror})")
    cmap = plt.get_cmap("tab10")
    colors = [cmap(i % 10) for i in range(len(runs))]

    panels = [("loss_vs_step", lambda ax: plot_loss(ax, runs, colors, False)),
              ("loss_vs_tokens", lambda ax: plot_loss(ax, runs, colors, True)),
              ("lr", lambda ax: plot_metric(ax, runs, colors, "lr", "learning rate")),
              ("grad_norm", lambda ax: plot_metric(ax, runs, colors, "grad_norm", "gradient norm (before clipping)", log=True)),
              ("tokens_per_s", lambda ax: plot_metric(ax, runs, colors, "tokens_per_s", "throughput (tokens/s)", eng=True))]
    if any(r.series("mfu")[0] for r in runs):
        panels.append(("mfu", lambda ax: plot_metric(ax, runs, colors, "mfu", "model flops utilization", percent=True)))
    if any(r.series("watts")[0] for r in runs):
        panels.append(("power", lambda ax: plot_metric(ax, runs, colors, "watts", "GPU power (W, NVML)")))
    if any(r.hellaswag for r in runs):
        panels.append(("hellaswag", lambda ax: plot_metric(ax, runs, colors, "accuracy", "HellaSwag accuracy",
                                                           percent=True, kind="hellaswag")))

    written = []
    for name, draw in panels:
        fig, ax = plt.subplots(figsize=(8, 5), dpi=100)
        draw(ax)
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(out, name + ".png")
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    cols = 3
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 4 * rows), dpi=90, squeeze=False)
    for ax, (name, draw) in zip(axes.flat, panels):
        draw(ax)
        ax.grid(True, alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    if axes.flat[0].get_legend_handles_labels()[0]:
        axes.flat[0].legend(fontsize=8)  # the loss panel's legend names every run
    fig.suptitle(", ".join(r.label for r in runs))
    fig.tight_layout()
    path = os.path.join(out, "overview.png")
    fig.savefig(path)
    plt.close(fig)
    written.append(path)
    print(f"wrote {len(written)} charts of {len(runs)} run(s) to {out}: " + " ".join(os.path.basename(p) for p in written))
    return 0


if __name__ == "__main__":
    sys.exit(main())
