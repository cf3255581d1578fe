// linear with group-wise quantized weights (q4gsw, q8; ops/quant/quant.h has the layouts):
//   y[m, n] = sum_k x[m, k] * value(n, k) (+ bias[n])
// Routes on x's live rows (n_tokens):
//   [1, 1]    gemv      f32 activations; vec4<u32> weight loads, 4 rows per thread so each x
//                       load serves 4 rows, threads along K reduced in workgroup memory
//   [2, 7]    small_m   f32 activations, one u32 word (8 or 4 values) per step for all live rows
//   [8, max]  gemm      two kernels: `quantize_act` turns each x row into int8 with one f32
//                       scale per (row, group of gs), then `gemm` multiplies int8 x int8 with
//                       dot4I8Packed (64 x 128 tile per workgroup), scaling per group in f32
// The GEMM's result differs from f32 math by the activation rounding: at most
// absmax(x in group) / 254 per activation (tests/ops/linear_q_test.cpp bounds it exactly).
#pragma once

#include <optional>

#include "graph/graph.h"
#include "ops/common.h"
#include "ops/quant/quant.h"

namespace wgrt::ops {

struct LinearQDesc {
  std::string name;        // node and output name, e.g. "ffn_down.3"
  QuantFormat format = QuantFormat::Q4gsw;
  uint32_t gs = 32;        // group size along K: 32, 64 or 128
  graph::TensorId x;       // [M, K] f32, M may vary
  graph::TensorId q;       // u32 [N, K/8] (q4gsw) or [N, K/4] (q8)
  graph::TensorId scales;  // f16 [N, K/gs]
  std::optional<graph::TensorId> bias;  // [N] f32
};

graph::TensorId add_linear_q(graph::Graph& g, const LinearQDesc& d);

// Weight tensors for a QuantWeight: adds `<name>.q` and `<name>.scales` (call before build,
// write with write_quant_weight after).
struct QuantTensors {
  graph::TensorId q, scales;
};
QuantTensors add_quant_weight(graph::Graph& g, const std::string& name, QuantFormat f, uint32_t n,
                              uint32_t k, uint32_t gs);
void write_quant_weight(graph::Graph& g, const QuantTensors& t, const QuantWeight& w);

struct LinearQParams {
  uint32_t m, n, k, gs;
  uint32_t has_bias, pad0, pad1, pad2;
};
static_assert(sizeof(LinearQParams) == 32);
extern const ParamLayout kLinearQLayout;

struct LinearQInferCtx {
  graph::Shape x;
  uint32_t n, k;
};
graph::Shape infer_linear_q(const LinearQInferCtx& c);

enum LinearQRoute : uint32_t { kLinearQGemv = 0, kLinearQSmallM = 1, kLinearQGemm = 2 };
struct LinearQPlanCtx {
  uint32_t m, n, k, gs;
  bool has_bias;
  uint32_t route;
  uint32_t gemv_rows_per_wg;  // fixed at build from the weight's shape
  uint32_t max_groups_per_dim;
};
void plan_linear_q(const LinearQPlanCtx& c, graph::Plan& plan);

// Kernel tiles (linear_q.wgsl).
constexpr uint32_t kLinearQGemmBM = 64, kLinearQGemmBN = 128;
constexpr uint32_t kLinearQSmallRows = 8;  // rows of the weight per small_m workgroup (x 32 threads)

}  // namespace wgrt::ops
