#!/usr/bin/env bash
# Hugging Face interop: ./export_hf (llm.c checkpoint -> model.safetensors + config.json) and
# ./import_hf (safetensors -> llm.c checkpoint), checked by test/hf_reference.py, which parses
# and writes safetensors with json + numpy and computes GPT-2 logits in HF's layout with
# PyTorch, independently of the C++. One line per check; exit 1 on any failure.
set -eu
cd "$(dirname "$0")/.."
source test/lib.sh  # defines: PY, require_pytorch
require_pytorch
make -s export_hf import_hf train_gpt_cpu build/test_hf_logits
out=test/out/hf
rm -rf "$out"; mkdir -p "$out"
ref() { "$PY" test/hf_reference.py "$@"; }

# awkward sizes: V=1000 (not a multiple of 128: wte loses 24 padded rows), 3 heads of 16
"$PY" test/pytorch_reference.py --random-checkpoint "$out/model.bin" --V 1000 --maxT 40 --L 3 --NH 3 --C 48 > /dev/null
./export_hf "$out/model.bin" "$out/f32" > /dev/null
./export_hf "$out/model.bin" "$out/bf16" --dtype bfloat16 > /dev/null
ref check-export "$out/f32" --checkpoint "$out/model.bin" --dtype F32 --cpp build/test_hf_logits
ref check-export "$out/bf16" --checkpoint "$out/model.bin" --dtype BF16 --cpp build/test_hf_logits

# round trips: F32 gives back the very same file; BF16 gives the bf16-rounded weights
./import_hf "$out/f32/model.safetensors" "$out/f32_back.bin" --config "$out/f32/config.json" > /dev/null
cmp "$out/model.bin" "$out/f32_back.bin" || { echo "FAIL import_hf(export_hf(model.bin)) differs from model.bin"; exit 1; }
echo "ok F32 round trip: import_hf(export_hf(model.bin)) is byte-identical to model.bin"
./import_hf "$out/bf16/model.safetensors" "$out/bf16_back.bin" > /dev/null  # config.json found next to it
ref check-import "$out/bf16_back.bin" --safetensors "$out/bf16/model.safetensors" --checkpoint "$out/model.bin" --nh 3 --tol 1e-2

# OpenAI's released-repo style: no "transformer." prefix, h.{i}.attn.bias buffers, F16;
# no config.json, so the heads come from C/64
"$PY" test/pytorch_reference.py --random-checkpoint "$out/model2.bin" --V 515 --maxT 32 --L 2 --NH 2 --C 128 --seed 5 > /dev/null
ref write-released "$out/released" --checkpoint "$out/model2.bin"
./import_hf "$out/released/model.safetensors" "$out/released.bin" > /dev/null
ref check-import "$out/released.bin" --safetensors "$out/released/model.safetensors" --checkpoint "$out/model2.bin" --nh 2 --tol 1e-2
# the trainer fine-tunes from an imported checkpoint
"$PY" test/make_test_data.py --out "$out/data" --vocab 515 --train-tokens 4000 --val-tokens 1000 > /dev/null
OMP_NUM_THREADS=1 ./train_gpt_cpu -e "$out/released.bin" -i "$out/data/markov_train_*.bin" -j "$out/data/markov_val_*.bin" \
    -o "$out/finetune" -b 2 -t 32 -x 3 -l 1e-3 -v 3 -m 2 -s 0 > "$out/finetune.txt" 2>&1 \
    || { echo "FAIL train_gpt_cpu -e released.bin:"; tail -5 "$out/finetune.txt"; exit 1; }
echo "ok train_gpt_cpu fine-tunes from the imported checkpoint: $(grep -c '"kind":"train"' "$out/finetune/metrics.jsonl") steps, $(tail -1 "$out/finetune/main.log")"

# bad inputs: each exactly one "error:" line naming the file, exit 1, nothing written
ref make-bad "$out/f32/model.safetensors" "$out/bad"
expect_error() {  # expect_error NAME PATTERN COMMAND...
    local name=$1 pattern=$2; shift 2
    rm -f "$out/bad.bin"
    set +e; "$@" > "$out/stdout.txt" 2> "$out/stderr.txt"; local rc=$?; set -e
    local lines; lines=$(wc -l < "$out/stderr.txt")
    if [ $rc -ne 1 ] || [ "$lines" -ne 1 ] || ! grep -q "^error: .*$pattern" "$out/stderr.txt" || [ -e "$out/bad.bin" ]; then
        echo "FAIL $name: exit $rc, $lines stderr lines (wanted exit 1, one line matching '$pattern', no output):"
        cat "$out/stderr.txt"; exit 1
    fi
    echo "ok $name: $(cat "$out/stderr.txt")"
}
cfg="--config $out/f32/config.json"
for case in "truncated:tensor .* outside the .*-byte data buffer" "tiny:truncated" "header_past_end:runs past the end" \
            "bad_json:not valid JSON" "missing_tensor:missing tensor transformer.h.1.mlp.c_fc.bias" \
            "wrong_shape:transformer.h.1.mlp.c_fc.bias has shape (2, 96), expected (192)" \
            "bad_offsets:span 772 bytes" "untied_head:lm_head.weight differs from wte.weight"; do
    name=${case%%:*}; pattern=${case#*:}
    expect_error "import_hf $name" "$name.safetensors: .*$pattern" ./import_hf "$out/bad/$name.safetensors" "$out/bad.bin" $cfg
done
expect_error "import_hf missing file" "nope.safetensors: cannot open" ./import_hf "$out/nope.safetensors" "$out/bad.bin"
cp "$out/f32/model.safetensors" "$out/bad/c48.safetensors"  # no config.json beside it
expect_error "import_hf C=48 without config.json" "C=48 is not a multiple of 64 (pass --config)" \
    ./import_hf "$out/bad/c48.safetensors" "$out/bad.bin"
sed 's/"n_embd": 48/"n_embd": 64/' "$out/f32/config.json" > "$out/bad/wrong_config.json"
expect_error "import_hf config.json that disagrees" "wrong_config.json: \"n_embd\" is 64 but .* holds 48" \
    ./import_hf "$out/f32/model.safetensors" "$out/bad.bin" --config "$out/bad/wrong_config.json"
head -c 2000 "$out/model.bin" > "$out/trunc.bin"
expect_error "export_hf truncated checkpoint" "trunc.bin: truncated" ./export_hf "$out/trunc.bin" "$out/bad_export"
expect_error "export_hf missing checkpoint" "none.bin: cannot open" ./export_hf "$out/none.bin" "$out/bad_export"
expect_error "export_hf unwritable dir" "model.bin/sub: cannot create directory" ./export_hf "$out/model.bin" "$out/model.bin/sub"
expect_error "export_hf bad dtype" "--dtype float16" ./export_hf "$out/model.bin" "$out/bad_export" --dtype float16
echo "all HF export/import checks passed"
