#!/usr/bin/env bash
# ./generate: sampling with a KV cache. Greedy decoding must pick, token for token, what
#  (a) the trainer's full forward over the whole sequence picks (build/test_generate_kv, which
#      also compares the logits of every step), and
#  (b) PyTorch picks (test/generate_reference.py: test/pytorch_reference.py's GPT-2, float64,
#      the whole sequence recomputed at every step), with the logits of every step close;
# sampling must be reproducible by seed, reduce to greedy at top-k 1 / tiny top-p / T 0, and
# draw only from the candidates top-k / top-p allow (against the filters written in Python);
# bad input gets one "error:" line and exit 1. One line per check; exit 1 on any failure.
set -eu
cd "$(dirname "$0")/.."
source test/lib.sh  # defines: PY, require_pytorch
require_pytorch
make -s generate build/test_generate_kv
# one thread: these models are tiny, and OpenMP threads that spin-wait for a core another
# process holds make each step 100x slower on a loaded machine
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
out=test/out/generate
rm -rf "$out"; mkdir -p "$out"
ref() { (cd test && "$PY" generate_reference.py "$@"); }
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
O=$(abs "$out")
failures=0
fail_check() { echo "FAIL $*"; failures=$((failures + 1)); }
ids_of() { tr -s ' ' ' ' < "$1" | sed 's/ *$//'; }  # the one line of ids, trimmed

# The models: A (V=500, maxT=64, 4 heads of 16) in fp32 and in bf16 (version 5); B with a longer
# context (V=300, maxT=128, 2 heads of 32) for a prompt of 20 and 108 generated tokens (to maxT,
# more than 2x the prompt). Weights 10x GPT-2's init, so greedy decoding does not just repeat.
ref checkpoint "$O/a.bin" --V 500 --maxT 64 --L 2 --NH 4 --C 64 --seed 3 > /dev/null
ref checkpoint "$O/a16.bin" --V 500 --maxT 64 --L 2 --NH 4 --C 64 --seed 3 --bf16 > /dev/null
ref checkpoint "$O/b.bin" --V 300 --maxT 128 --L 2 --NH 2 --C 64 --seed 7 > /dev/null
PA="499,5,17"
PB="299,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19"

# --- (a) the cache against the full forward, and ./generate against both -----------------
kv_check() {  # kv_check NAME MODEL PROMPT N CHUNK: writes $out/NAME.kv (the ids)
    local name=$1
    if ./build/test_generate_kv "$2" "$3" "$4" "$5" > "$out/$name.kvlog" 2>&1; then
        echo "ok   kv $name: $(grep '^kv vs full' "$out/$name.kvlog")"
    else
        fail_check "kv $name: $(tail -n 3 "$out/$name.kvlog" | tr '\n' ' ')"
    fi
    head -n 1 "$out/$name.kvlog" > "$out/$name.kv"
}
kv_check a "$O/a.bin" "$PA" 61 3            # the prompt at once, then to maxT
kv_check a_chunked "$O/a.bin" "499,5,17,9,8,7,6" 50 3  # the prompt 3 tokens per call
kv_check a16 "$O/a16.bin" "$PA" 61 3
kv_check b "$O/b.bin" "$PB" 108 1           # the prompt token by token, 108 steps to maxT

greedy() {  # greedy NAME MODEL PROMPT [more flags]: ./generate's ids to $out/NAME.ids, logits to NAME.lg
    local name=$1 model=$2 prompt=$3; shift 3
    ./generate -e "$model" -pi "$prompt" -st 0 -oi 1 -ol "$out/$name.lg" "$@" > "$out/$name.ids" 2> "$out/$name.err" ||
        { fail_check "generate $name: $(cat "$out/$name.err")"; return 0; }
}
vs_pytorch() {  # vs_pytorch NAME MODEL PROMPT N V
    local name=$1 model=$2 prompt=$3 n=$4 V=$5
    greedy "$name" "$model" "$prompt" -g "$n"
    ref greedy "$(abs "$model")" --prompt "$prompt" --n "$n" --logits-out "$O/$name.ref.lg" > "$out/$name.ref" 2> "$out/$name.ref.err"
    local got want same
    got=$(ids_of "$out/$name.ids"); want=$(ids_of "$out/$name.ref")
    same=$(paste -d' ' <(tr ' ' '\n' <<< "$got") <(tr ' ' '\n' <<< "$want") | awk '$1 == $2 { n++ } $1 != $2 { exit } END { print n + 0 }')
    if [ "$got" = "$want" ] && [ "$got" = "$(ids_of "$out/$name.kv")" ]; then
        echo "ok   greedy $name: ./generate = full forward = PyTorch, $same/$n tokens ($(cat "$out/$name.ref.err"))"
    else
        fail_check "greedy $name: ./generate and PyTorch agree on the first $same of $n tokens; ./generate: $got; PyTorch: $want; full forward: $(ids_of "$out/$name.kv")"
    fi
    local cmp
    if cmp=$(ref compare "$O/$name.lg" "$O/$name.ref.lg" --V "$V" --tol 1e-3); then
        echo "ok   logits $name vs PyTorch: $cmp"
    else
        fail_check "logits $name vs PyTorch: $cmp"
    fi
}
vs_pytorch a "$O/a.bin" "$PA" 61 500
vs_pytorch a16 "$O/a16.bin" "$PA" 61 500
vs_pytorch b "$O/b.bin" "$PB" 108 300

# no cache (the trainer's gpt2_forward every step) gives the same ids and logits
greedy a_nokv "$O/a.bin" "$PA" -kv 0
if [ "$(ids_of "$out/a_nokv.ids")" = "$(ids_of "$out/a.ids")" ] &&
   cmp=$(ref compare "$O/a_nokv.lg" "$O/a.lg" --V 500 --tol 1e-5); then
    echo "ok   -kv 0 (full forward) = -kv 1: same ids, $cmp"
else
    fail_check "-kv 0 differs from -kv 1: $(ids_of "$out/a_nokv.ids") vs $(ids_of "$out/a.ids") ${cmp:-}"
fi

# stops: -g tokens, EOT, maxT
greedy g5 "$O/a.bin" "$PA" -g 5
[ "$(ids_of "$out/g5.ids")" = "$(cut -d' ' -f1-5 <<< "$(ids_of "$out/a.ids")")" ] && grep -q "stopped at -g" "$out/g5.err" &&
    echo "ok   -g 5: the first 5 greedy tokens" || fail_check "-g 5: $(cat "$out/g5.ids") $(cat "$out/g5.err")"
greedy maxT "$O/a.bin" "$PA" -g 100
[ "$(ids_of "$out/maxT.ids")" = "$(ids_of "$out/a.ids")" ] && grep -q "stopped at maxT" "$out/maxT.err" &&
    echo "ok   -g 100: 3 prompt + 61 generated = 64 positions, stopped at maxT" || fail_check "maxT stop: $(cat "$out/maxT.err")"
# EOT: a model of 8 tokens (EOT is V-1 = 7) samples it soon; with -se 1 the output ends right
# after the first EOT that -se 0 shows, the tokens before it the same
ref checkpoint "$O/e.bin" --V 8 --maxT 64 --L 1 --NH 2 --C 32 --seed 5 > /dev/null
eot_ok=""
for seed in 1 2 3 4 5 6 7 8; do
    ./generate -e "$O/e.bin" -sd $seed -oi 1 -se 0 > "$out/noeot.ids" 2> /dev/null
    k=$(tr ' ' '\n' < "$out/noeot.ids" | grep -n -x 7 | head -n 1 | cut -d: -f1 || true)
    [ -n "$k" ] && [ "$k" -gt 1 ] || continue
    ./generate -e "$O/e.bin" -sd $seed -oi 1 > "$out/stop.ids" 2> "$out/stop.err"
    if [ "$(ids_of "$out/stop.ids")" = "$(cut -d' ' -f1-"$k" <<< "$(ids_of "$out/noeot.ids")")" ] &&
       grep -q "stopped at EOT" "$out/stop.err"; then
        eot_ok="seed $seed: $k tokens, the last EOT"
    fi
    break
done
[ -n "$eot_ok" ] && echo "ok   -se 1 stops after the first EOT ($eot_ok)" || fail_check "-se 1 did not stop at EOT: $(cat "$out/stop.ids" 2>/dev/null)"

# --- sampling ------------------------------------------------------------------------------
sample() {  # sample NAME [flags]: ids from model A at temperature 1 unless given
    ./generate -e "$O/a.bin" -pi "$PA" -g 40 -oi 1 "${@:2}" > "$out/$1.ids" 2> "$out/$1.err" ||
        fail_check "sample $1: $(cat "$out/$1.err")"
}
sample s5 -sd 5 -ol "$out/s5.lg"
sample s5b -sd 5
sample s6 -sd 6
sample s5_nokv -sd 5 -kv 0
cmp -s "$out/s5.ids" "$out/s5b.ids" && echo "ok   same seed, same tokens" || fail_check "-sd 5 twice differs"
cmp -s "$out/s5.ids" "$out/s5_nokv.ids" && echo "ok   same seed with -kv 0, same tokens" || fail_check "-sd 5 -kv 0 differs"
cmp -s "$out/s5.ids" "$out/s6.ids" && fail_check "-sd 5 and -sd 6 give the same 40 tokens" || echo "ok   another seed, other tokens"
greedy40=$(cut -d' ' -f1-40 <<< "$(ids_of "$out/a.ids")")
cmp -s "$out/s5.ids" <(echo "$greedy40") && fail_check "temperature 1 sampled the greedy tokens"
for flags in "-sk 1 -sd 5" "-sp 1e-6 -sd 5" "-sp 1e-6 -st 2 -sd 9" "-st 0 -sk 50 -sp 0.5 -sd 5"; do
    name=$(tr -d ' -' <<< "$flags")
    # shellcheck disable=SC2086
    sample "$name" $flags
    [ "$(ids_of "$out/$name.ids")" = "$greedy40" ] && echo "ok   $flags = greedy" || fail_check "$flags is not greedy: $(cat "$out/$name.ids")"
done
# the candidate sets: sampler_candidates on the logits of real steps vs the Python filter
for f in "1 0 1" "0.7 20 1" "1 0 0.9" "1.3 50 0.8" "1 0 0.3" "0.5 5 0.99"; do
    read -r T k p <<< "$f"
    if ./build/test_generate_kv --filter "$out/a.lg" 500 "$T" "$k" "$p" > "$out/filter.txt" 2> "$out/filter.err" &&
       res=$(ref filter "$O/a.lg" --V 500 --temperature "$T" --top-k "$k" --top-p "$p" --against "$O/filter.txt"); then
        echo "ok   $res"
    else
        fail_check "candidates T=$T k=$k p=$p: ${res:-} $(cat "$out/filter.err")"
    fi
done
# and every token ./generate samples lies in its step's allowed set
for f in "1 5 1" "1 0 0.5" "0.8 10 0.7"; do
    read -r T k p <<< "$f"
    sample "tkp" -st "$T" -sk "$k" -sp "$p" -sd 11 -ol "$out/tkp.lg"
    if res=$(ref check-sampled "$O/tkp.lg" --V 500 --ids "$(ids_of "$out/tkp.ids")" --temperature "$T" --top-k "$k" --top-p "$p"); then
        echo "ok   $res"
    else
        fail_check "$res"
    fi
done

# --- a text prompt: GPT-2 BPE in, text out (needs data/gpt2_vocab and the decode table) ------
if [ -f data/gpt2_vocab/encoder.json ] && [ -f data/gpt2_vocab/vocab.bpe ] && [ -f data/gpt2_tokenizer.bin ] && [ -x ./tokenize ]; then
    ref checkpoint "$O/g.bin" --V 50257 --maxT 32 --L 1 --NH 2 --C 64 --seed 4 > /dev/null
    text="The Lord is my shepherd"
    bpe=$(printf '%s' "$text" | ./tokenize encode)
    pids="50256 $bpe"
    ./generate -e "$O/g.bin" -p "$text" -st 0 -g 12 -oi 1 > "$out/g.ids" 2> "$out/g.err"
    ref greedy "$O/g.bin" --prompt "$pids" --n 12 > "$out/g.ref" 2> /dev/null
    ./generate -e "$O/g.bin" -pi "$pids" -st 0 -g 12 -se 0 > "$out/g.txt" 2> "$out/g.txt.err"
    want_text="$text$(./tokenize decode <<< "$(ids_of "$out/g.ref")")"
    if [ "$(ids_of "$out/g.ids")" = "$(ids_of "$out/g.ref")" ] && [ "$(head -c -1 "$out/g.txt")" = "$want_text" ]; then
        echo "ok   text prompt '$text' (EOT + $(wc -w <<< "$bpe") BPE tokens): 12 greedy tokens = PyTorch, text = ./tokenize decode"
    else
        fail_check "text prompt: ids $(cat "$out/g.ids") vs PyTorch $(cat "$out/g.ref"); text '$(cat "$out/g.txt")' vs '$want_text'"
    fi
else
    echo "skip text prompt: no data/gpt2_vocab (data/get_vocab.sh), data/gpt2_tokenizer.bin or ./tokenize"
fi

# --- bad input: one "error:" line, exit 1 ----------------------------------------------------
expect_error() {  # expect_error NAME "text in the message" ARGS...
    local name=$1 want=$2; shift 2
    set +e; ./generate "$@" > "$out/bad.stdout" 2> "$out/bad.stderr"; local rc=$?; set -e
    local lines msg; lines=$(wc -l < "$out/bad.stderr"); msg=$(head -n 1 "$out/bad.stderr")
    if [ $rc -eq 1 ] && [ "$lines" -eq 1 ] && [[ "$msg" == error:* ]] && [[ "$msg" == *"$want"* ]] && [ ! -s "$out/bad.stdout" ]; then
        echo "ok   $name: $msg"
    else
        fail_check "$name: exit $rc, $lines stderr lines, wanted '$want' in: $(cat "$out/bad.stderr")"
    fi
}
long=$(seq -s, 0 64)  # 65 ids, maxT is 64
expect_error missing_checkpoint "No such file" -e "$out/none.bin" -pi 1
expect_error no_checkpoint "-e MODEL.bin" -pi 1
head -c 2048 /dev/zero > "$out/zeros.bin"
expect_error not_a_checkpoint "not a model checkpoint" -e "$out/zeros.bin"
expect_error bad_flag "unknown flag '-zz'" -e "$O/a.bin" -zz 1
expect_error flag_without_value "flag -g needs a value" -e "$O/a.bin" -g
expect_error negative_temperature "flag -st" -e "$O/a.bin" -st -1
expect_error top_p_zero "flag -sp" -e "$O/a.bin" -sp 0
expect_error top_p_above_one "flag -sp" -e "$O/a.bin" -sp 1.5
expect_error negative_top_k "flag -sk" -e "$O/a.bin" -sk -1
expect_error bad_number "flag -g" -e "$O/a.bin" -g 12x
expect_error prompt_longer_than_maxT "longer than the model's context maxT=64" -e "$O/a.bin" -pi "$long"
expect_error prompt_id_outside_vocab "flag -pi: '500'" -e "$O/a.bin" -pi 3,500
expect_error text_prompt_wrong_vocab "vocabulary has 500 tokens" -e "$O/a.bin" -p "hello"
expect_error prompt_twice "not both" -e "$O/a.bin" -p "hello" -pi 1
./generate --help > "$out/help.txt" && grep -q -- "-sp  1 " "$out/help.txt" && echo "ok   --help lists every flag with its default" ||
    fail_check "--help"

if [ $failures -ne 0 ]; then echo "$failures check(s) FAILED"; exit 1; fi
echo "all generate checks passed"
