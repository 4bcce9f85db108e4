#!/usr/bin/env bash
# Installs the build into a temporary prefix and builds the README's examples against it as other
# projects would: examples/cpp with find_package(tinycoral), examples/c with pkg-config, and runs
# both and the Python example (from the installed package) on the virtual Edge TPU; each must
# print the CLI's best class for images/cat.bmp. Exit 77 (skipped) without test data.
# Usage: consumers_test.sh BUILD_DIR SOURCE_DIR
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
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" >/dev/null
top=$("$prefix/bin/tinycoral" run "$model" --image "$image" --device sim --top 1 --labels "$labels")
expected=$(echo "$top" | cut -d' ' -f1) expected_label=$(echo "$top" | cut -d' ' -f3-)
echo "the installed CLI's best class: $expected"

echo "== examples/cpp with find_package(tinycoral)"
cmake -S "$source/examples/cpp" -B "$work/cpp" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/cpp" >/dev/null
"$work/cpp/classify" "$model" "$labels" "$image" sim | tee "$work/cpp.out"
[ "$(head -n 1 "$work/cpp.out" | cut -d' ' -f1)" = "$expected" ]

echo "== examples/c with pkg-config"
libdir=$(dirname "$(find "$prefix" -name tinycoral.pc)")
export PKG_CONFIG_PATH=$libdir
cc -std=c11 -Wall -Werror "$source/examples/c/classify.c" -o "$work/c_classify" \
  $(pkg-config --cflags --libs tinycoral) -Wl,-rpath,"$(pkg-config --variable=libdir tinycoral)"
"$work/c_classify" "$model" "$image" sim | tee "$work/c.out"
[ "$(cut -d' ' -f1 "$work/c.out")" = "$expected" ]

site=$(find "$prefix" -type d -path '*dist-packages/tinycoral' | head -n 1)
if [ -n "$site" ]; then
  echo "== examples/python/classify.py with the installed package"
  PYTHONPATH=$(dirname "$site") /usr/bin/python3 "$source/examples/python/classify.py" \
    "$model" "$labels" "$image" sim | tee "$work/py.out"
  [ "$(head -n 1 "$work/py.out" | cut -d' ' -f1)" = "$expected" ]
  echo "== examples/python/classify_image.py (pycoral's example, imports changed)"
  PYTHONPATH=$(dirname "$site") /usr/bin/python3 "$source/examples/python/classify_image.py" \
    -m "$model@sim" -l "$labels" -i "$image" -k 1 -c 1 | tee "$work/pycoral.out"
  # PIL resizes here (Lanczos), not as the CLI does: the same animal, not necessarily the same class.
  tail -n 1 "$work/pycoral.out" | grep -q 'cat: [0-9.]*$'
else
  echo "(no Python package installed: built without python3-pybind11)"
fi
echo "all consumers agree"
