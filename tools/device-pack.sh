#!/usr/bin/env bash
# Packs what the GPU machine needs to run wgrt binaries into .carry/ (git-ignored), for the
# device `run` tool: name ".carry" in its `carry` list and start the command with
# `source tools/device-env.sh`. The GPU machine has no package registry (docs/PLATFORM.md).
#
#   tools/device-pack.sh [BUILD_DIR] [PROGRAM...]
#     BUILD_DIR  a build of this checkout (default: build-bench)
#     PROGRAM    executables relative to BUILD_DIR (default: wgrt and every bench/wgrt_lab_*)
#
# .carry/ afterwards (about 20 MB; the transfer limit is 64 MiB per call, whole tree included):
#   *.deb                  Vulkan loader + glvnd (Debian amd64), unpacked into / there
#   bin/                   the programs, debug info stripped
#   dawn/dawn.node.xz      Dawn (tools/setup.sh pins it), loaded at run time via WGRT_DAWN_LIB
#   share/wgrt/            the demo model, found by bin/* beside themselves (as installed)
#   lib/                   non-system shared libraries the programs need (libfmt, ...)
#   lib-compat/            libstdc++/libgcc_s, used there only if the system's are too old
#   MANIFEST               commit, date, sha256 of every file
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-build-bench}
shift || true
cd "$root"
[ -d "$build" ] || { echo "device-pack: no build dir '$build' (hint: cmake -S . -B $build -G Ninja && ninja -C $build)" >&2; exit 1; }

programs=("$@")
if [ ${#programs[@]} -eq 0 ]; then
  [ -x "$build/wgrt" ] && programs+=(wgrt)
  for f in "$build"/bench/wgrt_lab_*; do [ -x "$f" ] && [ -f "$f" ] && programs+=("${f#$build/}"); done
fi
[ ${#programs[@]} -gt 0 ] || { echo "device-pack: nothing built in '$build'" >&2; exit 1; }

carry="${WGRT_CARRY:-$root/.carry}"  # WGRT_CARRY: another folder, for runs side by side
mkdir -p "$carry"
rm -rf "$carry/bin" "$carry/lib" "$carry/lib-compat" "$carry/dawn" "$carry/share"
mkdir -p "$carry/bin" "$carry/lib" "$carry/lib-compat" "$carry/dawn" "$carry/share/wgrt"

# Vulkan loader and the glvnd pieces the NVIDIA ICD needs; downloaded once.
debs=(libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
missing=()
for d in "${debs[@]}"; do compgen -G "$carry/${d}_*_amd64.deb" >/dev/null || missing+=("$d"); done
if [ ${#missing[@]} -gt 0 ]; then
  mkdir -p /tmp/amd64/partial
  o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64)
  apt-get "${o[@]}" update -q >/dev/null
  (cd "$carry" && apt-get "${o[@]}" download "${missing[@]}")
fi

# Programs, without debug info (13 MB -> ~1 MB each).
for p in "${programs[@]}"; do
  [ -x "$build/$p" ] || { echo "device-pack: '$build/$p' is not an executable" >&2; exit 1; }
  strip --strip-debug -o "$carry/bin/$(basename "$p")" "$build/$p"
done

# spirv-as (Debian spirv-tools, statically linked) for bench/shader-stats.sh.
if command -v spirv-as >/dev/null; then cp "$(command -v spirv-as)" "$carry/bin/spirv-as"; fi

# Dawn: the pinned dawn.node (tools/setup.sh), compressed.
dawn="$root/.deps/dawn-node/dawn.node"
[ -f "$dawn" ] || { echo "device-pack: $dawn missing (hint: tools/setup.sh)" >&2; exit 1; }
xz -T2 -6 -c "$dawn" >"$carry/dawn/dawn.node.xz"

# The demo model, in the installed layout (src/support/install_paths.h): `wgrt run` without -m.
cp models/wgrt-demo-q8_0.gguf "$carry/share/wgrt/"

# Shared libraries: glibc's own stay behind (the machine has them); libstdc++/libgcc_s go to
# lib-compat as a fallback; everything else (libfmt, ...) goes along.
for p in "${programs[@]}"; do
  ldd "$build/$p" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  case "$name" in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*) ;;
    libstdc++.so.*|libgcc_s.so.*) cp -L "$path" "$carry/lib-compat/$name" ;;
    *) cp -L "$path" "$carry/lib/$name" ;;
  esac
done

{
  echo "commit $(git rev-parse HEAD)$(git diff --quiet HEAD -- src bench 2>/dev/null || echo ' (+ local changes)')"
  echo "packed $(date -u +%Y-%m-%dT%H:%M:%SZ) from $build"
  (cd "$carry" && find . -type f ! -name MANIFEST | sort | xargs sha256sum)
} >"$carry/MANIFEST"
echo "device-pack: $(du -sh "$carry" | cut -f1) in $carry: ${programs[*]}"
