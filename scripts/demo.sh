#!/usr/bin/env bash
# The main job: build tinycoral, then show it working on whatever is here.
# With Google's test data ($TINYCORAL_TESTDATA or ../shared/testdata): inspect and disassemble a
# compiled MobileNet, then classify an image with it on the best available device (a Coral stick if
# one is plugged in, else the virtual Edge TPU); compile a dense layer with `tinycoral compile` and
# run our program next to Google's on the virtual Edge TPU (the outputs and, per `tinycoral
# compare`, the programs are identical). Without it: assemble, check and disassemble the
# example program in examples/. Then a story: with a llama2.c checkpoint ($TINYCORAL_CHECKPOINT,
# e.g. stories15M.bin, README "TinyStories") on the CPU; without one, from a random checkpoint made by
# the test data's make_checkpoint.py (the text is noise then, and the script says so).
set -euo pipefail
cd "$(dirname "$0")/.."
# TINYCORAL_CLI names an already built tinycoral (the test suite runs this script that way).
tc=${TINYCORAL_CLI:-}
if [ -z "$tc" ]; then
  cmake --preset default >/dev/null
  cmake --build build -j "$(nproc)" --target tinycoral  # just the CLI, not the tests
  tc=build/tools/tinycoral
fi
log=$(mktemp)
out=$(mktemp)
trap 'rm -f "$log" "$out"' EXIT
data=${TINYCORAL_TESTDATA:-../shared/testdata}
if [ -f "$data/gen2020/mobilenet_v1_0.25_128_quant_edgetpu.tflite" ]; then
  model=$data/gen2020/mobilenet_v1_0.25_128_quant_edgetpu.tflite
  echo "== tinycoral inspect $model"
  "$tc" inspect "$model"
  echo "== tinycoral disasm --check (every compiled model in $data)"
  find "$data" -name '*_edgetpu.tflite' -print0 | sort -z | xargs -0 "$tc" disasm --check | tail -n 1
  echo "== first lines of the execution program"
  "$tc" disasm "$model" | sed -n '1,40p'  # sed reads it all: no SIGPIPE under pipefail
  labels=$data/labels/imagenet_labels.txt
  for image in cat bird; do
    echo "== classify images/$image.bmp with $(basename "$model") on the best available device"
    if ! "$tc" run "$model" --image "$data/images/$image.bmp" --device auto --top 3 --labels "$labels" \
      >"$out" 2>"$log"; then
      head -n 3 "$log"
      echo "(the device above could not run it; the CPU reference on the CPU twin instead)"
      "$tc" run "${model%_edgetpu.tflite}.tflite" --image "$data/images/$image.bmp" --device cpu \
        --top 3 --labels "$labels"
    else
      cat "$log" "$out"
    fi
  done
  dense=$data/libredgetpu/dense_256
  if [ -f "$dense.tflite" ] && [ -f "${dense}_edgetpu.tflite" ]; then
    echo "== tinycoral compile $(basename "$dense").tflite: our own program for the Edge TPU"
    compiled=$(mktemp -d)
    "$tc" compile "$dense.tflite" -o "$compiled" -s
    ours=$compiled/dense_256_edgetpu.tflite google=${dense}_edgetpu.tflite
    echo "== ours and Google's (edgetpu_compiler 16.0) on the virtual Edge TPU, the same input"
    for i in $(seq 0 255); do printf "\\$(printf %o $((i * 37 % 256)))"; done >"$compiled/input.raw"
    "$tc" run "$ours" --input "$compiled/input.raw" --device sim --output-file "$compiled/ours.raw"
    "$tc" run "$google" --input "$compiled/input.raw" --device sim --output-file "$compiled/google.raw"
    echo "ours,   first output bytes:$(od -An -tu1 -N12 "$compiled/ours.raw")"
    echo "Google, first output bytes:$(od -An -tu1 -N12 "$compiled/google.raw")"
    if cmp -s "$compiled/ours.raw" "$compiled/google.raw"; then
      echo "ours and Google's agree: $(wc -c <"$compiled/ours.raw") output bytes identical"
    else
      echo "ours and Google's differ" >&2
      exit 1
    fi
    echo "== tinycoral compare ours Google's"
    "$tc" compare "$ours" "$google"
    rm -rf "$compiled"
  fi
else
  echo "(no test data at $data: run scripts/download_testdata.sh and set TINYCORAL_TESTDATA for more)"
  bin=$(mktemp)
  "$tc" asm examples/hello.s -o "$bin"
  "$tc" disasm --check "$bin"
  "$tc" disasm "$bin"
  rm -f "$bin"
fi
tokenizer=$data/llama2c/tokenizer.bin
checkpoint=${TINYCORAL_CHECKPOINT:-}
if [ -n "$checkpoint" ] && [ -f "$checkpoint" ]; then
  echo "== a story from $(basename "$checkpoint") on the CPU (float32)"
  "$tc" generate "$checkpoint" ${tokenizer:+-z "$tokenizer"} -n 200 -t 0.8 -s 42 \
    -i "Once upon a time" --device cpu
elif [ -f "$data/llama2c/make_checkpoint.py" ] && command -v python3 >/dev/null; then
  echo "== a story (no checkpoint: set TINYCORAL_CHECKPOINT=stories15M.bin for a real one;"
  echo "   this is a random checkpoint from make_checkpoint.py, so the text is noise)"
  random_ckpt=$(mktemp)
  python3 "$data/llama2c/make_checkpoint.py" "$random_ckpt" rand_gqa
  "$tc" generate "$random_ckpt" -z "$tokenizer" -n 48 -t 0 -i "Once upon a time" --device cpu
  echo "== the chip path: every layer matmul on the virtual Edge TPU (int8; the same text as"
  echo "   --int8 on the CPU), with the stick's modeled speed"
  "$tc" generate "$random_ckpt" -z "$tokenizer" -n 48 -t 0 -i "Once upon a time" --device sim 2>&1
  rm -f "$random_ckpt"
else
  echo "(no llama2.c checkpoint or test data: no story; README \"TinyStories\" says where to get one)"
fi
