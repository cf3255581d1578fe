#include "ops/sampling/sampling.h"

#include <fmt/format.h>

#include <stdexcept>

namespace wgrt::ops {

namespace {
constexpr ParamField kFields[] = {{"n_rows", offsetof(SamplingParams, n_rows)},
                                  {"n_vocab", offsetof(SamplingParams, n_vocab)},
                                  {"n_blocks", offsetof(SamplingParams, n_blocks)},
                                  {"chunk", offsetof(SamplingParams, chunk)},
                                  {"k", offsetof(SamplingParams, k)},
                                  {"_pad0", offsetof(SamplingParams, _pad0)},
                                  {"_pad1", offsetof(SamplingParams, _pad1)},
                                  {"_pad2", offsetof(SamplingParams, _pad2)}};

uint32_t chunk_of(SamplingKind kind) { return kind == SamplingKind::TopK ? kTopKChunk : kArgmaxChunk; }

const char* op_name(SamplingKind kind) {
  switch (kind) {
    case SamplingKind::Argmax: return "argmax";
    case SamplingKind::TopK: return "top_k";
    case SamplingKind::LogSumExp: return "logsumexp";
  }
  return "?";
}

// Both passes of a route: (pass 1, pass 2) with their bindings.
std::vector<graph::KernelSpec> kernels(SamplingKind kind, graph::TensorId logits, graph::TensorId partial,
                                       graph::TensorId indices, graph::TensorId values) {
  using graph::Binding;
  if (kind == SamplingKind::LogSumExp)
    return {{gpu::make_key("sampling", "lse_partial"),
             {Binding::of(0, logits), Binding::of(1, partial), Binding::params(4)}},
            {gpu::make_key("sampling", "lse_final"),
             {Binding::of(1, partial), Binding::of(3, values), Binding::params(4)}}};
  if (kind == SamplingKind::Argmax)
    return {{gpu::make_key("sampling", "argmax_partial"),
             {Binding::of(0, logits), Binding::of(1, partial), Binding::params(4)}},
            {gpu::make_key("sampling", "argmax_final"),
             {Binding::of(1, partial), Binding::of(2, indices), Binding::params(4)}}};
  return {{gpu::make_key("sampling", "topk_partial"),
           {Binding::of(0, logits), Binding::of(1, partial), Binding::params(4)}},
          {gpu::make_key("sampling", "topk_final"),
           {Binding::of(1, partial), Binding::of(2, indices), Binding::of(3, values), Binding::params(4)}}};
}

void check_logits(const graph::Graph& g, const std::string& name, graph::TensorId logits) {
  const graph::Tensor& l = graph::tensor_info(g, logits);
  if (l.dtype != graph::DType::F32 || l.max_shape.rank != 2)
    throw std::invalid_argument(fmt::format("{}: logits '{}' must be f32 [n_rows, n_vocab], got {} {}",
                                            name, l.name, graph::dtype_name(l.dtype),
                                            graph::to_string(l.max_shape)));
}

graph::NodeId add_sampling_node(graph::Graph& g, const std::string& name, graph::TensorId logits,
                                SamplingKind kind, uint32_t k, std::vector<graph::TensorId> outputs,
                                graph::TensorId partial, std::optional<graph::SymbolId> enable = {},
                                bool fixed_out = false) {
  const graph::Tensor& l = graph::tensor_info(g, logits);
  // Workgroup data of the passes (sampling.wgsl WG; top-k: BUF entries and four scalars).
  constexpr uint32_t wg = 256, buf = 1024;
  // Argmax and logsumexp: two WG-entry arrays.
  require_fits(graph::device_caps(g).limits, name + ": " + op_name(kind),
               kind != SamplingKind::TopK ? WorkgroupFootprint{2 * wg_var_bytes(wg * 4), wg}
                                          : WorkgroupFootprint{2 * wg_var_bytes(buf * 4) + 4 * wg_var_bytes(4), wg});
  // Argmax: unused; logsumexp writes its one output through the values binding.
  graph::TensorId values = outputs.size() > 1 ? outputs[1] : outputs[0];
  outputs.push_back(partial);
  return graph::add_node(
      g, graph::Node{
             .name = name,
             .op = op_name(kind),
             .inputs = {logits},
             .outputs = outputs,
             .dynamic = true,
             .routes = enable ? graph::RouteSet{graph::RouteKey::of_symbol(*enable),
                                                {{kSamplingOff, "off", 0, 0, {}, /*idle=*/true},
                                                 {kSamplingOn, "on", 1, 1, kernels(kind, logits, partial, outputs[0], values)}}}
                              : graph::single_route(graph::RouteKey::of_dim(logits, 0), 1, l.max_shape[0],
                                                    kernels(kind, logits, partial, outputs[0], values)),
             .infer =
                 [kind, k, fixed_out](const graph::InferArgs& a) {
                   SamplingShapes s = infer_sampling({a.in[0], kind, k});
                   // A State `out` keeps its fixed shape: the live rows are its first ones.
                   for (size_t i = fixed_out ? 1 : 0; i + 1 < a.out.size(); ++i) a.out[i] = s.out;
                   a.out[a.out.size() - 1] = s.partial;
                 },
             .plan =
                 [kind, k](const graph::PlanArgs& a, graph::Plan& p) {
                   plan_sampling({a.in[0], kind, k, a.caps->limits.maxComputeWorkgroupsPerDimension}, p);
                 },
         });
}
}  // namespace

const ParamLayout kSamplingLayout{"sampling", sizeof(SamplingParams), kFields};

SamplingShapes infer_sampling(const SamplingInferCtx& c) {
  if (c.logits.rank != 2)
    throw std::invalid_argument(fmt::format("sampling: logits {} are not [n_rows, n_vocab]",
                                            graph::to_string(c.logits)));
  uint32_t rows = c.logits[0], vocab = c.logits[1];
  if (c.k == 0 || c.k > vocab)
    throw std::invalid_argument(fmt::format("top_k: k = {} is outside [1, n_vocab = {}]", c.k, vocab));
  uint32_t blocks = uint32_t(ceil_div(vocab, chunk_of(c.kind)));
  if (c.kind != SamplingKind::TopK) return {graph::Shape{rows}, graph::Shape{rows, blocks, 2}};
  return {graph::Shape{rows, c.k}, graph::Shape{rows, blocks * c.k, 2}};
}

void plan_sampling(const SamplingPlanCtx& c, graph::Plan& plan) {
  SamplingParams p{};
  p.n_rows = c.logits[0];
  p.n_vocab = c.logits[1];
  p.chunk = chunk_of(c.kind);
  p.n_blocks = uint32_t(ceil_div(p.n_vocab, p.chunk));
  p.k = c.kind == SamplingKind::TopK ? c.k : 1;
  if (p.n_rows > c.max_groups_per_dim || p.n_blocks > c.max_groups_per_dim)
    throw std::invalid_argument(fmt::format("sampling: {} rows of {} chunks pass the grid limit {}",
                                            p.n_rows, p.n_blocks, c.max_groups_per_dim));
  plan.params[0].set(p);
  plan.params[1].set(p);
  plan.grids[0] = {p.n_blocks, p.n_rows, 1};  // (chunk, row)
  plan.grids[1] = {1, p.n_rows, 1};           // a workgroup per row
}

graph::TensorId add_argmax(graph::Graph& g, const ArgmaxDesc& d) {
  check_logits(g, d.name, d.logits);
  SamplingShapes s = infer_sampling({graph::tensor_info(g, d.logits).max_shape, SamplingKind::Argmax, 1});
  if (d.out) {
    const graph::Tensor& o = graph::tensor_info(g, *d.out);
    if (o.dtype != graph::DType::U32 || o.role != graph::TensorRole::State || o.max_shape.rank != 1 ||
        o.max_shape[0] < s.out[0])
      throw std::invalid_argument(fmt::format("{}: `out` must be a u32 State tensor of at least the logits' {} rows",
                                              d.name, s.out[0]));
  }
  graph::TensorId out = d.out ? *d.out : graph::add_tensor(g, d.name, graph::DType::U32, s.out);
  graph::TensorId partial = graph::add_tensor(g, d.name + ".partial", graph::DType::U32, s.partial);
  add_sampling_node(g, d.name, d.logits, SamplingKind::Argmax, 1, {out}, partial, {}, d.out.has_value());
  return out;
}

TopKOutputs add_top_k(graph::Graph& g, const TopKDesc& d) {
  check_logits(g, d.name, d.logits);
  if (d.k == 0 || d.k > kTopKMax)
    throw std::invalid_argument(fmt::format("{}: k = {} is outside [1, {}]", d.name, d.k, kTopKMax));
  SamplingShapes s = infer_sampling({graph::tensor_info(g, d.logits).max_shape, SamplingKind::TopK, d.k});
  TopKOutputs out;
  out.indices = graph::add_tensor(g, d.name + ".indices", graph::DType::U32, s.out);
  out.values = graph::add_tensor(g, d.name + ".values", graph::DType::F32, s.out);
  graph::TensorId partial = graph::add_tensor(g, d.name + ".partial", graph::DType::U32, s.partial);
  if (d.enable && (d.enable->v >= graph::symbol_count(g) || graph::symbol_info(g, *d.enable).lo != 0 || graph::symbol_info(g, *d.enable).hi != 1))
    throw std::invalid_argument(fmt::format("{}: the enable symbol must range over [0, 1]", d.name));
  add_sampling_node(g, d.name, d.logits, SamplingKind::TopK, d.k, {out.indices, out.values}, partial, d.enable);
  return out;
}

graph::TensorId add_logsumexp(graph::Graph& g, const LogSumExpDesc& d) {
  check_logits(g, d.name, d.logits);
  if (d.enable.v >= graph::symbol_count(g) || graph::symbol_info(g, d.enable).lo != 0 ||
      graph::symbol_info(g, d.enable).hi != 1)
    throw std::invalid_argument(fmt::format("{}: the enable symbol must range over [0, 1]", d.name));
  SamplingShapes s = infer_sampling({graph::tensor_info(g, d.logits).max_shape, SamplingKind::LogSumExp, 1});
  graph::TensorId out = graph::add_tensor(g, d.name, graph::DType::F32, s.out);
  graph::TensorId partial = graph::add_tensor(g, d.name + ".partial", graph::DType::U32, s.partial);
  add_sampling_node(g, d.name, d.logits, SamplingKind::LogSumExp, 1, {out}, partial, d.enable);
  return out;
}

void add_sample_pick(graph::Graph& g, const SamplePickDesc& d) {
  const graph::Tensor& ids = graph::tensor_info(g, d.candidates.indices);
  const graph::Tensor& pick = graph::tensor_info(g, d.pick);
  const graph::Tensor& out = graph::tensor_info(g, d.out);
  const uint32_t rows = ids.max_shape.rank == 2 ? ids.max_shape[0] : 0;
  const bool pick_ok = pick.dtype == graph::DType::U32 &&
                       (pick.max_shape == graph::Shape{8} ? rows == 1 : pick.max_shape == graph::Shape{rows, 8});
  if (rows == 0 || !pick_ok || out.dtype != graph::DType::U32 || out.role != graph::TensorRole::State ||
      out.max_shape.rank != 1 || out.max_shape[0] < rows || d.enable.v >= graph::symbol_count(g) ||
      graph::symbol_info(g, d.enable).lo != 0 || graph::symbol_info(g, d.enable).hi != 1)
    throw std::invalid_argument(fmt::format("{}: sample_pick takes top-k candidates [rows, k], a u32 [rows, 8] pick "
                                            "input ([8] for one row), a u32 State output of at least the rows and an "
                                            "enable symbol in [0, 1]", d.name));
  const uint32_t k = ids.max_shape[1];
  graph::KernelSpec kernel{gpu::make_key("sampling", "sample_pick"),
                           {graph::Binding::of(6, d.candidates.indices), graph::Binding::of(7, d.candidates.values),
                            graph::Binding::of(8, d.pick), graph::Binding::of(2, d.out), graph::Binding::params(4)}};
  graph::add_node(g, graph::Node{
      .name = d.name,
      .op = "sample_pick",
      .inputs = {d.candidates.indices, d.candidates.values, d.pick},
      .outputs = {d.out},
      .dynamic = true,
      .routes = graph::RouteSet{graph::RouteKey::of_symbol(d.enable),
                                {{kSamplingOff, "off", 0, 0, {}, /*idle=*/true}, {kSamplingOn, "on", 1, 1, {kernel}}}},
      .infer = [](const graph::InferArgs&) {},
      .plan =
          [k](const graph::PlanArgs& a, graph::Plan& p) {
            const uint32_t n = a.in[0][0];  // the candidates' live rows
            p.params[0].set(SamplingParams{n, 0, 0, 0, k, 0, 0, 0});
            p.grids[0] = {1, n, 1};  // a workgroup per row
          },
  });
}

}  // namespace wgrt::ops
