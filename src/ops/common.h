// Helpers every op shares: grids, uniform-block field tables, key shorthands.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "graph/graph.h"

namespace wgrt::ops {

constexpr uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// `groups` workgroups laid out 2-D so no dimension passes `max_per_dim`; kernels recover the
// flat index as wid.x + wid.y * num_workgroups.x and skip indices past their count.
graph::Grid grid_1d(uint64_t groups, uint32_t max_per_dim);

// What one kernel variant asks of the device: the bytes of its entry point's var<workgroup>
// data (each variable rounded up to 16) and its workgroup size. Ops compute it from the same
// numbers they pass as override constants, so the budget and the WGSL arrays agree.
struct WorkgroupFootprint {
  uint64_t storage_bytes = 0;
  uint32_t invocations = 0;
};
constexpr uint64_t wg_var_bytes(uint64_t bytes) { return (bytes + 15) / 16 * 16; }

// The index of the first variant (listed fastest first) that fits the device's
// maxComputeWorkgroupStorageSize and maxComputeInvocationsPerWorkgroup. When none fits,
// throws std::invalid_argument naming `what` (node and kernel), the limit the smallest variant
// exceeds, its need and the device's value.
size_t pick_variant(const WGPULimits& limits, std::string_view what,
                    std::span<const WorkgroupFootprint> variants);
// The same pick without the error: variants.size() when none fits (a kernel with another to fall to).
size_t first_fit(const WGPULimits& limits, std::span<const WorkgroupFootprint> variants);
// The same check for an op with a single variant.
void require_fits(const WGPULimits& limits, std::string_view what, const WorkgroupFootprint& f);

// A field of a uniform block, for the test that checks C++ and WGSL agree.
struct ParamField {
  const char* name;
  uint32_t offset;
};

// One uniform block: the .wgsl file's `struct Params` and its C++ mirror.
struct ParamLayout {
  const char* kernel;  // .wgsl stem
  uint32_t size;
  std::span<const ParamField> fields;
};

// Every op's uniform block (ops/params_registry.cpp).
std::span<const ParamLayout> param_layouts();

}  // namespace wgrt::ops
