// Device peaks: the measured limits (read/write/copy bandwidth, f32 FMA rate, dispatch cost)
// that labs, `wgrt bench --profile` and `wgrt run --profile` compare kernels against. Written
// by wgrt_lab_peaks (bench/peaks.cpp); bench/peaks-<device>.json holds recorded ones.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <string>

namespace wgrt::gpu {

struct Peaks {
  std::string adapter;       // e.g. "NVIDIA H200"
  std::string driver;
  std::string backend;       // "vulkan"
  std::string adapter_type;  // "discrete GPU", "CPU"
  std::string date;          // YYYY-MM-DD
  std::string timer;         // "gpu-timestamps" or "wall-clock"
  uint64_t bytes = 0;        // buffer size the bandwidth figures used
  double read_gbps = std::numeric_limits<double>::quiet_NaN();   // best read kernel, bytes read / time
  double write_gbps = std::numeric_limits<double>::quiet_NaN();  // best fill kernel, bytes written / time
  double copy_gbps = std::numeric_limits<double>::quiet_NaN();   // best copy kernel, (bytes read + bytes written) / time
  double fma_gflops = std::numeric_limits<double>::quiet_NaN();  // f32, 2 flops per lane-FMA
  double dispatch_wall_us = std::numeric_limits<double>::quiet_NaN();     // one trivial dispatch, encode + submit + wait, amortized
  double dispatch_gpu_us = std::numeric_limits<double>::quiet_NaN();      // the same, GPU time from pass timestamps
  double dispatch_ro_gpu_us = std::numeric_limits<double>::quiet_NaN();   // trivial dispatches with no writable binding (no barrier)
  double dispatch_ro_wall_us = std::numeric_limits<double>::quiet_NaN();
};

// Writes `peaks` plus `details` (per-variant rows, free-form) as JSON, format "wgrt-peaks" v1.
void save_peaks(const std::string& path, const Peaks& peaks, const nlohmann::json& details);

// Reads a file save_peaks wrote; throws std::runtime_error naming the file and the field, with
// a hint, when it is missing, malformed or of another format version.
Peaks load_peaks(const std::string& path);

}  // namespace wgrt::gpu
