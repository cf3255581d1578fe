// Sampling reductions over logits [n_rows, n_vocab] f32 on the GPU, so a step reads back a
// few indices instead of the whole vocabulary. n_rows may vary.
//
//   argmax: indices [n_rows] u32, the first index of the row's maximum.
//   top_k:  indices [n_rows, k] u32 and values [n_rows, k] f32, best first.
//   logsumexp: [n_rows] f32, log sum_i exp(l_i): the log-softmax normalizer, so a token's
//           log-probability is its logit minus this (NaN and -inf logits carry no mass; a row
//           without mass gives -inf).
//
// Order: a total order on (value, index): larger value first, equal values by lower index.
// NaN ranks as -inf and -0 as +0 (values come back that way), so every result is
// deterministic whatever the reduction order.
//
// Two passes, so a 152k vocabulary is many workgroups' work: pass 1 splits each row into
// chunks (argmax 2048, top-k 4096 logits), a workgroup per (chunk, row) writes its best (or
// best k) into a scratch tensor `<name>.partial`; pass 2, a workgroup per row, reduces those.
// Top-k keeps a sorted top-k in workgroup memory and appends only candidates that beat its
// current k-th entry, bitonic-sorting when the 1024-entry buffer fills: most logits are
// rejected by one comparison.
#pragma once

#include <optional>

#include "graph/graph.h"
#include "ops/common.h"

namespace wgrt::ops {

constexpr uint32_t kArgmaxChunk = 2048;  // sampling.wgsl: WG * 8
constexpr uint32_t kTopKChunk = 4096;
constexpr uint32_t kTopKMax = 512;       // the buffer (1024) holds k kept + a 256 tile

struct ArgmaxDesc {
  std::string name;         // node and output name, e.g. "argmax"
  graph::TensorId logits;   // [n_rows, n_vocab] f32
  // Write the indices here instead of a new tensor: a u32 State tensor [rows] of at least the
  // logits' max rows (the next step's embedding reads it: row r feeds token r); a step's live
  // rows are its first ones, and the tensor keeps its fixed shape.
  std::optional<graph::TensorId> out;
};
// Returns indices [n_rows] u32.
graph::TensorId add_argmax(graph::Graph& g, const ArgmaxDesc& d);

// Route ids of the nodes switched by an enable symbol (top-k, sample_pick): off [0, 0] (idle),
// on [1, 1]. Without a symbol: one route, graph::kMainRoute.
inline constexpr graph::RouteId kSamplingOff{1}, kSamplingOn{2};

struct TopKDesc {
  std::string name;         // node name; outputs "<name>.indices", "<name>.values"
  graph::TensorId logits;   // [n_rows, n_vocab] f32
  uint32_t k = 0;           // 1..min(n_vocab, kTopKMax)
  // A symbol in [0, 1]: the node runs only while it is 1 (steps that sample), keyed as routes
  // "off" [0, 0] (no kernels) and "on" [1, 1].
  std::optional<graph::SymbolId> enable;
};
struct TopKOutputs {
  graph::TensorId indices;  // [n_rows, k] u32
  graph::TensorId values;   // [n_rows, k] f32
};
TopKOutputs add_top_k(graph::Graph& g, const TopKDesc& d);

// A sampled pick from the top-k on the GPU, so sampled decoding can stay pipelined: row r of
// the candidates gets its own draw. `pick` is a u32 input of PickParams, [max_rows, 8] (or [8]
// for one row), written by the host each step (a fresh draw per row); `out` the u32 State
// tensor [>= max_rows] the next step's embedding reads, row r's pick at r. Routes "off" [0, 0]
// (idle) and "on" [1, 1] on `enable`. The steps are llm::sample's (sampler.h) without a
// repetition penalty, in f32 (a draw within rounding of a boundary may pick its neighbour).
struct PickParams {
  uint32_t draw;      // u = draw / 2^32
  float temperature;  // > 0
  float top_p, min_p;
  uint32_t k;         // candidates considered (<= the top-k's k)
  uint32_t _pad0, _pad1, _pad2;
};
static_assert(sizeof(PickParams) == 32);
struct SamplePickDesc {
  std::string name;
  TopKOutputs candidates;  // [n_rows, k], best first
  graph::TensorId pick;    // u32 [max_rows, 8] (or [8]) input
  graph::TensorId out;     // u32 State [>= max_rows]
  graph::SymbolId enable;  // in [0, 1]
};
void add_sample_pick(graph::Graph& g, const SamplePickDesc& d);

// The log-softmax normalizer of each row, for log-probabilities; runs only while `enable` is 1
// (routes "off" [0, 0] and "on" [1, 1], as top-k's).
struct LogSumExpDesc {
  std::string name;         // node and output name, e.g. "logprob_norm"
  graph::TensorId logits;   // [n_rows, n_vocab] f32
  graph::SymbolId enable;   // in [0, 1]
};
// Returns [n_rows] f32.
graph::TensorId add_logsumexp(graph::Graph& g, const LogSumExpDesc& d);

struct SamplingParams {
  uint32_t n_rows;
  uint32_t n_vocab;
  uint32_t n_blocks;  // chunks per row in pass 1
  uint32_t chunk;     // logits per chunk
  uint32_t k;         // top-k (argmax: 1)
  uint32_t _pad0, _pad1, _pad2;
};
static_assert(sizeof(SamplingParams) == 32);
extern const ParamLayout kSamplingLayout;

enum class SamplingKind : uint8_t { Argmax, TopK, LogSumExp };

struct SamplingInferCtx {
  graph::Shape logits;
  SamplingKind kind;
  uint32_t k;
};
struct SamplingShapes {
  graph::Shape out;      // indices (and values); logsumexp: [n_rows] f32
  graph::Shape partial;  // [n_rows, n_blocks * k, 2] u32 (key, index) pairs; logsumexp: (max, sum) f32 bits
};
SamplingShapes infer_sampling(const SamplingInferCtx& c);

struct SamplingPlanCtx {
  graph::Shape logits;
  SamplingKind kind;
  uint32_t k;
  uint32_t max_groups_per_dim;
};
void plan_sampling(const SamplingPlanCtx& c, graph::Plan& plan);

}  // namespace wgrt::ops
