// linear_q's route builders (linear_q_build.h): each route family adds its routes' kernels and
// the steps plan_linear_q plans them by.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "ops/linear_q/linear_q_build.h"

namespace wgrt::ops::linear_q_detail {

using graph::Binding;

namespace {

// Whether part wp's one-row gemv reads x quantized ahead (XQ_IN): where the node has xq_in, the
// gemv route serves one row only and the format can.
bool reads_xq(const LinearQBuild& b, const LinearQPart& wp) {
  return b.d.xq_in && b.one_row_gemv && linear_q_takes_xq(b.caps, wp.format, b.d.gemv_int8);
}

// A gemv kernel's own constants: lanes, row sets, int8 x, x quantized ahead, rope. xr: rows of x
// per workgroup (GV_XR; gemv_multi's kernels); xq: the gemv route's one-row kernel.
void gemv_constants(const LinearQBuild& b, const LinearQPart& wp, std::string_view entry, bool norm, uint32_t xr,
                    bool xq, std::vector<gpu::OverrideConstant>& extra) {
  const LinearQDesc& d = b.d;
  const gpu::DeviceCaps& caps = b.caps;
  const bool gm = entry.starts_with("gemv_m");
  uint32_t lanes = gemv_lanes(caps, b.n, d.gemv_lanes, d.name, gm ? 1 : xr);
  if (gm) {
    extra.push_back({"GM_M", double(b.m_block)});
    lanes = std::min(lanes, 8 * gpu::subgroup_lanes(caps));  // linear_q_gemv_m.wgsl GM_SUBS
  }
  extra.push_back({"NORM", norm ? 1.0 : 0.0});
  extra.push_back({"SG", double(gpu::subgroup_lanes(caps))});
  extra.push_back({"XI8", gemv_takes_int8(caps, d.gemv_int8) ? 1.0 : 0.0});
  if (!gm) extra.push_back({"GV_XR", double(xr)});
  if (!gm && xr == 1 && b.out_sets != 4) {
    lanes = std::min(lanes, caps.limits.maxComputeInvocationsPerWorkgroup / b.out_sets);
    if (lanes < gpu::subgroup_lanes(caps))
      throw std::invalid_argument(fmt::format("{}: {} row sets of a subgroup each pass the device's {} invocations "
                                              "per workgroup (hint: no xq_out)", d.name, b.out_sets,
                                              caps.limits.maxComputeInvocationsPerWorkgroup));
    extra.push_back({"GV_SETS", double(b.out_sets)});
  }
  if (d.swiglu)
    for (const gpu::OverrideConstant& c : gate_act_constants(d.act)) extra.push_back(c);
  if (xq && d.xq_norm) extra.push_back({"XQ_NORM", 1.0});
  if (xq && reads_xq(b, wp)) extra.push_back({"XQ_IN", 1.0});
  extra.push_back({"GV_TK", double(lanes)});
  if (entry.starts_with("gemv_rope"))
    extra.insert(extra.end(), {{"ROPE_HD", double(d.rope->head_dim)},
                               {"ROPE_NROT", double(b.rope_caches->n_rot)},
                               {"ROPE_Q", double(d.rope->n_heads * d.rope->head_dim)},
                               {"ROPE_KV", double(d.rope->n_kv_heads * d.rope->head_dim)},
                               {"ROPE_F16", b.rope_caches->f16 ? 1.0 : 0.0}});
}

}  // namespace

gpu::PipelineKey kernel_key(const LinearQBuild& b, const LinearQPart& wp, const char* entry, KeyOptions o) {
  const KernelFormat& kf = kernel_format(wp.format);
  std::vector<gpu::OverrideConstant> extra = {{"BITS", double(kf.bits)},
                                              {"AFFINE", is_affine(wp.format) ? 1.0 : 0.0},
                                              {"SCALES", double(kf.scales)},
                                              {"NL", has_iq4_grid(wp.format) ? 1.0 : 0.0},
                                              {"RES", b.d.residual ? 1.0 : 0.0}};
  const std::string_view e = entry;
  const char* module = "linear_q";
  if (e.starts_with("gemv")) {
    gemv_constants(b, wp, e, o.norm, o.xr, o.xq, extra);
  } else if (e == "gemm") {
    extra.push_back({"SPLIT", o.split ? 1.0 : 0.0});
  } else if (e == "gemm_mma") {
    extra.push_back({"MMA_BM", double(o.mma_bm)});
    module = "linear_q_mma";
  } else if (e == "small_m") {
    const double sg = double(gpu::subgroup_lanes(b.caps));
    extra.push_back({"SG", sg});
    extra.push_back({"SM_RED", sg >= kSmallK ? 1.0 : double(7 * kWg) / sg});  // linear_q_matrix.wgsl RCH * WG / SG
  }
  gpu::PipelineKey pk = gpu::make_key(module, entry, std::move(extra));
  pk.sg_shim = true;
  return pk;
}

namespace {

void add_rope_step(const LinearQBuild& b, RouteKernels& r) {
  r.ks.push_back(rope_qkv_kernel(*b.d.rope, *b.rope_caches, *b.qkv, b.y));
  r.steps.push_back({LinearQStep::RopeQkv, 0});
}

// The gemv kernel of part i over xv (norm: fused) into yv (swiglu: y), xr rows of x per
// workgroup; also the gemv_m route's kernel for the formats gemv_m does not take.
graph::KernelSpec gemv_kernel(const LinearQBuild& b, uint32_t i, graph::TensorId xv, bool norm, graph::TensorId yv,
                              bool turn_rope, std::optional<graph::TensorId> partial, uint32_t xr = 1,
                              bool xq = false) {
  const LinearQDesc& d = b.d;
  const LinearQPart& wp = b.parts[i];
  const char* entry = d.swiglu      ? (xq && b.xq_out ? "gemv_swiglu_xq" : "gemv_swiglu")
                      : d.argmax_out ? "gemv_argmax"
                      : turn_rope    ? (d.rope->rows ? "gemv_rope_rows" : "gemv_rope")
                      : xq && b.xq_out ? "gemv_xq"
                                       : "gemv";
  const graph::TensorId xin = xq && reads_xq(b, wp) ? *d.xq_in : xv;
  const graph::TensorId nwv = xq && d.xq_norm ? *d.xq_norm : b.nw;
  std::vector<Binding> bs = {Binding::of(0, xin), Binding::of(1, wp.q), Binding::of(2, wp.scales),
                             Binding::of(3, b.bias), Binding::of(4, yv), Binding::params(5), Binding::of(10, nwv)};
  if (turn_rope)  // positions: the symbol block's pos, or the rows' table
    bs.insert(bs.end(), {Binding::of(12, d.rope->freqs), Binding::of(13, d.rope->k_cache),
                         Binding::of(14, d.rope->v_cache),
                         d.rope->rows ? Binding::of(20, d.rope->rows->table) : Binding::symbol_block(15)});
  else if (!d.swiglu)
    bs.push_back(Binding::of(9, b.res));  // gemv_swiglu and gemv_rope add no residual
  if (partial) bs.push_back(Binding::of(11, *partial));
  if (xq && b.xq_out) bs.push_back(Binding::of(11, *b.xq_out));
  return graph::KernelSpec{kernel_key(b, wp, entry, {.norm = norm, .xr = xr, .xq = xq}), bs};
}

// Whether part i's kernels read x in the q4 / q5 nibble order (layout 1) or natural (0).
int act_layout(const LinearQBuild& b, uint32_t i) {
  const uint8_t bits = kernel_format(b.parts[i].format).bits;
  return bits == 4 || bits == 5 ? 1 : 0;
}

// The rms_norm and one quantize_act per layout that the parts `quantized(i)` read.
template <class Quantized>
void add_prologue(LinearQBuild& b, ActQuant& aq, RouteKernels& r, Quantized quantized) {
  const LinearQDesc& d = b.d;
  if (d.norm) {
    r.ks.push_back({gpu::make_key("rms_norm", "rms_norm"),
                    {Binding::of(0, d.x), Binding::of(1, *d.norm), Binding::of(2, aq.xin), Binding::params(3)}});
    r.steps.push_back({LinearQStep::Norm, 0});
  }
  for (int layout = 0; layout < 2; ++layout)
    for (uint32_t i = 0; i < b.parts.size(); ++i)
      if (quantized(i) && act_layout(b, i) == layout) {
        if (!aq.xq[layout]) {
          aq.xq[layout] = add_scratch(b, Scratch::Xq, layout ? ".xq4" : ".xq", graph::DType::U32, {b.max_m, b.k / 4});
          aq.xs[layout] =
              add_scratch(b, Scratch::Xs, layout ? ".xs4" : ".xs", graph::DType::F32, {b.max_m, b.k / b.act_gs});
        }
        r.ks.push_back({kernel_key(b, b.parts[i], "quantize_act"),
                        {Binding::of(0, aq.xin), Binding::params(5), Binding::of(6, *aq.xq[layout]),
                         Binding::of(7, *aq.xs[layout])}});
        r.steps.push_back({LinearQStep::QuantizeAct, i});
        break;
      }
}

// Part i's gemm: on matrix cores (f32 x), or the int8 gemm (then gemm_combine where it splits K).
void add_gemm(LinearQBuild& b, const ActQuant& aq, uint32_t i, graph::TensorId ymat,
              std::optional<graph::TensorId> split_sums, RouteKernels& r) {
  const LinearQPart& wp = b.parts[i];
  const LinearQPartPlan& pp = b.part_plans[i];
  if (pp.mma_bm) {
    r.ks.push_back({kernel_key(b, wp, "gemm_mma", {.mma_bm = pp.mma_bm}),
                    {Binding::of(0, aq.xin), Binding::of(8, wp.q), Binding::of(2, wp.scales), Binding::of(3, b.bias),
                     Binding::of(4, ymat), Binding::params(5), Binding::of(9, b.res)}});
    r.steps.push_back({LinearQStep::Gemm, i});
    return;
  }
  const int layout = act_layout(b, i);
  r.ks.push_back({kernel_key(b, wp, "gemm", {.split = pp.split}),
                  {Binding::of(8, wp.q), Binding::of(2, wp.scales), Binding::of(3, b.bias),
                   Binding::of(4, pp.split ? *split_sums : ymat), Binding::params(5), Binding::of(6, *aq.xq[layout]),
                   Binding::of(7, *aq.xs[layout]), Binding::of(9, b.res)}});
  r.steps.push_back({LinearQStep::Gemm, i});
  if (pp.split) {
    r.ks.push_back({kernel_key(b, wp, "gemm_combine"),
                    {Binding::of(0, *split_sums), Binding::of(3, b.bias), Binding::of(4, ymat), Binding::params(5),
                     Binding::of(9, b.res)}});
    r.steps.push_back({LinearQStep::GemmCombine, i});
  }
}

}  // namespace

gpu::PipelineKey gemv_key(const LinearQBuild& b, const LinearQPart& wp, const char* entry, bool norm) {
  return kernel_key(b, wp, entry, {.norm = norm});
}

graph::TensorId add_scratch(LinearQBuild& b, Scratch kind, const char* suffix, graph::DType t, graph::Shape shape) {
  graph::TensorId id = graph::add_tensor(b.g, b.d.name + suffix, t, shape);
  b.outputs.push_back(id);
  b.scratch_kind.push_back(kind);
  return id;
}

void add_route(LinearQBuild& b, graph::RouteId id, const char* name, int64_t lo, int64_t hi, RouteKernels r) {
  b.routes.routes.push_back({id, name, lo, hi, std::move(r.ks)});
  b.route_steps.push_back({id, std::move(r.steps)});
}

RouteRanges route_ranges(LinearQBuild& b) {
  const LinearQDesc& d = b.d;
  RouteRanges r;
  r.gemv_m = gemv_max_rows();
  r.m_from = node_gemv_m_from(b.caps, b.n, d.gemv_int8, d.gemv_m_from);
  r.has_gemv_m = !d.last_row && b.max_m >= r.m_from && r.m_from <= r.gemv_m;
  r.gemv_hi = d.last_row ? b.max_m : std::min<int64_t>(r.has_gemv_m ? r.m_from - 1 : r.gemv_m, b.max_m);
  r.has_multi = !d.last_row && r.gemv_hi >= 2 && gemv_multi_on(b.caps, d.gemv_int8, d.gemv_x);
  r.has_last = d.last_row && d.xq_in && r.gemv_hi >= 2;
  b.one_row_gemv = r.has_multi || r.has_last || r.gemv_hi <= 1;
  // Rows of x per workgroup: gemv_x_rows(), halved while the kernel's workgroup memory passes the
  // device's limit (4 rows at 64 lanes need 24,640 bytes; WebGPU's default limit is 16,384).
  uint32_t multi_x = r.has_multi ? gemv_x_rows(d.gemv_x) : 1;
  while (multi_x > 1 && gemv_workgroup_bytes(gemv_lanes(b.caps, b.n, d.gemv_lanes, d.name, multi_x), multi_x) >
                            b.caps.limits.maxComputeWorkgroupStorageSize)
    multi_x /= 2;
  for (uint32_t i = 0; i < b.parts.size(); ++i)
    if (multi_x > 1 && gemv_takes_int8(b.caps, d.gemv_int8) && gemv_m_takes(b.parts[i].format))
      b.part_plans[i].gemv_x = multi_x;
  r.has_matrix = !d.last_row && b.max_m > r.gemv_m;
  return r;
}

// gemv: every fusion inside one kernel per weight (argmax: plus the partials' reduction).
// gemv_multi: the same kernels, gemv_x rows of x per workgroup; gemv_last: the same kernels
// staging the last row of x.
void build_gemv_routes(LinearQBuild& b, const RouteRanges& rr) {
  const LinearQDesc& d = b.d;
  std::optional<graph::TensorId> partial;  // bound writable only by gemv_argmax
  if (d.argmax_out)
    partial = add_scratch(b, Scratch::Partial, ".partial", graph::DType::U32,
                          {uint32_t(ceil_div(b.n, kLinearQGemvRows)), 2});
  for (const bool multi : {false, true}) {
    if (multi && !rr.has_multi && !rr.has_last) break;
    const graph::TensorId yv = d.rope && !b.gemv_rope ? *b.qkv : b.y;
    RouteKernels r;
    for (uint32_t i = 0; i < b.parts.size(); ++i) {
      const uint32_t xr = multi && rr.has_multi ? b.part_plans[i].gemv_x : 1;
      r.ks.push_back(gemv_kernel(b, i, d.x, d.norm.has_value(), yv, b.gemv_rope, partial, xr, !multi));
      r.steps.push_back({xr > 1 ? LinearQStep::GemvMulti : LinearQStep::Gemv, i});
    }
    if (partial) {
      r.ks.push_back({gpu::make_key("sampling", "argmax_final"),
                      {Binding::of(1, *partial), Binding::of(2, *d.argmax_out), Binding::params(4)}});
      r.steps.push_back({LinearQStep::ArgmaxFinal, 0});
    }
    if (d.rope && !b.gemv_rope) add_rope_step(b, r);
    if (multi && rr.has_last)
      add_route(b, kLinearQGemvLast, "gemv_last", 2, rr.gemv_hi, std::move(r));
    else if (multi)
      add_route(b, kLinearQGemvMulti, "gemv_multi", 2, rr.gemv_hi, std::move(r));
    else
      add_route(b, kLinearQGemv, "gemv", 1, b.one_row_gemv ? 1 : rr.gemv_hi, std::move(r));
  }
}

ActQuant make_act_quant(LinearQBuild& b) {
  ActQuant aq{.xin = b.d.x};
  if (b.d.norm) aq.xin = add_scratch(b, Scratch::Normed, ".normed", graph::DType::F32, {b.max_m, b.k});
  return aq;
}

// gemv_m: [rms_norm] -> quantize_act -> a kernel per weight over the int8 x, all rows at once
// (swiglu inside) -> [rope_qkv].
void build_gemv_m_route(LinearQBuild& b, const RouteRanges& rr, ActQuant& aq) {
  const LinearQDesc& d = b.d;
  const graph::TensorId yv = d.rope ? *b.qkv : b.y;
  RouteKernels r;
  auto takes = [&](uint32_t i) { return gemv_m_takes(b.parts[i].format); };
  add_prologue(b, aq, r, takes);
  for (uint32_t i = 0; i < b.parts.size(); ++i) {
    if (!takes(i)) {
      r.ks.push_back(gemv_kernel(b, i, aq.xin, false, yv, false, std::nullopt));
      r.steps.push_back({LinearQStep::Gemv, i});
      continue;
    }
    const int layout = act_layout(b, i);
    std::vector<Binding> bs = {Binding::of(1, b.parts[i].q), Binding::of(2, b.parts[i].scales),
                               Binding::of(3, b.bias),       Binding::of(4, yv),
                               Binding::params(5),           Binding::of(16, *aq.xq[layout]),
                               Binding::of(7, *aq.xs[layout])};
    if (!d.swiglu) bs.push_back(Binding::of(9, b.res));
    r.ks.push_back({kernel_key(b, b.parts[i], d.swiglu ? "gemv_m_swiglu" : "gemv_m"), bs});
    r.steps.push_back({LinearQStep::GemvM, i});
  }
  if (d.rope) add_rope_step(b, r);
  add_route(b, kLinearQGemvM, "gemv_m", rr.m_from, std::min<int64_t>(rr.gemv_m, b.max_m), std::move(r));
}

// small_m (up to 7 rows) and gemm: [rms_norm] -> [quantize_act] -> a kernel per weight ->
// [silu_mul] -> [rope_qkv]. Split K: the weights of few rows (gemm_split_max_n) sum slices of K
// into one scratch [slices][M][N], shared by the weights one after the other. Up to 3 weights
// (q|k|v in three formats: 10 kernels with norm, act quantizations, combines and rope,
// graph::kMaxDispatches). On matrix cores (gemm_takes_mma, and gemm_mma_bm for the weight's
// rows) the gemm reads f32 x itself and splits no K.
void build_matrix_routes(LinearQBuild& b, const RouteRanges& rr, ActQuant& aq) {
  const LinearQDesc& d = b.d;
  const graph::TensorId ymat = d.swiglu ? add_scratch(b, Scratch::GateUp, ".gate_up", graph::DType::F32, {b.max_m, b.n})
                               : d.rope ? *b.qkv
                                        : b.y;
  const bool mma = gemm_takes_mma(b.caps);
  std::optional<graph::TensorId> split_sums;
  uint64_t split_words = 0;
  for (LinearQPartPlan& pp : b.part_plans) {
    pp.mma_bm = mma ? gemm_mma_bm(pp.n) : 0;
    pp.split = !pp.mma_bm && b.parts.size() <= 3 && pp.n <= gemm_split_max_n() && pp.n % 4 == 0 &&
               b.k >= 2 * kLinearQSplitMinK;
    if (pp.split)
      split_words = std::max<uint64_t>(split_words, uint64_t(split_scratch_rows(b.max_m, pp.n, b.k, b.act_gs)) * pp.n);
  }
  if (split_words) split_sums = add_scratch(b, Scratch::Split, ".split", graph::DType::F32, {uint32_t(split_words)});
  auto matrix_route = [&](graph::RouteId id, const char* name, int64_t lo, int64_t hi, bool small) {
    RouteKernels r;
    // q6k has no small_m kernel: its gemm serves every row count past the gemv's.
    auto uses_gemm = [&](uint32_t i) { return !small || b.parts[i].format == QuantFormat::Q6K; };
    add_prologue(b, aq, r, [&](uint32_t i) { return uses_gemm(i) && !b.part_plans[i].mma_bm; });
    for (uint32_t i = 0; i < b.parts.size(); ++i) {
      if (uses_gemm(i)) {
        add_gemm(b, aq, i, ymat, split_sums, r);
        continue;
      }
      r.ks.push_back({kernel_key(b, b.parts[i], "small_m"),
                      {Binding::of(0, aq.xin), Binding::of(8, b.parts[i].q), Binding::of(2, b.parts[i].scales),
                       Binding::of(3, b.bias), Binding::of(4, ymat), Binding::params(5), Binding::of(9, b.res)}});
      r.steps.push_back({LinearQStep::SmallM, i});
    }
    if (d.swiglu) {
      r.ks.push_back({gpu::make_key("silu_mul", "silu_mul", gate_act_constants(d.act)),
                      {Binding::of(0, ymat), Binding::of(1, ymat), Binding::of(2, b.y), Binding::params(3)}});
      r.steps.push_back({LinearQStep::SiluMul, 0});
    }
    if (d.rope) add_rope_step(b, r);
    add_route(b, id, name, lo, hi, std::move(r));
  };
  if (rr.gemv_m < 7) matrix_route(kLinearQSmallM, "small_m", rr.gemv_m + 1, std::min<int64_t>(7, b.max_m), true);
  if (b.max_m >= 8) matrix_route(kLinearQGemm, "gemm", std::max<int64_t>(8, rr.gemv_m + 1), b.max_m, false);
}

}  // namespace wgrt::ops::linear_q_detail
