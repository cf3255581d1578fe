// Dawn, loaded at run time from Dawn's own Node.js build (npm `webgpu`, its dawn.node).
//
// That file is Dawn with its full native API inside but no exported `wgpu*` symbols: it is a
// Node-API module. wgrt opens it as a plain shared library (two Node-API symbols it binds at
// load are stubbed here; Node is never started), finds Dawn's own NativeGetProcAddress in the
// file's symbol table, and resolves by name every entry point dawn_abi.h declares. A build
// against an installed Dawn (WGRT_SYSTEM_WEBGPU_H) links it instead and loads nothing.
#pragma once

#include <string>

namespace wgrt::gpu {

// Loads Dawn once per process (later calls return at once; safe from any thread). Throws
// GpuError naming the file and what is missing (the file, a symbol, an entry point) with a hint.
void load_dawn();

// The file load_dawn() reads: $WGRT_DAWN_LIB when set, else PREFIX/lib/wgrt/dawn.node beside
// the wgrt binary or libwgrt.so (support/install_paths.h; the build tree links tools/setup.sh's
// dawn.node there). Throws GpuError naming the paths it tried when none exists.
std::string dawn_library_path();

}  // namespace wgrt::gpu
