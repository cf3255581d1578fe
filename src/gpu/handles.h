// Move-only RAII owners for WebGPU objects, and a count of the objects wgrt created and
// still holds (tests use it to prove that a token step creates nothing and a graph leaks
// nothing).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <utility>

#include "gpu/webgpu.h"

namespace wgrt::gpu {

enum class ObjectKind : uint8_t {
  Instance, Adapter, Device, Queue, Buffer, ShaderModule, ComputePipeline, BindGroupLayout,
  PipelineLayout, BindGroup, QuerySet, CommandEncoder, ComputePassEncoder, CommandBuffer,
  Count
};

const char* object_kind_name(ObjectKind kind);

struct ObjectCounts {
  std::array<int64_t, size_t(ObjectKind::Count)> created{};
  std::array<int64_t, size_t(ObjectKind::Count)> alive{};
  int64_t created_of(ObjectKind k) const { return created[size_t(k)]; }
  int64_t alive_of(ObjectKind k) const { return alive[size_t(k)]; }
  int64_t alive_total() const;
  // Objects other than the single-use encoders/command buffers WebGPU makes per submit.
  int64_t created_persistent() const;
};

// A snapshot of the process-wide counters (they are diagnostics, not state).
ObjectCounts object_counts();

namespace detail {
void note_created(ObjectKind kind);
void note_released(ObjectKind kind);
}  // namespace detail

template <class Raw, void (*Release)(Raw), ObjectKind Kind>
class Handle {
 public:
  Handle() = default;
  // Takes over one reference; a null raw handle makes an empty Handle.
  static Handle adopt(Raw raw) { return Handle(raw); }
  Handle(Handle&& o) noexcept : raw_(std::exchange(o.raw_, nullptr)) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      raw_ = std::exchange(o.raw_, nullptr);
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }

  void reset() {
    if (raw_) {
      Release(raw_);
      detail::note_released(Kind);
      raw_ = nullptr;
    }
  }
  Raw get() const { return raw_; }
  explicit operator bool() const { return raw_ != nullptr; }

 private:
  explicit Handle(Raw raw) : raw_(raw) {
    if (raw_) detail::note_created(Kind);
  }
  Raw raw_ = nullptr;
};

// Buffers and query sets free their memory at once rather than at the last reference.
inline void destroy_and_release(WGPUBuffer b) { wgpuBufferDestroy(b); wgpuBufferRelease(b); }
inline void destroy_and_release(WGPUQuerySet q) { wgpuQuerySetDestroy(q); wgpuQuerySetRelease(q); }

using Instance = Handle<WGPUInstance, wgpuInstanceRelease, ObjectKind::Instance>;
using Adapter = Handle<WGPUAdapter, wgpuAdapterRelease, ObjectKind::Adapter>;
using DeviceHandle = Handle<WGPUDevice, wgpuDeviceRelease, ObjectKind::Device>;
using Queue = Handle<WGPUQueue, wgpuQueueRelease, ObjectKind::Queue>;
using Buffer = Handle<WGPUBuffer, destroy_and_release, ObjectKind::Buffer>;
using ShaderModule = Handle<WGPUShaderModule, wgpuShaderModuleRelease, ObjectKind::ShaderModule>;
using ComputePipeline =
    Handle<WGPUComputePipeline, wgpuComputePipelineRelease, ObjectKind::ComputePipeline>;
using BindGroupLayout =
    Handle<WGPUBindGroupLayout, wgpuBindGroupLayoutRelease, ObjectKind::BindGroupLayout>;
using PipelineLayout =
    Handle<WGPUPipelineLayout, wgpuPipelineLayoutRelease, ObjectKind::PipelineLayout>;
using BindGroup = Handle<WGPUBindGroup, wgpuBindGroupRelease, ObjectKind::BindGroup>;
using QuerySet = Handle<WGPUQuerySet, destroy_and_release, ObjectKind::QuerySet>;
using CommandEncoder =
    Handle<WGPUCommandEncoder, wgpuCommandEncoderRelease, ObjectKind::CommandEncoder>;
using ComputePass =
    Handle<WGPUComputePassEncoder, wgpuComputePassEncoderRelease, ObjectKind::ComputePassEncoder>;
using CommandBuffer =
    Handle<WGPUCommandBuffer, wgpuCommandBufferRelease, ObjectKind::CommandBuffer>;

}  // namespace wgrt::gpu
