#include "ops/embedding/embedding.h"

#include <fmt/format.h>

#include <stdexcept>

namespace wgrt::ops {

namespace {
constexpr ParamField kFields[] = {{"n_tokens", offsetof(EmbeddingParams, n_tokens)},
                                  {"dim", offsetof(EmbeddingParams, dim)},
                                  {"vocab", offsetof(EmbeddingParams, vocab)},
                                  {"gs", offsetof(EmbeddingParams, gs)}};
constexpr uint32_t kWg = 256;  // embedding.wgsl WG

const char* type_name(EmbeddingType t) {
  switch (t) {
    case EmbeddingType::F32: return "f32";
    case EmbeddingType::F16: return "f16";
    case EmbeddingType::Q8: return "q8";
    case EmbeddingType::Q6K: return "q6k";
    default: return "q4gsw";
  }
}
}  // namespace

const ParamLayout kEmbeddingLayout{"embedding", sizeof(EmbeddingParams), kFields};

graph::Shape infer_embedding(const EmbeddingInferCtx& c) {
  if (c.ids.rank != 1)
    throw std::invalid_argument(fmt::format("embedding: ids {} must be [n_tokens]", graph::to_string(c.ids)));
  return graph::Shape{c.ids[0], c.dim};
}

void plan_embedding(const EmbeddingPlanCtx& c, graph::Plan& plan) {
  plan.params[0].set(EmbeddingParams{c.n_tokens, c.dim, c.vocab, c.gs});
  plan.grids[0] = grid_1d(ceil_div(uint64_t(c.n_tokens) * c.dim, kWg), c.max_groups_per_dim);
}

graph::TensorId add_embedding(graph::Graph& g, const EmbeddingDesc& d) {
  const graph::Tensor& ids = g.tensors.at(d.ids.v);
  const graph::Tensor& table = g.tensors.at(d.table.v);
  if (ids.dtype != graph::DType::U32 || ids.max_shape.rank != 1)
    throw std::invalid_argument(fmt::format("{}: ids must be u32 [n_tokens]", d.name));
  if (table.max_shape.rank != 2)
    throw std::invalid_argument(fmt::format("{}: the table must be 2-D", d.name));
  const uint32_t vocab = table.max_shape[0];
  uint32_t dim = table.max_shape[1];
  const bool quant = d.type == EmbeddingType::Q8 || d.type == EmbeddingType::Q4gsw || d.type == EmbeddingType::Q6K;
  graph::DType want = quant ? graph::DType::U32
                            : d.type == EmbeddingType::F16 ? graph::DType::F16 : graph::DType::F32;
  if (table.dtype != want)
    throw std::invalid_argument(fmt::format("{}: a {} table must be a {} tensor, not {}", d.name,
                                            type_name(d.type), graph::dtype_name(want),
                                            graph::dtype_name(table.dtype)));
  uint32_t gs = 0;
  if (quant) {
    dim = d.type == EmbeddingType::Q6K ? dim / kQ6KWords * 256 : dim * (d.type == EmbeddingType::Q8 ? 4 : 8);
    gs = d.gs;
    check_quant_shape(vocab, dim, gs, d.name.c_str());
    if (!d.scales || g.tensors.at(d.scales->v).dtype != graph::DType::F16 ||
        g.tensors.at(d.scales->v).max_shape != graph::Shape{vocab, dim / gs})
      throw std::invalid_argument(
          fmt::format("{}: a {} table needs f16 scales [{}, {}]", d.name, type_name(d.type), vocab, dim / gs));
  }

  require_fits(g.dev->caps.limits, d.name + ": embedding", {0, kWg});  // no workgroup data
  graph::TensorId out = graph::add_tensor(g, d.name, graph::DType::F32, {ids.max_shape[0], dim});
  using graph::Binding;
  std::vector<Binding> bindings = {Binding::of(0, d.ids), Binding::of(4, out), Binding::params(5)};
  const char* entry = "emb_f32";
  switch (d.type) {
    case EmbeddingType::F32: bindings.push_back(Binding::of(1, d.table)); break;
    case EmbeddingType::F16:
      entry = "emb_f16";
      bindings.push_back(Binding::of(2, d.table));
      break;
    case EmbeddingType::Q8:
    case EmbeddingType::Q4gsw:
    case EmbeddingType::Q6K:
      entry = d.type == EmbeddingType::Q8 ? "emb_q8" : d.type == EmbeddingType::Q6K ? "emb_q6k" : "emb_q4";
      bindings.push_back(Binding::of(2, d.table));
      bindings.push_back(Binding::of(3, *d.scales));
      break;
  }
  std::vector<graph::TensorId> inputs = {d.ids, d.table};
  if (quant) inputs.push_back(*d.scales);
  graph::RouteSet routes = graph::single_route(graph::RouteKey::of_dim(d.ids, 0), 1, ids.max_shape[0],
                                               {{gpu::make_key("embedding", entry), bindings}});
  const bool fed = d.fed_ids.has_value();
  if (fed) {
    const graph::Tensor& f = g.tensors.at(d.fed_ids->v);
    if (f.dtype != graph::DType::U32 || f.max_shape != graph::Shape{1} || d.feed.v >= g.symbols.size() ||
        g.symbols[d.feed.v].lo != 0 || g.symbols[d.feed.v].hi != 1)
      throw std::invalid_argument(fmt::format("{}: fed_ids must be u32 [1] and feed a symbol in [0, 1]", d.name));
    std::vector<Binding> fed_bindings = bindings;
    fed_bindings[0] = Binding::of(0, *d.fed_ids);
    routes = graph::RouteSet{graph::RouteKey::of_symbol(d.feed),
                             {{"host", 0, 0, {{gpu::make_key("embedding", entry), bindings}}},
                              {"fed", 1, 1, {{gpu::make_key("embedding", entry), fed_bindings}}}}};
    inputs.push_back(*d.fed_ids);
  }
  graph::add_node(g, graph::Node{
      .name = d.name,
      .op = std::string("embedding_") + type_name(d.type),
      .inputs = inputs,
      .outputs = {out},
      .dynamic = true,
      .routes = std::move(routes),
      .infer = [dim](const graph::InferArgs& a) { a.out[0] = infer_embedding({a.in[0], dim}); },
      .plan =
          [dim, vocab, gs, fed, name = d.name](const graph::PlanArgs& a, graph::Plan& p) {
            if (fed && a.route == 1 && a.in[0][0] != 1)
              throw std::invalid_argument(fmt::format("{}: a fed step has one token, not {}", name, a.in[0][0]));
            plan_embedding({a.in[0][0], dim, vocab, gs, a.caps->limits.maxComputeWorkgroupsPerDimension}, p);
          },
      .cost =
          [row = table.bytes / vocab, dim](const graph::PlanArgs& a) {
            // One table row per token (and its scales, within a few %), the f32 rows out.
            const uint64_t n = a.in[0][0];
            return graph::NodeCost{n * (row + 4 + uint64_t(dim) * 4), 0};
          },
  });
  return out;
}

}  // namespace wgrt::ops
