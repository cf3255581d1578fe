#!/usr/bin/env bash
# `wgrt bench` under several environment settings (the WGRT_* switches that exist to measure),
# alternated round by round, and llama.cpp without matrix cores on the same tests, in ONE device
# call after bench/peers/pack.sh (carry .carry-peers); files written by llama.cpp's quantizer
# (as run-h200.sh). Rows go to stdout and $OUT/variants.md as they come.
#   PRESETS   shapes (default llama-3.2-1b)        TYPES  quantizations (default q4_0)
#   TESTS     wgrt bench / peer_bench flags (default "-p 512 -n 0 -d 4096 -r 2")
#   VARIANTS  space-separated settings, each VAR=VALUE[,VAR=VALUE...] or "default" (none);
#             e.g. "default WGRT_PREFILL_QREG=0 WGRT_GEMM_SPLIT_N=0"
#   ROUNDS    times each variant runs, alternated (default 2)
#   PEER=0    no llama.cpp rows; OUT, PEER_WORK as in run-h200.sh
#   PEER_SMALL=1  the tiny shape and short tests (to check the script on lavapipe)
set -uo pipefail
default_out=/tmp/wgrt-variants-out
source "$(dirname "${BASH_SOURCE[0]}")/device-common.sh"
md="$out/variants.md"
: >"$md"
read -r -a presets <<<"${PRESETS:-llama-3.2-1b}"
read -r -a tests <<<"${TESTS:--p 512 -n 0 -d 4096 -r 2}"
if [ -n "${PEER_SMALL:-}" ]; then
  presets=(tiny) tests=(-p 32 -n 0 -d 32 -r 2)
  export GGML_VK_VISIBLE_DEVICES=${GGML_VK_VISIBLE_DEVICES:-0}
fi
read -r -a variants <<<"${VARIANTS:-default}"
row() { echo "$*" | tee -a "$md"; }

for preset in "${presets[@]}"; do
  wgrt_make_model --preset "$preset" --type f16 --vocab-from "$work/vocab.gguf" -o "$work/f16.gguf" >/dev/null 2>&1 || exit 1
  for type in ${TYPES:-q4_0}; do
    "$peer/peer_quantize" "$work/f16.gguf" "$work/$type.gguf" "$type" >/dev/null 2>&1 || exit 1
    for round in $(seq "${ROUNDS:-2}"); do
      for v in "${variants[@]}"; do
        settings=()
        [ "$v" = default ] || IFS=, read -r -a settings <<<"$v"
        env "${settings[@]}" wgrt bench -m "$work/$type.gguf" "${tests[@]}" -o md 2>"$out/last-wgrt.log" |
          grep '^| ' | grep -v -e '---' -e '^| model' | cut -d'|' -f2,7,8 |
          while read -r line; do row "| $preset $type | $v | $round |$line |"; done
      done
      if [ "${PEER:-1}" != 0 ]; then
        env GGML_VK_DISABLE_COOPMAT=1 GGML_VK_DISABLE_COOPMAT2=1 "$peer/peer_bench" -m "$work/$type.gguf" "${tests[@]}" \
          -o jsonl 2>"$out/last-peer.log" |
          sed -E 's/.*"n_prompt": ([0-9]+), "n_gen": ([0-9]+), "n_depth": ([0-9]+).*"avg_ts": ([0-9.]+), "stddev_ts": ([0-9.]+).*/p\1 n\2 @ d\3 | \4 ± \5/' |
          while read -r line; do row "| $preset $type | llama.cpp no coopmat | $round | $line |"; done
      fi
    done
    rm -f "$work/$type.gguf"
  done
  rm -f "$work/f16.gguf"
done
