#!/usr/bin/env bash
# Packs the one folder bench/peers/run-h200.sh needs on the GPU machine (it has no package
# registry and no network): tools/device-pack.sh's part (wgrt, wgrt_make_model, Dawn, the
# Vulkan loader .debs, libfmt, ...) plus
#   peer/llama.tar.xz                 llama.cpp's Vulkan build + peer_bench, peer_quantize
#                                     (bench/peers/setup.sh)
#   peer/ggml-vocab-llama-bpe.gguf.xz the llama3 vocabulary the model files copy
#   peer/llama-src.tar.xz             (PEER_CUDA=1) the same release's sources, for
#                                     bench/peers/cuda-build.sh on the GPU machine (3 MiB)
# and checks the whole stays under the 64 MiB a device call carries.
#
#   bench/peers/pack.sh [BUILD_DIR] [PROGRAM...]   # default build; into .carry-peers/ (or $WGRT_CARRY)
# PROGRAM: more executables of BUILD_DIR to carry beside wgrt and wgrt_make_model (e.g.
# bench/wgrt_lab_attention for pending-h200.sh).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-build}
shift || true
cd "$root"
carry=${WGRT_CARRY:-$root/.carry-peers}
vocab="$root/.deps/llama-vocab/models/ggml-vocab-llama-bpe.gguf"
[ -f "$vocab" ] || { echo "peers/pack: $vocab missing (hint: tools/setup-test-data.sh)" >&2; exit 1; }

bash bench/peers/setup.sh
mkdir -p "$carry/peer"
lib="$root/.deps/peers/llama"
tarball="$carry/peer/llama.tar.xz"
if [ ! -f "$tarball" ] || [ -n "$(find "$lib" -newer "$tarball" -print -quit)" ]; then
  tar -C "$lib" --exclude=.ready -cf - . | xz -T2 -6 >"$tarball.tmp"
  mv "$tarball.tmp" "$tarball"
fi
[ -f "$carry/peer/ggml-vocab-llama-bpe.gguf.xz" ] || xz -T2 -6 -c "$vocab" >"$carry/peer/ggml-vocab-llama-bpe.gguf.xz"
if [ -n "${PEER_CUDA:-}" ] && [ ! -f "$carry/peer/llama-src.tar.xz" ]; then
  tmp=$(mktemp -d)
  tar -xzf "$root/.deps/npm/node-llama-cpp-3.21.1.tgz" -C "$tmp" package/llama/gitRelease.bundle
  git clone -q --no-checkout "$tmp/package/llama/gitRelease.bundle" "$tmp/repo" 2>/dev/null
  git -C "$tmp/repo" archive HEAD CMakeLists.txt cmake include src ggml vendor LICENSE licenses |
    xz -T2 -6 >"$carry/peer/llama-src.tar.xz"
  rm -rf "$tmp"
fi
# Last, so its MANIFEST lists the peer's files too.
WGRT_CARRY="$carry" bash tools/device-pack.sh "$build" wgrt wgrt_make_model "$@"

bytes=$(du -sb "$carry" | cut -f1)
tree=$(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1)
limit=$((64 * 1048576))
echo "peers/pack: $carry holds $((bytes / 1048576)) MiB ($bytes bytes), the tracked tree $((tree / 1048576)) MiB;" \
     "a device call carries at most 64 MiB"
[ $((bytes + tree)) -lt "$limit" ] || { echo "peers/pack: too big to carry" >&2; exit 1; }
