#!/usr/bin/env bash
# llama.cpp's CUDA backend as the second peer, built ON THE GPU MACHINE (it has nvcc, cmake and
# ninja; the npm CUDA prebuilt needs a newer driver than it has) from the sources of the same
# llama.cpp release as the Vulkan peer: node-llama-cpp@3.21.1's llama/gitRelease.bundle, which
# bench/peers/pack.sh carries as peer/llama-src.tar.xz (PEER_CUDA=1). About 260 s on 16 cores.
#
#   bench/peers/cuda-build.sh DEST
#
# DEST gets libllama, libggml* with the CUDA backend (sm_90: the H100 and H200), and beside them
# peer_bench (bench/peers/peer_bench.cpp) linked against them, rpath $ORIGIN (an old-style
# DT_RPATH: it also serves the libraries' own dependencies, libggml-cpu beside libggml). Sourced settings
# from device-common.sh are not needed: only $WGRT_CARRY (default .carry-peers).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dest=${1:?usage: cuda-build.sh DEST}
carry=${WGRT_CARRY:-$root/.carry-peers}
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
command -v nvcc >/dev/null || { echo "cuda-build: no nvcc on this machine" >&2; exit 1; }
if command -v xz >/dev/null; then xz -dc "$carry/peer/llama-src.tar.xz"
else python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' \
  "$carry/peer/llama-src.tar.xz"
fi | tar -xf - -C "$src"
cmake -S "$src" -B "$src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
  -DLLAMA_BUILD_MTMD=OFF -DLLAMA_CURL=OFF \
  -DBUILD_SHARED_LIBS=ON >"$src/configure.log" 2>&1 || { tail -30 "$src/configure.log" >&2; exit 1; }
cmake --build "$src/build" --target llama -j "$(nproc)" >"$src/build.log" 2>&1 ||
  { tail -30 "$src/build.log" >&2; exit 1; }
mkdir -p "$dest"
find "$src/build" -name 'lib*.so*' -exec cp -P {} "$dest/" \;
g++ -std=c++17 -O2 -Wall -Wextra -DPEER_BACKEND='"CUDA"' -I"$src/include" -I"$src/ggml/include" "$root/bench/peers/peer_bench.cpp" \
  -o "$dest/peer_bench" -L"$dest" -lllama -lggml -lggml-base -Wl,--disable-new-dtags,-rpath,'$ORIGIN'
echo "cuda-build: llama.cpp CUDA (sm_90) and peer_bench in $dest"
