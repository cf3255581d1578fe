#!/usr/bin/env bash
# Installs what is missing, builds wgrt and runs its main job: generate text. Without -m it
# runs the built-in default model, which has random weights (it says so): pass
# `-m model.gguf` (or a Hugging Face model directory) and any `wgrt run` flags after it.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/tools/setup.sh"
cmake -S "$root" -B "$root/build" -G Ninja >/dev/null
cmake --build "$root/build" --target wgrt
"$root/build/wgrt" run -n 48 "$@"
