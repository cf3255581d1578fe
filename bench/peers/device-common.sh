# Sourced by the one-call device scripts (run-h200.sh, moe-h200.sh, pending-h200.sh, profile-h200.sh, variants-h200.sh,
# prefill-h200.sh, toggles-h200.sh) with `default_out` set: the repository root becomes the
# working folder; WGRT_CARRY (default .carry-peers), $out (OUT, else $default_out) and $work
# (PEER_WORK, default /tmp/wgrt-peers) are set and made; tools/device-env.sh is sourced (wgrt and
# the labs on PATH, the carried Vulkan loader); llama.cpp's build (peer_bench, peer_quantize) is
# unpacked into $peer and the llama3 vocabulary the model files copy into $work/vocab.gguf.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
export WGRT_CARRY=${WGRT_CARRY:-$root/.carry-peers}
out=${OUT:-$default_out}
work=${PEER_WORK:-/tmp/wgrt-peers}
mkdir -p "$out" "$work"

unxz_to() {  # unxz_to FILE.xz DEST: xz, or Python's lzma where xz is missing
  if command -v xz >/dev/null; then xz -dc "$1" >"$2"
  else python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],"wb"))' "$1" "$2"
  fi
}

source tools/device-env.sh >/dev/null || exit 1
peer=/tmp/wgrt-peer
mkdir -p "$peer"
unxz_to "$WGRT_CARRY/peer/llama.tar.xz" "$work/llama.tar" && tar -xf "$work/llama.tar" -C "$peer" &&
  rm -f "$work/llama.tar" || exit 1
unxz_to "$WGRT_CARRY/peer/ggml-vocab-llama-bpe.gguf.xz" "$work/vocab.gguf" || exit 1
