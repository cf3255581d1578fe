#include "gpu/handles.h"

namespace wgrt::gpu {
namespace {
constexpr size_t kKinds = size_t(ObjectKind::Count);
std::array<std::atomic<int64_t>, kKinds> g_created{};
std::array<std::atomic<int64_t>, kKinds> g_alive{};
}  // namespace

const char* object_kind_name(ObjectKind kind) {
  static constexpr const char* names[kKinds] = {
      "instance",        "adapter",          "device",          "queue",
      "buffer",          "shader module",    "compute pipeline", "bind group layout",
      "pipeline layout", "bind group",       "query set",       "command encoder",
      "compute pass",    "command buffer"};
  return names[size_t(kind)];
}

namespace detail {
void note_created(ObjectKind kind) {
  g_created[size_t(kind)].fetch_add(1, std::memory_order_relaxed);
  g_alive[size_t(kind)].fetch_add(1, std::memory_order_relaxed);
}
void note_released(ObjectKind kind) { g_alive[size_t(kind)].fetch_sub(1, std::memory_order_relaxed); }
}  // namespace detail

ObjectCounts object_counts() {
  ObjectCounts c;
  for (size_t i = 0; i < kKinds; ++i) {
    c.created[i] = g_created[i].load(std::memory_order_relaxed);
    c.alive[i] = g_alive[i].load(std::memory_order_relaxed);
  }
  return c;
}

int64_t ObjectCounts::alive_total() const {
  int64_t n = 0;
  for (auto a : alive) n += a;
  return n;
}

int64_t ObjectCounts::created_persistent() const {
  int64_t n = 0;
  for (size_t i = 0; i < kKinds; ++i) {
    auto k = ObjectKind(i);
    if (k == ObjectKind::CommandEncoder || k == ObjectKind::ComputePassEncoder ||
        k == ObjectKind::CommandBuffer)
      continue;
    n += created[i];
  }
  return n;
}

}  // namespace wgrt::gpu
