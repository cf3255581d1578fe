// The constants each kernel file shares with its op's C++ (gpu/pipeline.h KernelConstant): the
// values are the ops' own; gpu::kernel_module_source writes them into every module that holds
// the file, so the WGSL uses them and never declares them.
#include "gpu/pipeline.h"
#include "ops/attention/attention.h"
#include "ops/embedding/embedding.h"
#include "ops/gated_add/gated_add.h"
#include "ops/kv_cache/kv_cache.h"
#include "ops/linear/linear.h"
#include "ops/linear_q/linear_q.h"
#include "ops/linear_q/linear_q_build.h"
#include "ops/moe/moe.h"
#include "ops/norm/norm.h"
#include "ops/rope/rope.h"
#include "ops/sampling/logit_adjust.h"
#include "ops/silu_mul/silu_mul.h"
#include "ops/softmax/softmax.h"

namespace wgrt::gpu {

std::span<const KernelConstant> kernel_constants() {
  using namespace ops;
  static constexpr KernelConstant kTable[] = {
      {"attention", "WG", kAttnWorkgroup},
      {"attention", "RWG", kAttnReduceWorkgroup},
      {"attention", "MAX_GROUP", kAttnMaxGroup},
      {"attention", "MAX_CHUNKS", kMaxDecodeChunks},
      {"attention", "MAX_KPL", kAttnMaxKeysPerLane},
      {"attention_decode_vec", "VKEYS", kVecKeysPerTurn},
      {"attention_prefill_rt", "RK", kPrefillRtKeys},
      {"attention_prefill_rth", "RHK", kPrefillRthKeys},
      {"embedding", "WG", kEmbeddingWorkgroup},
      {"gated_add", "WG", kGatedAddWorkgroup},
      {"kv_cache", "WG", kKvCacheWorkgroup},
      {"linear", "ROWS", kLinearGemvRows},
      {"linear", "TILE", kLinearTile},
      {"linear_q_gemv_entries", "GV_ROWS", kLinearQGemvRows},
      {"linear_q_gemv_entries", "EX_MAX_E", kMoeMaxExperts},
      {"linear_q_matrix", "WG", linear_q_detail::kWg},
      {"linear_q_matrix", "RPT", linear_q_detail::kRpt},
      {"linear_q_matrix", "SK", linear_q_detail::kSmallK},
      {"linear_q_matrix", "BM", kLinearQGemmBM},
      {"linear_q_matrix", "BN", kLinearQGemmBN},
      {"linear_q_mma", "MMA_MAX_BM", kLinearQMmaMaxBM},
      {"linear_q_mma", "MMA_LD", kLinearQMmaLd},
      {"linear_q_mma", "MMA_SG", kLinearQMmaLanes},
      {"logit_adjust", "WG", kLogitAdjustWorkgroup},
      {"moe", "MOE_WG", kMoeWorkgroup},
      {"moe", "MOE_MAX_E", kMoeMaxExperts},
      {"rms_norm", "WG", kRmsNormWorkgroup},
      {"rope", "WG", kRopeWorkgroup},
      {"silu_mul", "WG", kSiluMulWorkgroup},
      {"softmax", "WG", kSoftmaxWorkgroup},
  };
  return kTable;
}

}  // namespace wgrt::gpu
