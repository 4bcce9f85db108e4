#!/usr/bin/env bash
# Installs what tinycoral needs to build, test and fuzz on Debian 12 (run as root). Idempotent.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git python3
  libusb-1.0-0-dev flatbuffers-compiler libflatbuffers-dev
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev libcpp-httplib-dev nlohmann-json3-dev
  libstb-dev umockdev libumockdev-dev
  clang libclang-rt-14-dev clang-format lld
  python3-dev python3-pybind11 pybind11-dev python3-numpy python3-pytest python3-pil
  chromium chromium-driver python3-selenium
  qemu-user g++-aarch64-linux-gnu
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "setup: all build dependencies present"
