#!/usr/bin/env bash
# The CPU interpreter's kernels on aarch64: cross-compiles src/host/qgemm*.cpp with
# tests/host/simd_kernels_check.cpp (nothing else: seconds, not a whole cross build) and runs the
# check under qemu-user twice, on a CPU with the dot product (qemu's default, "max": portable,
# neon and neon-dotprod) and on a Cortex-A53 without it (portable and neon; the Raspberry Pi 3 and
# 4 class). Every level must equal the plain loops. Exit 77 (skipped) without Debian's
# g++-aarch64-linux-gnu and qemu-user (scripts/setup.sh installs them).
# Usage: cross_check.sh SOURCE_DIR
set -euo pipefail
source=$1
cxx=aarch64-linux-gnu-g++
sysroot=/usr/aarch64-linux-gnu
for tool in "$cxx" qemu-aarch64; do
  if ! command -v "$tool" >/dev/null; then
    echo "SKIP: $tool not found (Debian: g++-aarch64-linux-gnu, qemu-user; scripts/setup.sh)"
    exit 77
  fi
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
launcher=$(command -v ccache || true)
objects=()
for src in src/host/qgemm.cpp src/host/qgemm_neon.cpp src/host/qgemm_x86.cpp \
  tests/host/simd_kernels_check.cpp; do
  obj=$work/$(basename "$src" .cpp).o
  $launcher "$cxx" -std=c++20 -O2 -Wall -Wextra -Wpedantic -Werror -I"$source/src" -c "$source/$src" -o "$obj"
  objects+=("$obj")
done
"$cxx" "${objects[@]}" -o "$work/check"
echo "== aarch64 with the dot product (qemu -cpu max)"
qemu-aarch64 -cpu max -L "$sysroot" "$work/check" | tee "$work/max.out"
grep -q '^neon-dotprod: ' "$work/max.out"
echo "== aarch64 without it (qemu -cpu cortex-a53)"
qemu-aarch64 -cpu cortex-a53 -L "$sysroot" "$work/check" | tee "$work/a53.out"
grep -q '^neon: ' "$work/a53.out" && ! grep -q '^neon-dotprod' "$work/a53.out"
