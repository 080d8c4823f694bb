#!/usr/bin/env bash
# test_llmc_interop.sh: llm.c's files load here and ours pass llm.c's loaders (issue 6).
# The llm.c side is test/llmc_format.py: files written as llm.c's Python writers write them
# (train_gpt2.py, dev/data/data_common.py) and checked as its C loaders check them
# (train_gpt2.c, train_gpt2.cu, llmc/dataloader.h, llmc/tokenizer.h); the numbers to match
# come from PyTorch (test/pytorch_reference.py), never from the trainer.
#  a. llm.c -> here: fp32 (v3) and bf16 (v5) models, shards, tokenizer files (v2, and v1
#     without EOT), an eval file: the trainer's val loss equals PyTorch's on the same val
#     windows, its bf16 training steps equal pytorch_train.py's, its HellaSwag count and its
#     greedy samples (decoded with the tokenizer files) equal PyTorch's
#  b. here -> llm.c: ./tokenize's tokenizer file, shards and eval file, and a checkpoint of
#     the trainer pass llm.c's checks and are byte for byte what llm.c's writers write for
#     the same content; the checkpoint read that way gives the trainer's val loss and sample
#  c. files that break one of llm.c's rules: llmc_format.py and the trainer both reject them
# Exit 0 pass, 77 skip (with the reason), else fail.
set -u
cd "$(dirname "$0")/.." || exit 1
PY=${PYTHON:-/usr/bin/python3}
F=test/out/llmc_interop   # the llm.c side
O=$F/ours                 # files our tools write
FMT="$PY test/llmc_format.py"
# the models are tiny: one thread each, which also keeps a busy machine from slowing spin-waits
export OMP_NUM_THREADS=1
die() { echo "FAIL: $*"; exit 1; }
if ! "$PY" -c "import importlib.util as u; exit(not (u.find_spec('torch') and u.find_spec('numpy')))" 2>/dev/null; then
    echo "SKIP: PyTorch and numpy are not importable by $PY (apt-get install python3-torch)"
    [ "${CI:-}" = "true" ] && exit 1 || exit 77
fi
make -s train_gpt_cpu tokenize || die "build failed"
rm -rf "$F" && mkdir -p "$O"
start=$(date +%s)
TRAIN="$F/llmc_train_*.bin"
VAL="$F/llmc_val_*.bin"

# ---- a. llm.c -> here ---------------------------------------------------------------------
# the llm.c-style files, each checked (--strict) against llm.c's loaders and writers
$FMT fixtures "$F" || die "llmc_format.py fixtures failed"
run() {  # run NAME FLAGS...: the trainer, stdout to $F/NAME.stdout
    local name=$1
    shift
    ./train_gpt_cpu "$@" >"$F/$name.stdout" 2>"$F/$name.stderr" ||
        die "train_gpt_cpu $*: $(tail -n 3 "$F/$name.stderr")"
}
# fp32 model: val loss over 7 windows (5 from the first val shard, 2 from the second),
# HellaSwag on llm.c's eval file, a greedy sample decoded with the version 2 tokenizer
run run_fp32 -e "$F/model_fp32.bin" -i "$TRAIN" -j "$VAL" -o "$F/run_fp32" -b 4 -t 32 -x 0 -v 1 -m 7 \
    -s 1 -g 12 -st 0 -tf "$F/tokenizer_v2.bin" -h 1 -hf "$F/hellaswag_llmc.bin"
# bf16 model: val loss of the widened weights, then 3 training steps (as pytorch_train.py)
run run_bf16 -e "$F/model_bf16.bin" -i "$TRAIN" -j "$VAL" -o "$F/run_bf16" -b 4 -t 32 -x 3 -v 3 -m 7 \
    -s 0 -l 1e-3 -u 1 -q 0.1 -c 0.1 -k cosine
# a GPT-2-vocabulary model (V 50257 padded to 50304) sampled with a version 1 tokenizer file
run run_v1 -e "$F/model_gpt2vocab.bin" -i "$TRAIN" -b 1 -t 16 -x 0 -v 0 -s 1 -g 20 -st 0 \
    -tf "$F/tokenizer_v1.bin"
$FMT compare "$F" || die "the trainer differs from PyTorch on llm.c's files"
# llm.c's llama-3 shards (uint32 ids, [20240801, 7]) of the same tokens: the bf16 run again,
# the same main.log byte for byte
mkdir -p "$F/wide"
pairs=()
for s in $TRAIN $VAL; do pairs+=("$s" "$F/wide/$(basename "$s")"); done
$FMT widen "${pairs[@]}" || die "llmc_format.py widen failed"
run run_bf16_wide -e "$F/model_bf16.bin" -i "${TRAIN/$F/$F/wide}" -j "${VAL/$F/$F/wide}" -o "$F/run_bf16_wide" \
    -b 4 -t 32 -x 3 -v 3 -m 7 -s 0 -l 1e-3 -u 1 -q 0.1 -c 0.1 -k cosine
cmp -s "$F/run_bf16/main.log" "$F/run_bf16_wide/main.log" ||
    die "the llama-3 (uint32) shards of the same tokens train differently: $(diff "$F/run_bf16/main.log" "$F/run_bf16_wide/main.log" | head -n 4)"
echo "ok llm.c's llama-3 shards (uint32 ids): the same main.log as the uint16 shards of the same tokens"

# ---- b. here -> llm.c ---------------------------------------------------------------------
if bash data/get_vocab.sh >"$F/vocab.log" 2>&1; then
    ./tokenize tokenizer-file "$O/gpt2_tokenizer.bin" >/dev/null || die "./tokenize tokenizer-file failed"
    ./tokenize shards --out "$O/ours" --val-docs 2 --shard-tokens 1500 --threads 2 "$F/docs" >/dev/null ||
        die "./tokenize shards failed"
    files=(tokenizer "$O/gpt2_tokenizer.bin" shard "$O"/ours_*.bin)
    if ./tokenize --help | grep -q hellaswag; then
        ./tokenize hellaswag "$F/hellaswag.jsonl" "$O/hellaswag_ours.bin" >/dev/null || die "./tokenize hellaswag failed"
        files+=(eval "$O/hellaswag_ours.bin")
    else
        echo "  note: ./tokenize has no hellaswag command yet; its eval file is not checked"
    fi
    $FMT check --strict --V 50257 --eot 50256 "${files[@]}" >"$O/check.txt" ||
        die "llm.c's loaders (or writers) disagree with ./tokenize: $(grep rejected "$O/check.txt")"
    sed 's/^/  /' "$O/check.txt"
    # GPT-2's own ids: "Hello" 15496, " " 220, EOT 50256
    "$PY" -c "
import sys; sys.path.insert(0, 'test'); import llmc_format as f
t = f.read_tokenizer(sys.argv[1]); p = t['pieces']
assert (len(p), t['eot'], p[15496], p[220], p[50256]) == (50257, 50256, b'Hello', b' ', b'<|endoftext|>'), \
    (len(p), t['eot'], p[15496], p[220], p[50256])" "$O/gpt2_tokenizer.bin" ||
        die "$O/gpt2_tokenizer.bin does not hold GPT-2's tokens"
    OTRAIN="$O/ours_train_000000.bin"
    OVAL="$O/ours_val_000000.bin"
    OTOK="$O/gpt2_tokenizer.bin"
else
    echo "  note: no GPT-2 vocabulary ($(tail -n 1 "$F/vocab.log")): ./tokenize's files are not checked;"
    echo "        the checkpoint below trains on the llm.c-style shards and samples with the v1 tokenizer"
    OTRAIN=$TRAIN
    OVAL=$VAL
    OTOK="$F/tokenizer_v1.bin"
fi
# a checkpoint of the trainer at step 2, where it also prints the val loss and a greedy sample
./train_gpt_cpu -e gpt2:l1c16h2 -i "$OTRAIN" -j "$OVAL" -o "$O/run" -b 2 -t 32 -x 2 -v 2 -m 2 -n 2 -l 1e-3 \
    -s 2 -g 10 -st 0 -tf "$OTOK" >"$O/run.stdout" 2>"$O/run.stderr" ||
    die "train_gpt_cpu on our files: $(tail -n 3 "$O/run.stderr")"
[ -f "$O/run/DONE_00000002" ] || die "no checkpoint DONE_00000002 in $O/run"
$FMT compare-ours --model "$O/run/model_00000002.bin" --val "$OVAL" --B 2 --T 32 --batches 2 \
    --metrics "$O/run/metrics.jsonl" --step 2 --tokenizer "$OTOK" --gen 10 --stdout "$O/run.stdout" ||
    die "our checkpoint, read as llm.c reads it, differs from the trainer"

# ---- c. files that break llm.c's rules ---------------------------------------------------
# name, llmc_format.py's reason, the trainer's flags that load it
cases=(
    "model_version|version 4|-e BAD"
    "model_magic|Bad magic model file|-e BAD"
    "model_truncated|comes up short|-e BAD"
    "model_vp|padded vocab Vp=384 < V=500|-e BAD"
    "shard_version|Bad version in data file|-i BAD"
    "shard_magic|llama-3's uint32 shard|-i BAD"
    "shard_size|file size is not as expected|-i BAD"
    "tokenizer_version|bad version|-s 1 -tf BAD"
    "tokenizer_v1_vocab|asserts V == 50257|-s 1 -tf BAD"
    "tokenizer_truncated|truncated|-s 1 -tf BAD"
    "tokenizer_empty_token|length 0|-s 1 -tf BAD"
    "eval_version|Bad version|-h 1 -hf BAD"
    "eval_marker|65535 delimiter|-h 1 -hf BAD"
    "eval_index|has index 3|-h 1 -hf BAD"
)
files=(model "$F/bad_model_fp32_as_bf16.bin")
for c in "${cases[@]}"; do files+=("${c%%_*}" "$F/bad_${c%%|*}.bin"); done
$FMT check --T 32 "${files[@]}" >"$F/check_bad.txt"
for c in "${cases[@]}"; do
    IFS='|' read -r name reason flags <<<"$c"
    bad="$F/bad_$name.bin"
    got=$(grep "^$bad: " "$F/check_bad.txt")
    [[ "$got" == *"rejected:"*"$reason"* ]] || die "llmc_format.py on $bad: '$got' lacks '$reason'"
    # shellcheck disable=SC2086  # flags is a word list
    ./train_gpt_cpu -e "$F/model_fp32.bin" -i "$TRAIN" -j "$VAL" -b 4 -t 32 -x 0 -v 0 -s 0 ${flags//BAD/$bad} \
        >"$F/bad.stdout" 2>"$F/bad.stderr" && die "train_gpt_cpu accepts $bad"
    if [ "$(wc -l <"$F/bad.stderr")" != 1 ] || ! grep -q "^error: .*bad_$name.bin" "$F/bad.stderr"; then
        die "train_gpt_cpu on $bad: stderr is not one 'error: ...bad_$name.bin...' line: $(head -c 300 "$F/bad.stderr")"
    fi
    printf '  %-26s llm.c: %s\n  %-26s ours:  %s\n' "bad_$name" "${got#*rejected: }" "" "$(cat "$F/bad.stderr")"
done
# a bf16 (v5) header on fp32 data: llm.c's BF16 build reads the bf16-sized half it expects and
# ignores the rest (llmc_format.py: a note); the trainer refuses the size mismatch
bad="$F/bad_model_fp32_as_bf16.bin"
got=$(grep -A1 "^$bad: " "$F/check_bad.txt")
[[ "$got" == *": ok: "*"note: "*"bytes after the parameters"* ]] || die "llmc_format.py on $bad: $got"
./train_gpt_cpu -e "$bad" -i "$TRAIN" -b 4 -t 32 -x 0 -v 0 -s 0 >/dev/null 2>"$F/bad.stderr" &&
    die "train_gpt_cpu accepts $bad"
echo "  bad_model_fp32_as_bf16     llm.c reads it (ignoring the 2nd half); ours: $(cat "$F/bad.stderr")"
echo "PASS: llm.c's files load here and ours pass llm.c's loaders ($(( $(date +%s) - start )) s)"
