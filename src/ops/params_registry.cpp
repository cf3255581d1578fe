// Every op's uniform block, listed for the C++/WGSL agreement test.
#include "ops/attention/attention.h"
#include "ops/common.h"
#include "ops/elementwise/elementwise.h"
#include "ops/gated_add/gated_add.h"
#include "ops/kv_cache/kv_cache.h"
#include "ops/linear/linear.h"
#include "ops/moe/moe.h"
#include "ops/softmax/softmax.h"
#include "ops/norm/norm.h"
#include "ops/rope/rope.h"
#include "ops/sampling/logit_adjust.h"
#include "ops/sampling/sampling.h"
#include "ops/silu_mul/silu_mul.h"
#include "ops/linear_q/linear_q.h"
#include "ops/embedding/embedding.h"
#include "ops/slice/slice.h"

namespace wgrt::ops {

std::span<const ParamLayout> param_layouts() {
  static const ParamLayout layouts[] = {
      kElementwiseLayout,
      kGatedAddLayout,
      kLinearLayout,
      kAttentionLayout,
      kKvCacheLayout,
      kSoftmaxLayout,
      kRmsNormLayout,
      kRopeLayout,
      kSiluMulLayout,
      kSamplingLayout,
      kLogitAdjustLayout,
      kLinearQLayout,
      kEmbeddingLayout,
      kSliceLayout,
      kMoeLayout,
  };
  return layouts;
}

}  // namespace wgrt::ops
