#include "ops/embedding/embedding.h"

#include <fmt/format.h>

#include <stdexcept>

#include "ops/linear_q/linear_q.h"

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
    case EmbeddingType::Q4K: return "q4k";
    case EmbeddingType::Q5K: return "q5k";
    case EmbeddingType::Q41: return "q4_1";
    case EmbeddingType::Q50: return "q5_0";
    case EmbeddingType::Q51: return "q5_1";
    case EmbeddingType::IQ4XS: return "iq4_xs";
    case EmbeddingType::Q2K: return "q2k";
    case EmbeddingType::Q3K: return "q3k";
    default: return "q4gsw";
  }
}

std::optional<QuantFormat> quant_format(EmbeddingType t) {
  switch (t) {
    case EmbeddingType::F32:
    case EmbeddingType::F16: return std::nullopt;
    case EmbeddingType::Q8: return QuantFormat::Q8;
    case EmbeddingType::Q4gsw: return QuantFormat::Q4gsw;
    case EmbeddingType::Q6K: return QuantFormat::Q6K;
    case EmbeddingType::Q4K: return QuantFormat::Q4K;
    case EmbeddingType::Q5K: return QuantFormat::Q5K;
    case EmbeddingType::Q41: return QuantFormat::Q41;
    case EmbeddingType::Q50: return QuantFormat::Q50;
    case EmbeddingType::Q51: return QuantFormat::Q51;
    case EmbeddingType::IQ4XS: return QuantFormat::IQ4XS;
    case EmbeddingType::Q2K: return QuantFormat::Q2K;
    case EmbeddingType::Q3K: return QuantFormat::Q3K;
  }
  return std::nullopt;
}

// Values per row of a table whose q words are [vocab, words]: the least multiple of 32 whose
// rows take that many words (quant_row_words grows with k), or 0 when none does.
uint32_t table_dim(QuantFormat f, uint32_t words) {
  for (uint32_t k = 32; k / 32 <= words; k += 32)  // fewer than 32 values per word (q2k: 12.8)
    if (quant_row_words(f, k) == words) return k;
  return 0;
}
}  // namespace

EmbeddingType embedding_type(QuantFormat f) {
  switch (f) {
    case QuantFormat::Q4gsw: return EmbeddingType::Q4gsw;
    case QuantFormat::Q8: return EmbeddingType::Q8;
    case QuantFormat::Q6K: return EmbeddingType::Q6K;
    case QuantFormat::Q4K: return EmbeddingType::Q4K;
    case QuantFormat::Q5K: return EmbeddingType::Q5K;
    case QuantFormat::Q41: return EmbeddingType::Q41;
    case QuantFormat::Q50: return EmbeddingType::Q50;
    case QuantFormat::Q51: return EmbeddingType::Q51;
    case QuantFormat::IQ4XS: return EmbeddingType::IQ4XS;
    case QuantFormat::Q2K: return EmbeddingType::Q2K;
    case QuantFormat::Q3K: return EmbeddingType::Q3K;
  }
  return EmbeddingType::Q4gsw;
}

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
  const graph::Tensor& ids = graph::tensor_info(g, d.ids);
  const graph::Tensor& table = graph::tensor_info(g, d.table);
  if (ids.dtype != graph::DType::U32 || ids.max_shape.rank != 1)
    throw std::invalid_argument(fmt::format("{}: ids must be u32 [n_tokens]", d.name));
  if (table.max_shape.rank != 2)
    throw std::invalid_argument(fmt::format("{}: the table must be 2-D", d.name));
  const uint32_t vocab = table.max_shape[0];
  uint32_t dim = table.max_shape[1];
  const std::optional<QuantFormat> qf = quant_format(d.type);
  const bool quant = qf.has_value();
  graph::DType want = quant ? graph::DType::U32
                            : d.type == EmbeddingType::F16 ? graph::DType::F16 : graph::DType::F32;
  if (table.dtype != want)
    throw std::invalid_argument(fmt::format("{}: a {} table must be a {} tensor, not {}", d.name,
                                            type_name(d.type), graph::dtype_name(want),
                                            graph::dtype_name(table.dtype)));
  uint32_t gs = 0;
  if (quant) {
    dim = table_dim(*qf, dim);
    if (dim == 0)
      throw std::invalid_argument(fmt::format("{}: a {} table's rows of {} words hold no whole number of groups",
                                              d.name, type_name(d.type), table.max_shape[1]));
    gs = d.gs;
    check_format_shape(*qf, vocab, dim, gs, d.name.c_str());
    if (table.max_shape[1] != quant_row_words(*qf, dim))
      throw std::invalid_argument(fmt::format("{}: a {} table's rows are {} words, not {}", d.name, type_name(d.type),
                                              quant_row_words(*qf, dim), table.max_shape[1]));
    const graph::Shape want_s = scales_shape(*qf, vocab, dim, gs);
    if (!d.scales || graph::tensor_info(g, *d.scales).dtype != scales_dtype(*qf) ||
        graph::tensor_info(g, *d.scales).max_shape != want_s)
      throw std::invalid_argument(fmt::format("{}: a {} table needs {} scales {}", d.name, type_name(d.type),
                                              graph::dtype_name(scales_dtype(*qf)), graph::to_string(want_s)));
  }

  require_fits(graph::device_caps(g).limits, d.name + ": embedding", {0, kWg});  // no workgroup data
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
    case EmbeddingType::Q4K:
    case EmbeddingType::Q5K:
    case EmbeddingType::Q41:
    case EmbeddingType::Q50:
    case EmbeddingType::Q51:
    case EmbeddingType::IQ4XS:
    case EmbeddingType::Q2K:
    case EmbeddingType::Q3K:
      entry = d.type == EmbeddingType::Q8    ? "emb_q8"
              : d.type == EmbeddingType::Q6K ? "emb_q6k"
              : d.type == EmbeddingType::Q4K ? "emb_q4k"
              : d.type == EmbeddingType::Q5K ? "emb_q5k"
              : d.type == EmbeddingType::Q41 ? "emb_q4_1"
              : d.type == EmbeddingType::Q50 ? "emb_q5_0"
              : d.type == EmbeddingType::Q51 ? "emb_q5_1"
              : d.type == EmbeddingType::IQ4XS ? "emb_iq4_xs"
              : d.type == EmbeddingType::Q2K ? "emb_q2k"
              : d.type == EmbeddingType::Q3K ? "emb_q3k"
                                             : "emb_q4";
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
    const graph::Tensor& f = graph::tensor_info(g, *d.fed_ids);
    if (f.dtype != graph::DType::U32 || f.max_shape != graph::Shape{1} || d.feed.v >= graph::symbol_count(g) ||
        graph::symbol_info(g, d.feed).lo != 0 || graph::symbol_info(g, d.feed).hi != 1)
      throw std::invalid_argument(fmt::format("{}: fed_ids must be u32 [1] and feed a symbol in [0, 1]", d.name));
    std::vector<Binding> fed_bindings = bindings;
    fed_bindings[0] = Binding::of(0, *d.fed_ids);
    routes = graph::RouteSet{graph::RouteKey::of_symbol(d.feed),
                             {{kEmbeddingHost, "host", 0, 0, {{gpu::make_key("embedding", entry), bindings}}},
                              {kEmbeddingFed, "fed", 1, 1, {{gpu::make_key("embedding", entry), fed_bindings}}}}};
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
            if (fed && a.route_is(kEmbeddingFed) && a.in[0][0] != 1)
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
