#!/usr/bin/env bash
# The web app under load for a minute (the suite's serve_load runs the same test for 12 s): 20
# loopback clients asking `tinycoral serve` for stories and classifications; prints the requests
# answered, the "busy, place N" events and the server's resident memory once a second.
#   bench/serve_load.sh [BUILD_DIR] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
exec /usr/bin/python3 tests/serve/load_test.py "$build/tools/tinycoral" "$PWD" "$build/tests/serve_artifacts" \
  --seconds "${2:-60}" --clients 20
