#!/usr/bin/env bash
# Continuous batching on the H200, in ONE device call (issue: 8 streams >= 4x one), after
# `bench/peers/pack.sh build` (carry .carry-peers):
#   1. the 1B file written by llama.cpp's quantizer (as run-h200.sh);
#   2. `wgrt bench -p 0 -n 128 -d 0,4096 -r 3 --parallel 1,2,4,8`: N sequences decoding together
#      on one graph, each step read back before the next (as the server steps its slots);
#   3. `wgrt serve --parallel 8` on loopback and bench/serve_load.py: 1 client then 8 clients of
#      greedy 256-token completions, twice over (completion tokens over wall time; prefill and
#      HTTP included).
# Results in $OUT (bench.jsonl, serve.jsonl, logs); the summary on stdout.
# Environment: OUT, PEER_WORK, SERVE_TYPE (default q4_0), PEER_SMALL=1 (the tiny shape and
# short runs, to check the script on lavapipe).
set -uo pipefail
default_out=/tmp/wgrt-serve-out
source "$(dirname "${BASH_SOURCE[0]}")/device-common.sh"
type=${SERVE_TYPE:-q4_0}
if [ -n "${PEER_SMALL:-}" ]; then
  preset=tiny tests=(-p 0 -n 8 -d 0,64 -r 1 --parallel 1,4) tokens=16 reqs1=2 reqs8=1
  export GGML_VK_VISIBLE_DEVICES=${GGML_VK_VISIBLE_DEVICES:-0}
else
  preset=llama-3.2-1b tests=(-p 0 -n 128 -d 0,4096 -r 3 --parallel 1,2,4,8) tokens=256 reqs1=8 reqs8=4
fi
file="$work/$preset-$type.gguf"
wgrt_make_model --preset "$preset" --type f16 --vocab-from "$work/vocab.gguf" -o "$work/f16.gguf" >/dev/null 2>&1 &&
  "$peer/peer_quantize" "$work/f16.gguf" "$file" "$type" >"$out/quantize.log" 2>&1 || { echo "serve-h200: no model file" >&2; exit 1; }
rm -f "$work/f16.gguf"

echo "== wgrt bench ${tests[*]} ($preset $type)"
wgrt bench -m "$file" "${tests[@]}" -o jsonl >"$out/bench.jsonl" 2>"$out/bench.log" || { tail -5 "$out/bench.log"; exit 1; }
python3 - "$out/bench.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    kind = "batched" if r.get("batched") else "single"
    print(f"tg{r['n_gen']} x{r.get('n_parallel', 1)} @ d{r['n_depth']} ({kind}): {r['avg_ts']:.1f} +- {r['stddev_ts']:.1f} tok/s")
PY

port=18080
wgrt serve -m "$file" --parallel 8 -c 1024 --port "$port" >"$out/serve.log" 2>&1 &
pid=$!
for _ in $(seq 300); do
  curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
  python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=1)" 2>/dev/null && break
  sleep 0.2
done
echo "== wgrt serve --parallel 8: bench/serve_load.py, $tokens-token greedy completions"
rc=0
: >"$out/serve.jsonl"
for round in 1 2; do
  for c in 1 8; do
    reqs=$([ "$c" = 1 ] && echo "$reqs1" || echo "$reqs8")
    python3 bench/serve_load.py --url "http://127.0.0.1:$port" --clients "$c" --requests "$reqs" --tokens "$tokens" \
      | tee -a "$out/serve.jsonl" || rc=1
  done
done
kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
exit $rc
