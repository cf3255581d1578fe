#!/usr/bin/env bash
# Installs what is missing, builds everything and runs every test that fits a CPU Vulkan
# driver (heavy cases, label "heavy", run on a real GPU: ctest -L heavy), then the parsers
# of untrusted input again under AddressSanitizer and UndefinedBehaviorSanitizer.
# Usage: bash tools/test.sh [extra ctest args for the main suite]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/tools/setup.sh"
bash "$root/tools/setup-test-data.sh"
werror=OFF; [ -n "${CI:-}" ] && werror=ON

cmake -S "$root" -B "$root/build" -G Ninja -DWGRT_WERROR=$werror
cmake --build "$root/build"
(cd "$root/build" && ctest --output-on-failure --no-tests=error -LE heavy "$@")

cmake -S "$root" -B "$root/build-asan" -G Ninja -DWGRT_WERROR=$werror -DWGRT_BUILD_BENCH=OFF \
  -DWGRT_SANITIZE=address,undefined
cmake --build "$root/build-asan" --target wgrt_parser_tests
(cd "$root/build-asan" && ctest --output-on-failure --no-tests=error -L parser)
