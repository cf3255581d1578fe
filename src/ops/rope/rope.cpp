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
                                  {"pos", offsetof(RopeParams, pos)},
                                  {"neox", offsetof(RopeParams, neox)},
                                  {"_pad0", offsetof(RopeParams, _pad0)},
                                  {"_pad1", offsetof(RopeParams, _pad1)}};
constexpr uint32_t kWorkgroup = 256;  // rope.wgsl WG
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
  if (c.pos < 0 || c.pos + int64_t(p.n_tokens) > int64_t(UINT32_MAX))
    throw std::invalid_argument(fmt::format("rope: positions {}..{} are outside [0, 2^32)", c.pos,
                                            c.pos + p.n_tokens - 1));
  p.pos = uint32_t(c.pos);
  p.neox = c.layout == RopeLayout::Neox ? 1u : 0u;
  plan.params[0].set(p);
  uint64_t pairs = uint64_t(p.n_tokens) * p.n_heads * (p.head_dim / 2);  // a thread per pair
  plan.grids[0] = grid_1d(ceil_div(pairs, kWorkgroup), c.max_groups_per_dim);
}

graph::TensorId add_rope(graph::Graph& g, const RopeDesc& d) {
  const graph::Tensor& x = g.tensors.at(d.x.v);
  const graph::Tensor& f = g.tensors.at(d.freqs.v);
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
  if (d.pos.v >= g.symbols.size())
    throw std::invalid_argument(fmt::format("{}: unknown pos symbol id {}", d.name, d.pos.v));
  infer_rope({x.max_shape, d.head_dim});
  graph::TensorId y = graph::add_tensor(g, d.name, graph::DType::F32, x.max_shape);

  graph::KernelSpec k{gpu::make_key("rope", "rope"),
                      {graph::Binding::of(0, d.x), graph::Binding::of(1, d.freqs),
                       graph::Binding::of(2, y), graph::Binding::params(3)}};
  uint32_t head_dim = d.head_dim;
  RopeLayout layout = d.layout;
  graph::SymbolId pos = d.pos;
  graph::add_node(g, graph::Node{
      .name = d.name,
      .op = "rope",
      .inputs = {d.x, d.freqs},
      .outputs = {y},
      .dynamic = true,
      .routes = graph::single_route(graph::RouteKey::of_dim(d.x, 0), 1, x.max_shape[0], {k}),
      .infer = [head_dim](const graph::InferArgs& a) { a.out[0] = infer_rope({a.in[0], head_dim}); },
      .plan =
          [=](const graph::PlanArgs& a, graph::Plan& p) {
            plan_rope({a.in[0], head_dim, n_rot, a.sym[pos], layout,
                       a.caps->limits.maxComputeWorkgroupsPerDimension},
                      p);
          },
  });
  return y;
}

}  // namespace wgrt::ops
