#!/usr/bin/env bash
# The measurements the performance log (now docs/perf/) listed as pending, in ONE device call after
#   bench/peers/pack.sh build bench/wgrt_lab_attention      (carry .carry-peers)
# each an A/B alternated in the same run:
#   1. decode attention kernels: wgrt_lab_attention, decode_sg against decode_vec (f16 caches,
#      head sizes 64 and 128, contexts 128..8192, split caps 0/64/128), then
#      WGRT_DECODE_KERNEL=sg|vec wgrt bench tg128 at depths 0 and 4096 on a 1B Q4_0 file written
#      by llama.cpp's quantizer (as run-h200.sh);
#   2. qwen2 with RoPE in the q|k|v gemv: WGRT_GEMV_ROPE=0|1 wgrt bench tg128 on a qwen2.5-0.5b
#      Q8_0 file (wgrt_make_model).
# Environment: OUT (results; the device tool sets it), PEER_WORK (model files), PEER_SMALL=1
# (the tiny llama shape for both parts and short tests, to check the script on lavapipe).
set -uo pipefail
default_out=/tmp/wgrt-pending-out
source "$(dirname "${BASH_SOURCE[0]}")/device-common.sh"
if [ -n "${PEER_SMALL:-}" ]; then
  llama=tiny qwen=tiny tg=(-p 0 -n 8 -d 0,32 -r 2) lab=(--head-dims 64 --contexts 64,256 --max-chunks 0,8)
  export GGML_VK_VISIBLE_DEVICES=${GGML_VK_VISIBLE_DEVICES:-0}
else
  llama=llama-3.2-1b qwen=qwen2.5-0.5b tg=(-p 0 -n 128 -d 0,4096 -r 3)
  lab=(--head-dims 64,128 --contexts 128,1024,4096,8192 --max-chunks 0,64,128)
fi
{
  head -1 "$WGRT_CARRY/MANIFEST"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  wgrt info | head -4
} >"$out/machine.txt" 2>&1
cat "$out/machine.txt"

# alternate VAR FILE LABEL VALUE...: `wgrt bench` on FILE once per value, twice round, each
# table's header and rows into $out/LABEL.md.
alternate() {
  local var=$1 file=$2 label=$3
  shift 3
  for round in 1 2; do
    for v in "$@"; do
      echo "== $label: $var=$v (round $round)"
      env "$var=$v" wgrt bench -m "$file" "${tg[@]}" -o md 2>>"$out/$label.log" | grep '^| ' | grep -v -- '---'
    done
  done | tee "$out/$label.md"
}

echo "== 1. decode attention: the lab"
peaks=()
[ -f bench/peaks-h200.json ] && [ -z "${PEER_SMALL:-}" ] && peaks=(--peaks bench/peaks-h200.json)
wgrt_lab_attention "${peaks[@]}" --routes decode --caches f16 --decode-kernels sg,vec "${lab[@]}" \
  2>"$out/lab_attention.log" | tee "$out/lab_attention.md"
wgrt_make_model --preset "$llama" --type f16 --vocab-from "$work/vocab.gguf" -o "$work/f16.gguf" >/dev/null 2>&1 || exit 1
"$peer/peer_quantize" "$work/f16.gguf" "$work/llama-q4_0.gguf" q4_0 >/dev/null 2>&1 || exit 1
rm -f "$work/f16.gguf"
alternate WGRT_DECODE_KERNEL "$work/llama-q4_0.gguf" decode_kernel sg vec
rm -f "$work/llama-q4_0.gguf"

echo "== 2. qwen2: RoPE in the q|k|v gemv"
wgrt_make_model --preset "$qwen" --type q8_0 --vocab-from "$work/vocab.gguf" -o "$work/qwen-q8_0.gguf" >/dev/null 2>&1 ||
  exit 1
alternate WGRT_GEMV_ROPE "$work/qwen-q8_0.gguf" gemv_rope 0 1
rm -f "$work/qwen-q8_0.gguf"
echo "== done"
