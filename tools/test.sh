#!/usr/bin/env bash
# Installs what is missing, builds everything and runs every test that fits a CPU Vulkan
# driver (heavy cases, label "heavy", run on a real GPU: ctest -L heavy).
# Usage: bash tools/test.sh [extra ctest args]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/tools/setup.sh"
bash "$root/tools/setup-test-data.sh"
werror=OFF; [ -n "${CI:-}" ] && werror=ON
cmake -S "$root" -B "$root/build" -G Ninja -DWGRT_WERROR=$werror
cmake --build "$root/build"
cd "$root/build"
ctest --output-on-failure --no-tests=error -LE heavy "$@"
