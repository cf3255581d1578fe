// Shared by the device-layer tests: the y = scale * (a * x + b) + offset kernels (the embedded
// src/gpu/gpu_selftest.wgsl and inline variants), their uniform block, a CPU reference and
// a runner that encodes, submits and reads back one dispatch.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "gpu/buffer.h"
#include "gpu/pipeline.h"
#include "gpu/profiler.h"

namespace wgrt::test {

// Mirrors `struct Params` of gpu_selftest.wgsl.
struct SelftestParams {
  uint32_t n = 0;
  float a = 0;
  float b = 0;
  uint32_t pad = 0;
};
static_assert(sizeof(SelftestParams) == 16 && alignof(SelftestParams) == 4);

constexpr uint32_t kSelftestWorkgroup = 64;  // @workgroup_size of the self-test kernels

// Inputs chosen so that every intermediate is exact in f32 (small multiples of 1/8), so the
// GPU result must equal the CPU's bit for bit whether or not the GPU fuses a*x+b.
inline std::vector<float> selftest_input(uint32_t n) {
  std::vector<float> x(n);
  for (uint32_t i = 0; i < n; ++i) x[i] = float(int(i % 509) - 254) * 0.125f;
  return x;
}

inline std::vector<float> selftest_cpu(const SelftestParams& p, std::span<const float> x,
                                       float scale = 1.0f, float offset = 0.0f) {
  std::vector<float> y(p.n);
  for (uint32_t i = 0; i < p.n; ++i) y[i] = scale * (p.a * x[i] + p.b) + offset;
  return y;
}

// The buffers and bind group of one run; y starts as NaN so unwritten elements show.
struct SelftestJob {
  uint32_t n = 0;
  gpu::Buffer params, x, y;
  gpu::BindGroup group;
};

inline SelftestJob make_selftest_job(gpu::Device& dev, const gpu::Pipeline& pipe,
                                     const SelftestParams& p, std::span<const float> x) {
  SelftestJob job;
  job.n = p.n;
  job.params = gpu::create_buffer(dev, sizeof(p), gpu::kUniformUsage, "selftest params");
  job.x = gpu::create_buffer(dev, x.size_bytes(), gpu::kStorageUsage, "selftest x");
  job.y = gpu::create_buffer(dev, uint64_t(p.n) * sizeof(float), gpu::kStorageUsage, "selftest y");
  gpu::upload(dev, job.params.get(), 0, &p, sizeof(p));
  gpu::upload(dev, job.x.get(), x);
  std::vector<float> nan(p.n, std::numeric_limits<float>::quiet_NaN());
  gpu::upload(dev, job.y.get(), std::span<const float>(nan));
  const gpu::BufferBinding bindings[] = {
      {.binding = 0, .buffer = job.params.get()},
      {.binding = 1, .buffer = job.x.get()},
      {.binding = 2, .buffer = job.y.get()}};
  job.group = gpu::create_bind_group(dev, pipe.layout.get(), bindings, "selftest");
  return job;
}

// Encodes the job as one compute pass (timed under `label` when `prof` is non-null).
inline void encode_selftest(WGPUCommandEncoder enc, const gpu::Pipeline& pipe,
                            const SelftestJob& job, gpu::Profiler* prof = nullptr,
                            std::string_view label = "selftest") {
  gpu::ComputePass pass = gpu::begin_compute_pass(enc, prof, label);
  wgpuComputePassEncoderSetPipeline(pass.get(), pipe.pipeline.get());
  wgpuComputePassEncoderSetBindGroup(pass.get(), 0, job.group.get(), 0, nullptr);
  wgpuComputePassEncoderDispatchWorkgroups(
      pass.get(), (job.n + kSelftestWorkgroup - 1) / kSelftestWorkgroup, 1, 1);
  wgpuComputePassEncoderEnd(pass.get());
}

inline void submit(gpu::Device& dev, gpu::CommandEncoder& enc) {
  auto cmd = gpu::CommandBuffer::adopt(wgpuCommandEncoderFinish(enc.get(), nullptr));
  WGPUCommandBuffer raw = cmd.get();
  wgpuQueueSubmit(dev.queue.get(), 1, &raw);
}

inline gpu::CommandEncoder make_encoder(gpu::Device& dev) {
  return gpu::CommandEncoder::adopt(wgpuDeviceCreateCommandEncoder(dev.get(), nullptr));
}

// One dispatch of `pipe` over x; returns y.
inline std::vector<float> run_selftest(gpu::Device& dev, const gpu::Pipeline& pipe,
                                       const SelftestParams& p, std::span<const float> x) {
  SelftestJob job = make_selftest_job(dev, pipe, p, x);
  gpu::CommandEncoder enc = make_encoder(dev);
  encode_selftest(enc.get(), pipe, job);
  submit(dev, enc);
  return gpu::read_buffer<float>(dev, job.y.get(), p.n);
}

}  // namespace wgrt::test
