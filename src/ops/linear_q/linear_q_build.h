// What add_linear_q (linear_q.cpp) shares with its route builders (linear_q_routes.cpp) and
// its device choices (linear_q_choices.cpp); not part of the op's interface (linear_q.h).
//
// add_linear_q checks the description, fills a LinearQBuild and picks the routes' row ranges
// (route_ranges); then each route family's builder adds its routes, each route a list of
// kernels and the LinearQStep list that plan_linear_q turns into their params and grids:
//   build_gemv_routes    gemv, gemv_multi, gemv_last  (every fusion inside one kernel per weight)
//   build_gemv_m_route   gemv_m                       ([rms_norm] quantize_act, a kernel per weight)
//   build_matrix_routes  small_m, gemm                (int8 gemm with split K, or matrix cores)
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ops/linear_q/linear_q.h"

namespace wgrt::ops::linear_q_detail {

// How the kernels read a weight format (linear_q.wgsl's BITS and SCALES; AFFINE and NL follow
// quant.h's is_affine and has_iq4_grid). The GGUF blocks' sizes are model/ggml_types.h's
// GgmlTypeInfo; the repacked words' quant.h's.
struct KernelFormat {
  QuantFormat format;
  uint8_t bits;    // 2: q2k, 3: q3k, 4: q4gsw / q4k / q4_1 / iq4, 5: q5k / q5_0 / q5_1, 6: q6k, 8: q8
  uint8_t scales;  // 0 an f16 per group, 1 the K-quant regions, 2 (d, m) pairs, 3 iq4_xs's headers
};
const KernelFormat& kernel_format(QuantFormat f);

// linear_q_matrix.wgsl's tiles: WG threads, RPT rows per thread, SK lanes along K (small_m);
// ops/kernel_constants.cpp writes them into it.
constexpr uint32_t kWg = 256;
constexpr uint32_t kRpt = 4;
constexpr uint32_t kSmallK = 32;

// A weight's rows (N), after checking its words and scales against K (errors name `name`).
uint32_t check_part(const graph::Graph& g, const LinearQPart& wp, uint32_t k, const std::string& name);

// The device choices the builders take (linear_q_choices.cpp).
uint32_t node_gemv_m_from(const gpu::DeviceCaps& caps, uint32_t n, int gemv_int8, uint32_t forced);
bool gemv_multi_on(const gpu::DeviceCaps& caps, int gemv_int8, uint32_t gemv_x);
uint32_t split_scratch_rows(uint32_t max_m, uint32_t n, uint32_t k, uint32_t gs);
uint32_t gemv_lanes(const gpu::DeviceCaps& caps, uint32_t n, uint32_t forced, const std::string& name, uint32_t xr);
uint64_t gemv_workgroup_bytes(uint32_t lanes, uint32_t xr);
// gemv_experts_swiglu_route's: the gemv's (xr 1) and the route's ranking (linear_q_experts.cpp).
uint64_t experts_routed_workgroup_bytes(uint32_t lanes);
// The pairs from which the experts' grouped gemm serves: `forced` (LinearQExpertsDesc::gemm_from),
// else WGRT_EXPERTS_GEMM_FROM, else kExpertsGemmMinPairs; 0: never.
uint32_t experts_gemm_from(uint32_t forced);
// Whether the device runs gemm_experts: its 9 storage buffers (the int8 gemm's 7, moe_sort's
// order and tiles) pass WebGPU's default of 8 per stage; without, steps of any length take the
// gemv route.
inline constexpr uint32_t kExpertsGemmStorageBuffers = 9;
bool experts_gemm_runs(const gpu::DeviceCaps& caps);
bool gemv_turns_rope(const gpu::DeviceCaps& caps, const RopeQkv& r, std::span<const LinearQPartPlan> parts);

// The node's scratch tensors (outputs past y), by what their live shape follows.
enum class Scratch : uint8_t { Partial, Normed, GateUp, Qkv, Xq, Xs, Split, XqOut };

// One route's kernels and what each is (plan_linear_q's steps).
struct RouteKernels {
  std::vector<graph::KernelSpec> ks;
  std::vector<LinearQStep> steps;
};

// The node under construction: its description, checked weights, tensors and routes so far.
struct LinearQBuild {
  graph::Graph& g;
  const LinearQDesc& d;
  const gpu::DeviceCaps& caps;
  std::vector<LinearQPart> parts;  // the first weight, then d.more (their rows continue y's columns)
  std::vector<LinearQPartPlan> part_plans;
  uint32_t max_m = 0, k = 0;
  uint32_t n = 0;      // all weights' rows
  uint32_t n_out = 0;  // y's columns
  uint32_t act_gs = 0;  // the activation groups
  uint32_t m_block = 0;  // rows of x per gemv_m workgroup
  // Row sets per one-row gemv workgroup: 8 for swiglu writing xq (16 outputs, one xq block).
  uint32_t out_sets = 4;
  std::optional<RopeQkvCaches> rope_caches;
  bool gemv_rope = false;     // the gemv turns q and k itself (gemv_turns_rope)
  bool one_row_gemv = false;  // the gemv route serves one row only (route_ranges sets it)
  graph::TensorId y;
  graph::TensorId bias, res, nw;  // bound where declared but not read: x or the scales
  std::optional<graph::TensorId> xq_out;   // the output quantized ahead (d.xq_out)
  std::optional<graph::TensorId> qkv;      // q|k|v before rope_qkv, where the gemv does not turn it
  std::vector<graph::TensorId> outputs;    // y, then the scratch
  std::vector<Scratch> scratch_kind;       // of outputs[1..]
  graph::RouteSet routes;
  std::vector<std::pair<graph::RouteId, std::vector<LinearQStep>>> route_steps;
};

// Which routes the node has and the rows each serves (x's live rows).
struct RouteRanges {
  uint32_t gemv_m = 0;  // the gemv routes' rows: [1, gemv_m]
  uint32_t m_from = 0;  // gemv_m's first row count
  bool has_gemv_m = false;
  int64_t gemv_hi = 0;  // the gemv's rows past the first, where gemv_multi takes them: [2, gemv_hi]
  bool has_multi = false;
  bool has_last = false;  // last_row reading xq_in (the output head): gemv_last stages the last row
  bool has_matrix = false;
};

// Picks the ranges; sets b.one_row_gemv and each part's gemv_x (rows of x per gemv_multi workgroup).
RouteRanges route_ranges(LinearQBuild& b);

graph::TensorId add_scratch(LinearQBuild& b, Scratch kind, const char* suffix, graph::DType t, graph::Shape shape);
void add_route(LinearQBuild& b, graph::RouteId id, const char* name, int64_t lo, int64_t hi, RouteKernels r);

// The pipeline of entry point `entry` for weight wp: the format's constants, then the entry's.
struct KeyOptions {
  bool norm = false;
  bool split = false;   // gemm: split K
  uint32_t xr = 1;      // gemv: rows of x per workgroup
  bool xq = false;      // gemv: the one-row kernel (x quantized ahead in, xq out)
  uint32_t mma_bm = 0;  // gemm_mma: rows of y per workgroup
};
gpu::PipelineKey kernel_key(const LinearQBuild& b, const LinearQPart& wp, const char* entry, KeyOptions o = {});

void build_gemv_routes(LinearQBuild& b, const RouteRanges& r);
// The pipeline of gemv entry point `entry` (one row of x per workgroup, no fusion) for weight wp:
// the gemv_experts kernels (linear_q_experts.cpp).
gpu::PipelineKey gemv_key(const LinearQBuild& b, const LinearQPart& wp, const char* entry, bool norm = false);
// gemv_m and the matrix routes share the normalized x and its int8 copies (created once).
struct ActQuant {
  graph::TensorId xin;  // x, or its rms_norm
  std::optional<graph::TensorId> xq[2], xs[2];  // per layout: natural, q4/q5 nibble order
};
ActQuant make_act_quant(LinearQBuild& b);
void build_gemv_m_route(LinearQBuild& b, const RouteRanges& r, ActQuant& aq);
void build_matrix_routes(LinearQBuild& b, const RouteRanges& r, ActQuant& aq);

}  // namespace wgrt::ops::linear_q_detail
