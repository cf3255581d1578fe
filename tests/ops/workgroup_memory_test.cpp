// C++'s counts of kernels' workgroup memory against what Dawn counts from the WGSL: the counts
// decide which variant a node takes on a device (linear_q's rows of x per gemv_multi workgroup,
// the experts' routed gate|up, attention's decode and prefill kernels), so an undercount fails to
// compile there and an overcount gives up a variant that fits. A device granted exactly the count compiles the kernel; one granted
// 16 bytes less (a variable's rounding) refuses it.
#include <gtest/gtest.h>

#include <algorithm>

#include "graph/graph.h"
#include "ops/attention/attention.h"
#include "ops/kv_cache/kv_cache.h"
#include "ops/linear_q/linear_q.h"
#include "ops/linear_q/linear_q_build.h"
#include "ops/moe/moe.h"
#include "ops/quant/quant.h"
#include "support/device.h"
#include "support/op_harness.h"

namespace wgrt::test {
namespace {

using namespace graph;

// The pipeline of route `route` of node `name` (its last kernel: the gemv after any prologue).
gpu::PipelineKey kernel_of(const Graph& g, const std::string& name, RouteId route) {
  return route_info(g, find_node(g, name), route).kernels.back().pipeline;
}

// Whether a device here can be granted `bytes` - 16 to `bytes` of workgroup storage (WebGPU's
// minimum is 16 KiB: smaller counts fit every device, so they decide no variant).
bool checkable(uint64_t bytes) {
  return bytes <= device().caps.limits.maxComputeWorkgroupStorageSize && bytes - 16 >= 16384;
}

// Compiles `key` on a device granted exactly `bytes` of workgroup storage, and fails to on one
// granted 16 fewer.
void expect_exact(const gpu::PipelineKey& key, uint64_t bytes) {
  SCOPED_TRACE(::testing::Message() << key.kernel << "/" << key.entry << ": " << bytes << " bytes");
  if (!checkable(bytes))
    GTEST_SKIP() << "the count is outside what a device can be granted here (16384 to "
                 << device().caps.limits.maxComputeWorkgroupStorageSize << ")";
  gpu::Device exact = gpu::create_device({.workgroup_storage = uint32_t(bytes)});
  ASSERT_EQ(exact.caps.limits.maxComputeWorkgroupStorageSize, bytes);
  EXPECT_NO_THROW(gpu::get_pipeline(exact, key));
  gpu::Device less = gpu::create_device({.workgroup_storage = uint32_t(bytes - 16)});
  EXPECT_THROW(gpu::get_pipeline(less, key), gpu::GpuError);
}

// gemv_multi with 4 rows of x at 64 lanes (gemv_workgroup_bytes: 24,640 bytes, past WebGPU's
// default 16 KiB, so a device at the default takes fewer rows).
TEST(WorkgroupMemory, GemvMultiCountIsExact) {
  Graph g(device());
  TensorId x = add_input(g, {.name = "x", .max_shape = {8, 512}, .dynamic_dims = 1});
  ops::QuantTensors w = ops::add_quant_weight(g, "w", ops::QuantFormat::Q4gsw, 64, 512, 32);
  ops::add_linear_q(g, {.name = "y", .format = ops::QuantFormat::Q4gsw, .gs = 32, .x = x, .q = w.q,
                        .scales = w.scales, .gemv_lanes = 64, .gemv_int8 = 1, .gemv_x = 4,
                        .gemv_m_from = ops::kLinearQGemvMaxRows + 1});
  const gpu::PipelineKey key = kernel_of(g, "y", ops::kLinearQGemvMulti);
  EXPECT_NE(std::find(key.constants.begin(), key.constants.end(), gpu::OverrideConstant{"GV_XR", 4}),
            key.constants.end());
  expect_exact(key, ops::linear_q_detail::gemv_workgroup_bytes(64, 4));
}

// The experts' gate|up ranking its token's router logits (gemv_experts_swiglu_route) at 64
// lanes, a k-quant and an IQ4 format.
TEST(WorkgroupMemory, RoutedExpertsCountIsExact) {
  for (ops::QuantFormat f : {ops::QuantFormat::Q4K, ops::QuantFormat::IQ4XS}) {
    SCOPED_TRACE(ops::quant_format_name(f));
    Graph g(device());
    TensorId x = add_input(g, {.name = "x", .max_shape = {2, 512}, .dynamic_dims = 1});
    TensorId logits = add_input(g, {.name = "logits", .max_shape = {2, 8}, .dynamic_dims = 1});
    const uint32_t gs = ops::has_block_d(f) ? 256 : 32;
    ops::QuantTensors w = ops::add_quant_weight(g, "w", f, 8 * 64, 512, gs);
    ops::add_linear_q_experts_routed(g, {.name = "y", .format = f, .gs = gs, .x = x, .q = w.q, .scales = w.scales,
                                         .n_expert = 64, .x_div = 2, .swiglu = true, .gemv_lanes = 64},
                                     {.name = "route", .logits = logits, .n_used = 2});
    expect_exact(kernel_of(g, "y", ops::kLinearQExpertsRouted),
                 ops::linear_q_detail::experts_routed_workgroup_bytes(64));
  }
}

// Attention's kernels at the footprints attention_variants counts for them (ops/attention), each
// decode kernel forced in turn, f16 caches, head dims 64 and 128, 4 and 8 query heads a KV head:
// the decode kernel, decode_reduce and the prefill kernel the node takes, where the count is past
// WebGPU's minimum of 16 KiB (the prefill kernels at head dim 128; the decode kernels' stay under).
TEST(WorkgroupMemory, AttentionCountsAreExact) {
  const gpu::DeviceCaps& caps = device().caps;
  uint32_t checked = 0;
  auto check = [&](const gpu::PipelineKey& key, uint64_t bytes) {
    if (!checkable(bytes)) return;
    expect_exact(key, bytes);
    ++checked;
  };
  for (uint32_t head_dim : {64u, 128u})
    for (uint32_t group : {4u, 8u})
      for (ops::DecodeKernel kernel : {ops::DecodeKernel::vec, ops::DecodeKernel::sg, ops::DecodeKernel::split}) {
        SCOPED_TRACE(::testing::Message() << "head_dim " << head_dim << ", group " << group << ", "
                                          << ops::decode_kernel_name(kernel));
        const uint32_t n_heads = 2 * group, lanes = gpu::subgroup_lanes(caps);
        ops::AttentionVariants v;
        try {
          v = ops::attention_variants(caps.limits, "attn", head_dim, group, true, lanes, kernel);
        } catch (const std::invalid_argument&) {
          continue;  // the kernel cannot run this shape on this device (the node refuses it too)
        }
        Graph g(device());
        auto kc = ops::add_kv_cache(g, "kc", DType::F16, 2, 64, head_dim);
        auto vc = ops::add_kv_cache(g, "vc", DType::F16, 2, 64, head_dim);
        auto pos = add_symbol(g, {.name = "pos", .lo = 0, .hi = 63});
        auto q = add_input(g, {.name = "q", .max_shape = {8, n_heads * head_dim}, .dynamic_dims = 1});
        ops::add_attention(g, {.name = "attn", .q = q, .k_cache = kc, .v_cache = vc, .pos = pos, .n_heads = n_heads,
                               .decode_kernel = kernel});
        const auto& decode = route_info(g, find_node(g, "attn"), ops::kAttentionDecode).kernels;
        check(decode.front().pipeline, v.decode.storage_bytes);
        check(decode.back().pipeline, v.reduce.storage_bytes);
        check(kernel_of(g, "attn", ops::kAttentionPrefill), v.prefill.storage_bytes);
      }
  RecordProperty("checked", int(checked));
  if (checked == 0) GTEST_SKIP() << "no attention kernel's count is past 16 KiB on this device";
}

}  // namespace
}  // namespace wgrt::test
