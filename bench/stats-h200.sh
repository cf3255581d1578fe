#!/usr/bin/env bash
# What the driver compiled each kernel of a model's steps to, and where a decode step goes, in
# ONE device call after
#   tools/device-pack.sh build wgrt wgrt_make_model bench/wgrt_shader_stats bench/wgrt_lab_linear
#   bench/wgrt_lab_attention                                                    (carry .carry)
# For each shape in STATS_PRESETS (default llama-3.2-1b llama-3.1-8b: Q4_0 weights, Q6_K
# embedding and output as llama.cpp's Q4_0 files have, written by wgrt_make_model):
#   1. bench/shader-stats.sh over a short `wgrt bench` (prefill and decode): every pipeline's
#      registers per thread, shared memory and spills as the driver reports them;
#   2. `wgrt bench -p 0 -n 64 -d 0,4096 -r 2 --profile`: the decode step by kernel.
# Then STATS_LAB (a command line, optional) runs as given, e.g. a lab sweep.
# Results: $OUT/stats.tar.xz (everything) and a summary on stdout.
# Environment: OUT, STATS_PRESETS, STATS_TESTS (the profiled bench's tests), STATS_LAB,
# STATS_WORK (model files, default /tmp/wgrt-stats).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
source tools/device-env.sh >/dev/null || exit 1
out=${OUT:-/tmp/wgrt-stats-out}
work=${STATS_WORK:-/tmp/wgrt-stats}
res=$(mktemp -d)
mkdir -p "$out" "$work"
read -r -a tests <<<"${STATS_TESTS:--p 0 -n 64 -d 0,4096 -r 2}"
mark() { echo "== $* ($(date +%T))" | tee -a "$res/marks.txt"; }

for preset in ${STATS_PRESETS:-llama-3.2-1b llama-3.1-8b}; do
  model="$work/$preset-q4_0.gguf"
  mark "$preset: make"
  wgrt_make_model --preset "$preset" --type q4_0 --embd-type q6_k -o "$model" >"$res/$preset-make.log" 2>&1 || {
    tail -5 "$res/$preset-make.log"; continue; }
  mark "$preset: shader stats"
  bash bench/shader-stats.sh "$res/$preset-stats" wgrt bench -m "$model" -p 64 -n 4 -r 1 --no-warmup >/dev/null 2>&1 ||
    echo "$preset: shader-stats failed (see $preset-stats/command.log)"
  cut -c1-400 "$res/$preset-stats/stats.tsv" 2>/dev/null
  mark "$preset: profile"
  wgrt bench -m "$model" "${tests[@]}" --profile -o md >"$res/$preset-bench.md" 2>"$res/$preset-bench.log"
  grep '^| ' "$res/$preset-bench.md" | grep -v -- '---'
  rm -f "$model"
done
if [ -n "${STATS_LAB:-}" ]; then
  mark "lab: $STATS_LAB"
  bash -c "$STATS_LAB" >"$res/lab.md" 2>"$res/lab.log"
  cat "$res/lab.md"
fi
mark done
tar -C "$res" -cf - . | xz -6 >"$out/stats.tar.xz"
rm -rf "$res"
