#include "ops/common.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace wgrt::ops {

graph::Grid grid_1d(uint64_t groups, uint32_t max_per_dim) {
  groups = std::max<uint64_t>(groups, 1);
  if (groups <= max_per_dim) return {uint32_t(groups), 1, 1};
  uint64_t y = ceil_div(groups, max_per_dim);
  return {uint32_t(ceil_div(groups, y)), uint32_t(y), 1};
}

size_t first_fit(const WGPULimits& limits, std::span<const WorkgroupFootprint> variants) {
  for (size_t i = 0; i < variants.size(); ++i)
    if (variants[i].storage_bytes <= limits.maxComputeWorkgroupStorageSize &&
        variants[i].invocations <= limits.maxComputeInvocationsPerWorkgroup)
      return i;
  return variants.size();
}

size_t pick_variant(const WGPULimits& limits, std::string_view what,
                    std::span<const WorkgroupFootprint> variants) {
  if (size_t i = first_fit(limits, variants); i < variants.size()) return i;
  if (variants.empty()) throw std::invalid_argument(fmt::format("{}: no kernel variant for this shape", what));
  // Report the variant that asks least of the limit the device is shortest of.
  auto least = [&](auto field) {
    return std::min_element(variants.begin(), variants.end(),
                            [&](const auto& a, const auto& b) { return field(a) < field(b); });
  };
  auto by_storage = least([](const WorkgroupFootprint& f) { return f.storage_bytes; });
  if (by_storage->storage_bytes > limits.maxComputeWorkgroupStorageSize)
    throw std::invalid_argument(fmt::format(
        "{}: every kernel variant exceeds maxComputeWorkgroupStorageSize (the smallest needs {} bytes, "
        "the device has {}) (hint: an adapter with more workgroup memory, or a smaller head_dim)",
        what, by_storage->storage_bytes, limits.maxComputeWorkgroupStorageSize));
  auto by_threads = least([](const WorkgroupFootprint& f) { return f.invocations; });
  throw std::invalid_argument(fmt::format(
      "{}: every kernel variant exceeds maxComputeInvocationsPerWorkgroup (the smallest needs {}, the "
      "device has {}) (hint: an adapter with larger workgroups)",
      what, by_threads->invocations, limits.maxComputeInvocationsPerWorkgroup));
}

void require_fits(const WGPULimits& limits, std::string_view what, const WorkgroupFootprint& f) {
  pick_variant(limits, what, {&f, 1});
}

}  // namespace wgrt::ops
