#include "ops/common.h"

#include <algorithm>

namespace wgrt::ops {

graph::Grid grid_1d(uint64_t groups, uint32_t max_per_dim) {
  groups = std::max<uint64_t>(groups, 1);
  if (groups <= max_per_dim) return {uint32_t(groups), 1, 1};
  uint64_t y = ceil_div(groups, max_per_dim);
  return {uint32_t(ceil_div(groups, y)), uint32_t(y), 1};
}

}  // namespace wgrt::ops
