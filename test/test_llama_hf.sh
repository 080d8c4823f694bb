#!/usr/bin/env bash
# Llama 3 from Hugging Face files to training, against PyTorch. test/llama_reference.py (a Llama
# written apart from the C++, in float64, with its own safetensors writer and reader) writes a
# LlamaForCausalLM directory (config.json + F32 model.safetensors, untied head, GQA) and
# test/make_test_data.py writes llm.c shards; then, as the issue's independent check does:
#   ./import_hf DIR/model.safetensors out.bin           (config.json beside it)
#   ./train_gpt_cpu -e out.bin  with llm.c's flags       -> main.log
#   test/pytorch_train.py --hf-llama DIR, the same run   -> losses
# and every step's loss must agree within 1e-5 relative (norms 1e-4). Also:
#   - the same on 32-bit token shards (magic 20240801, version 7, llm.c's Llama branch);
#   - a sharded BF16 model (3 files + index), opened by its index and by one of its shards,
#     imports to exactly the bytes of the F32 file of the same bf16-rounded values;
#   - ./export_hf writes a directory that llama_reference.py reads back to the same tensors,
#     and that ./import_hf turns back into the same checkpoint;
#   - the checkpoint header keeps eps, theta and the RoPE scaling as float32 bit for bit;
#   - config.json fields this trainer does not compute are refused, one line naming the field,
#     exit 1, nothing written; a resumed Llama run continues bit for bit.
set -eu
cd "$(dirname "$0")/.."
source test/lib.sh  # defines: PY, require_pytorch
require_pytorch
make -s train_gpt_cpu import_hf export_hf
out=test/out/llama_hf
rm -rf "$out"; mkdir -p "$out"
fail() { echo "FAIL: $*"; exit 1; }
set -f  # the flags below hold globs for the trainer, not for the shell
export OMP_NUM_THREADS=2

# compare_losses MAIN_LOG PYTORCH_LOSSES: every step's loss within 1e-5 relative, norm 1e-4
compare_losses() {
    awk '
        function rel(a, b) { d = a - b; if (d < 0) d = -d; return d / (a < 0 ? -a : a) }
        FNR == NR { if ($1 ~ /^s:/ && $2 ~ /^trl:/) { split($1, s, ":"); split($2, l, ":"); split($4, n, ":");
                                                      loss[s[2]] = l[2]; norm[s[2]] = n[2]; nc++ } next }
        { if (!($1 in loss)) { print "step " $1 " missing from main.log"; bad = 1; exit }
          if ((e = rel($2, loss[$1])) > ml) ml = e; if ((e = rel($3, norm[$1])) > mn) mn = e; np++ }
        END { if (bad) exit 1
              if (np == 0 || np != nc) { print "steps: main.log " nc ", PyTorch " np; exit 1 }
              printf "%d steps, max rel diff: loss %.2g, norm %.2g", np, ml, mn
              exit !(ml <= 1e-5 && mn <= 1e-4) }' "$1" "$2"
}

# --- a LlamaForCausalLM directory and shards, as the independent check writes them
"$PY" test/llama_reference.py --write-hf "$out/hf" --config gqa2 --seed 7
"$PY" test/make_test_data.py --out "$out" --vocab 1000 --train-tokens 6000 --val-tokens 2000 --seed 3 > /dev/null
./import_hf "$out/hf/model.safetensors" "$out/model.bin" > "$out/import.log" || fail "import_hf: $(cat "$out/import.log")"
cat "$out/import.log"

llmc_flags="-b 4 -t 32 -d 256 -x 8 -l 1e-3 -u 0 -q 1.0 -c 0.0 -v 0 -s 0 -n 0"  # 2 micro-steps a step
train() {  # train OUTDIR SHARD_PREFIX [more flags]: the C++ run
    local dir=$1 prefix=$2; shift 2
    ./train_gpt_cpu -e "$out/model.bin" -i "$prefix"_train_*.bin -j "$prefix"_val_*.bin -o "$dir" $llmc_flags "$@" \
        > "$dir.stdout" 2>&1 || fail "train_gpt_cpu: $(tail -3 "$dir.stdout")"
}
train "$out/run" "$out/markov"
pytorch_run() {  # pytorch_run HF_DIR OUT_FILE STEPS [SHARD_PREFIX]
    "$PY" test/pytorch_train.py --hf-llama "$1" --train "${4:-$out/markov}_train_*.bin" --B 4 --T 32 --total-batch 256 \
        --steps "$3" --lr 1e-3 --warmup 0 --final-frac 1.0 --weight-decay 0.0 --dtype float64 --out "$2" --quiet
}
pytorch_run "$out/hf" "$out/pytorch.txt" 8
msg=$(compare_losses "$out/run/main.log" "$out/pytorch.txt") || fail "main.log vs PyTorch: $msg"
echo "ok import_hf + train_gpt_cpu (llm.c flags, GQA 6/2, untied head) vs PyTorch: $msg"

# Llama 3.1's RoPE scaling from config.json's rope_scaling, theta 500,000, 4 query heads per kv head
"$PY" test/llama_reference.py --write-hf "$out/hf_scaled" --config scaled --seed 11
"$PY" test/make_test_data.py --out "$out" --prefix v300 --vocab 300 --train-tokens 3000 --val-tokens 1000 --seed 4 > /dev/null
./import_hf "$out/hf_scaled/model.safetensors" "$out/scaled.bin" > /dev/null
./train_gpt_cpu -e "$out/scaled.bin" -i "$out"/v300_train_*.bin -o "$out/run_scaled" -b 4 -t 32 -d 256 -x 4 -l 1e-3 \
    -u 0 -q 1.0 -c 0.0 -v 0 -s 0 -n 0 > "$out/run_scaled.stdout" 2>&1 || fail "scaled: $(tail -3 "$out/run_scaled.stdout")"
pytorch_run "$out/hf_scaled" "$out/pytorch_scaled.txt" 4 "$out/v300"
msg=$(compare_losses "$out/run_scaled/main.log" "$out/pytorch_scaled.txt") || fail "scaled RoPE vs PyTorch: $msg"
echo "ok the same with RoPE scaling (llama3 type, factor 8): $msg"

# --- the same tokens in 32-bit shards
"$PY" - "$out" <<'EOF'
import sys, glob, os
import numpy as np
out = sys.argv[1]
for path in glob.glob(f"{out}/markov_*.bin"):
    h = np.fromfile(path, dtype="<i4", count=256).copy()
    toks = np.fromfile(path, dtype="<u2", offset=1024).astype("<u4")
    h[0], h[1] = 20240801, 7
    with open(path.replace("markov_", "wide_"), "wb") as f:
        f.write(h.tobytes() + toks.tobytes())
EOF
train "$out/run_u32" "$out/wide"
cmp -s <(grep "^s:" "$out/run/main.log") <(grep "^s:" "$out/run_u32/main.log") ||
    fail "32-bit shards train differently from 16-bit ones"
echo "ok 32-bit token shards (magic 20240801 v7): the same main.log as the 16-bit shards"

# --- the header keeps the floats; a resumed run continues bit for bit
"$PY" - "$out/model.bin" "$out/hf/config.json" "$out/scaled.bin" "$out/hf_scaled/config.json" <<'EOF'
import json, sys
import numpy as np
for model, config in ((sys.argv[1], sys.argv[2]), (sys.argv[3], sys.argv[4])):
    h = np.fromfile(model, dtype="<i4", count=256)
    c = json.load(open(config))
    rs = c["rope_scaling"] or {}
    want = np.array([c["rms_norm_eps"], c["rope_theta"], rs.get("factor", 0), rs.get("low_freq_factor", 0),
                     rs.get("high_freq_factor", 0), rs.get("original_max_position_embeddings", 0)], dtype="<f4")
    got = h[10:16].view("<f4")
    assert h[0] == 20261124 and h[1] == 3, h[:2]
    assert (got.view("<i4") == want.view("<i4")).all(), (got, want)
    print(f"ok checkpoint header: eps {got[0]!r}, theta {got[1]!r}, RoPE scaling {list(got[2:])} as float32, bit for bit")
EOF
./train_gpt_cpu -e "$out/model.bin" -i "$out"/markov_train_*.bin -j "$out"/markov_val_*.bin -o "$out/resume" \
    -b 4 -t 32 -x 4 -l 1e-3 -v 0 -s 0 -n 4 -y 1 > "$out/resume1.stdout" 2>&1 || fail "resume: first half"
./train_gpt_cpu -e "$out/model.bin" -i "$out"/markov_train_*.bin -j "$out"/markov_val_*.bin -o "$out/resume" \
    -b 4 -t 32 -x 8 -l 1e-3 -v 0 -s 0 -n 4 -y 1 > "$out/resume2.stdout" 2>&1 || fail "resume: second half"
grep -q "resumed from" "$out/resume2.stdout" || fail "the second half did not resume"
./train_gpt_cpu -e "$out/model.bin" -i "$out"/markov_train_*.bin -j "$out"/markov_val_*.bin -o "$out/straight" \
    -b 4 -t 32 -x 8 -l 1e-3 -v 0 -s 0 -n 8 > "$out/straight.stdout" 2>&1 || fail "resume: straight run"
cmp -s "$out/resume/model_00000008.bin" "$out/straight/model_00000008.bin" || fail "resumed Llama run differs"
echo "ok resume: 4 + 4 steps give the weights of 8 straight steps, bit for bit"

# --- sharded BF16: by the index and by a shard, the values of the F32 file of the same rounding
"$PY" test/llama_reference.py --write-hf "$out/hf_bf16" --config gqa2 --seed 7 --dtype BF16 --shards 3 --round-bf16
"$PY" test/llama_reference.py --write-hf "$out/hf_rounded" --config gqa2 --seed 7 --dtype F32 --round-bf16
for k in 1 2 3; do [ -f "$out/hf_bf16/model-0000$k-of-00003.safetensors" ]; done || fail "the writer made no 3 shards"
./import_hf "$out/hf_rounded/model.safetensors" "$out/rounded.bin" > /dev/null
./import_hf "$out/hf_bf16/model.safetensors.index.json" "$out/bf16_index.bin" > /dev/null
./import_hf "$out/hf_bf16/model-00002-of-00003.safetensors" "$out/bf16_shard.bin" > /dev/null
cmp -s "$out/rounded.bin" "$out/bf16_index.bin" || fail "sharded BF16 via the index differs from F32"
cmp -s "$out/rounded.bin" "$out/bf16_shard.bin" || fail "sharded BF16 via a shard differs from F32"
echo "ok sharded BF16 (3 files + index): imported by the index and by a shard, equal to the F32 import"

# --- export and back
./export_hf "$out/model.bin" "$out/exported" > /dev/null
"$PY" - "$out/hf" "$out/exported" <<'EOF'
import sys, os
sys.path.insert(0, "test")
import llama_reference as lr
a, b = lr.read_hf(sys.argv[1]), lr.read_hf(sys.argv[2])
assert a.c == b.c, (a.c, b.c)
for (na, ta), (nb, tb) in zip(lr.hf_tensors(a), lr.hf_tensors(b)):
    assert na == nb and (ta == tb).all(), na
print(f"ok export_hf: {len(lr.hf_tensors(a))} tensors and the configuration read back equal")
EOF
./import_hf "$out/exported/model.safetensors" "$out/reimported.bin" > /dev/null
cmp -s "$out/model.bin" "$out/reimported.bin" || fail "export + import is not the identity"
echo "ok import_hf of the export: the same checkpoint, byte for byte"

# --- generation: ./generate on the imported model, greedy, with and without the KV cache,
# against the reference's own greedy decoding (its float64 logits at every step)
make -s generate
./generate -e "$out/model.bin" -pi 5,17,99 -g 12 -st 0 -oi 1 -ol "$out/gen_kv.f32" > "$out/gen_kv.txt" 2> "$out/gen.log" ||
    fail "generate: $(cat "$out/gen.log")"
./generate -e "$out/model.bin" -pi 5,17,99 -g 12 -st 0 -oi 1 -kv 0 -ol "$out/gen_full.f32" > "$out/gen_full.txt" 2>> "$out/gen.log" ||
    fail "generate -kv 0: $(cat "$out/gen.log")"
cmp -s "$out/gen_kv.f32" "$out/gen_full.f32" || fail "generate: the KV cache's logits differ from the full forward's"
"$PY" - "$out/hf" "$out/gen_kv.txt" "$out/gen_kv.f32" <<'EOF'
import sys
import numpy as np
import torch
sys.path.insert(0, "test")
import llama_reference as lr
m = lr.read_hf(sys.argv[1])
got = [int(t) for t in open(sys.argv[2]).read().split()]
ours = np.fromfile(sys.argv[3], dtype="<f4").reshape(len(got), -1)
seq, worst = [5, 17, 99], 0.0
with torch.no_grad():
    for i in range(len(got)):
        logits = m(torch.tensor([seq]))[0][0, -1]
        worst = max(worst, float((logits - torch.from_numpy(ours[i]).double()).abs().max()))
        seq.append(int(logits.argmax()))
assert seq[3:] == got, (seq[3:], got)
assert worst < 1e-4, worst
print(f"ok generate (KV cache = full forward, bit for bit): {len(got)} greedy tokens equal PyTorch's, "
      f"logits within {worst:.1e}")
EOF

# --- config.json fields this trainer does not compute: refused, one line naming the field
refuse() {  # refuse FIELD JSON_PYTHON_EXPR
    local field=$1 edit=$2 d="$out/bad_$1"
    rm -rf "$d"; mkdir -p "$d"
    cp "$out/hf/model.safetensors" "$d/"
    "$PY" -c "import json,sys; c=json.load(open('$out/hf/config.json')); $edit; json.dump(c, open('$d/config.json','w'))"
    if ./import_hf "$d/model.safetensors" "$d/out.bin" > "$d/stdout" 2> "$d/stderr"; then fail "$field: accepted"; fi
    [ "$(wc -l < "$d/stderr")" = 1 ] || fail "$field: not one line: $(cat "$d/stderr")"
    grep -q "$field" "$d/stderr" || fail "$field: the error does not name it: $(cat "$d/stderr")"
    [ ! -e "$d/out.bin" ] && [ ! -e "$d/out.bin.tmp" ] || fail "$field: something was written"
    echo "  refused: $(cat "$d/stderr")"
}
refuse attention_bias 'c["attention_bias"]=True'
refuse mlp_bias 'c["mlp_bias"]=True'
refuse sliding_window 'c["sliding_window"]=4096'
refuse rope_scaling.rope_type 'c["rope_scaling"]={"rope_type":"yarn","factor":4.0}'
refuse num_local_experts 'c["num_local_experts"]=8'
refuse model_type 'c["model_type"]="mistral"'
refuse hidden_act 'c["hidden_act"]="gelu"'
refuse head_dim 'c["head_dim"]=32'
echo "ok config.json: 8 unsupported fields refused, nothing written"
echo "PASS"
