#!/usr/bin/env bash
# The mixture-of-experts shape against llama.cpp's Vulkan backend, in ONE device call, after
#   bench/peers/pack.sh build bench/wgrt_lab_attention           (carry .carry-peers)
# (issue 41: MoE decode >= 1.5x llama.cpp's on the same file):
#   1. wgrt_make_model --preset qwen3-30b-a3b --type q4_k (16.7 GiB of random weights, llama3
#      vocabulary; wgrt_make_model's own Q4_K: both runtimes read the same file);
#   2. wgrt bench and peer_bench, -p 512 -n 128 -d 0,4096 -r 2, llama.cpp's twice (its tg128 varied
#      from 189 to 221 tok/s between calls on an H100);
#   3. wgrt bench --profile (decode, 16 steps): each family of nodes as the step runs it;
#   4. wgrt_lab_attention at the shape's heads (32 query, 4 KV, head dim 128, f16 caches).
# Results in $OUT (wgrt.md, peer-1.jsonl, peer-2.jsonl, profile.txt, lab.md, logs); the summary on
# stdout. About 6 minutes on an H100 (wgrt loads the file in ~80 s).
# Environment: OUT, PEER_WORK, MOE_PRESET (default qwen3-30b-a3b), MOE_TYPE (default q4_k),
# WGRT_EXTRA (more wgrt bench flags), PEER_SMALL=1 (the qwen2moe-tiny preset and short runs,
# to check the script on lavapipe).
set -uo pipefail
default_out=/tmp/wgrt-moe-out
source "$(dirname "${BASH_SOURCE[0]}")/device-common.sh"
preset=${MOE_PRESET:-qwen3-30b-a3b} type=${MOE_TYPE:-q4_k}
tests=(-p 512 -n 128 -d 0,4096 -r 2) profile=(-p 0 -n 16 -d 0 -r 1)
lab=(--head-dims 128 --kv-heads 4 --contexts 128,4096 --decode-kernels best,vec,sg)
if [ -n "${PEER_SMALL:-}" ]; then
  preset=qwen2moe-tiny type=q8_0 tests=(-p 32 -n 8 -d 0,64 -r 1) profile=(-p 0 -n 4 -d 0 -r 1)
  lab=(--head-dims 64 --kv-heads 4 --contexts 64 --decode-kernels best)
  export GGML_VK_VISIBLE_DEVICES=${GGML_VK_VISIBLE_DEVICES:-0}
fi
read -r -a extra <<<"${WGRT_EXTRA:-}"
{
  head -1 "$WGRT_CARRY/MANIFEST"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
} >"$out/machine.txt" 2>&1
cat "$out/machine.txt"
t0=$SECONDS
file="$work/moe-$preset-$type.gguf"
wgrt_make_model --preset "$preset" --type "$type" --vocab-from "$work/vocab.gguf" --threads "$(nproc)" -o "$file" \
  >"$out/make.log" 2>&1 || { tail -3 "$out/make.log"; exit 1; }
echo "== $preset $type made in $((SECONDS - t0)) s"
rc=0
echo "== wgrt bench ${tests[*]}"
wgrt bench -m "$file" "${tests[@]}" -o md "${extra[@]}" 2>"$out/wgrt.log" | tee "$out/wgrt.md" || rc=1
for round in 1 2; do
  echo "== llama.cpp, round $round"
  "$peer/peer_bench" -m "$file" "${tests[@]}" -o jsonl >"$out/peer-$round.jsonl" 2>"$out/peer-$round.log" || rc=1
  python3 - "$out/peer-$round.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    test = f"pp{r['n_prompt']}" if r["n_prompt"] else f"tg{r['n_gen']}"
    print(f"{test} @ d{r['n_depth']}: {r['avg_ts']:.2f} tok/s (samples {', '.join(f'{s:.1f}' for s in r['samples_ts'])})")
PY
done
echo "== wgrt bench --profile ${profile[*]}"
wgrt bench -m "$file" "${profile[@]}" --profile "${extra[@]}" >"$out/profile.txt" 2>&1 || rc=1
sed -n '/^dispatches per token/,/^| logits/p' "$out/profile.txt"
rm -f "$file"
echo "== wgrt_lab_attention ${lab[*]}"
wgrt_lab_attention --routes decode --caches f16 "${lab[@]}" 2>"$out/lab.log" | tee "$out/lab.md" || rc=1
echo "== done in $((SECONDS - t0)) s"
exit $rc
