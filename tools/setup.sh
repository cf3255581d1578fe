#!/usr/bin/env bash
# Installs everything wgrt needs on a fresh Debian 12 machine. Idempotent: a second run
# changes nothing and touches no network when all is in place.
#
#   Debian packages : compiler, CMake/Ninja, libraries, Vulkan loader, clang-16 + libFuzzer (the
#                     fuzz targets), HAProxy and curl (deploy/haproxy's test), Mesa lavapipe >= 25
#                     (bookworm-backports, from this machine's own configured archive)
#   Dawn            : npm webgpu@0.4.0 (sha512-checked), its dawn.node into .deps/dawn-node
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deps="$root/.deps"
sudo_=""; [ "$(id -u)" = 0 ] || sudo_="sudo"

packages=(build-essential cmake ninja-build pkg-config git ca-certificates openssl
  googletest libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev
  libfmt-dev libcpp-httplib-dev libboost-dev libpcre2-dev python3 python3-numpy python3-pytest libvulkan1
  libutf8proc-dev clang-16 libclang-rt-16-dev libfuzzer-16-dev libvulkan-dev spirv-tools
  haproxy curl)

missing=()
# npm: Debian's package, unless a Node.js with its own npm is already installed.
command -v npm >/dev/null 2>&1 || packages+=(npm)
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# Mesa's lavapipe from Debian 12 proper (22.x) is refused by Dawn; >= 25 from backports works.
mesa_ok() {
  local v; v=$(dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null) || return 1
  dpkg --compare-versions "$v" ge 25
}

backports_list=/etc/apt/sources.list.d/wgrt-bookworm-backports.list
add_backports() {
  grep -rqs "bookworm-backports" /etc/apt/sources.list /etc/apt/sources.list.d/ && return 0
  # The archive URI of the machine's existing bookworm entry (deb822 or one-line format).
  local uri=""
  uri=$(awk '/^URIs:/{u=$2} /^Suites:/ && / bookworm( |$)/{print u; exit}' \
        /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  if [ -z "$uri" ]; then
    uri=$(awk '$1=="deb" && $3=="bookworm" {print $2; exit}' \
          /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)
  fi
  [ -n "$uri" ] || { echo "setup: no bookworm entry in apt's sources to derive backports from" >&2; exit 1; }
  echo "deb $uri bookworm-backports main" | $sudo_ tee "$backports_list" >/dev/null
  echo "setup: added bookworm-backports from $uri"
}

if [ ${#missing[@]} -gt 0 ] || ! mesa_ok; then
  add_backports
  export DEBIAN_FRONTEND=noninteractive
  $sudo_ apt-get update -q
  [ ${#missing[@]} -eq 0 ] || $sudo_ apt-get install -y -q --no-install-recommends "${missing[@]}"
  mesa_ok || $sudo_ apt-get install -y -q --no-install-recommends -t bookworm-backports mesa-vulkan-drivers
fi

# Dawn, pinned and checked against the registry's published integrity: Dawn's own Node.js build
# (npm `webgpu`, Dawn commit c5d549e250 of 2026-03-18). wgrt loads its dawn.node at run time
# through src/gpu/dawn_loader.cpp; Node.js is never involved.
dawn_pkg="webgpu@0.4.0"
dawn_sri="sha512-F5pimn3Aoi0zWjuRdiVs5TnrUwSzD2lESBohsIUsqyitWkGRQlXU2fhV6ycXlQTa1bvAf3sjqiUpBEpmSQ5ptA=="
dawn_dir="$deps/dawn-node"
if [ ! -f "$dawn_dir/.verified" ]; then
  mkdir -p "$deps/npm"
  tgz="$deps/npm/webgpu-0.4.0.tgz"
  [ -f "$tgz" ] || (cd "$deps/npm" && npm pack --silent "$dawn_pkg" >/dev/null)
  got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
  if [ "$got" != "$dawn_sri" ]; then
    rm -f "$tgz"
    echo "setup: $dawn_pkg failed its integrity check (got $got)" >&2; exit 1
  fi
  rm -rf "$dawn_dir" && mkdir -p "$dawn_dir"
  tar -xzf "$tgz" -C "$dawn_dir" package/dist/linux-x64.dawn.node package/LICENSE.md
  mv "$dawn_dir/package/dist/linux-x64.dawn.node" "$dawn_dir/dawn.node"
  mv "$dawn_dir/package/LICENSE.md" "$dawn_dir/LICENSE.md"
  rm -rf "$dawn_dir/package"
  touch "$dawn_dir/.verified"
  echo "setup: Dawn ready in $dawn_dir"
fi
