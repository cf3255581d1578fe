#include "ops/embedding/embedding.h"

#include <fmt/format.h>

#include <stdexcept>

#include "ops/linear_q/linear_q.h"

namespace wgrt::ops {

namespace {
constexpr ParamField kFields[] = {{"n_tokens", offsetof(EmbeddingParams, n_tokens)},
                                  {"dim", offsetof(EmbeddingParams, dim)},
                                  {"vocab", offsetof(EmbeddingParams, vocab)},
                                  {"gs", offsetof(EmbeddingParams, gs)},
                                  {"row0", offsetof(EmbeddingParams, row0)},
                                  {"first", offsetof(EmbeddingParams, first)},
                                  {"_pad0", offsetof(EmbeddingParams, _pad0)},
                                  {"_pad1", offsetof(EmbeddingParams, _pad1)}};

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
    case EmbeddingType::IQ4NL: return "iq4_nl";
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
    case EmbeddingType::IQ4NL: return QuantFormat::IQ4NL;
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
    case QuantFormat::IQ4NL: return EmbeddingType::IQ4NL;
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
  uint32_t row0 = 0;
  for (size_t i = 0; i < c.rows.size(); ++i) {
    plan.params[i].set(EmbeddingParams{c.n_tokens, c.dim, c.rows[i], c.gs, row0, i == 0 ? 1u : 0u, 0, 0});
    plan.grids[i] = grid_1d(ceil_div(uint64_t(c.n_tokens) * c.dim, kEmbeddingWorkgroup), c.max_groups_per_dim);
    row0 += c.rows[i];
  }
}

namespace {

// A table part's kernel bindings (after ids, out and params), checking its tensors; `dim` is
// the row length in values, found from the first part.
std::vector<graph::Binding> part_bindings(graph::Graph& g, const EmbeddingDesc& d, const EmbeddingPart& part,
                                          uint32_t& rows, uint32_t& dim) {
  const graph::Tensor& table = graph::tensor_info(g, part.table);
  if (table.max_shape.rank != 2)
    throw std::invalid_argument(fmt::format("{}: the table must be 2-D", d.name));
  rows = table.max_shape[0];
  const std::optional<QuantFormat> qf = quant_format(d.type);
  graph::DType want = qf ? graph::DType::U32 : d.type == EmbeddingType::F16 ? graph::DType::F16 : graph::DType::F32;
  if (table.dtype != want)
    throw std::invalid_argument(fmt::format("{}: a {} table must be a {} tensor, not {}", d.name,
                                            type_name(d.type), graph::dtype_name(want),
                                            graph::dtype_name(table.dtype)));
  using graph::Binding;
  if (!qf) {
    if (dim != 0 && table.max_shape[1] != dim)
      throw std::invalid_argument(fmt::format("{}: table part '{}' has rows of {}, not {}", d.name, table.name,
                                              table.max_shape[1], dim));
    dim = table.max_shape[1];
    return {d.type == EmbeddingType::F32 ? Binding::of(1, part.table) : Binding::of(2, part.table)};
  }
  const uint32_t k = table_dim(*qf, table.max_shape[1]);
  if (k == 0 || (dim != 0 && k != dim))
    throw std::invalid_argument(fmt::format("{}: a {} table's rows of {} words hold no whole number of groups{}",
                                            d.name, type_name(d.type), table.max_shape[1],
                                            dim ? fmt::format(" of a {}-value row", dim) : ""));
  dim = k;
  check_format_shape(*qf, rows, dim, d.gs, d.name.c_str());
  if (table.max_shape[1] != quant_row_words(*qf, dim))
    throw std::invalid_argument(fmt::format("{}: a {} table's rows are {} words, not {}", d.name, type_name(d.type),
                                            quant_row_words(*qf, dim), table.max_shape[1]));
  const graph::Shape want_s = scales_shape(*qf, rows, dim, d.gs);
  if (!part.scales || graph::tensor_info(g, *part.scales).dtype != scales_dtype(*qf) ||
      graph::tensor_info(g, *part.scales).max_shape != want_s)
    throw std::invalid_argument(fmt::format("{}: a {} table needs {} scales {}", d.name, type_name(d.type),
                                            graph::dtype_name(scales_dtype(*qf)), graph::to_string(want_s)));
  return {Binding::of(2, part.table), Binding::of(3, *part.scales)};
}

const char* entry_point(EmbeddingType t) {
  switch (t) {
    case EmbeddingType::F32: return "emb_f32";
    case EmbeddingType::F16: return "emb_f16";
    case EmbeddingType::Q8: return "emb_q8";
    case EmbeddingType::Q6K: return "emb_q6k";
    case EmbeddingType::Q4K: return "emb_q4k";
    case EmbeddingType::Q5K: return "emb_q5k";
    case EmbeddingType::Q41: return "emb_q4_1";
    case EmbeddingType::Q50: return "emb_q5_0";
    case EmbeddingType::Q51: return "emb_q5_1";
    case EmbeddingType::IQ4XS: return "emb_iq4_xs";
    case EmbeddingType::Q2K: return "emb_q2k";
    case EmbeddingType::Q3K: return "emb_q3k";
    case EmbeddingType::IQ4NL: return "emb_iq4_nl";
    case EmbeddingType::Q4gsw: break;
  }
  return "emb_q4";
}

}  // namespace

graph::TensorId add_embedding(graph::Graph& g, const EmbeddingDesc& d) {
  const graph::Tensor& ids = graph::tensor_info(g, d.ids);
  if (ids.dtype != graph::DType::U32 || ids.max_shape.rank != 1)
    throw std::invalid_argument(fmt::format("{}: ids must be u32 [n_tokens]", d.name));
  const bool quant = quant_format(d.type).has_value();
  const uint32_t gs = quant ? d.gs : 0;
  std::vector<EmbeddingPart> parts = {{d.table, d.scales}};
  parts.insert(parts.end(), d.more.begin(), d.more.end());
  std::vector<uint32_t> rows(parts.size());
  std::vector<std::vector<graph::Binding>> table_bindings;
  uint32_t dim = 0;
  for (size_t i = 0; i < parts.size(); ++i) table_bindings.push_back(part_bindings(g, d, parts[i], rows[i], dim));
  uint64_t vocab = 0, table_bytes = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    vocab += rows[i];
    table_bytes += graph::tensor_info(g, parts[i].table).bytes;
  }

  require_fits(graph::device_caps(g).limits, d.name + ": embedding", {0, kEmbeddingWorkgroup});  // no workgroup data
  graph::TensorId out = graph::add_tensor(g, d.name, graph::DType::F32, {ids.max_shape[0], dim});
  using graph::Binding;
  const char* entry = entry_point(d.type);
  // A kernel per part; the fed route reads the id from fed_ids.
  auto kernels = [&](graph::TensorId id_tensor) {
    std::vector<graph::KernelSpec> ks;
    for (const std::vector<Binding>& tb : table_bindings) {
      std::vector<Binding> b = {Binding::of(0, id_tensor), Binding::of(4, out), Binding::params(5)};
      b.insert(b.end(), tb.begin(), tb.end());
      ks.push_back({gpu::make_key("embedding", entry), b});
    }
    return ks;
  };
  std::vector<graph::TensorId> inputs = {d.ids};
  for (const EmbeddingPart& part : parts) {
    inputs.push_back(part.table);
    if (quant) inputs.push_back(*part.scales);
  }
  graph::RouteSet routes = graph::single_route(graph::RouteKey::of_dim(d.ids, 0), 1, ids.max_shape[0], kernels(d.ids));
  const bool fed = d.fed_ids.has_value();
  uint32_t fed_rows = 0;  // the fed route's live size: 1..fed_rows tokens
  if (fed) {
    const graph::Tensor& f = graph::tensor_info(g, *d.fed_ids);
    if (f.dtype != graph::DType::U32 || f.max_shape.rank != 1 || d.feed.v >= graph::symbol_count(g) ||
        graph::symbol_info(g, d.feed).lo != 0 || graph::symbol_info(g, d.feed).hi != 1)
      throw std::invalid_argument(fmt::format("{}: fed_ids must be u32 [rows] and feed a symbol in [0, 1]", d.name));
    fed_rows = f.max_shape[0];
    routes = graph::RouteSet{graph::RouteKey::of_symbol(d.feed),
                             {{kEmbeddingHost, "host", 0, 0, kernels(d.ids)},
                              {kEmbeddingFed, "fed", 1, 1, kernels(*d.fed_ids)}}};
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
          [dim, rows, gs, fed, fed_rows, name = d.name](const graph::PlanArgs& a, graph::Plan& p) {
            if (fed && a.route_is(kEmbeddingFed) && a.in[0][0] > fed_rows)
              throw std::invalid_argument(fmt::format("{}: a fed step has at most {} tokens (a row of fed ids each), "
                                                      "not {}", name, fed_rows, a.in[0][0]));
            plan_embedding({a.in[0][0], dim, rows, gs, a.caps->limits.maxComputeWorkgroupsPerDimension}, p);
          },
      .cost =
          [row = table_bytes / vocab, dim](const graph::PlanArgs& a) {
            // One table row per token (and its scales, within a few %), the f32 rows out.
            const uint64_t n = a.in[0][0];
            return graph::NodeCost{n * (row + 4 + uint64_t(dim) * 4), 0};
          },
  });
  return out;
}

}  // namespace wgrt::ops
