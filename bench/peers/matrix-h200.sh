#!/usr/bin/env bash
# The matrix-core routes on the GPU, in ONE device call after
#   bench/peers/pack.sh build tests/wgrt_tests   (carry .carry-peers)
# 1. `wgrt info` (shader-f16, subgroups, the subgroup-matrix configurations Dawn offers);
# 2. the op suites on this GPU (MATRIX_TESTS, a gtest filter), where the gemm route runs on
#    matrix cores when the device has them (lavapipe has none: CI tests the int8 gemm);
# 2b. with MATRIX_LAB=1, wgrt_lab_linear at M = 512 (pack it: pack.sh build tests/wgrt_tests
#    bench/wgrt_lab_linear) on the 1B and 8B shapes, with the int8 gemm (WGRT_MMA=0) and the
#    matrix-core gemm at 64 and 128 rows a workgroup (WGRT_MMA_BM): its checks, then its timings;
# 3. on the 1B Q4_0 and Q4_K_M files written by llama.cpp's quantizer: `wgrt bench` with matrix
#    cores (WGRT_MMA=1) and without (WGRT_MMA=0), llama.cpp's peer_bench with its matrix cores
#    and without, the same tests (MATRIX_BENCH, default -p 512 -n 128 -d 0 -r 3);
# 4. `wgrt run --warmup -n 128` after a 2-token prompt, to compare with bench's tg128;
# 5. with PEER_CUDA=1 (pack with PEER_CUDA=1), llama.cpp's CUDA backend too, built here while the
#    suites run (bench/peers/cuda-build.sh), on the same files.
# The suites and the first wgrt rows run with WGRT_MMA=1 (the matrix-core gemm is opt-in until
# measured: linear_q.h kLinearQMmaByDefault).
# Everything lands in $OUT: summary.md (the rows), info.txt, tests.log, *.log.
# Environment: OUT, PEER_WORK (model files), MATRIX_LAB, MATRIX_LAB_FORMATS, MATRIX_LAB_S,
# MATRIX_LAB_VARIANTS (WGRT_MMA:WGRT_MMA_BM pairs, default "0:auto 1:64 1:128"), MATRIX_TESTS,
# MATRIX_TEST_S (the suites' time limit, default 240 s), MATRIX_TYPES (default "q4_0 q4_k_m"), PEER_SMALL=1 (the tiny shape).
set -uo pipefail
default_out=/tmp/wgrt-matrix-out
source "$(dirname "${BASH_SOURCE[0]}")/device-common.sh"
summary="$out/summary.md"
: >"$summary"
wgrt info >"$out/info.txt" 2>&1
head -12 "$out/info.txt" >>"$summary"

cuda=/tmp/wgrt-peer-cuda
cuda_pid=
if [ -n "${PEER_CUDA:-}" ]; then
  bash bench/peers/cuda-build.sh "$cuda" >"$out/cuda-build.log" 2>&1 &
  cuda_pid=$!
fi
filter=${MATRIX_TESTS:-LinearQ*:GpuPipelineCache*:GpuDevice*}
t0=$SECONDS
WGRT_MMA=1 timeout "${MATRIX_TEST_S:-240}" wgrt_tests --gtest_brief=1 --gtest_filter="$filter" >"$out/tests.log" 2>&1
rc=$?
{
  echo "== wgrt_tests --gtest_filter=$filter: rc $rc in $((SECONDS - t0)) s"
  grep -E '^\[  (PASSED|FAILED)|tests? ran|FAILED TEST' "$out/tests.log" | head -20
} >>"$summary"

if [ -n "${MATRIX_LAB:-}" ]; then
  lab_shapes=2048x2048,2048x512,2048x16384,8192x2048,4096x4096,4096x1024,4096x28672,14336x4096
  for variant in ${MATRIX_LAB_VARIANTS:-0:auto 1:64 1:128}; do
    mma=${variant%:*} bm=${variant#*:}
    echo "== wgrt_lab_linear --m 512, WGRT_MMA=$mma WGRT_MMA_BM=$bm" >>"$summary"
    WGRT_MMA=$mma WGRT_MMA_BM=$bm timeout "${MATRIX_LAB_S:-200}" wgrt_lab_linear --m 512 --formats "${MATRIX_LAB_FORMATS:-q4,q4k,q6k}" \
      --shapes "$lab_shapes" --repeats 5 >"$out/lab-$mma-$bm.log" 2>&1
    echo "rc $?" >>"$summary"
    grep -E '^\|' "$out/lab-$mma-$bm.log" >>"$summary"
  done
fi
if [ -n "${PEER_SMALL:-}" ]; then
  preset=tiny
  read -r -a tests <<<"${MATRIX_BENCH:--p 32 -n 8 -d 0 -r 2}"
  export GGML_VK_VISIBLE_DEVICES=${GGML_VK_VISIBLE_DEVICES:-0}
else
  preset=llama-3.2-1b
  read -r -a tests <<<"${MATRIX_BENCH:--p 512 -n 128 -d 0 -r 3}"
fi
row() {  # the md rows of a wgrt bench, or a jsonl row of peer_bench as md, labelled
  local label=$1
  sed -E -n -e "s/^\| (.*)$/| $label | \1/p" \
    -e "s/.*\"n_prompt\": ([0-9]+), \"n_gen\": ([0-9]+).*\"avg_ts\": ([0-9.]+), \"stddev_ts\": ([0-9.]+).*/| $label | p\1 n\2 | \3 ± \4 |/p"
}
wgrt_make_model --preset "$preset" --type f16 --vocab-from "$work/vocab.gguf" -o "$work/f16.gguf" >"$out/make.log" 2>&1 ||
  { echo "make_model failed" >>"$summary"; exit 1; }
if [ -n "$cuda_pid" ]; then
  wait "$cuda_pid"
  echo "== llama.cpp CUDA build: rc $? ($(tail -1 "$out/cuda-build.log"))" >>"$summary"
fi
for type in ${MATRIX_TYPES:-q4_0 q4_k_m}; do
  file="$work/$type.gguf"
  "$peer/peer_quantize" "$work/f16.gguf" "$file" "$type" >"$out/quantize-$type.log" 2>&1 || continue
  echo "== $preset $type" >>"$summary"
  WGRT_MMA=1 wgrt bench -m "$file" "${tests[@]}" -o md 2>"$out/wgrt-$type.log" | grep '^| ' |
    grep -v -e '---' -e '^| model' | row "wgrt WGRT_MMA=1" >>"$summary"
  WGRT_MMA=0 wgrt bench -m "$file" "${tests[@]}" -o md 2>"$out/wgrt-int8-$type.log" | grep '^| ' |
    grep -v -e '---' -e '^| model' | row "wgrt WGRT_MMA=0" >>"$summary"
  "$peer/peer_bench" -m "$file" "${tests[@]}" -o jsonl 2>"$out/peer-$type.log" | row "llama.cpp" >>"$summary"
  env GGML_VK_DISABLE_COOPMAT=1 GGML_VK_DISABLE_COOPMAT2=1 "$peer/peer_bench" -m "$file" "${tests[@]}" -o jsonl \
    2>"$out/peer-nocm-$type.log" | row "llama.cpp no coopmat" >>"$summary"
  if [ -x "$cuda/peer_bench" ]; then
    "$cuda/peer_bench" -m "$file" "${tests[@]}" -o jsonl 2>"$out/peer-cuda-$type.log" | row "llama.cpp CUDA" >>"$summary"
  fi
  wgrt run -m "$file" -p "Hi" -n 128 --temp 0 --warmup >/dev/null 2>"$out/run-warmup-$type.log"
  echo "| wgrt run --warmup | $(grep -o 'generated [0-9]* tokens in [0-9.]* s ([0-9.]* tok/s)' "$out/run-warmup-$type.log") |" \
    >>"$summary"
  rm -f "$file"
done
rm -f "$work/f16.gguf"
cat "$summary"
