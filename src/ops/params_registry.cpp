// Every op's uniform block, listed for the C++/WGSL agreement test.
#include "ops/common.h"
#include "ops/elementwise/elementwise.h"
#include "ops/linear/linear.h"

namespace wgrt::ops {

std::span<const ParamLayout> param_layouts() {
  static const ParamLayout layouts[] = {
      kElementwiseLayout,
      kLinearLayout,
  };
  return layouts;
}

}  // namespace wgrt::ops
