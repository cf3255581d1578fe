#!/usr/bin/env bash
# Installs what is missing, builds wgrt and runs its main job: generate text. Without -m it
# runs wgrt's demo model (models/README.md: 12.9 M parameters trained on public-domain
# English), prompted with "In the beginning" unless -p is given: pass `-m model.gguf` (or a
# Hugging Face model directory) and any `wgrt run` flags after it.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/tools/setup.sh"
cmake -S "$root" -B "$root/build" -G Ninja >/dev/null
cmake --build "$root/build" --target wgrt
args=("$@")
if ! printf '%s\n' "$@" | grep -qE '^(-m|--model|-p|--prompt)(=|$)'; then args=(-p "In the beginning" "$@"); fi
"$root/build/wgrt" run -n 48 "${args[@]}"
