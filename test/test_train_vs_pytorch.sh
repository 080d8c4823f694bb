#!/usr/bin/env bash
# A whole training run against PyTorch: the same llm.c-format checkpoint and shards,
# llm.c's flags (gradient accumulation, warmup, cosine/linear decay, weight decay,
# clipping), and main.log's losses, grad norms and lrs compared with test/pytorch_train.py.
set -eu
cd "$(dirname "$0")/.."
source test/lib.sh  # defines: PY, require_pytorch
require_pytorch
make -s train_gpt_cpu
out=test/out/train_vs_pytorch
rm -rf "$out"; mkdir -p "$out"
"$PY" test/pytorch_reference.py --random-checkpoint "$out/model.bin" --V 300 --maxT 64 --L 2 --NH 4 --C 64 --seed 7 > /dev/null
"$PY" test/make_test_data.py --out "$out" --vocab 300 --train-tokens 40000 --val-tokens 5000 --shards 2 --seed 3 > /dev/null

run_case() {  # name B T D steps lr warmup final wd schedule
    local name=$1 B=$2 T=$3 D=$4 steps=$5 lr=$6 u=$7 q=$8 c=$9 k=${10}
    ./train_gpt_cpu -e "$out/model.bin" -i "$out/markov_train_*.bin" -j "$out/markov_val_*.bin" \
        -o "$out/$name" -b "$B" -t "$T" -d "$D" -x "$steps" -l "$lr" -u "$u" -q "$q" -c "$c" -k "$k" \
        -v 0 -s 0 -n 0 > "$out/$name.stdout"
    "$PY" test/pytorch_train.py --model "$out/model.bin" --train "$out/markov_train_*.bin" --B "$B" --T "$T" \
        --total-batch "$D" --steps "$steps" --lr "$lr" --warmup "$u" --final-frac "$q" --weight-decay "$c" \
        --schedule "$k" --quiet --out "$out/$name.ref"
    "$PY" - "$out/$name/main.log" "$out/$name.ref" "$name" <<'PYEOF'
import sys
log, ref, name = sys.argv[1:4]
ours = {}
for line in open(log):
    f = dict(kv.split(":", 1) for kv in line.split())
    if "trl" in f:
        ours[int(f["s"])] = (float(f["trl"]), float(f["norm"]), float(f["lr"]))
refs = [tuple(float(x) for x in l.split()) for l in open(ref) if l.strip()]
assert len(ours) == len(refs), f"{name}: {len(ours)} steps logged, reference has {len(refs)}"
worst = 0.0
for step, loss, norm, lr in refs:
    l, n, r = ours[int(step)]
    # main.log prints 6 decimals: allow that rounding on top of the relative tolerance
    for got, want, tol in ((l, loss, 1e-5), (n, norm, 1e-4), (r, lr, 1e-5)):
        err = abs(got - want) - 5e-7
        rel = max(err, 0.0) / abs(want)
        worst = max(worst, rel if tol == 1e-5 else 0.0)
        assert rel <= tol, f"{name} step {int(step)}: got {got}, PyTorch {want} (rel {rel:.2e} > {tol})"
print(f"ok {name}: {len(refs)} steps, loss {refs[0][1]:.4f} -> {refs[-1][1]:.4f}, worst loss/lr rel err {worst:.2e}")
PYEOF
}
run_case cosine_accum 4 32 256 24 3e-3 5 0.1 0.1 cosine
run_case linear_odd 3 37 222 12 1e-3 2 0.0 0.0 linear
run_case constant 2 64 128 10 1e-3 0 1.0 0.0 constant
