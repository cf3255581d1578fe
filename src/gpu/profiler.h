// GPU timestamp profiler: each profiled compute pass gets a begin/end timestamp pair, so a
// pass per dispatch gives per-dispatch GPU durations. Needs the timestamp-query feature.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpu/device.h"

namespace wgrt::gpu {

struct Profiler {
  QuerySet queries;
  Buffer resolved;  // QueryResolve | CopySrc
  Buffer staging;   // MapRead
  uint32_t capacity = 0;            // passes
  std::vector<std::string> labels;  // one per pass recorded since the last read
};

struct ProfileSample {
  std::string label;
  double seconds = 0;
};

// Throws GpuError when the device lacks timestamp-query.
Profiler create_profiler(Device& dev, uint32_t max_passes);

// Begins a compute pass on `enc`; when `prof` is non-null the pass is timed under `label`.
ComputePass begin_compute_pass(WGPUCommandEncoder enc, Profiler* prof, std::string_view label);

// Resolves the recorded timestamps into the profiler's buffers; call before finishing `enc`.
void resolve_profile(Profiler& prof, WGPUCommandEncoder enc);

// After the work was submitted: the duration of each recorded pass, in order. Resets.
std::vector<ProfileSample> read_profile(Device& dev, Profiler& prof);

}  // namespace wgrt::gpu
