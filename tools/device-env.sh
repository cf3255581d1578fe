# Source this on the GPU machine, in the repository root, with .carry/ from
# tools/device-pack.sh carried along:
#
#   source tools/device-env.sh && wgrt info && wgrt_lab_peaks --out $OUT/peaks.json
#
# Installs the carried Vulkan loader, points it at the NVIDIA driver, unpacks Dawn (WGRT_DAWN_LIB), and puts
# the carried programs and libraries first on PATH / LD_LIBRARY_PATH. Returns non-zero (and
# says why) when something is missing; safe to source twice.
wgrt_device_env() {
  local carry=${WGRT_CARRY:-$PWD/.carry}
  if [ ! -f "$carry/MANIFEST" ]; then
    echo "device-env: no $carry/MANIFEST (hint: run tools/device-pack.sh here and carry .carry)" >&2
    return 1
  fi
  local f
  for f in "$carry"/*.deb; do [ -e "$f" ] || continue; dpkg -x "$f" / || return 1; done
  ldconfig
  export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
  export __EGL_VENDOR_LIBRARY_FILENAMES=${__EGL_VENDOR_LIBRARY_FILENAMES:-/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json}

  local dawn=/tmp/wgrt-dawn
  mkdir -p "$dawn"
  if [ ! -f "$dawn/dawn.node" ]; then
    if command -v xz >/dev/null; then
      xz -dc "$carry/dawn/dawn.node.xz" >"$dawn/dawn.node.tmp" || return 1
    else  # the image always has Python
      python3 -c 'import lzma,shutil,sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2],"wb"))' \
        "$carry/dawn/dawn.node.xz" "$dawn/dawn.node.tmp" || return 1
    fi
    mv "$dawn/dawn.node.tmp" "$dawn/dawn.node"
  fi
  export WGRT_DAWN_LIB="$dawn/dawn.node"

  export LD_LIBRARY_PATH="$carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PATH="$carry/bin:$PATH"
  # The carried libstdc++ only when the machine's is older than the build's.
  local probe
  probe=$(ls "$carry"/bin/* 2>/dev/null | head -1)
  if [ -n "$probe" ] && ldd "$probe" 2>&1 | grep -q "version .* not found"; then
    export LD_LIBRARY_PATH="$carry/lib-compat:$LD_LIBRARY_PATH"
  fi
  if [ -n "$probe" ] && ldd "$probe" 2>&1 | grep -q "not found"; then
    echo "device-env: $(basename "$probe") still lacks libraries:" >&2
    ldd "$probe" 2>&1 | grep "not found" >&2
    return 1
  fi
  echo "device-env: ready ($(head -1 "$carry/MANIFEST"); VK_DRIVER_FILES=$VK_DRIVER_FILES)"
}
wgrt_device_env
