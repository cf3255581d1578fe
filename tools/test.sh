#!/usr/bin/env bash
# Installs what is missing, builds everything and runs every test that fits a CPU Vulkan
# driver, one per core (heavy cases and the wide share of the sweeps, label "heavy", run on a
# real GPU: ctest -L heavy), then the op and graph
# suites on a device with WebGPU's default limits (WGRT_LIMITS=default), then the parsers
# of untrusted input and the engine's fast suites (graph engine on the CPU Vulkan driver, GPU
# layer, sampler) again under AddressSanitizer and UndefinedBehaviorSanitizer, then every fuzz
# target (tests/fuzz) for WGRT_FUZZ_SECONDS each (default 30; 0 skips fuzzing).
# `wgrt serve`'s hostile-client suite (label "stress") runs after the main suite, on its own,
# then the Python package's tests and the install test (tools/test-install.sh).
# Usage: bash tools/test.sh [extra ctest args for the main suite]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/tools/setup.sh"
bash "$root/tools/setup-test-data.sh"
werror=OFF; [ -n "${CI:-}" ] && werror=ON

cmake -S "$root" -B "$root/build" -G Ninja -DWGRT_WERROR=$werror
cmake --build "$root/build"
# Tests run side by side, one per core: on a CPU Vulkan driver most of a case is compiling its
# pipelines, one thread each.
jobs=$(nproc)
(cd "$root/build" && ctest --output-on-failure --no-tests=error -j "$jobs" -LE 'heavy|stress' "$@")

# `wgrt serve` against hostile clients (label "stress", about a minute): its figures (requests
# sent / answered / lost, the server's RSS before and after) go to the log.
timeout 300 "$root/build/tests/wgrt_stress_tests" --gtest_brief=1

# The Python package (python/wgrt, ctypes) over build/libwgrt.so and the demo model, with pytest.
# Debian's python3 (tools/setup.sh installs python3-pytest for it), not one on PATH.
(cd "$root/python" && WGRT_LIBRARY="$root/build/libwgrt.so" /usr/bin/python3 -m pytest -q -p no:cacheprovider)

# wgrt as users get it (about 2 minutes): installed into a temporary prefix, examples/ built
# against it alone (find_package, pkg-config) and run, the installed and moved `wgrt run`, the .deb.
bash "$root/tools/test-install.sh" "$root/build"

# --- deploy/haproxy: two `wgrt serve` replicas behind HAProxy on loopback (about 1.5 minutes):
# affinity, one and two replicas' tok/s, 64 clients while a replica is killed and restarted.
timeout 600 bash "$root/tests/deploy/haproxy_test.sh" "$root/build/wgrt"
# --- end deploy/haproxy

# The op and graph suites again on a device with WebGPU's default limits (WGRT_LIMITS=default:
# 16 KiB of workgroup storage, 256 invocations per workgroup): every kernel must pick a variant
# that fits.
default_limits_suites='Attention*:Elementwise*:Embedding*:KvCache*:Linear*:RmsNorm*:OpParams*:Quant*:Rope*'
default_limits_suites+=':Argmax*:SamplePick*:TopK*:SiluMul*:Softmax*:Graph*:GpuDevice*'
# One shard per core (gtest's sharding), each with its log; a failing shard's log is printed.
pids=()
for ((shard = 0; shard < jobs; ++shard)); do
  GTEST_TOTAL_SHARDS=$jobs GTEST_SHARD_INDEX=$shard WGRT_LIMITS=default "$root/build/tests/wgrt_tests" \
    --gtest_brief=1 --gtest_filter="$default_limits_suites" > "$root/build/default_limits_$shard.log" 2>&1 &
  pids+=($!)
done
for ((shard = 0; shard < jobs; ++shard)); do
  if ! wait "${pids[$shard]}"; then
    cat "$root/build/default_limits_$shard.log"
    echo "default limits: shard $shard of $jobs failed (its log: build/default_limits_$shard.log)" >&2
    exit 1
  fi
  tail -n 1 "$root/build/default_limits_$shard.log"
done

# -O1 and line tables: the usual sanitizer build, compiled in about half the time of -O2 -g; the
# reports still name files and lines.
cmake -S "$root" -B "$root/build-asan" -G Ninja -DWGRT_WERROR=$werror -DWGRT_BUILD_BENCH=OFF \
  -DWGRT_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG"
cmake --build "$root/build-asan" --target wgrt_parser_tests wgrt_engine_tests
(cd "$root/build-asan" && ctest --output-on-failure --no-tests=error -j "$jobs" -L 'parser|engine')

# libFuzzer, built with clang-16 in build-fuzz: each target over its committed corpus plus a
# fresh scratch corpus. A crash's input lands in build-fuzz/crashes/; once fixed, it joins
# tests/fuzz/corpus/<target>/ (which the suites above replay).
fuzz_seconds=${WGRT_FUZZ_SECONDS:-30}
if [ "$fuzz_seconds" != 0 ]; then
  cmake -S "$root/tests/fuzz" -B "$root/build-fuzz" -G Ninja -DCMAKE_CXX_COMPILER=clang++-16
  cmake --build "$root/build-fuzz" --target wgrt_fuzz_targets
  mkdir -p "$root/build-fuzz/crashes"
  for corpus in "$root"/tests/fuzz/corpus/*/; do
    t=$(basename "$corpus")
    work="$root/build-fuzz/work/$t" log="$root/build-fuzz/fuzz_$t.log"
    rm -rf "$work" && mkdir -p "$work"
    if ! "$root/build-fuzz/fuzz_$t" -max_total_time="$fuzz_seconds" -timeout=10 -rss_limit_mb=2048 \
        -dict="$root/tests/fuzz/$t.dict" -artifact_prefix="$root/build-fuzz/crashes/$t-" \
        "$work" "$corpus" > "$log" 2>&1; then
      tail -n 40 "$log"
      echo "fuzz: fuzz_$t failed (its input is in build-fuzz/crashes/, the log in $log)" >&2
      exit 1
    fi
    echo "fuzz: fuzz_$t: $(grep -E '^Done [0-9]+ runs' "$log" | tail -1)"
  done
fi
