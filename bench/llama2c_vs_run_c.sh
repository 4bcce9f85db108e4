#!/usr/bin/env bash
# tok/s of `tinycoral generate` (float32 and --int8) against llama2.c's run.c on the same
# checkpoint, one thread each, runs interleaved so that a busy machine slows both alike; prints the
# median of each. run.c is built from llama2.c's source when it is available (LLAMA2C_SRC: a
# checkout, or a bare git directory such as the search tool's mirror); never vendored. Without it
# only our numbers are printed. Greedy runs use the pruned classifier (docs/llm.md "Speed"),
# sampled runs compute every logit.
#   bench/llama2c_vs_run_c.sh [CHECKPOINT] [ROUNDS]   (default: make_checkpoint.py rand15M, 5)
set -euo pipefail
cd "$(dirname "$0")/.."
tc=${TINYCORAL_CLI:-build/tools/tinycoral}
data=${TINYCORAL_TESTDATA:-../shared/testdata}/llama2c
rounds=${2:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ckpt=${1:-}
if [ -z "$ckpt" ]; then
  ckpt=$work/rand15M.bin
  python3 "$data/make_checkpoint.py" "$ckpt" rand15M
fi
src=${LLAMA2C_SRC:-/work/.mirror/karpathy+llama2.c/repo}
runc=""
if [ -f "$src/run.c" ]; then
  cp "$src/run.c" "$work/run.c"
elif git --git-dir="$src" show HEAD:run.c >"$work/run.c" 2>/dev/null; then
  :
else
  echo "(no llama2.c source at $src: set LLAMA2C_SRC to compare with run.c)"
fi
if [ -s "$work/run.c" ]; then
  gcc -Ofast -march=native "$work/run.c" -o "$work/run" -lm
  runc=$work/run
fi
args=(-z "$data/tokenizer.bin" -n 256 -t 0 -i "Once upon a time")
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
: >"$work/ours" ; : >"$work/int8" ; : >"$work/runc" ; : >"$work/ours_t" ; : >"$work/runc_t"
sampled=(-z "$data/tokenizer.bin" -n 256 -t 1 -p 0.9 -s 1 -i "Once upon a time")
for _ in $(seq "$rounds"); do
  "$tc" generate "$ckpt" "${sampled[@]}" --device cpu --threads 1 2>&1 >/dev/null |
    sed -n 's/.* \([0-9.]*\) tok\/s.*/\1/p' >>"$work/ours_t"
  if [ -n "$runc" ]; then
    "$runc" "$ckpt" "${sampled[@]}" 2>&1 >/dev/null | sed -n 's/achieved tok\/s: //p' >>"$work/runc_t"
  fi
  "$tc" generate "$ckpt" "${args[@]}" --device cpu --threads 1 2>&1 >/dev/null |
    sed -n 's/.* \([0-9.]*\) tok\/s.*/\1/p' >>"$work/ours"
  "$tc" generate "$ckpt" "${args[@]}" --device cpu --threads 1 --int8 2>&1 >/dev/null |
    sed -n 's/.* \([0-9.]*\) tok\/s.*/\1/p' >>"$work/int8"
  if [ -n "$runc" ]; then
    "$runc" "$ckpt" "${args[@]}" 2>&1 >/dev/null | sed -n 's/achieved tok\/s: //p' >>"$work/runc"
  fi
done
echo "greedy (-t 0), 256 positions:"
echo "tinycoral float32, 1 thread: $(median <"$work/ours") tok/s (median of $rounds)"
echo "tinycoral int8,    1 thread: $(median <"$work/int8") tok/s"
if [ -n "$runc" ]; then
  r=$(median <"$work/runc")
  o=$(median <"$work/ours")
  echo "run.c (gcc -Ofast -march=native): $r tok/s; float32 speed-up $(echo "$o $r" | awk '{printf "%.2f", $1/$2}')x"
fi
echo "sampled (-t 1 -p 0.9), every logit computed: tinycoral $(median <"$work/ours_t") tok/s"
[ -n "$runc" ] && echo "  run.c $(median <"$work/runc_t") tok/s"
for t in 2 4; do
  v=$("$tc" generate "$ckpt" "${args[@]}" --device cpu --threads $t 2>&1 >/dev/null |
    sed -n 's/.* \([0-9.]*\) tok\/s.*/\1/p')
  echo "tinycoral float32, $t threads: $v tok/s"
done
# The chip path (step a, and step b's fused FFN): its stick time is modeled from the simulator's
# clock (deterministic: one run of 16 positions says it all); the wall time is the simulation's.
"$tc" generate "$ckpt" -z "$data/tokenizer.bin" -n 16 -t 0 -i "Once upon a time" --device sim \
  --threads 1 --json | python3 -c '
import json, sys
j = json.load(sys.stdin); m = j["chip"]["modeled"]
print("chip path (--device sim): modeled stick %.1f tok/s (%.3f ms per token: compute %.3f, USB %.3f + %.3f, per run %.3f); simulated wall %.1f tok/s"
      % (m["stick_tokens_per_second"], m["stick_ms_per_token"], m["compute_ms_per_token"],
         m["to_device_ms_per_token"], m["from_device_ms_per_token"], m["per_run_ms_per_token"],
         j["tokens_per_second"]))'
