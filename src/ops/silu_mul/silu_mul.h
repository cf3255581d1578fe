// SwiGLU: out = silu(gate) * up, silu(g) = g / (1 + e^-g); or GeGLU (GateAct::GeluTanh, Gemma):
// out = gelu_tanh(gate) * up, gelu_tanh(g) = g / 2 * (1 + tanh(sqrt(2 / pi) * (g + 0.044715 g^3))).
//
// Either two tensors gate, up [n_tokens, ff], or one fused [n_tokens, 2 * ff] holding gate
// then up in each row (a merged gate|up projection). out [n_tokens, ff]; n_tokens may vary.
#pragma once

#include <optional>

#include "graph/graph.h"
#include "ops/common.h"

namespace wgrt::ops {

enum class GateAct : uint8_t { Silu, GeluTanh };

struct SiluMulDesc {
  std::string name;                   // node and output name, e.g. "ffn_act.3"
  graph::TensorId gate;               // [n_tokens, ff], or fused [n_tokens, 2 * ff] without up
  std::optional<graph::TensorId> up;  // [n_tokens, ff]; absent: gate is the fused gate|up
  GateAct act = GateAct::Silu;        // the gate's activation (silu_mul.wgsl override GELU)
};

graph::TensorId add_silu_mul(graph::Graph& g, const SiluMulDesc& d);

// gate_act.wgsl's override constants for `act` (none for SiLU, its default), for every kernel
// that applies the gate: silu_mul and linear_q's fused swiglu entries.
std::vector<gpu::OverrideConstant> gate_act_constants(GateAct act);

struct SiluMulParams {
  uint32_t n_tokens;
  uint32_t ff;
  uint32_t fused;  // 1: gate and up are halves of one [n_tokens, 2 * ff] row; 2: blocks of 16
                   // columns, gate then up (kSiluBlocked)
  uint32_t _pad0;
};
static_assert(sizeof(SiluMulParams) == 16);
extern const ParamLayout kSiluMulLayout;

struct SiluMulInferCtx {
  graph::Shape gate;
  std::optional<graph::Shape> up;
};
graph::Shape infer_silu_mul(const SiluMulInferCtx& c);

struct SiluMulPlanCtx {
  graph::Shape out;
  uint32_t fused;  // SiluMulParams::fused
  uint32_t max_groups_per_dim;
};
void plan_silu_mul(const SiluMulPlanCtx& c, graph::Plan& plan);

// The `fused` value for a [n_tokens, 2 * ff] row whose gate and up columns alternate in blocks
// of 16 (the fused gate|up weight of linear_q's swiglu epilogue).
constexpr uint32_t kSiluMulWorkgroup = 256;  // silu_mul.wgsl WG (ops/kernel_constants.cpp writes it)
constexpr uint32_t kSiluBlocked = 2;

}  // namespace wgrt::ops
