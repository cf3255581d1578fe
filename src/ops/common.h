// Helpers every op shares: grids, uniform-block field tables, key shorthands.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "graph/graph.h"

namespace wgrt::ops {

constexpr uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// `groups` workgroups laid out 2-D so no dimension passes `max_per_dim`; kernels recover the
// flat index as wid.x + wid.y * num_workgroups.x and skip indices past their count.
graph::Grid grid_1d(uint64_t groups, uint32_t max_per_dim);

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
