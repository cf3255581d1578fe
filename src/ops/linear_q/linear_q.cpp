#include "ops/linear_q/linear_q.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "ops/linear_q/linear_q_build.h"
#include "ops/norm/norm.h"
#include "ops/sampling/sampling.h"
#include "ops/silu_mul/silu_mul.h"

namespace wgrt::ops {

using namespace linear_q_detail;

namespace {
constexpr ParamField kFields[] = {
    {"m", offsetof(LinearQParams, m)},       {"n", offsetof(LinearQParams, n)},
    {"k", offsetof(LinearQParams, k)},       {"gs", offsetof(LinearQParams, gs)},
    {"has_bias", offsetof(LinearQParams, has_bias)}, {"x_row", offsetof(LinearQParams, x_row)},
    {"eps", offsetof(LinearQParams, eps)},   {"y_off", offsetof(LinearQParams, y_off)},
    {"ld", offsetof(LinearQParams, ld)},     {"pos_sym", offsetof(LinearQParams, pos_sym)},
    {"n_ctx", offsetof(LinearQParams, n_ctx)}, {"kslice", offsetof(LinearQParams, kslice)},
    {"ex_n", offsetof(LinearQParams, ex_n)}, {"ex_xdiv", offsetof(LinearQParams, ex_xdiv)},
    {"ex_e", offsetof(LinearQParams, ex_e)}, {"ex_norm", offsetof(LinearQParams, ex_norm)}};
}  // namespace

const ParamLayout kLinearQLayout{"linear_q", sizeof(LinearQParams), kFields};

graph::Shape infer_linear_q(const LinearQInferCtx& c) {
  if (c.x.rank != 2 || c.x[1] != c.k)
    throw std::invalid_argument(
        fmt::format("linear_q: x {} does not have K = {} columns", graph::to_string(c.x), c.k));
  return graph::Shape{c.x[0], c.n};
}

std::vector<uint32_t> interleave_swiglu_rows(std::span<const uint32_t> gate, std::span<const uint32_t> up,
                                             uint32_t ff, uint32_t row_words) {
  if (ff % 16 != 0 || gate.size() != size_t(ff) * row_words || up.size() != gate.size())
    throw std::invalid_argument(fmt::format("interleave_swiglu_rows: ff {} must be a multiple of 16 with "
                                            "{} words per row", ff, row_words));
  std::vector<uint32_t> out(2 * gate.size());
  for (uint32_t r = 0; r < ff; ++r) {
    const size_t g_row = size_t(r / 16) * 32 + r % 16;
    std::copy_n(gate.begin() + size_t(r) * row_words, row_words, out.begin() + g_row * row_words);
    std::copy_n(up.begin() + size_t(r) * row_words, row_words, out.begin() + (g_row + 16) * row_words);
  }
  return out;
}

void plan_linear_q(const LinearQPlanCtx& c, const LinearQLive& live, std::span<const LinearQStep> steps,
                   graph::Plan& plan) {
  const uint32_t m = live.m;
  // last_row: the gemv reads x's last live row and writes one output row.
  const uint32_t out_m = c.last_row ? 1 : m;
  const uint32_t maxg = live.max_groups_per_dim;
  if (c.rope) check_rope_positions(c.name, *c.rope, c.rope_caches, m, live.pos);
  auto part_params = [&](const LinearQPartPlan& pp) {
    return LinearQParams{out_m, pp.n, c.k, c.gs, c.has_bias ? 1u : 0u, c.last_row ? m - 1 : 0u, c.eps,
                         pp.y_off, c.n, c.rope ? rope_qkv_symbol(*c.rope).v : 0u, c.rope_caches.n_ctx, c.k, 0u, 1u};
  };
  auto gemm_params = [&](const LinearQPartPlan& pp) {  // a split weight's slices of K
    LinearQParams params = part_params(pp);
    if (pp.split) params.kslice = gemm_kslice(m, pp.n, c.k, c.gs);
    return params;
  };
  for (size_t j = 0; j < steps.size(); ++j) {
    const LinearQPartPlan& pp = c.parts.at(steps[j].part);
    switch (steps[j].kind) {
      case LinearQStep::Norm:  // rms_norm into the node's normalized-x scratch
        plan.params[j].set(RmsNormParams{m, c.k, c.eps, 0});
        plan.grids[j] = grid_1d(m, maxg);
        break;
      case LinearQStep::QuantizeAct:
        plan.params[j].set(part_params(pp));
        plan.grids[j] = grid_1d(ceil_div(uint64_t(m) * (c.k / c.gs), 64), maxg);
        break;
      case LinearQStep::Gemv: {
        plan.params[j].set(part_params(pp));
        const uint32_t rows = c.swiglu ? pp.n / 2 : pp.n;  // swiglu: a row set makes 2 outputs of 4 rows
        const uint64_t tiles = ceil_div(rows, (c.swiglu ? 2 : 4) * c.gemv_sets);
        plan.grids[j] = grid_1d(tiles * out_m, maxg);  // a workgroup per tile and row of x
        break;
      }
      case LinearQStep::GemvMulti: {  // a workgroup per tile and gemv_x rows of x
        plan.params[j].set(part_params(pp));
        const uint32_t rows = c.swiglu ? pp.n / 2 : pp.n;
        const uint64_t tiles = ceil_div(rows, c.swiglu ? kLinearQGemvRows / 2 : kLinearQGemvRows);
        plan.grids[j] = grid_1d(tiles * ceil_div(m, pp.gemv_x), maxg);
        break;
      }
      case LinearQStep::GemvM: {  // a workgroup per tile and block of rows of x
        plan.params[j].set(part_params(pp));
        const uint32_t rows = c.swiglu ? pp.n / 2 : pp.n;
        const uint64_t tiles = ceil_div(rows, c.swiglu ? kLinearQGemvRows / 2 : kLinearQGemvRows);
        plan.grids[j] = grid_1d(tiles * ceil_div(m, c.gemv_m_block), maxg);
        break;
      }
      case LinearQStep::ArgmaxFinal:
        plan.params[j].set(SamplingParams{1, c.n, uint32_t(ceil_div(c.n, kLinearQGemvRows)), 0, 1, 0, 0, 0});
        plan.grids[j] = {1, 1, 1};
        break;
      case LinearQStep::SmallM:
        plan.params[j].set(part_params(pp));
        plan.grids[j] = grid_1d(ceil_div(pp.n, kRpt * (kWg / kSmallK)), maxg);
        break;
      case LinearQStep::Gemm: {
        const LinearQParams params = gemm_params(pp);
        plan.params[j].set(params);
        const uint32_t bm = pp.mma_bm ? pp.mma_bm : kLinearQGemmBM;
        plan.grids[j] = {uint32_t(ceil_div(pp.n, kLinearQGemmBN)), uint32_t(ceil_div(m, bm)),
                         uint32_t(ceil_div(c.k, params.kslice))};
        break;
      }
      case LinearQStep::GemmCombine:
        plan.params[j].set(gemm_params(pp));
        plan.grids[j] = grid_1d(ceil_div(uint64_t(m) * pp.n / 4, 64), maxg);
        break;
      case LinearQStep::SiluMul:
        plan.params[j].set(SiluMulParams{m, c.n / 2, kSiluBlocked, 0});
        plan.grids[j] = grid_1d(ceil_div(uint64_t(m) * (c.n / 2), kSiluMulWorkgroup), maxg);
        break;
      case LinearQStep::RopeQkv:
        plan_rope_qkv(c.name, *c.rope, c.rope_caches, m, live.pos, maxg, plan.params[j], plan.grids[j]);
        break;
    }
  }
}

graph::DType scales_dtype(QuantFormat f) { return has_word_scales(f) ? graph::DType::U32 : graph::DType::F16; }

graph::Shape scales_shape(QuantFormat f, uint32_t n, uint32_t k, uint32_t gs) {
  if (has_kq_scales(f)) return graph::Shape{uint32_t(kq_scale_words(n, k))};
  if (f == QuantFormat::IQ4XS) return graph::Shape{n, k / 256 * 2};  // the blocks' headers
  return graph::Shape{n, k / gs};  // f16 pairs, or Q41/Q51's (d, m) words
}

QuantTensors add_quant_weight(graph::Graph& g, const std::string& name, QuantFormat f, uint32_t n,
                              uint32_t k, uint32_t gs) {
  check_format_shape(f, n, k, gs, name.c_str());
  QuantTensors t;
  t.q = graph::add_weight(g, {.name = name + ".q", .dtype = graph::DType::U32,
                              .shape = {n, quant_row_words(f, k)}});
  t.scales = graph::add_weight(g, {.name = name + ".scales", .dtype = scales_dtype(f),
                                   .shape = scales_shape(f, n, k, gs)});
  return t;
}

void write_quant_weight(graph::Graph& g, const QuantTensors& t, const QuantWeight& w) {
  graph::write_tensor<uint32_t>(g, t.q, w.q);
  graph::write_tensor<uint32_t>(g, t.scales, w.scales);
}

graph::TensorId linear_q_xq(const graph::Graph& g, const std::string& name) {
  return graph::find_tensor(g, name + ".xq_ahead");
}
// A weight's rows (N), after checking its words and scales against K.
uint32_t linear_q_detail::check_part(const graph::Graph& g, const LinearQPart& wp, uint32_t k, const std::string& name) {
  const graph::Tensor& q = graph::tensor_info(g, wp.q);
  const graph::Tensor& s = graph::tensor_info(g, wp.scales);
  const char* fmt_name = quant_format_name(wp.format);
  if (q.dtype != graph::DType::U32 || q.max_shape.rank != 2)
    throw std::invalid_argument(fmt::format("{}: {} weight words must be a u32 [N, K/{}] tensor", name, fmt_name,
                                            values_per_word(wp.format)));
  const uint32_t n = q.max_shape[0];
  check_format_shape(wp.format, n, k, wp.gs, name.c_str());
  if (q.max_shape[1] != quant_row_words(wp.format, k))
    throw std::invalid_argument(fmt::format("{}: {} weight {} does not match K = {} (want [{}, {}])", name, fmt_name,
                                            graph::to_string(q.max_shape), k, n, quant_row_words(wp.format, k)));
  const graph::Shape want_s = scales_shape(wp.format, n, k, wp.gs);
  if (s.dtype != scales_dtype(wp.format) || s.max_shape != want_s)
    throw std::invalid_argument(fmt::format("{}: {} scales must be {} {}, not {} {}", name, fmt_name,
                                            graph::dtype_name(scales_dtype(wp.format)), graph::to_string(want_s),
                                            graph::dtype_name(s.dtype), graph::to_string(s.max_shape)));
  return n;
}

namespace {

void check_f32(const graph::Graph& g, graph::TensorId t, const graph::Shape& want, const std::string& what,
               const std::string& name) {
  const graph::Tensor& x = graph::tensor_info(g, t);
  if (x.dtype != graph::DType::F32 || x.max_shape != want)
    throw std::invalid_argument(fmt::format("{}: {} must be f32 {}, not {} {}", name, what, graph::to_string(want),
                                            graph::dtype_name(x.dtype), graph::to_string(x.max_shape)));
}

// The weights (checked against K, their rows continuing y's columns) and their shared
// activation group.
void check_weights(LinearQBuild& b) {
  const LinearQDesc& d = b.d;
  b.parts = {{d.format, d.gs, d.q, d.scales}};
  b.parts.insert(b.parts.end(), d.more.begin(), d.more.end());
  for (const LinearQPart& wp : b.parts) {
    b.part_plans.push_back({check_part(b.g, wp, b.k, d.name), b.n});
    b.n += b.part_plans.back().n;
  }
  auto act_group = [](const LinearQPart& wp) { return activation_group(wp.format, wp.gs); };
  b.act_gs = act_group(b.parts[0]);
  for (const LinearQPart& wp : b.parts)
    if (act_group(wp) != b.act_gs)
      throw std::invalid_argument(fmt::format("{}: weights of group sizes {} and {} cannot share one output "
                                              "(hint: fuse weights with equal group sizes)", d.name, b.act_gs,
                                              act_group(wp)));
  if (b.parts.size() > 1 && d.swiglu)
    throw std::invalid_argument(fmt::format("{}: several weights take no swiglu", d.name));
  if (d.argmax_out)  // each part's argmax partials follow the earlier parts' (a workgroup per 16 rows)
    for (size_t i = 0; i + 1 < b.part_plans.size(); ++i)
      if (b.part_plans[i].n % kLinearQGemvRows != 0)
        throw std::invalid_argument(fmt::format("{}: with argmax, every weight but the last has a multiple of {} "
                                                "rows, not {}", d.name, kLinearQGemvRows, b.part_plans[i].n));
}

// The fusions' tensors and which fusions go together; sets b.rope_caches and b.n_out.
void check_fusions(LinearQBuild& b) {
  const LinearQDesc& d = b.d;
  const graph::Graph& g = b.g;
  const uint32_t n = b.n;
  if (d.bias) check_f32(g, *d.bias, {n}, "bias", d.name);
  if (d.norm) check_f32(g, *d.norm, {b.k}, "norm weight", d.name);
  if (d.act != GateAct::Silu && !d.swiglu)
    throw std::invalid_argument(fmt::format("{}: a gate activation needs swiglu", d.name));
  if (d.swiglu && (n % 32 != 0 || d.residual || d.argmax_out))
    throw std::invalid_argument(fmt::format("{}: a swiglu weight has (gate, up) blocks of 16 rows (N = {} is "
                                            "not a multiple of 32) and takes no residual or argmax", d.name, n));
  if (d.argmax_out && !d.last_row)
    throw std::invalid_argument(fmt::format("{}: the argmax epilogue projects the last row only", d.name));
  if (d.last_row && (d.swiglu || d.residual))
    throw std::invalid_argument(fmt::format("{}: last_row takes no swiglu or residual", d.name));
  if (d.rope) {
    if (d.swiglu || d.last_row || d.residual || d.argmax_out)
      throw std::invalid_argument(fmt::format("{}: the rope epilogue takes no swiglu, last_row, residual or argmax",
                                              d.name));
    b.rope_caches = check_rope_qkv(b.g, d.name, *d.rope, n, b.max_m);
  }
  b.n_out = d.swiglu ? n / 2 : d.rope ? d.rope->n_heads * d.rope->head_dim : n;
  if (d.residual) check_f32(g, *d.residual, {b.max_m, n}, "residual", d.name);
  if (d.argmax_out) {
    const graph::Tensor& a = graph::tensor_info(g, *d.argmax_out);
    if (a.dtype != graph::DType::U32 || a.max_shape != graph::Shape{1})
      throw std::invalid_argument(fmt::format("{}: argmax_out must be u32 [1]", d.name));
  }
  if (d.xq_out && (b.parts.size() > 1 || d.rope || d.argmax_out || d.last_row || b.n_out % 16 != 0))
    throw std::invalid_argument(fmt::format("{}: xq_out takes one weight of a multiple of 16 outputs (not {}) and no "
                                            "rope, argmax or last_row", d.name, b.n_out));
  if (d.xq_norm && (!d.xq_out || d.norm))
    throw std::invalid_argument(fmt::format("{}: xq_norm goes with xq_out and without norm (both bind the kernels' "
                                            "norm weight)", d.name));
  if (d.xq_norm) check_f32(g, *d.xq_norm, {b.n_out}, "xq norm weight", d.name);
  if (d.xq_in) {
    const graph::Tensor& t = graph::tensor_info(g, *d.xq_in);
    if (t.dtype != graph::DType::U32 || t.max_shape != graph::Shape{linear_q_xq_words(b.k)})
      throw std::invalid_argument(fmt::format("{}: xq_in must be u32 [{}] (a producer's xq of K = {} values)", d.name,
                                              linear_q_xq_words(b.k), b.k));
  }
}

// The node's live shapes: y and the scratch follow x's live rows.
graph::InferFn linear_q_infer(const LinearQBuild& b, const LinearQPlanCtx& base) {
  const bool rope_rows = b.d.rope && b.d.rope->rows;
  return [base, n_out = b.n_out, scratch_kind = b.scratch_kind, rope_rows](const graph::InferArgs& a) {
    const uint32_t m = infer_linear_q({a.in[0], base.n, base.k})[0];
    if (rope_rows) check_kv_rows_live(base.name, a.in.back(), m);
    a.out[0] = graph::Shape{base.last_row ? 1 : m, n_out};
    for (size_t i = 0; i < scratch_kind.size(); ++i) {  // scratch follows the live rows
      graph::Shape& out = a.out[1 + i];
      switch (scratch_kind[i]) {
        case Scratch::Partial: break;  // fixed: a pair per gemv workgroup
        case Scratch::Split: break;    // fixed: the most slices of the most rows
        case Scratch::XqOut: out = graph::Shape{linear_q_xq_words(n_out)}; break;  // one row
        case Scratch::Normed: out = graph::Shape{m, base.k}; break;
        case Scratch::GateUp:
        case Scratch::Qkv: out = graph::Shape{m, base.n}; break;
        case Scratch::Xq: out = graph::Shape{m, base.k / 4}; break;
        case Scratch::Xs: out = graph::Shape{m, base.k / base.gs}; break;
      }
    }
  };
}

// The node: its inputs and outputs, the routes built, and the shapes, plans and cost of a step.
void add_linear_q_node(LinearQBuild& b) {
  const LinearQDesc& d = b.d;
  if (d.argmax_out) b.outputs.push_back(*d.argmax_out);
  if (d.rope) b.outputs.insert(b.outputs.end(), {d.rope->k_cache, d.rope->v_cache});
  std::vector<graph::TensorId> inputs = {d.x};
  if (d.xq_in) inputs.push_back(*d.xq_in);
  for (const LinearQPart& wp : b.parts) inputs.insert(inputs.end(), {wp.q, wp.scales});
  for (const auto& t : {d.bias, d.norm, d.residual})
    if (t) inputs.push_back(*t);
  if (d.rope) inputs.push_back(d.rope->freqs);
  if (d.rope && d.rope->q_norm) inputs.insert(inputs.end(), {*d.rope->q_norm, *d.rope->k_norm});
  if (d.rope && d.rope->rows) inputs.push_back(d.rope->rows->table);  // the last input (infer checks its rows)
  const LinearQPlanCtx base{.n = b.n, .k = b.k, .gs = b.act_gs, .has_bias = d.bias.has_value(),
                            .norm = d.norm.has_value(), .eps = d.eps,
                            .swiglu = d.swiglu, .last_row = d.last_row, .gemv_m_block = b.m_block,
                            .gemv_sets = b.out_sets,
                            .parts = b.part_plans, .name = d.name,
                            .rope = d.rope, .rope_caches = b.rope_caches.value_or(RopeQkvCaches{})};
  uint64_t weight_bytes = 0;
  for (size_t i = 0; i < b.parts.size(); ++i)
    weight_bytes += quant_bytes(b.parts[i].format, b.part_plans[i].n, b.k, b.parts[i].gs);
  std::string op = std::string("linear_") + quant_format_name(d.format);
  for (const LinearQPart& wp : d.more) op += std::string("+") + quant_format_name(wp.format);
  graph::add_node(b.g, graph::Node{
      .name = d.name,
      .op = op,
      .inputs = inputs,
      .outputs = b.outputs,
      .dynamic = true,
      .routes = std::move(b.routes),
      .infer = linear_q_infer(b, base),
      .plan =
          [base, route_steps = b.route_steps](const graph::PlanArgs& a, graph::Plan& p) {
            const LinearQLive live{.m = a.in[0][0],
                                   .max_groups_per_dim = a.caps->limits.maxComputeWorkgroupsPerDimension,
                                   .pos = base.rope ? a.sym[rope_qkv_symbol(*base.rope)] : 0};
            for (const auto& [id, steps] : route_steps)
              if (a.route_is(id)) plan_linear_q(base, live, steps, p);
          },
      .cost =
          [base, n_out = b.n_out, weight_bytes, has_res = d.residual.has_value()](const graph::PlanArgs& a) {
            // The weights once (q + scales), the rows of x read, y (and the residual).
            const uint64_t m = base.last_row ? 1 : a.in[0][0];
            uint64_t act = m * base.k * 4 + m * n_out * 4 * (has_res ? 2 : 1);
            if (base.rope)  // k and v into the caches
              act += 2 * m * base.rope->n_kv_heads * base.rope->head_dim * (base.rope_caches.f16 ? 2 : 4);
            return graph::NodeCost{weight_bytes + act, 2.0 * double(m) * base.n * base.k};
          },
  });
}

}  // namespace

graph::TensorId add_linear_q(graph::Graph& g, const LinearQDesc& d) {
  const graph::Tensor& x = graph::tensor_info(g, d.x);
  if (x.dtype != graph::DType::F32 || x.max_shape.rank != 2)
    throw std::invalid_argument(fmt::format("{}: linear_q takes f32 x [M, K]", d.name));
  LinearQBuild b{.g = g, .d = d, .caps = graph::device_caps(g), .max_m = x.max_shape[0], .k = x.max_shape[1]};
  check_weights(b);
  check_fusions(b);

  b.y = graph::add_tensor(g, d.name, graph::DType::F32, {d.last_row ? 1 : b.max_m, b.n_out});
  b.outputs = {b.y};
  // Bindings a variant declares but does not read get x (read-only, never written here).
  b.bias = d.bias.value_or(d.scales);
  b.res = d.residual.value_or(d.x);
  b.nw = d.norm.value_or(d.x);
  // The gemv's epilogue writes f32 and f16 caches; q8_0 ones take rope_qkv_q8 after it.
  b.gemv_rope = d.rope && !b.rope_caches->q8 && gemv_turns_rope(b.caps, *d.rope, b.part_plans);
  b.m_block = gemv_m_block();
  // x quantized ahead (one row of x): this node's one-row gemv writes its output as xq blocks too
  // (gemv_xq, gemv_swiglu_xq: the node's one-row kernels take 8 row sets with swiglu, 16 outputs a
  // workgroup), and reads its x from xq_in (XQ_IN) where its gemv route serves one row only and
  // the part's format can.
  b.out_sets = d.xq_out && d.swiglu ? 8 : 4;
  if (d.xq_out) b.xq_out = add_scratch(b, Scratch::XqOut, ".xq_ahead", graph::DType::U32, {linear_q_xq_words(b.n_out)});
  b.routes = graph::RouteSet{graph::RouteKey::of_dim(d.x, 0), {}};

  const RouteRanges rr = route_ranges(b);
  // rope outside the gemv: q|k|v lands in scratch, then rope_qkv writes y and the caches.
  if (d.rope && (!b.gemv_rope || rr.has_gemv_m || rr.has_matrix))
    b.qkv = add_scratch(b, Scratch::Qkv, ".qkv", graph::DType::F32, {b.max_m, b.n});
  build_gemv_routes(b, rr);
  if (rr.has_gemv_m || rr.has_matrix) {
    ActQuant aq = make_act_quant(b);
    if (rr.has_gemv_m) build_gemv_m_route(b, rr, aq);
    if (rr.has_matrix) build_matrix_routes(b, rr, aq);
  }
  add_linear_q_node(b);
  return b.y;
}

}  // namespace wgrt::ops
