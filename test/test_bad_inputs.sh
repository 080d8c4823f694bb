#!/usr/bin/env bash
# Bad input gets one clear line: for each broken file or flag, train_gpt_cpu must exit 1
# (not crash), print exactly one stderr line starting with "error:" that names the file
# or flag and the problem, and write no checkpoint.
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-/usr/bin/python3}
make -s train_gpt_cpu
out=test/out/bad_inputs
rm -rf "$out"; mkdir -p "$out"
"$PY" test/pytorch_reference.py --random-checkpoint "$out/model.bin" --V 300 --maxT 64 --L 1 --NH 2 --C 32 --seed 1 > /dev/null
"$PY" test/make_test_data.py --out "$out" --vocab 300 --train-tokens 4000 --val-tokens 2000 --seed 2 > /dev/null
set -f
train="$out/markov_train_*.bin"
val="$out/markov_val_*.bin"
good="-e $out/model.bin -i $train -j $val -b 2 -t 16 -x 2 -v 1 -s 0 -n 1"
failures=0

# expect NAME "text that must appear in the message" ARGS...
expect() {
    local name=$1 want=$2; shift 2
    local dir="$out/run_$name"
    rm -rf "$dir"
    set +e
    local odir=(-o "$dir")
    [ -n "${NO_OUT:-}" ] && odir=()
    ./train_gpt_cpu "${odir[@]}" "$@" > "$out/$name.stdout" 2> "$out/$name.stderr"
    local rc=$?
    set -e
    local lines; lines=$(wc -l < "$out/$name.stderr")
    local msg; msg=$(head -n 1 "$out/$name.stderr")
    local written; written=$(ls "$dir" 2>/dev/null | grep -c -E '^(model|state|DONE)_' || true)
    if [ $rc -eq 1 ] && [ "$lines" -eq 1 ] && [[ "$msg" == error:* ]] && [[ "$msg" == *"$want"* ]] && [ "$written" -eq 0 ]; then
        echo "ok   $name: $msg"
    else
        echo "FAIL $name: exit $rc, $lines stderr lines, $written checkpoint files, wanted '$want' in: $(cat "$out/$name.stderr")"
        failures=$((failures + 1))
    fi
}

# the good command works (so the failures below are the inputs' fault)
./train_gpt_cpu $good -o "$out/run_good" > "$out/good.stdout" || { echo "FAIL good run"; exit 1; }
[ -f "$out/run_good/DONE_00000002" ] || { echo "FAIL good run wrote no checkpoint"; exit 1; }
echo "ok   good run: trains and checkpoints"

# checkpoints
head -c 3000 "$out/model.bin" > "$out/truncated.bin"
expect truncated_checkpoint "$out/truncated.bin: truncated" $good -e "$out/truncated.bin"
cp "$out/model.bin" "$out/longer.bin"; printf 'xxxx' >> "$out/longer.bin"
expect overlong_checkpoint "$out/longer.bin: truncated or corrupt" $good -e "$out/longer.bin"
head -c 500 "$out/model.bin" > "$out/tiny.bin"
expect header_only_checkpoint "$out/tiny.bin: truncated" $good -e "$out/tiny.bin"
"$PY" - "$out" <<'PYEOF'
import struct, sys
d = sys.argv[1]
b = bytearray(open(f"{d}/model.bin", "rb").read())
def patch(name, off, val, fmt="<i"):
    c = bytearray(b); c[off:off+4] = struct.pack(fmt, val); open(f"{d}/{name}", "wb").write(c)
patch("magic.bin", 0, 12345)
patch("version.bin", 4, 7)
patch("heads.bin", 20, 5)          # C=32 not divisible by 5 heads
patch("layers.bin", 16, -3)
patch("nan.bin", 1024 + 4 * 100, float("nan"), "<f")
# shards: size disagrees with header, wrong magic, token id >= vocab
s = bytearray(open(f"{d}/markov_train_000000.bin", "rb").read())
def shard(name, data): open(f"{d}/{name}", "wb").write(data)
c = bytearray(s); c[8:12] = struct.pack("<i", struct.unpack("<i", s[8:12])[0] + 10); shard("badsize_000.bin", c)
c = bytearray(s); c[0:4] = struct.pack("<i", 20240326); shard("badmagic_000.bin", c)
c = bytearray(s); c[4:8] = struct.pack("<i", 9); shard("badversion_000.bin", c)
c = bytearray(s); c[1024 + 2 * 50:1024 + 2 * 51] = struct.pack("<H", 300); shard("badtoken_000.bin", c)
open(f"{d}/badtok.bin", "wb").write(struct.pack("<256I", *([20240328, 2, 300, 299] + [0] * 252)) + b"\x05ab")
PYEOF
expect wrong_magic "$out/magic.bin: bad magic 12345" $good -e "$out/magic.bin"
expect wrong_version "$out/version.bin: unsupported version 7" $good -e "$out/version.bin"
expect corrupt_header "$out/heads.bin: corrupt header" $good -e "$out/heads.bin"
expect negative_layers "$out/layers.bin: corrupt header" $good -e "$out/layers.bin"
expect nan_weights "$out/nan.bin: corrupt: non-finite" $good -e "$out/nan.bin"
expect missing_checkpoint "$out/nope.bin: cannot open" $good -e "$out/nope.bin"

# data shards
expect shard_size "$out/badsize_000.bin" $good -i "$out/badsize_*.bin"
expect shard_magic "$out/badmagic_000.bin: bad magic" $good -i "$out/badmagic_*.bin"
expect shard_version "$out/badversion_000.bin: unsupported shard version" $good -i "$out/badversion_*.bin"
expect token_out_of_vocab "$out/badtoken_000.bin: token id 300 at position 50 is >= vocab size 300" $good -i "$out/badtoken_*.bin"
expect val_token_out_of_vocab "$out/badtoken_000.bin: token id 300" $good -j "$out/badtoken_*.bin"
expect glob_matches_nothing "$out/nothing_*.bin: no files match" $good -i "$out/nothing_*.bin"

# tokenizer file (used for samples)
expect bad_tokenizer "$out/badtok.bin" $good -s 1 -tf "$out/badtok.bin"

# flags
expect t_above_maxT "flag -t: 100 exceeds the model's maximum sequence length 64" $good -t 100
expect unknown_flag "unknown flag '-zz'" $good -zz 1
expect not_a_number "flag -b: expected an integer" $good -b four
expect float_junk "flag -l: expected a number" $good -l 1e-3x
expect negative_batch "flag -b: expected an integer in [1," $good -b -2
expect missing_value "flag -x needs a value" $good -x
expect bad_schedule "flag -k: unknown schedule 'cosin'" $good -k cosin
expect bad_descriptor "flag -e: 'd13' is neither a model descriptor" $good -e d13
expect batch_not_multiple "flag -d: 100 is not a positive multiple" $good -d 100
expect zero_stage "flag -z: expected an integer in" $good -z 4
expect multi_process "-pn 2 with -pi mpi: start the processes with mpirun" $good -pn 2
expect rank_range "-pr 1: the rank must be below -pn 1" $good -pi fs -pf /tmp -pn 1 -pr 1
expect cpu_sockets "flag -pi fs: train_gpt_cpu's processes share their work through MPI: start them with mpirun -np 2" \
    $good -pi fs -pf /tmp -pn 2 -pr 1
expect init_method "flag -pi: unknown init method 'nfs'" $good -pi nfs
NO_OUT=1 expect resume_needs_dir "flag -y 1 needs an output directory" $good -y 1

# an output dir that already holds checkpoints is not silently overwritten
set +e
./train_gpt_cpu $good -o "$out/run_good" > /dev/null 2> "$out/existing.stderr"; rc=$?
set -e
if [ $rc -eq 1 ] && grep -q "already holds checkpoints" "$out/existing.stderr" && [ -f "$out/run_good/DONE_00000002" ]; then
    echo "ok   existing checkpoints: $(cat "$out/existing.stderr")"
else
    echo "FAIL existing checkpoints: exit $rc: $(cat "$out/existing.stderr")"; failures=$((failures + 1))
fi
# found by test_fuzz.sh: a tokenizer file's vocab size is checked against the file's size
# before V tokens are allocated (V = 2^24 in 1 KB used to ask for 512 MB first)
"$PY" -c "import struct, sys; open(sys.argv[1], 'wb').write(struct.pack('<256I', 20240328, 2, 1 << 24, *[0] * 253) + b'\x01a')" "$out/hugetok.bin"
expect huge_vocab_tokenizer "$out/hugetok.bin: truncated file: 1026 bytes cannot hold 16777216 tokens" $good -s 1 -tf "$out/hugetok.bin"
[ $failures -eq 0 ] || { echo "$failures bad-input case(s) failed"; exit 1; }
