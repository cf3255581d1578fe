#!/usr/bin/env bash
# Test data from the npm registry, fetched at test set-up, never committed. Idempotent.
#   .deps/llama-vocab/models/  vocab-only GGUF files with .inp/.out tokenizer test vectors,
#                              from node-llama-cpp@3.21.1 (llama/gitRelease.bundle, a git bundle)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deps="$root/.deps"
vocab="$deps/llama-vocab"
pkg="node-llama-cpp@3.21.1"
sri="sha512-E3N0Ev2Va0wzydvXYFwM9Hvyo07PoWjt8T/9GMc43Cvt8YkV/NU/tYUgEMC1grTPv2o9PRjQi0G3Wb5P/awiMg=="
[ -f "$vocab/.ready" ] && exit 0
mkdir -p "$deps/npm"
tgz="$deps/npm/node-llama-cpp-3.21.1.tgz"
[ -f "$tgz" ] || (cd "$deps/npm" && npm pack --silent "$pkg" >/dev/null)
got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
if [ "$got" != "$sri" ]; then
  rm -f "$tgz"
  echo "setup-test-data: $pkg failed its integrity check" >&2; exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$tgz" -C "$tmp" package/llama/gitRelease.bundle
rm -rf "$vocab"
git clone -q "$tmp/package/llama/gitRelease.bundle" "$tmp/repo" 2>/dev/null
mkdir -p "$vocab"
cp -r "$tmp/repo/models" "$vocab/models"
touch "$vocab/.ready"
echo "setup-test-data: tokenizer test vectors in $vocab/models"
