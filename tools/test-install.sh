#!/usr/bin/env bash
# wgrt as users get it: installs build/ into a temporary prefix, builds examples/ against that
# prefix only (find_package and pkg-config), runs them and the installed `wgrt run` from
# elsewhere, moves the prefix and runs it again, checks the errors of a half-copied install,
# then makes the .deb (cpack), checks what it lists and runs the wgrt it unpacks.
# Usage: bash tools/test-install.sh [BUILD_DIR]   (default build; tools/test.sh runs it)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
tmp=$(mktemp -d /tmp/wgrt-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"
prompt="Once upon a time"

fail() { echo "test-install: FAIL: $*" >&2; exit 1; }
pass() { echo "test-install: ok: $*"; }
# Runs a command, its stderr to a log; shows the log when it fails.
run() {
  local log="$tmp/last.log"
  if ! "$@" 2>"$log"; then cat "$log" >&2; fail "$*"; fi
}

cmake --build "$build" --target wgrt wgrt_shared
run cmake --install "$build" --prefix "$prefix" --strip >/dev/null
for f in bin/wgrt lib/libwgrt.so lib/libwgrt.so.0.2 lib/wgrt/dawn.node include/wgrt/wgrt.h include/wgrt/wgrt.hpp \
         lib/cmake/wgrt/wgrtConfig.cmake lib/cmake/wgrt/wgrtConfigVersion.cmake lib/cmake/wgrt/wgrtTargets.cmake \
         lib/pkgconfig/wgrt.pc share/wgrt/wgrt-demo-q8_0.gguf share/doc/wgrt/LICENSE \
         lib/python3/dist-packages/wgrt/__init__.py; do
  [ -e "$prefix/$f" ] || fail "cmake --install left out $f"
done
pass "cmake --install put the files in place"

# libwgrt.so exports the C API and the two Node-API stubs Dawn binds, nothing else.
others=$(nm -D --defined-only "$prefix/lib/libwgrt.so" | awk '{print $3}' | grep -Ev '^(wgrt_|napi_create_(type_)?error$)' || true)
[ -z "$others" ] || fail "libwgrt.so exports more than the C API: $(echo $others | head -c 300)"
pass "libwgrt.so exports $(nm -D --defined-only "$prefix/lib/libwgrt.so" | grep -c ' wgrt_') wgrt_* entry points only"

# examples/ against the installed package only: nothing of the build tree on the search path.
run cmake -S "$root/examples" -B "$tmp/examples" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
grep -q "^wgrt_DIR:PATH=$prefix/lib/cmake/wgrt$" "$tmp/examples/CMakeCache.txt" || fail "find_package(wgrt) did not find $prefix"
run cmake --build "$tmp/examples" >/dev/null
pass "examples/ built with find_package(wgrt) from $prefix"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
# shellcheck disable=SC2046
run cc -std=c11 -o "$tmp/simple-pc" "$root/examples/simple.c" $(pkg-config --cflags --libs wgrt) \
  -Wl,-rpath,"$(pkg-config --variable=libdir wgrt)"
unset PKG_CONFIG_PATH
pass "examples/simple.c built with pkg-config wgrt"

cd "$tmp"
simple=$(run "$tmp/simple-pc") || exit 1
[ "$(echo "$simple" | head -1)" = "wgrt $(sed -nE 's/^project\(wgrt VERSION ([0-9.]+).*/\1/p' "$root/CMakeLists.txt")" ] ||
  fail "simple printed '$(echo "$simple" | head -1)', not the project's version"
continuation=$(echo "$simple" | tail -n +2)
[ -n "$continuation" ] || fail "simple generated nothing"
pass "simple (pkg-config build) generated: $continuation"
[ "$(run "$tmp/examples/simple")" = "$simple" ] || fail "simple (CMake build) generated other text"
stream=$(run "$tmp/examples/stream") || exit 1
echo "$stream" | grep -q '^12 tokens, ' || fail "stream: $stream"
pass "stream (C++, wgrt.hpp) streamed 12 tokens"

# The installed wgrt, run from another directory after the prefix moved: it finds Dawn and the
# demo model beside itself. The greedy text is the C API's (the same model and sampler).
mv "$prefix" "$tmp/moved"
prefix="$tmp/moved"
mkdir -p "$tmp/elsewhere" && cd "$tmp/elsewhere"
text=$(run "$prefix/bin/wgrt" run -n 8 --temp 0 -p "$prompt" --no-display-prompt) || exit 1
grep -q "wgrt-demo-q8_0.gguf" "$tmp/last.log" || fail "wgrt run did not say it ran the demo model: $(cat "$tmp/last.log")"
[ -n "$text" ] && [[ "$continuation" == "$text"* ]] || fail "wgrt run printed '$text', not the start of '$continuation'"
pass "installed wgrt run, moved prefix, from $PWD: $text"

# The Python package as installed: it finds the prefix's libwgrt.so, which finds the demo model.
py_text=$(run env PYTHONPATH="$prefix/lib/python3/dist-packages" WGRT_LIBRARY= /usr/bin/python3 -c \
  "import wgrt; print(wgrt.Model().generate('$prompt', temperature=0, max_tokens=8))") || exit 1
[ "$py_text" = "$text" ] || fail "the installed Python package generated '$py_text', not '$text'"
pass "the installed Python package (import wgrt) generated the same text"

# A half-copied install says what it looked for.
mkdir -p "$tmp/lone/bin" && cp "$prefix/bin/wgrt" "$tmp/lone/bin/"
if "$tmp/lone/bin/wgrt" run -n 1 >/dev/null 2>"$tmp/lone.log"; then fail "wgrt ran without Dawn"; fi
grep -qF "tried $tmp/lone/bin/lib/wgrt/dawn.node, $tmp/lone/lib/wgrt/dawn.node" "$tmp/lone.log" ||
  fail "no Dawn: $(cat "$tmp/lone.log")"
mkdir -p "$tmp/lone/lib/wgrt" && ln -s "$prefix/lib/wgrt/dawn.node" "$tmp/lone/lib/wgrt/dawn.node"
if "$tmp/lone/bin/wgrt" run -n 1 >/dev/null 2>"$tmp/lone.log"; then fail "wgrt ran without its demo model"; fi
grep -qF "tried $tmp/lone/bin/share/wgrt/wgrt-demo-q8_0.gguf, $tmp/lone/share/wgrt/wgrt-demo-q8_0.gguf" \
  "$tmp/lone.log" || fail "no demo model: $(cat "$tmp/lone.log")"
pass "a copy without Dawn or the demo model names the paths it tried"

# The .deb: its files, its dependencies, and the wgrt it unpacks.
cd "$build"
run cpack -G DEB -B "$tmp/deb" >/dev/null
deb=$(ls "$tmp"/deb/wgrt_*_amd64.deb)
listing=$(dpkg-deb -c "$deb")
for f in ./usr/bin/wgrt ./usr/lib/libwgrt.so ./usr/lib/wgrt/dawn.node ./usr/include/wgrt/wgrt.h \
         ./usr/include/wgrt/wgrt.hpp ./usr/lib/cmake/wgrt/wgrtConfig.cmake ./usr/lib/pkgconfig/wgrt.pc \
         ./usr/share/wgrt/wgrt-demo-q8_0.gguf ./usr/lib/python3/dist-packages/wgrt/__init__.py; do
  echo "$listing" | grep -q " $f\( \|$\)" || fail "$(basename "$deb") lacks $f"
done
depends=$(dpkg-deb -f "$deb" Depends)
for d in libfmt9 libpcre2-8-0 libutf8proc2 libvulkan1; do [[ "$depends" == *"$d"* ]] || fail "Depends lacks $d: $depends"; done
dpkg-deb -x "$deb" "$tmp/root"
cd "$tmp/elsewhere"
deb_text=$(run "$tmp/root/usr/bin/wgrt" run -n 8 --temp 0 -p "$prompt" --no-display-prompt) || exit 1
[ "$deb_text" = "$text" ] || fail "the .deb's wgrt printed '$deb_text', not '$text'"
pass "$(basename "$deb") ($(du -h "$deb" | cut -f1)): files, Depends: $depends; its wgrt printed the same text"
