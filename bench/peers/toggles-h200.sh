#!/usr/bin/env bash
# Dawn device toggles one by one on the same file (issue: measure before relying on one):
# `wgrt bench` pp512 + tg128 at depth 0 per toggle setting, with GPU clocks sampled alongside.
# For one device call after bench/peers/pack.sh (carry .carry-peers), like run-h200.sh.
#   OUT (results), PEER_WORK (model files), PRESET (default llama-3.2-1b), TYPE (default q4_0),
#   TOGGLE_SETS (default: none, each toggle alone, all three), PROFILE_DEPTHS (default 0,4096)
set -uo pipefail
default_out=/tmp/wgrt-toggles-out
source "$(dirname "${BASH_SOURCE[0]}")/device-common.sh"
preset=${PRESET:-llama-3.2-1b}
type=${TYPE:-q4_0}
wgrt_make_model --preset "$preset" --type f16 --vocab-from "$work/vocab.gguf" -o "$work/f16.gguf" >/dev/null 2>&1 || exit 1
"$peer/peer_quantize" "$work/f16.gguf" "$work/m.gguf" "$type" >/dev/null 2>&1 || exit 1
rm -f "$work/f16.gguf"
command -v nvidia-smi >/dev/null &&
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,utilization.gpu --format=csv -lms 250 >"$out/clocks.csv" 2>&1 &
smi=$!
read -r -a sets <<<"${TOGGLE_SETS:-none disable_robustness disable_workgroup_init skip_validation disable_robustness,disable_workgroup_init,skip_validation}"
for t in "${sets[@]}"; do
  tog=$t; [ "$t" = none ] && tog=
  echo "== toggles: $t"
  WGRT_TOGGLES=$tog wgrt bench -m "$work/m.gguf" -p 512 -n 128 -d 0 -r 3 -o md 2>/dev/null | tail -2
done
kill $smi 2>/dev/null
echo "== profile (no toggles)"
wgrt bench -m "$work/m.gguf" -p 512 -n 128 -d "${PROFILE_DEPTHS:-0,4096}" -r 2 -o md --profile 2>&1 | grep -v "repetition\|warm-up\|^| ---"
awk -F', ' 'NR > 1 {print $2, $3, $4}' "$out/clocks.csv" | sort | uniq -c | sort -rn | head -8
