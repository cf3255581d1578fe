#include "gpu/profiler.h"

#include <fmt/format.h>

#include "gpu/buffer.h"

namespace wgrt::gpu {

Profiler create_profiler(Device& dev, uint32_t max_passes) {
  if (!dev.caps.timestamp_query)
    throw GpuError(fmt::format("the adapter '{}' has no timestamp-query feature; GPU profiling "
                               "is unavailable (hint: time with wall clocks instead)",
                               dev.caps.adapter.name));
  Profiler p;
  p.capacity = max_passes;
  WGPUQuerySetDescriptor desc{};
  desc.label = sv("wgrt profiler");
  desc.type = WGPUQueryType_Timestamp;
  desc.count = 2 * max_passes;
  p.queries = scoped(dev, "creating the timestamp query set",
                     [&] { return QuerySet::adopt(wgpuDeviceCreateQuerySet(dev.get(), &desc)); });
  uint64_t bytes = uint64_t(desc.count) * sizeof(uint64_t);
  p.resolved = create_buffer(dev, bytes, WGPUBufferUsage_QueryResolve | WGPUBufferUsage_CopySrc,
                             "profiler resolve");
  p.staging = create_buffer(dev, bytes, kReadbackUsage, "profiler staging");
  return p;
}

ComputePass begin_compute_pass(WGPUCommandEncoder enc, Profiler* prof, std::string_view label) {
  WGPUComputePassDescriptor desc{};
  desc.label = sv(label);
  WGPUPassTimestampWrites writes{};
  if (prof) {
    if (prof->labels.size() >= prof->capacity)
      throw GpuError(fmt::format("profiler full: more than {} timed passes in one submit",
                                 prof->capacity));
    uint32_t i = uint32_t(prof->labels.size());
    writes.querySet = prof->queries.get();
    writes.beginningOfPassWriteIndex = 2 * i;
    writes.endOfPassWriteIndex = 2 * i + 1;
    desc.timestampWrites = &writes;
    prof->labels.emplace_back(label);
  }
  return ComputePass::adopt(wgpuCommandEncoderBeginComputePass(enc, &desc));
}

void resolve_profile(Profiler& prof, WGPUCommandEncoder enc) {
  auto n = uint32_t(2 * prof.labels.size());
  if (n == 0) return;
  wgpuCommandEncoderResolveQuerySet(enc, prof.queries.get(), 0, n, prof.resolved.get(), 0);
  wgpuCommandEncoderCopyBufferToBuffer(enc, prof.resolved.get(), 0, prof.staging.get(), 0,
                                       uint64_t(n) * sizeof(uint64_t));
}

std::vector<ProfileSample> read_profile(Device& dev, Profiler& prof) {
  std::vector<ProfileSample> out;
  if (prof.labels.empty()) return out;
  std::vector<uint64_t> ticks(2 * prof.labels.size());
  map_read(dev, prof.staging.get(), ticks.size() * sizeof(uint64_t), ticks.data());
  for (size_t i = 0; i < prof.labels.size(); ++i) {
    uint64_t b = ticks[2 * i], e = ticks[2 * i + 1];
    out.push_back({std::move(prof.labels[i]), e > b ? double(e - b) * 1e-9 : 0.0});
  }
  prof.labels.clear();
  return out;
}

}  // namespace wgrt::gpu
