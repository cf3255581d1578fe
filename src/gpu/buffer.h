// GPU buffers: create, upload, read back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/device.h"

namespace wgrt::gpu {

constexpr WGPUBufferUsage kStorageUsage =
    WGPUBufferUsage_Storage | WGPUBufferUsage_CopyDst | WGPUBufferUsage_CopySrc;
// CopySrc so tests can read uniform blocks back.
constexpr WGPUBufferUsage kUniformUsage =
    WGPUBufferUsage_Uniform | WGPUBufferUsage_CopyDst | WGPUBufferUsage_CopySrc;
constexpr WGPUBufferUsage kReadbackUsage = WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst;

// Size is rounded up to a multiple of 4 bytes (WebGPU copies move whole words).
Buffer create_buffer(Device& dev, uint64_t bytes, WGPUBufferUsage usage, std::string_view label);

// Queues a write; `bytes` need not be a multiple of 4 (the tail word is zero-padded).
void upload(Device& dev, WGPUBuffer dst, uint64_t offset, const void* data, size_t bytes);

template <class T>
void upload(Device& dev, WGPUBuffer dst, std::span<const T> values, uint64_t offset = 0) {
  upload(dev, dst, offset, values.data(), values.size_bytes());
}

// Maps a MapRead staging buffer, copies `bytes` out, unmaps. Waits for the GPU.
void map_read(Device& dev, WGPUBuffer staging, size_t bytes, void* dst);

// The same in two halves, so the wait can come later: begin right after the submit that fills
// the buffer (the mapping then waits for that work only), end when the data is needed. `r`
// must stay at its address in between (the callback writes into it).
struct MapRequest {
  WGPUFuture future{};
  WGPUMapAsyncStatus status = WGPUMapAsyncStatus_Error;
  std::string message;
  size_t bytes = 0;
  bool pending = false;
  bool kept = false;  // map_read_end(keep) left the buffer mapped: map_read_copy reads it again
};
void map_read_begin(Device& dev, WGPUBuffer staging, size_t bytes, MapRequest& r);
// Waits for the mapping, copies min(bytes, r.bytes) to dst (none when dst is null), unmaps
// (`keep`: leaves it mapped, so later reads cost a copy, not a round trip to the GPU, until
// map_release). wait_ns, when given, gets the nanoseconds spent waiting for the GPU.
void map_read_end(Device& dev, WGPUBuffer staging, MapRequest& r, void* dst, size_t bytes, int64_t* wait_ns = nullptr,
                  bool keep = false);
// A kept mapping (r.kept): copies `bytes` of it from byte `offset` to dst (within r.bytes);
// map_release unmaps it.
void map_read_copy(WGPUBuffer staging, const MapRequest& r, void* dst, size_t bytes, size_t offset = 0);
void map_release(WGPUBuffer staging, MapRequest& r);

// Reads `bytes` of `src` from `offset` through a temporary staging buffer. For tests and
// tools; the token path reads through staging buffers it allocated at build.
void read_buffer(Device& dev, WGPUBuffer src, uint64_t offset, size_t bytes, void* dst);

template <class T>
std::vector<T> read_buffer(Device& dev, WGPUBuffer src, size_t count, uint64_t offset = 0) {
  std::vector<T> out(count);
  read_buffer(dev, src, offset, count * sizeof(T), out.data());
  return out;
}

constexpr uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace wgrt::gpu
