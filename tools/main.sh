#!/usr/bin/env bash
# Installs what is missing, builds wgrt and runs its main job.
# Until text generation lands the main job is `wgrt info`: the GPU wgrt would run on.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/tools/setup.sh"
cmake -S "$root" -B "$root/build" -G Ninja >/dev/null
cmake --build "$root/build" --target wgrt
"$root/build/wgrt" info "$@"
