#!/usr/bin/env bash
# Builds tinycoral and runs the whole test suite twice: an -O2 build without debug information
# (preset `tests`, build-tests/), then a clang build under AddressSanitizer + UBSan, which also
# runs each libFuzzer target for a short while (FUZZ_SECONDS, default 15). SKIP_ASAN=1 /
# SKIP_FUZZ=1 leave those parts out. Tests that need Google's test data use $TINYCORAL_TESTDATA,
# else ../shared/testdata, and skip without it.
# Usage: scripts/test.sh            (from the checkout; run scripts/setup.sh first)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-$(nproc)}
fuzz_seconds=${FUZZ_SECONDS:-15}
stage() { printf '\n=== %s (%s)\n' "$1" "$(date +%H:%M:%S)"; }

stage "format (clang-format, .clang-format)"
if command -v clang-format >/dev/null && git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files '*.cpp' '*.h' | xargs clang-format --dry-run -Werror
fi

# The first build is preset `tests` (build-tests/): RelWithDebInfo's -O2 without its debug
# information, which the tests do not need and which costs a third of the compile time.
stage "build (-O2, no debug info)"
cmake --preset tests >/dev/null
cmake --build build-tests -j "$jobs"
summary=$(mktemp)
run_ctest() {  # run_ctest BUILD_DIR TIMEOUT [CTEST ARGS]: runs ctest, keeps its counts
  local log; log=$(mktemp)
  local dir=$1 timeout=$2
  shift 2
  # ctest starts the tests it knows to be long first when it has their costs; a fresh build has
  # none, so it gets the tracked ones (tests of 2 s or more under either build, from a CI log),
  # and the longest no longer start last while the other core idles.
  mkdir -p "$dir/Testing/Temporary"
  [ -f "$dir/Testing/Temporary/CTestCostData.txt" ] ||
    cp tests/ctest_cost_data.txt "$dir/Testing/Temporary/CTestCostData.txt"
  ctest --test-dir "$dir" -j "$jobs" --output-on-failure --timeout "$timeout" "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local total failed skipped
  total=$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' "$log" | tail -n 1)
  failed=$(sed -n 's/.* \([0-9]*\) tests failed out of.*/\1/p' "$log" | tail -n 1)
  skipped=$(grep -c '(Skipped)' "$log" || true)
  echo "${total:-0} ${failed:-0} ${skipped:-0}" >>"$summary"
  rm -f "$log"
  return "$rc"
}
stage "tests"
run_ctest build-tests 600

if [ "${SKIP_ASAN:-0}" != 1 ]; then
  # One clang build with ASan + UBSan serves the second test run and the fuzzers.
  stage "build (clang, AddressSanitizer + UBSan, libFuzzer targets)"
  cmake --preset asan >/dev/null
  cmake --build build-asan -j "$jobs"
  stage "tests under AddressSanitizer + UBSan"
  # malloc_context_size=5: allocation and free stacks of 5 frames in a report (30 by default) take
  # 8% off the compiler's allocation-heavy tests; the error's own stack stays whole.
  # allocator_release_to_os_interval_ms=-1: freed memory is not handed back to the kernel every 5 s
  # (only to be faulted in again): 16% fewer page faults and ~15% less CPU in a whole-model compile
  # (MobileNet v1 0.5's test: 12.9 -> 10.6 s user + system, mean of 3); nothing is checked less
  # (the quarantine and every check are unchanged).
  asan=detect_leaks=1:abort_on_error=1:malloc_context_size=5:allocator_release_to_os_interval_ms=-1
  ASAN_OPTIONS=$asan UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 run_ctest build-asan 900
  if [ "${SKIP_FUZZ:-0}" != 1 ]; then
    # Each fuzzer runs on one core: $jobs of them at a time, each printing its lines when done.
    stage "fuzzers (${fuzz_seconds}s each, $jobs at a time)"
    ls fuzz/*_fuzz.cpp | xargs -n 1 -P "$jobs" scripts/fuzz_one.sh build-asan/fuzz "$fuzz_seconds" || {
      echo "a fuzzer found a problem (its output above)" >&2
      exit 1
    }
  fi
fi
stage "done"
awk '{t+=$1; f+=$2; s+=$3} END {printf "tests: %d passed, %d failed, %d skipped\n", t-f-s, f, s}' "$summary"
rm -f "$summary"
