// Which devices the gemm route runs on matrix cores (ops::gemm_takes_mma), decided from the
// adapter's features alone. The kernel itself is checked by the LinearQ suites, which take it
// wherever the device qualifies (a GPU with subgroup matrices; lavapipe has none, so CI keeps
// testing the int8 gemm there).
#include <gtest/gtest.h>

#include "ops/linear_q/linear_q.h"
#include "support/env.h"

namespace wgrt::test {
namespace {

gpu::DeviceCaps matrix_gpu() {
  gpu::DeviceCaps c;
  c.shader_f16 = true;
  c.subgroups = true;
  c.subgroup_matrix = true;
  c.subgroup_min_size = c.subgroup_max_size = 32;
  c.limits.maxComputeWorkgroupStorageSize = 49152;
  c.limits.maxComputeInvocationsPerWorkgroup = 1024;
  c.subgroup_matrix_configs = {
      {WGPUSubgroupMatrixComponentType_F16, WGPUSubgroupMatrixComponentType_F16, 16, 16, 16},
      {WGPUSubgroupMatrixComponentType_F16, WGPUSubgroupMatrixComponentType_F32, 16, 16, 16},
      {WGPUSubgroupMatrixComponentType_I8, WGPUSubgroupMatrixComponentType_I32, 16, 16, 32}};
  return c;
}

TEST(LinearQMma, TakenWhereTheAdapterOffersAnF16Tile) {
  ScopedEnv env("WGRT_MMA", "1");
  EXPECT_TRUE(ops::gemm_takes_mma(matrix_gpu()));
  EXPECT_FALSE(ops::gemm_takes_mma(gpu::DeviceCaps{}));

  gpu::DeviceCaps c = matrix_gpu();
  c.subgroup_matrix = false;  // the feature not enabled on the device
  EXPECT_FALSE(ops::gemm_takes_mma(c));
  c = matrix_gpu();
  c.shader_f16 = false;
  EXPECT_FALSE(ops::gemm_takes_mma(c));
  c = matrix_gpu();
  c.subgroup_min_size = 16;  // a subgroup size that varies
  EXPECT_FALSE(ops::gemm_takes_mma(c));
  c = matrix_gpu();
  c.subgroup_min_size = c.subgroup_max_size = 64;
  EXPECT_FALSE(ops::gemm_takes_mma(c));
  c = matrix_gpu();
  c.subgroup_matrix_configs.erase(c.subgroup_matrix_configs.begin() + 1);  // no f16 -> f32 tile
  EXPECT_FALSE(ops::gemm_takes_mma(c));
  c = matrix_gpu();
  c.limits.maxComputeWorkgroupStorageSize = ops::kLinearQMmaWorkgroupBytes - 4;
  EXPECT_FALSE(ops::gemm_takes_mma(c));
}

TEST(LinearQMma, EnvironmentTurnsItOnAndOff) {
  {
    ScopedEnv env("WGRT_MMA", nullptr);
    EXPECT_EQ(ops::gemm_takes_mma(matrix_gpu()), ops::kLinearQMmaByDefault);
  }
  {
    ScopedEnv env("WGRT_MMA", "0");
    EXPECT_FALSE(ops::gemm_takes_mma(matrix_gpu()));
  }
  {
    ScopedEnv env("WGRT_MMA", "yes");
    EXPECT_THROW(ops::gemm_takes_mma(matrix_gpu()), std::invalid_argument);
  }
}

}  // namespace
}  // namespace wgrt::test
