#!/usr/bin/env bash
# Prefill only, in ONE short device call after
#   bench/peers/pack.sh build bench/wgrt_lab_linear   (carry .carry-peers)
# on the 1B Q4_0 and Q4_K_M files written by llama.cpp's quantizer (as run-h200.sh):
#   wgrt bench -p 512 -n 0 -d 0 -r 3 (--profile) and llama.cpp's peer_bench, the same test
#   without matrix cores, alternated in the same run; then wgrt_lab_linear at M = 512 on the 1B
#   layer shapes (q4, q4k, q6k). Prints the rows; the logs land in $OUT/prefill.tar.xz.
# Environment: OUT, PEER_WORK (model files), PEER_SMALL=1 (the tiny shape, to check on lavapipe).
set -uo pipefail
default_out=/tmp/wgrt-prefill-out
source "$(dirname "${BASH_SOURCE[0]}")/device-common.sh"
res=$(mktemp -d)
if [ -n "${PEER_SMALL:-}" ]; then
  preset=tiny tests=(-p 32 -n 0 -d 0 -r 2) shapes=256x256
  export GGML_VK_VISIBLE_DEVICES=${GGML_VK_VISIBLE_DEVICES:-0}
else
  preset=llama-3.2-1b tests=(-p 512 -n 0 -d 0 -r 3) shapes=2048x3072,2048x2048,2048x16384,8192x2048
fi
peaks=()
[ -f bench/peaks-h200.json ] && [ -z "${PEER_SMALL:-}" ] && peaks=(--peaks bench/peaks-h200.json)

wgrt_make_model --preset "$preset" --type f16 --vocab-from "$work/vocab.gguf" -o "$work/f16.gguf" >/dev/null 2>&1 || exit 1
for type in q4_0 q4_k_m; do
  "$peer/peer_quantize" "$work/f16.gguf" "$work/$type.gguf" "$type" >/dev/null 2>&1 || exit 1
  for round in 1 2; do
    echo "== $type, round $round: wgrt, then llama.cpp without matrix cores"
    wgrt bench -m "$work/$type.gguf" "${tests[@]}" --profile -o md 2>"$res/wgrt-$type-$round.log" |
      grep '^| ' | grep -v -e '---' -e '^| model'
    env GGML_VK_DISABLE_COOPMAT=1 GGML_VK_DISABLE_COOPMAT2=1 "$peer/peer_bench" -m "$work/$type.gguf" \
      "${tests[@]}" -o jsonl 2>"$res/peer-$type-$round.log" | tee "$res/peer-$type-$round.jsonl" |
      sed -E 's/.*"model_type": "([^"]*)".*"n_prompt": ([0-9]+).*"avg_ts": ([0-9.]+), "stddev_ts": ([0-9.]+).*/| \1 | peer no coopmat | pp\2 | \3 ± \4 |/'
  done
  rm -f "$work/$type.gguf"
done
rm -f "$work/f16.gguf"
echo "== wgrt_lab_linear, M = 512"
wgrt_lab_linear "${peaks[@]}" --formats q4,q4k,q6k --m 512 --shapes "$shapes" 2>"$res/lab_linear.log" |
  tee "$res/lab_linear.md" | grep -e '^| fmt' -e ' ok ' -e 'MISMATCH'
tar -C "$res" -cf - . | xz -6 >"$out/prefill.tar.xz"
rm -rf "$res"
