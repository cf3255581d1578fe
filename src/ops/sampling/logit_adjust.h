// Logit adjustment on the GPU, in place on logits [n_rows, n_vocab] f32 before the sampling
// reductions read them (sampling.h: argmax, top-k, sample_pick, logsumexp), so a step with a
// logit bias, repetition penalties or a grammar reads back the top-k instead of the whole row.
//
// Per row the host writes (llm/batch.h stage_adjust):
//   rows:    LogitAdjustRow: the entry count, whether a mask applies, the repeat and presence
//            penalties;
//   entries: up to kLogitAdjustMaxEntries LogitAdjustEntry, distinct tokens each: a token with
//            count c > 0 in the penalty window gets llm::adjusted_logits' rule (sampler.h): the
//            repeat penalty divides a positive logit and multiplies a negative one, then
//            presence * [c > 0] and frequency * c (the latter computed by the host, so a fused
//            multiply-add cannot change its rounding) are subtracted; then every entry adds its
//            bias (0 for a penalty alone);
//   allow:   a bitmask of the tokens a grammar allows (grammar/token_index.h's words); where
//            the row's has_mask is set, every other token's logit becomes -inf.
// Entry tokens at or past n_vocab are skipped (the CPU path ignores them too).
//
// Runs only while `enable` is 1 (routes "off" [0, 0], idle, and "on" [1, 1], as top-k's), so
// an unconstrained step costs nothing. The node lists `logits` as an input it writes in place:
// the graph keeps one producer per intermediate, and runs nodes in insertion order in one
// pass, so adding it after the logits' producer and before their readers is what orders it.
#pragma once

#include <cstdint>

#include "graph/graph.h"
#include "ops/common.h"

namespace wgrt::ops {

// Entries per row: the distinct tokens of the penalty window and of the bias together. A
// sampler needing more takes the CPU path (llm/batch.h can_adjust_on_gpu says so).
constexpr uint32_t kLogitAdjustWorkgroup = 256;  // logit_adjust.wgsl WG (ops/kernel_constants.cpp writes it)
constexpr uint32_t kLogitAdjustMaxEntries = 1024;

struct LogitAdjustRow {
  uint32_t n_entries;
  uint32_t has_mask;        // 1: tokens without their allow bit become -inf
  float repeat_penalty;     // 1: off
  float presence_penalty;
  float repeat_inverse;     // 1 / repeat_penalty as a float (positive logits are multiplied by it)
  uint32_t _pad1, _pad2, _pad3;
};
static_assert(sizeof(LogitAdjustRow) == 32);

struct LogitAdjustEntry {
  uint32_t token;
  uint32_t count;     // in the penalty window; 0: bias only
  float bias;         // added last
  float freq_sub;     // frequency_penalty * count, as the CPU computes it
};
static_assert(sizeof(LogitAdjustEntry) == 16);

struct LogitAdjustDesc {
  std::string name;        // node name; inputs "<name>.rows", "<name>.entries", "<name>.allow"
  graph::TensorId logits;  // [n_rows, n_vocab] f32, adjusted in place
  graph::SymbolId enable;  // in [0, 1]
};
struct LogitAdjust {
  graph::SymbolId enable;
  graph::TensorId rows;     // u32 [max_rows, 8]: LogitAdjustRow each
  graph::TensorId entries;  // u32 [max_rows, kLogitAdjustMaxEntries, 4]: LogitAdjustEntry each
  graph::TensorId allow;    // u32 [max_rows, ceil(n_vocab / 32)]
  uint32_t max_rows = 0, n_vocab = 0;
};
LogitAdjust add_logit_adjust(graph::Graph& g, const LogitAdjustDesc& d);

struct LogitAdjustParams {
  uint32_t n_rows;
  uint32_t n_vocab;
  uint32_t max_entries;  // entries per row in the tensor
  uint32_t mask_words;   // allow words per row
  uint32_t neg_inf;      // 0xff800000, the bits of -inf: a WGSL constant may not be infinite
  uint32_t _pad1, _pad2, _pad3;
};
static_assert(sizeof(LogitAdjustParams) == 32);
extern const ParamLayout kLogitAdjustLayout;

}  // namespace wgrt::ops
