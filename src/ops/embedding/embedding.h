// embedding: out[t, :] = table[ids[t], :] as f32, for f32, f16, q8, q4gsw, K-quant (q2k..q6k), q4_1/q5_x, iq4_nl and
// iq4_xs tables
// (ops/quant/quant.h has the quantized layouts; an f16 table is [vocab, dim] in f16 pairs).
// ids is u32 [n_tokens] and may vary per step. An id >= vocab gives a row of zeros: the
// kernel never reads past the table (validate token ids on the CPU for a proper error).
// A table split by rows (EmbeddingDesc::more: past the device's storage binding limit) runs one
// kernel per part.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "graph/graph.h"
#include "ops/common.h"
#include "ops/quant/quant.h"

namespace wgrt::ops {

enum class EmbeddingType : uint8_t { F32, F16, Q8, Q4gsw, Q6K, Q4K, Q5K, Q41, Q50, Q51, IQ4XS, Q2K, Q3K, IQ4NL };
// The table type of a quantized weight format.
EmbeddingType embedding_type(QuantFormat f);

// Further rows of a table, continuing the vocabulary: the same type and row length.
struct EmbeddingPart {
  graph::TensorId table;
  std::optional<graph::TensorId> scales;
};

struct EmbeddingDesc {
  std::string name;  // node and output name, e.g. "token_embd"
  EmbeddingType type = EmbeddingType::F32;
  graph::TensorId ids;    // u32 [n_tokens]
  graph::TensorId table;  // f32/f16 [vocab, dim], or the q words u32 [vocab, dim / (8 or 4)]
  std::optional<graph::TensorId> scales;  // quantized tables: their scales (linear_q's scales_shape)
  uint32_t gs = 32;                       // quantized tables: group size
  std::vector<EmbeddingPart> more;        // the table's further rows, in order
  // Decode steps fed on the GPU: while symbol `feed` (in [0, 1]) is 1, token t's id is read
  // from row t of `fed_ids` (u32 [rows], written by the previous step's sampling: row r of its
  // readout) instead of ids; a fed step has 1..rows tokens (one sequence: rows 1).
  // Routes "host" [0, 0] and "fed" [1, 1] on the symbol (ids kEmbeddingHost, kEmbeddingFed;
  // without fed_ids one route, graph::kMainRoute).
  std::optional<graph::TensorId> fed_ids;
  graph::SymbolId feed;
};

graph::TensorId add_embedding(graph::Graph& g, const EmbeddingDesc& d);
constexpr uint32_t kEmbeddingWorkgroup = 256;  // embedding.wgsl WG (ops/kernel_constants.cpp writes it)
inline constexpr graph::RouteId kEmbeddingHost{1}, kEmbeddingFed{2};

struct EmbeddingParams {
  uint32_t n_tokens, dim, vocab, gs;  // vocab: this part's rows
  uint32_t row0, first;               // the part's first row; 1 for the first part
  uint32_t _pad0, _pad1;
};
static_assert(sizeof(EmbeddingParams) == 32);
extern const ParamLayout kEmbeddingLayout;

struct EmbeddingInferCtx {
  graph::Shape ids;
  uint32_t dim;
};
graph::Shape infer_embedding(const EmbeddingInferCtx& c);

struct EmbeddingPlanCtx {
  uint32_t n_tokens, dim;
  std::span<const uint32_t> rows;  // each part's rows, in order: a kernel each
  uint32_t gs;
  uint32_t max_groups_per_dim;
};
void plan_embedding(const EmbeddingPlanCtx& c, graph::Plan& plan);

}  // namespace wgrt::ops
