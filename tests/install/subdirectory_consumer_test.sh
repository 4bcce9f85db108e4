#!/usr/bin/env bash
# A project that adds tinycoral's source tree with add_subdirectory (examples/subdirectory) builds
# and classifies images/cat.bmp on the virtual Edge TPU with the CLI's best class. It builds the
# library afresh in Debug (-O0, without debug info: it adds a third to the build and no warning)
# with warnings as errors, the configuration neither CI build
# (RelWithDebInfo with GCC, Debug -O1 with clang under the sanitizers) compiles, so that a warning
# only GCC raises at -O0 cannot creep in (README "Builds"). Exit 77 (skipped) without test data.
# Usage: subdirectory_consumer_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 source=$2
data=${TINYCORAL_TESTDATA:-$source/../shared/testdata}
model=$data/gen2020/mobilenet_v1_0.25_128_quant_edgetpu.tflite
if [ ! -f "$model" ]; then
  echo "SKIP: no test data at $data (run scripts/download_testdata.sh, set TINYCORAL_TESTDATA)"
  exit 77
fi
labels=$data/labels/imagenet_labels.txt image=$data/images/cat.bmp
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
expected=$("$build/tools/tinycoral" run "$model" --image "$image" --device sim --top 1 | cut -d' ' -f1)
echo "the CLI's best class: $expected"

echo "== examples/subdirectory: add_subdirectory(tinycoral), Debug, warnings as errors"
cmake -S "$source/examples/subdirectory" -B "$work/sub" -G Ninja -DTINYCORAL_SOURCE_DIR="$source" \
  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0 -DTINYCORAL_WERROR=ON >/dev/null
cmake --build "$work/sub" --parallel "$(nproc)" >"$work/build.log" 2>&1 || {
  tail -n 40 "$work/build.log"
  exit 1
}
"$work/sub/classify" "$model" "$labels" "$image" sim | tee "$work/out"
[ "$(head -n 1 "$work/out" | cut -d' ' -f1)" = "$expected" ]
echo "the add_subdirectory consumer agrees"
