#!/usr/bin/env bash
# Runs one libFuzzer target from its seeds (tests/data/fuzz/NAME) for SECONDS and prints its last
# lines in one piece, so that fuzzers run side by side do not interleave (scripts/test.sh).
# Usage: scripts/fuzz_one.sh FUZZ_BUILD_DIR SECONDS fuzz/NAME.cpp
# FUZZ_SEED (default 1) fixes libFuzzer's random choices, so that CI explores the same inputs for
# the same code and a red run names a change, not a lucky draw; FUZZ_SEED=0 draws a new seed (for
# the longer hunts that look for new holes).
set -euo pipefail
dir=$1 seconds=$2
name=$(basename "$3" .cpp)
work=$(mktemp -d) log=$(mktemp)
trap 'rm -rf "$work" "$log"' EXIT
seeds=tests/data/fuzz/$name
[ -d "$seeds" ] && cp -r "$seeds"/. "$work"/
if ! "$dir/$name" -seed="${FUZZ_SEED:-1}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len=65536 \
  -print_final_stats=1 "$work" >"$log" 2>&1; then
  { echo "--- $name"; tail -n 60 "$log"; echo "fuzzer $name found a problem"; } >&2
  exit 255  # makes xargs stop starting others
fi
{ echo "--- $name"; tail -n 3 "$log"; }
