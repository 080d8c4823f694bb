#!/usr/bin/env bash
# The CPU programs under AddressSanitizer + UndefinedBehaviorSanitizer (and LeakSanitizer):
# a training run with validation, sampling, checkpoints and a resume, the broken inputs of
# test_bad_inputs, ./tokenize on hostile bytes, ./import_hf on broken files. Any sanitizer
# report fails the test; the sanitized run must also log the same losses as the normal one.
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}
out=test/out/sanitizers
rm -rf "$out"; mkdir -p "$out" build/san
SAN="-O1 -g -march=native -std=c++17 -fopenmp -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
g++ $SAN -o build/san/train_gpt_cpu train_gpt.cpp -lm
g++ $SAN -o build/san/tokenize data/tokenize.cpp -lm -lpthread
g++ $SAN -o build/san/import_hf import_hf.cpp -lm
make -s train_gpt_cpu
bash data/get_vocab.sh > /dev/null  # ./tokenize needs GPT-2's vocabulary
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=99
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=98
export OMP_NUM_THREADS=2
failures=0
check() {  # check NAME WANT_RC LOG: the exit code is WANT_RC and the log has no sanitizer report
    local name=$1 want=$2 rc=$3 log=$4
    if [ "$rc" -eq "$want" ] && ! grep -q -E "ERROR: (Address|Leak)Sanitizer|runtime error:" "$log"; then
        echo "ok   $name (exit $rc)"
    else
        echo "FAIL $name: exit $rc (wanted $want)"; grep -m 5 -E "Sanitizer|runtime error" "$log" || tail -3 "$log"
        failures=$((failures + 1))
    fi
}
run() {  # run NAME WANT_RC CMD...
    local name=$1 want=$2; shift 2
    set +e
    "$@" > "$out/$name.log" 2>&1
    local rc=$?
    set -e
    check "$name" "$want" "$rc" "$out/$name.log"
}

"$PY" test/pytorch_reference.py --random-checkpoint "$out/model.bin" --V 300 --maxT 64 --L 2 --NH 4 --C 64 --seed 3 > /dev/null
"$PY" test/make_test_data.py --out "$out" --vocab 300 --train-tokens 6000 --val-tokens 2000 --seed 4 > /dev/null
set -f
flags="-e $out/model.bin -i $out/markov_train_*.bin -j $out/markov_val_*.bin -b 4 -t 32 -d 256 -x 12 -l 2e-3
       -u 2 -q 0.1 -c 0.1 -v 4 -m 2 -s 6 -g 8 -n 4 -sh 1 -sl 3 -sg 3"
./train_gpt_cpu $flags -o "$out/ref" > "$out/ref.stdout"
run train_run 0 build/san/train_gpt_cpu $flags -o "$out/san"
# -O1 and -O3 round differently in the last digits: the same losses to 1e-5
if "$PY" - "$out/ref/main.log" "$out/san/main.log" <<'PYEOF'
import sys
a, b = (open(p).read().split() for p in sys.argv[1:3])
assert len(a) == len(b), "different line counts"
for x, y in zip(a, b):
    kx, vx = x.split(":"); ky, vy = y.split(":")
    assert kx == ky and abs(float(vx) - float(vy)) <= 1e-5 * max(1.0, abs(float(vx))), f"{x} vs {y}"
PYEOF
then echo "ok   sanitized run logs the same losses (1e-5)"
else echo "FAIL sanitized run's main.log differs"; failures=$((failures + 1)); fi
run train_run_stopped 0 build/san/train_gpt_cpu $flags -o "$out/san_resume"
rm -f "$out/san_resume/DONE_00000012" "$out/san_resume/DONE_00000008"
run resume 0 build/san/train_gpt_cpu $flags -o "$out/san_resume" -y 1
if cmp -s "$out/san/main.log" "$out/san_resume/main.log"; then echo "ok   sanitized resume is bit-exact"
else echo "FAIL sanitized resume's main.log differs"; failures=$((failures + 1)); fi

# broken inputs: clean exit 1, no sanitizer report
head -c 3000 "$out/model.bin" > "$out/truncated.bin"
head -c 100 "$out/model.bin" > "$out/tiny.bin"
"$PY" - "$out" <<'PYEOF'
import struct, sys
d = sys.argv[1]
b = bytearray(open(f"{d}/model.bin", "rb").read())
c = bytearray(b); c[16:20] = struct.pack("<i", 100000); open(f"{d}/huge_layers.bin", "wb").write(c)
c = bytearray(b); c[24:28] = struct.pack("<i", -64); open(f"{d}/neg_channels.bin", "wb").write(c)
s = bytearray(open(f"{d}/markov_train_000000.bin", "rb").read())
c = bytearray(s); c[8:12] = struct.pack("<i", -5); open(f"{d}/negtok_000.bin", "wb").write(c)
c = bytearray(s); c[1024 + 20:1024 + 22] = struct.pack("<H", 65535); open(f"{d}/bigtok_000.bin", "wb").write(c)
open(f"{d}/tok_lies.bin", "wb").write(struct.pack("<256I", *([20240328, 2, 4000000000, 1] + [0] * 252)))
open(f"{d}/hostile.txt", "wb").write(bytes(range(256)) * 40 + "naïve café 😀👍🏽 'S 'll\r\n\t\t  x".encode() + b"\xff\xfe\xc0\x80\xed\xa0\x80")
st = b'{"wte": {"dtype": "F32", "shape": [4000000000, 8], "data_offsets": [0, 16]}}'
open(f"{d}/lying.safetensors", "wb").write(struct.pack("<Q", len(st)) + st + b"\0" * 16)
open(f"{d}/short.safetensors", "wb").write(struct.pack("<Q", 10**12))
PYEOF
for f in truncated tiny huge_layers neg_channels; do
    run "checkpoint_$f" 1 build/san/train_gpt_cpu $flags -o "$out/bad_$f" -e "$out/$f.bin"
done
run shard_negative_count 1 build/san/train_gpt_cpu $flags -o "$out/bad_s1" -i "$out/negtok_*.bin"
run shard_token_65535 1 build/san/train_gpt_cpu $flags -o "$out/bad_s2" -i "$out/bigtok_*.bin"
run tokenizer_lies 1 build/san/train_gpt_cpu $flags -o "$out/bad_t" -tf "$out/tok_lies.bin"
run flags_junk 1 build/san/train_gpt_cpu -b 99999999999999 -t x
run tokenize_hostile 0 sh -c "build/san/tokenize encode < '$out/hostile.txt' > '$out/hostile.ids' && build/san/tokenize decode < '$out/hostile.ids' > '$out/hostile.out' && cmp '$out/hostile.txt' '$out/hostile.out'"
run import_lying_header 1 build/san/import_hf "$out/lying.safetensors" "$out/x.bin"
run import_short 1 build/san/import_hf "$out/short.safetensors" "$out/x.bin"
[ $failures -eq 0 ] || { echo "$failures sanitizer case(s) failed"; exit 1; }
echo "all sanitizer checks passed"
