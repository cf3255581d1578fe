#!/usr/bin/env bash
# wgrt against llama.cpp's Vulkan backend on the same GGUF files, in ONE device call, and one
# table of the results (bench/peers/README.md says how to run it).
#
# For each shape (Llama-3.2-1B, Llama-3.1-8B; random weights, llama3 vocabulary): write the
# F16 file once (wgrt_make_model, every core), and from it, with llama.cpp's own quantizer
# (peer_quantize), the Q4_0 file, then the Q4_K_M file; run on each
#   wgrt bench  -p 512 -n 128 -d 0,4096 -r 3 -o jsonl --parallel 1,8
#   peer_bench  the same tests, matrix cores on, then off (GGML_VK_DISABLE_COOPMAT{,2}=1)
# and finally write $OUT/table.md (bench/peers/table.py). Everything that comes back goes to
# $OUT (rows, logs, per-step times in steps.tsv); the model files stay in $PEER_WORK.
#
# Environment:
#   OUT            where results go (the device tool sets it; default /tmp/wgrt-peers-out)
#   WGRT_CARRY     the folder bench/peers/pack.sh filled (default .carry-peers)
#   PEER_WORK      model files (default /tmp/wgrt-peers: ~21 GB at the peak for the 8B shape)
#   PEER_BUDGET_S  seconds before remaining steps are skipped (default 540: 9 minutes)
#   PEER_PRESETS   shapes to run (default "llama-3.2-1b llama-3.1-8b"); PEER_TYPES likewise
#                  (default "q4_0 q4_k_m"; peer_quantize.cpp kTypes lists the others)
#   PEER_PARALLEL  wgrt's batched tg rows (`--parallel`, default "1,8"; empty: none): N sequences
#                  decoding together on one graph, in a table of their own (llama.cpp has none)
#   WGRT_EXTRA     more `wgrt bench` flags, e.g. "--profile" (its report lands in the step's log)
#   PEER_CUDA=1    llama.cpp's CUDA backend too, built here first (bench/peers/cuda-build.sh,
#                  ~260 s; pack with PEER_CUDA=1): its rows beside the Vulkan ones
#   PEER_RUNS      which runs to make (default "wgrt peer peer-nocm peer-cuda")
#   PEER_SMALL=1   the tiny shape and tests -p 32 -n 8 -d 0,64 -r 2, to check the script on
#                  lavapipe (also set VK_DRIVER_FILES to lavapipe's ICD there)
set -uo pipefail
default_out=/tmp/wgrt-peers-out
source "$(dirname "${BASH_SOURCE[0]}")/device-common.sh"
budget=${PEER_BUDGET_S:-540}
: >"$out/steps.tsv"
: >"$out/files.tsv"
start=$SECONDS

if [ -n "${PEER_SMALL:-}" ]; then
  presets=(tiny)
  tests=(-p 32 -n 8 -d 0,64 -r 2)
  export GGML_VK_VISIBLE_DEVICES=${GGML_VK_VISIBLE_DEVICES:-0}  # llama.cpp skips CPU devices unless named
else
  read -r -a presets <<<"${PEER_PRESETS:-llama-3.2-1b llama-3.1-8b}"
  tests=(-p 512 -n 128 -d 0,4096 -r 3)
fi

# PEER_RUNS: which of wgrt, peer, peer-nocm, peer-cuda run (default all), e.g. the CUDA rows
# alone for files whose other rows an earlier call measured.
wants() { [[ " ${PEER_RUNS:-wgrt peer peer-nocm peer-cuda} " == *" $1 "* ]]; }

log() { echo "[$((SECONDS - start)) s] $*" | tee -a "$out/log.txt" >&2; }

# step NAME STDOUT_FILE CMD...: runs CMD with what is left of the budget, stderr to
# $out/NAME.log, and records "NAME rc seconds" in steps.tsv; skipped once the budget is spent.
step() {
  local name=$1 stdout=$2
  shift 2
  local left=$((budget - (SECONDS - start)))
  if [ "$left" -le 5 ]; then
    log "$name: skipped (the ${budget} s budget is spent)"
    printf '%s\tskipped\t0\n' "$name" >>"$out/steps.tsv"
    return 1
  fi
  local t0=$SECONDS rc=0
  log "$name: $*"
  timeout "$left" "$@" >"$stdout" 2>"$out/$name.log" || rc=$?
  printf '%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - t0))" >>"$out/steps.tsv"
  log "$name: rc $rc in $((SECONDS - t0)) s"
  [ "$rc" -eq 0 ] || tail -5 "$out/$name.log" >&2
  return "$rc"
}

{
  head -1 "$WGRT_CARRY/MANIFEST"
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu --format=csv
  wgrt info | head -6
  df -h "$work" | tail -1
  echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) threads"
} >"$out/machine.txt" 2>&1
log "ready: $(head -1 "$out/machine.txt")"

cuda=/tmp/wgrt-peer-cuda
# A warm machine keeps /tmp between calls: a second call (e.g. the 8B shape alone) reuses the build.
if [ -n "${PEER_CUDA:-}" ] && [ ! -x "$cuda/peer_bench" ]; then
  step cuda-build "$out/cuda-build.out" bash bench/peers/cuda-build.sh "$cuda"
fi

for preset in "${presets[@]}"; do
  f16="$work/$preset-f16.gguf"
  step "$preset-make-f16" "$out/$preset-make-f16.out" \
    wgrt_make_model --preset "$preset" --type f16 --vocab-from "$work/vocab.gguf" -o "$f16" || continue
  # Q4_0 fully measured before Q4_K_M is even written, so a run cut short keeps whole rows.
  read -r -a types <<<"${PEER_TYPES:-q4_0 q4_k_m}"
  read -r -a extra <<<"${WGRT_EXTRA:-}"
  parallel=${PEER_PARALLEL-1,8}
  [ -n "$parallel" ] && extra+=(--parallel "$parallel")
  for q in "${types[@]}"; do
    name="$preset-$q"
    file="$work/$name.gguf"
    step "$name-quantize" "$out/$name-quantize.out" "$peer/peer_quantize" "$f16" "$file" "$q" || continue
    printf '%s\t%s\n' "$name" "$(stat -c %s "$file")" >>"$out/files.tsv"
    wants wgrt && step "$name.wgrt" "$out/$name.wgrt.jsonl" wgrt bench -m "$file" "${tests[@]}" -o jsonl "${extra[@]}"
    wants peer && step "$name.peer" "$out/$name.peer.jsonl" "$peer/peer_bench" -m "$file" "${tests[@]}" -o jsonl
    wants peer-nocm && step "$name.peer-nocm" "$out/$name.peer-nocm.jsonl" \
      env GGML_VK_DISABLE_COOPMAT=1 GGML_VK_DISABLE_COOPMAT2=1 "$peer/peer_bench" -m "$file" "${tests[@]}" -o jsonl
    # libggml's own dependencies (libggml-cpu, libggml-cuda) are found through the library path.
    [ -x "$cuda/peer_bench" ] && wants peer-cuda &&
      step "$name.peer-cuda" "$out/$name.peer-cuda.jsonl" \
        env LD_LIBRARY_PATH="$cuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$cuda/peer_bench" -m "$file" "${tests[@]}" -o jsonl
    rm -f "$file"
  done
  rm -f "$f16"
done

python3 bench/peers/table.py "$out" >"$out/table.md" && cat "$out/table.md"
log "done"
