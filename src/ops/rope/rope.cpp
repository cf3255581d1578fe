#include "ops/rope/rope.h"

#include <fmt/format.h>

#include <cmath>
#include <numbers>
#include <stdexcept>

namespace wgrt::ops {

namespace {
constexpr ParamField kFields[] = {{"n_tokens", offsetof(RopeParams, n_tokens)},
                                  {"n_heads", offsetof(RopeParams, n_heads)},
                                  {"head_dim", offsetof(RopeParams, head_dim)},
                                  {"n_rot", offsetof(RopeParams, n_rot)},
                                  {"pos_sym", offsetof(RopeParams, pos_sym)},
                                  {"neox", offsetof(RopeParams, neox)},
                                  {"n_kv_heads", offsetof(RopeParams, n_kv_heads)},
                                  {"n_ctx", offsetof(RopeParams, n_ctx)}};
}  // namespace

const ParamLayout kRopeLayout{"rope", sizeof(RopeParams), kFields};

std::vector<double> rope_inv_freqs(const RopeFreqs& f) {
  if (f.n_rot == 0 || f.n_rot % 2 != 0)
    throw std::invalid_argument(fmt::format("rope: n_rot must be even and > 0, got {}", f.n_rot));
  if (!(f.theta > 1.0)) throw std::invalid_argument(fmt::format("rope: theta must be > 1, got {}", f.theta));
  uint32_t half = f.n_rot / 2;
  if (!f.freq_factors.empty() && f.freq_factors.size() != half)
    throw std::invalid_argument(fmt::format("rope: {} freq_factors for {} pairs", f.freq_factors.size(), half));
  std::vector<double> inv(half);
  for (uint32_t j = 0; j < half; ++j) {
    double v = std::pow(f.theta, -2.0 * j / f.n_rot);
    if (f.llama3) {
      // Llama 3.1 rope_scaling: keep high frequencies, divide low ones by `factor`, blend
      // linearly (in 1 / wavelength) between.
      const Llama3RopeScaling& s = *f.llama3;
      double low_wavelen = s.original_max_position / s.low_freq_factor;
      double high_wavelen = s.original_max_position / s.high_freq_factor;
      double wavelen = 2 * std::numbers::pi / v;
      if (wavelen > low_wavelen) {
        v /= s.factor;
      } else if (wavelen >= high_wavelen) {
        double smooth = (s.original_max_position / wavelen - s.low_freq_factor) /
                        (s.high_freq_factor - s.low_freq_factor);
        v = (1 - smooth) * v / s.factor + smooth * v;
      }
    }
    if (!f.freq_factors.empty()) v /= f.freq_factors[j];
    inv[j] = v;
  }
  return inv;
}

std::vector<uint32_t> rope_freq_table(const RopeFreqs& f) {
  std::vector<double> inv = rope_inv_freqs(f);
  std::vector<uint32_t> table(inv.size() * 2);
  for (size_t j = 0; j < inv.size(); ++j) {
    // Turns per position, as a fraction of 2^64; only its value mod 1 matters.
    double turns = inv[j] / (2 * std::numbers::pi);
    turns -= std::floor(turns);
    double hi = std::floor(std::ldexp(turns, 32));
    double lo = std::round(std::ldexp(std::ldexp(turns, 32) - hi, 32));
    if (lo >= 4294967296.0) {  // rounding carried into hi
      lo = 0;
      hi += 1;
    }
    table[2 * j] = uint32_t(uint64_t(hi) & 0xffffffffu);
    table[2 * j + 1] = uint32_t(lo);
  }
  return table;
}

graph::TensorId add_rope_freqs(graph::Graph& g, std::string name, uint32_t n_rot) {
  if (n_rot == 0 || n_rot % 2 != 0)
    throw std::invalid_argument(fmt::format("{}: n_rot must be even and > 0, got {}", name, n_rot));
  return graph::add_weight(g, {.name = std::move(name), .dtype = graph::DType::U32, .shape = {n_rot / 2, 2}});
}

graph::Shape infer_rope(const RopeInferCtx& c) {
  if (c.x.rank != 2 || c.x[1] % c.head_dim != 0)
    throw std::invalid_argument(fmt::format("rope: x {} is not [n_tokens, n_heads * {}]",
                                            graph::to_string(c.x), c.head_dim));
  return c.x;
}

void plan_rope(const RopePlanCtx& c, graph::Plan& plan) {
  RopeParams p{};
  p.n_tokens = c.x[0];
  p.n_heads = c.x[1] / c.head_dim;
  p.head_dim = c.head_dim;
  p.n_rot = c.n_rot;
  if (!c.rows && (c.pos < 0 || c.pos + int64_t(p.n_tokens) > int64_t(UINT32_MAX)))
    throw std::invalid_argument(fmt::format("rope: positions {}..{} are outside [0, 2^32)", c.pos,
                                            c.pos + p.n_tokens - 1));
  p.pos_sym = c.pos_sym;
  p.neox = c.layout == RopeLayout::Neox ? 1u : 0u;
  plan.params[0].set(p);
  uint64_t pairs = uint64_t(p.n_tokens) * p.n_heads * (p.head_dim / 2);  // a thread per pair
  plan.grids[0] = grid_1d(ceil_div(pairs, kRopeWorkgroup), c.max_groups_per_dim);
}

graph::TensorId add_rope(graph::Graph& g, const RopeDesc& d) {
  const graph::Tensor& x = graph::tensor_info(g, d.x);
  const graph::Tensor& f = graph::tensor_info(g, d.freqs);
  uint32_t n_rot = d.n_rot ? d.n_rot : d.head_dim;
  if (x.dtype != graph::DType::F32)
    throw std::invalid_argument(fmt::format("{}: rope takes f32 x", d.name));
  if (d.head_dim == 0 || d.head_dim % 2 != 0 || n_rot % 2 != 0 || n_rot > d.head_dim)
    throw std::invalid_argument(fmt::format("{}: head_dim {} and n_rot {} must be even, n_rot <= head_dim",
                                            d.name, d.head_dim, n_rot));
  if (f.dtype != graph::DType::U32 || f.max_shape != graph::Shape{n_rot / 2, 2})
    throw std::invalid_argument(fmt::format("{}: freqs '{}' is {} {}, expected u32 [{}, 2] (add_rope_freqs)",
                                            d.name, f.name, graph::dtype_name(f.dtype),
                                            graph::to_string(f.max_shape), n_rot / 2));
  if (d.pos.v >= graph::symbol_count(g))
    throw std::invalid_argument(fmt::format("{}: unknown pos symbol id {}", d.name, d.pos.v));
  infer_rope({x.max_shape, d.head_dim});
  require_fits(graph::device_caps(g).limits, d.name + ": rope", {0, kRopeWorkgroup});  // no workgroup data
  const bool rows = d.rows.has_value();
  const graph::Shape x_max = x.max_shape;  // copied: add_tensor below may add tensors
  if (rows) check_kv_rows(g, d.name, *d.rows, x_max[0]);
  graph::TensorId y = graph::add_tensor(g, d.name, graph::DType::F32, x_max);

  graph::KernelSpec k{gpu::make_key("rope", "rope", rows ? std::vector<gpu::OverrideConstant>{{"TABLE", 1.0}}
                                                         : std::vector<gpu::OverrideConstant>{}),
                      {graph::Binding::of(0, d.x), graph::Binding::of(1, d.freqs),
                       graph::Binding::of(2, y), graph::Binding::params(3),
                       graph::Binding::of(6, kv_rows_binding(d.rows, d.x)), graph::Binding::symbol_block(7)}};
  uint32_t head_dim = d.head_dim;
  RopeLayout layout = d.layout;
  graph::SymbolId pos = d.pos;
  std::vector<graph::TensorId> inputs = {d.x, d.freqs};
  if (rows) inputs.push_back(d.rows->table);
  const std::string name = d.name;
  graph::add_node(g, graph::Node{
      .name = d.name,
      .op = "rope",
      .inputs = inputs,
      .outputs = {y},
      .dynamic = true,
      .routes = graph::single_route(graph::RouteKey::of_dim(d.x, 0), 1, x_max[0], {k}),
      .infer =
          [head_dim, rows, name](const graph::InferArgs& a) {
            a.out[0] = infer_rope({a.in[0], head_dim});
            if (rows) check_kv_rows_live(name, a.in[2], a.in[0][0]);
          },
      .plan =
          [=](const graph::PlanArgs& a, graph::Plan& p) {
            plan_rope({a.in[0], head_dim, n_rot, rows ? 0 : a.sym[pos], pos.v, layout,
                       a.caps->limits.maxComputeWorkgroupsPerDimension, rows},
                      p);
          },
  });
  return y;
}

bool rope_qkv_norms(uint32_t head_dim) { return head_dim % 4 == 0 && kRopeWorkgroup % (head_dim / 4) == 0; }

RopeQkvCaches check_rope_qkv(const graph::Graph& g, const std::string& name, const RopeQkv& r, uint32_t width,
                             uint32_t max_tokens) {
  const graph::Tensor& kc = graph::tensor_info(g, r.k_cache);
  const graph::Tensor& vc = graph::tensor_info(g, r.v_cache);
  const uint32_t hd = r.head_dim, n_rot = r.n_rot ? r.n_rot : r.head_dim;
  if (width != (r.n_heads + 2 * r.n_kv_heads) * hd || hd % 4 != 0 || n_rot % 4 != 0 || n_rot > hd ||
      r.n_heads == 0 || r.n_kv_heads == 0)
    throw std::invalid_argument(fmt::format(
        "{}: rope_qkv takes f32 qkv [n_tokens, ({} + 2 * {}) * {}], head_dim and n_rot multiples of 4, got {} columns",
        name, r.n_heads, r.n_kv_heads, hd, width));
  const graph::Shape cache{r.n_kv_heads, kc.max_shape.rank == 3 ? kc.max_shape[1] : 0, hd};
  const bool q8 = kc.dtype == graph::DType::Q8_0;
  if (kc.role != graph::TensorRole::State || vc.role != graph::TensorRole::State || kc.max_shape != cache ||
      vc.max_shape != cache || kc.dtype != vc.dtype ||
      (kc.dtype != graph::DType::F32 && kc.dtype != graph::DType::F16 && !q8))
    throw std::invalid_argument(fmt::format("{}: the caches must be State tensors [{}, n_ctx, {}] of one dtype "
                                            "(f32, f16 or q8_0)", name, r.n_kv_heads, hd));
  if (q8 && (hd % 32 != 0 || hd > kRopeQ8MaxHeadDim))
    throw std::invalid_argument(fmt::format("{}: q8_0 caches need a head_dim that is a multiple of 32 and at most {}, "
                                            "not {}", name, kRopeQ8MaxHeadDim, hd));
  const graph::Tensor& f = graph::tensor_info(g, r.freqs);
  if (f.dtype != graph::DType::U32 || f.max_shape != graph::Shape{n_rot / 2, 2})
    throw std::invalid_argument(fmt::format("{}: freqs must be u32 [{}, 2] (add_rope_freqs)", name, n_rot / 2));
  if (r.pos.v >= graph::symbol_count(g))
    throw std::invalid_argument(fmt::format("{}: unknown pos symbol id {}", name, r.pos.v));
  if (r.rows) check_kv_rows(g, name, *r.rows, max_tokens);
  if (r.q_norm.has_value() != r.k_norm.has_value() || (r.q_norm && !rope_qkv_norms(hd)))
    throw std::invalid_argument(fmt::format("{}: rope_qkv normalizes q and k together, heads of a size whose quarter "
                                            "divides {} (head_dim {})", name, kRopeWorkgroup, hd));
  for (const auto& w : {r.q_norm, r.k_norm}) {
    if (!w) continue;
    const graph::Tensor& t = graph::tensor_info(g, *w);
    if (t.dtype != graph::DType::F32 || t.max_shape != graph::Shape{hd})
      throw std::invalid_argument(fmt::format("{}: the q and k norm weights must be f32 [{}]", name, hd));
  }
  // rope_qkv_q8 stages four values a thread; the norms a sum a thread.
  const uint64_t wg_bytes = (q8 ? wg_var_bytes(4 * kRopeWorkgroup * 4) : 0) + (r.q_norm ? wg_var_bytes(kRopeWorkgroup * 4) : 0);
  require_fits(graph::device_caps(g).limits, name + ": rope_qkv", {wg_bytes, kRopeWorkgroup});
  return {kc.max_shape[1], n_rot, kc.dtype == graph::DType::F16, q8};
}

graph::KernelSpec rope_qkv_kernel(const RopeQkv& r, const RopeQkvCaches& c, graph::TensorId qkv, graph::TensorId q) {
  std::vector<gpu::OverrideConstant> consts = {{"F16", c.f16 ? 1.0 : 0.0}};
  if (r.rows) consts.push_back({"TABLE", 1.0});
  if (r.q_norm) consts.insert(consts.end(), {{"QK_NORM", 1.0}, {"QK_EPS", double(r.norm_eps)}});
  std::vector<graph::Binding> bs = {graph::Binding::of(0, qkv), graph::Binding::of(1, r.freqs), graph::Binding::of(2, q),
                                    graph::Binding::params(3), graph::Binding::of(4, r.k_cache),
                                    graph::Binding::of(5, r.v_cache), graph::Binding::of(6, kv_rows_binding(r.rows, r.freqs)),
                                    graph::Binding::symbol_block(7),
                                    // Without norms the kernels still declare them: qkv stands in (read-only, unread).
                                    graph::Binding::of(8, r.q_norm.value_or(qkv)), graph::Binding::of(9, r.k_norm.value_or(qkv))};
  return {gpu::make_key("rope", c.q8 ? "rope_qkv_q8" : "rope_qkv", std::move(consts)), std::move(bs)};
}

void check_rope_positions(const std::string& name, const RopeQkv& r, const RopeQkvCaches& c, uint32_t n,
                          int64_t pos) {
  if (r.rows) {
    check_max_keys(name, pos, c.n_ctx);
    return;
  }
  if (pos < 0 || pos + n > c.n_ctx)
    throw std::out_of_range(fmt::format(
        "{}: {} tokens at pos {} go past the context of {} (hint: the cache holds positions 0..{}; "
        "start a new sequence or build with a larger n_ctx)", name, n, pos, c.n_ctx, c.n_ctx - 1));
}

void plan_rope_qkv(const std::string& name, const RopeQkv& r, const RopeQkvCaches& c, uint32_t n, int64_t pos,
                   uint32_t max_groups_per_dim, graph::ParamBlock& params, graph::Grid& grid) {
  check_rope_positions(name, r, c, n, pos);
  params.set(RopeParams{n, r.n_heads, r.head_dim, c.n_rot, rope_qkv_symbol(r).v,
                        r.layout == RopeLayout::Neox ? 1u : 0u, r.n_kv_heads, c.n_ctx});
  const uint64_t heads = uint64_t(n) * (r.n_heads + 2 * r.n_kv_heads);
  // rope_qkv_q8: whole heads a workgroup (rope.wgsl q8_heads_per_group).
  grid = c.q8 ? grid_1d(ceil_div(heads, kRopeWorkgroup / (r.head_dim / 4)), max_groups_per_dim)
              : grid_1d(ceil_div(heads * (r.head_dim / 4), kRopeWorkgroup), max_groups_per_dim);
}

uint64_t rope_qkv_bytes(const RopeQkv& r, const RopeQkvCaches& c, uint64_t n) {
  // The rows of qkv in, rotated q out, each token's k and v rows into the caches.
  const uint64_t dim = r.head_dim;
  const uint64_t in = n * (r.n_heads + 2 * r.n_kv_heads) * dim * 4;
  const uint64_t row_bytes = c.q8 ? dim + dim / 32 * 2 : dim * (c.f16 ? 2 : 4);
  return in + n * r.n_heads * dim * 4 + 2 * n * r.n_kv_heads * row_bytes;
}

graph::TensorId add_rope_qkv(graph::Graph& g, const RopeQkvDesc& d) {
  const graph::Tensor& x = graph::tensor_info(g, d.qkv);
  if (x.dtype != graph::DType::F32 || x.max_shape.rank != 2)
    throw std::invalid_argument(fmt::format("{}: rope_qkv takes f32 qkv [n_tokens, columns]", d.name));
  const RopeQkv r = d.rope;
  const uint32_t max_tokens = x.max_shape[0];  // copied: add_tensor below may add tensors
  const RopeQkvCaches c = check_rope_qkv(g, d.name, r, x.max_shape[1], max_tokens);
  graph::TensorId y = graph::add_tensor(g, d.name, graph::DType::F32, {max_tokens, r.n_heads * r.head_dim});
  const std::string name = d.name;
  std::vector<graph::TensorId> inputs = {d.qkv, r.freqs};
  if (r.rows) inputs.push_back(r.rows->table);  // in[2]: infer checks its rows
  if (r.q_norm) inputs.insert(inputs.end(), {*r.q_norm, *r.k_norm});
  graph::add_node(g, graph::Node{
      .name = d.name,
      .op = "rope_qkv",
      .inputs = inputs,
      .outputs = {y, r.k_cache, r.v_cache},
      .dynamic = true,
      .routes = graph::single_route(graph::RouteKey::of_dim(d.qkv, 0), 1, max_tokens,
                                    {rope_qkv_kernel(r, c, d.qkv, y)}),
      .infer =
          [r, name](const graph::InferArgs& a) {
            a.out[0] = graph::Shape{a.in[0][0], r.n_heads * r.head_dim};
            if (r.rows) check_kv_rows_live(name, a.in[2], a.in[0][0]);
          },
      .plan =
          [name, r, c](const graph::PlanArgs& a, graph::Plan& p) {
            plan_rope_qkv(name, r, c, a.in[0][0], a.sym[rope_qkv_symbol(r)],
                          a.caps->limits.maxComputeWorkgroupsPerDimension, p.params[0], p.grids[0]);
          },
      .cost = [r, c](const graph::PlanArgs& a) { return graph::NodeCost{rope_qkv_bytes(r, c, a.in[0][0]), 0}; },
  });
  return y;
}

}  // namespace wgrt::ops
