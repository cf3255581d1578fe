#!/usr/bin/env bash
# Where the time goes, in ONE device call after
#   bench/peers/pack.sh build bench/wgrt_lab_attention bench/wgrt_lab_linear   (carry .carry-peers)
#   1. `wgrt bench -p 512 -n 32 -d 0,4096 -r 3 --profile` on the 1B Q4_0 and Q4_K_M files written by
#      llama.cpp's quantizer (as run-h200.sh): per-kernel GPU time of prefill and decode;
#   2. the labs on the same shapes: wgrt_lab_linear (q4, q4k, q6k; M = 1 and 512; the 1B layer
#      shapes) and wgrt_lab_attention (decode_vec and decode_sg, f16, 512 and 4096 keys, split
#      caps 0/32; prefill), each timing after a second of spin-up (lab.h spin_up);
#   3. the SM and memory clocks every 100 ms throughout (clocks.csv; nvidia-smi), to tell a kernel's
#      speed from a GPU that has not clocked up.
# Everything lands in $OUT/profile.tar.xz (a device call returns few files) and the summary on stdout.
# Environment: OUT, PEER_WORK (model files), PROFILE_TYPES (default "q4_0 q4_k_m"), PROFILE_FORMATS
# (the lab's, default q4,q4k,q6k), PEER_SMALL=1 (the tiny shape, to check on lavapipe).
set -uo pipefail
default_out=/tmp/wgrt-profile-out
source "$(dirname "${BASH_SOURCE[0]}")/device-common.sh"
res=$(mktemp -d)
if [ -n "${PEER_SMALL:-}" ]; then
  preset=tiny tests=(-p 32 -n 4 -d 0,64 -r 1) shapes=256x256 attn=(--head-dims 64 --contexts 256)
  export GGML_VK_VISIBLE_DEVICES=${GGML_VK_VISIBLE_DEVICES:-0}
else
  preset=llama-3.2-1b tests=(-p 512 -n 32 -d 0,4096 -r 3) attn=(--head-dims 64,128 --contexts 512,4096)
  shapes=2048x3072,2048x2048,2048x16384,8192x2048,2048x128256
fi
clock_pid=
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,utilization.gpu --format=csv -lms 100 \
    >"$res/clocks.csv" 2>&1 &
  clock_pid=$!
fi
peaks=()
[ -f bench/peaks-h200.json ] && [ -z "${PEER_SMALL:-}" ] && peaks=(--peaks bench/peaks-h200.json)
mark() { echo "== $* ($(date +%T.%N | cut -c1-12))" | tee -a "$res/marks.txt"; }

mark "1. wgrt bench --profile"
wgrt_make_model --preset "$preset" --type f16 --vocab-from "$work/vocab.gguf" -o "$work/f16.gguf" >/dev/null 2>&1 || exit 1
for type in ${PROFILE_TYPES:-q4_0 q4_k_m}; do
  "$peer/peer_quantize" "$work/f16.gguf" "$work/$type.gguf" "$type" >/dev/null 2>&1 || exit 1
  mark "bench $type"
  wgrt bench -m "$work/$type.gguf" "${tests[@]}" --profile -o md >"$res/bench-$type.md" 2>"$res/bench-$type.log"
  grep '^| ' "$res/bench-$type.md" | grep -v -- '---'
  rm -f "$work/$type.gguf"
done
rm -f "$work/f16.gguf"

mark "2. wgrt_lab_linear"
wgrt_lab_linear "${peaks[@]}" --formats "${PROFILE_FORMATS:-q4,q4k,q6k}" --m 1,512 --shapes "$shapes" >"$res/lab_linear.md" 2>"$res/lab_linear.log"
cat "$res/lab_linear.md"
mark "3. wgrt_lab_attention"
wgrt_lab_attention "${peaks[@]}" --caches f16 --decode-kernels vec,sg --max-chunks 0,32 "${attn[@]}" >"$res/lab_attention.md" 2>"$res/lab_attention.log"
cat "$res/lab_attention.md"
mark "done"
[ -n "$clock_pid" ] && kill "$clock_pid"
tar -C "$res" -cf - . | xz -6 >"$out/profile.tar.xz"
rm -rf "$res"
