#!/usr/bin/env bash
# The peer for `wgrt bench`: llama.cpp's Vulkan backend as prebuilt on npm, fetched at bench
# time (pinned, sha512-checked), never committed; then wgrt's own two small programs against
# its llama.h, built with g++. Idempotent.
#
#   bench/peers/setup.sh
#
# Afterwards, in .deps/peers/ (git-ignored, shared by the worktrees):
#   include/       llama.h and ggml's headers, checked out of node-llama-cpp@3.21.1's
#                  llama/gitRelease.bundle (the sources the prebuilt libraries come from)
#   llama/         libllama, libggml*, the Vulkan and CPU backends of
#                  @node-llama-cpp/linux-x64-vulkan@3.21.1, and beside them (rpath $ORIGIN)
#                  peer_bench and peer_quantize (bench/peers/*.cpp)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
deps="$root/.deps"
peers="$deps/peers"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$deps/npm" "$peers"

# fetch <pkg@ver> <tgz name> <sha512 SRI from `npm view <pkg@ver> dist.integrity`>
fetch() {
  local pkg=$1 tgz="$deps/npm/$2" sri=$3 got
  [ -f "$tgz" ] || (cd "$deps/npm" && npm pack --silent "$pkg" >/dev/null)
  got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
  if [ "$got" != "$sri" ]; then
    rm -f "$tgz"
    echo "peers/setup: $pkg failed its integrity check" >&2; exit 1
  fi
}

if [ ! -f "$peers/include/.ready" ]; then
  fetch node-llama-cpp@3.21.1 node-llama-cpp-3.21.1.tgz \
    "sha512-E3N0Ev2Va0wzydvXYFwM9Hvyo07PoWjt8T/9GMc43Cvt8YkV/NU/tYUgEMC1grTPv2o9PRjQi0G3Wb5P/awiMg=="
  tar -xzf "$deps/npm/node-llama-cpp-3.21.1.tgz" -C "$tmp" package/llama/gitRelease.bundle
  git clone -q --no-checkout "$tmp/package/llama/gitRelease.bundle" "$tmp/repo" 2>/dev/null
  git -C "$tmp/repo" checkout -q HEAD -- include ggml/include
  rm -rf "$peers/include"
  mkdir -p "$peers/include"
  cp "$tmp/repo"/include/*.h "$tmp/repo"/ggml/include/*.h "$peers/include/"
  git -C "$tmp/repo" rev-parse HEAD >"$peers/include/.commit"
  touch "$peers/include/.ready"
fi

if [ ! -f "$peers/llama/.ready" ]; then
  fetch @node-llama-cpp/linux-x64-vulkan@3.21.1 node-llama-cpp-linux-x64-vulkan-3.21.1.tgz \
    "sha512-flEeSzONQ6OIm5bYKLQf4eEnBzcC5WugFbyPUwkCqyyOFZ8pH0H9ulQ7ZNDLSIczeKneMRJornlyY1Hq7d3GDA=="
  tar -xzf "$deps/npm/node-llama-cpp-linux-x64-vulkan-3.21.1.tgz" -C "$tmp" package/bins/linux-x64-vulkan
  rm -rf "$peers/llama"
  mkdir -p "$peers/llama"
  # The libraries only: not the Node addon nor llama-common.
  (cd "$tmp/package/bins/linux-x64-vulkan" && cp libllama.*.so libggml.*.so libggml-base.so libggml-vulkan.so \
    libggml-cpu-*.so "$peers/llama/")
  touch "$peers/llama/.ready"
fi

# wgrt's programs against that llama.h (rebuilt when their source is newer).
lib="$peers/llama"
for prog in peer_bench peer_quantize; do
  src="$root/bench/peers/$prog.cpp"
  if [ ! -x "$lib/$prog" ] || [ "$src" -nt "$lib/$prog" ]; then
    g++ -std=c++17 -O2 -Wall -Wextra -Werror -I"$peers/include" "$src" -o "$lib/$prog" \
      -L"$lib" -l:libllama.vulkan.v0.4.0.so -l:libggml.vulkan.v0.4.0.so -l:libggml-base.so \
      -Wl,-rpath,'$ORIGIN'
  fi
done
echo "peers/setup: llama.cpp $(cat "$peers/include/.commit" | cut -c1-10) Vulkan build and peer_bench, peer_quantize in $lib"
