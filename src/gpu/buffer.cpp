#include "gpu/buffer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace wgrt::gpu {

Buffer create_buffer(Device& dev, uint64_t bytes, WGPUBufferUsage usage, std::string_view label) {
  WGPUBufferDescriptor desc{};
  desc.label = sv(label);
  desc.usage = usage;
  desc.size = align_up(bytes == 0 ? 4 : bytes, 4);
  return scoped(dev, fmt::format("creating buffer '{}' of {} bytes", label, desc.size),
                [&] { return Buffer::adopt(wgpuDeviceCreateBuffer(dev.get(), &desc)); });
}

void upload(Device& dev, WGPUBuffer dst, uint64_t offset, const void* data, size_t bytes) {
  size_t whole = bytes & ~size_t(3);
  if (whole) wgpuQueueWriteBuffer(dev.queue.get(), dst, offset, data, whole);
  if (size_t tail = bytes - whole) {
    uint8_t word[4] = {0, 0, 0, 0};
    std::memcpy(word, static_cast<const uint8_t*>(data) + whole, tail);
    wgpuQueueWriteBuffer(dev.queue.get(), dst, offset + whole, word, 4);
  }
}

void map_read_begin(Device& dev, WGPUBuffer staging, size_t bytes, MapRequest& r) {
  r.bytes = bytes;
  r.status = WGPUMapAsyncStatus_Error;
  r.message.clear();
  WGPUBufferMapCallbackInfo cb{};
  cb.mode = WGPUCallbackMode_WaitAnyOnly;
  cb.callback = [](WGPUMapAsyncStatus status, WGPUStringView message, void* u1, void*) {
    auto* req = static_cast<MapRequest*>(u1);
    req->status = status;
    req->message = to_string(message);
  };
  cb.userdata1 = &r;
  r.future = wgpuBufferMapAsync(staging, WGPUMapMode_Read, 0, size_t(align_up(bytes, 4)), cb);
  r.pending = true;
  (void)dev;
}

void map_read_end(Device& dev, WGPUBuffer staging, MapRequest& r, void* dst, size_t bytes, int64_t* wait_ns,
                  bool keep) {
  if (!r.pending) throw GpuError("map_read_end: no mapping was begun for this buffer");
  r.pending = false;
  const auto t0 = std::chrono::steady_clock::now();
  wait(dev, r.future);
  if (wait_ns)
    *wait_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  check(dev);
  if (r.status != WGPUMapAsyncStatus_Success)
    throw GpuError(fmt::format("mapping a read-back buffer failed: {}", r.message));
  r.kept = true;
  try {
    map_read_copy(staging, r, dst, std::min(bytes, r.bytes));
  } catch (...) {
    map_release(staging, r);
    throw;
  }
  if (!keep) map_release(staging, r);
}

void map_read_copy(WGPUBuffer staging, const MapRequest& r, void* dst, size_t bytes, size_t offset) {
  if (!r.kept) throw GpuError("map_read_copy: the read-back buffer is not mapped");
  if (offset > r.bytes || bytes > r.bytes - offset)
    throw GpuError(fmt::format("map_read_copy: bytes {}..{} of a mapping of {}", offset, offset + bytes, r.bytes));
  const auto* src = static_cast<const uint8_t*>(wgpuBufferGetConstMappedRange(staging, 0, size_t(align_up(r.bytes, 4))));
  if (!src) throw GpuError("read-back buffer mapped but its range is unavailable");
  if (dst) std::memcpy(dst, src + offset, bytes);
}

void map_release(WGPUBuffer staging, MapRequest& r) {
  if (!r.kept) return;
  r.kept = false;
  wgpuBufferUnmap(staging);
}

void map_read(Device& dev, WGPUBuffer staging, size_t bytes, void* dst) {
  MapRequest r;
  map_read_begin(dev, staging, bytes, r);
  map_read_end(dev, staging, r, dst, bytes);
}

void read_buffer(Device& dev, WGPUBuffer src, uint64_t offset, size_t bytes, void* dst) {
  uint64_t copy = align_up(bytes, 4);
  Buffer staging = create_buffer(dev, copy, kReadbackUsage, "read_buffer staging");
  auto enc = CommandEncoder::adopt(wgpuDeviceCreateCommandEncoder(dev.get(), nullptr));
  wgpuCommandEncoderCopyBufferToBuffer(enc.get(), src, offset, staging.get(), 0, copy);
  auto cmd = CommandBuffer::adopt(wgpuCommandEncoderFinish(enc.get(), nullptr));
  WGPUCommandBuffer raw = cmd.get();
  wgpuQueueSubmit(dev.queue.get(), 1, &raw);
  map_read(dev, staging.get(), bytes, dst);
}

}  // namespace wgrt::gpu
