// The WebGPU C API as wgrt sees it: its own ABI declarations by default, or the official
// header of an installed Dawn when the build is pointed at one (WGRT_DAWN_INSTALL).
#pragma once

#if defined(WGRT_SYSTEM_WEBGPU_H)
#include <webgpu/webgpu.h>
#else
#include "gpu/dawn_abi.h"
#endif

#include <string>
#include <string_view>

namespace wgrt::gpu {

inline WGPUStringView sv(std::string_view s) { return WGPUStringView{s.data(), s.size()}; }

inline std::string to_string(WGPUStringView s) {
  if (!s.data) return {};
  if (s.length == WGPU_STRLEN) return std::string(s.data);
  return std::string(s.data, s.length);
}

}  // namespace wgrt::gpu
