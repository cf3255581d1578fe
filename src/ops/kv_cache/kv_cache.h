// KV-cache write: the live n_tokens rows of k and v ([n_tokens, n_kv_heads * head_dim], f32)
// go to cache positions pos .. pos + n_tokens - 1, pos being a graph symbol.
//
// Cache layout: a graph State tensor of fixed shape [n_kv_heads, n_ctx, head_dim], so one KV
// head's keys are contiguous (attention streams them per head). dtype F32, or F16 packed two
// per u32 with pack2x16float (element d of a row is half d % 2 of word d / 2): half the bytes
// for decode, which is bound by reading the cache. Writing past n_ctx is rejected by plan.
#pragma once

#include "graph/graph.h"
#include "ops/common.h"

namespace wgrt::ops {

struct KvCacheDesc {
  std::string name;  // node name, e.g. "kv_write.3"
  graph::TensorId k;  // [n_tokens, n_kv_heads * head_dim] f32, n_tokens may vary
  graph::TensorId v;  // same shape as k
  graph::TensorId k_cache;  // State [n_kv_heads, n_ctx, head_dim], F32 or F16
  graph::TensorId v_cache;  // same shape and dtype as k_cache
  graph::SymbolId pos;      // first position written
};

// A cache tensor of the layout above (role State); dtype F32 or F16.
graph::TensorId add_kv_cache(graph::Graph& g, const std::string& name, graph::DType dtype,
                             uint32_t n_kv_heads, uint32_t n_ctx, uint32_t head_dim);

graph::NodeId add_kv_write(graph::Graph& g, const KvCacheDesc& d);

struct KvCacheParams {
  uint32_t n_tokens, n_kv_heads, head_dim, pos;
  uint32_t n_ctx, _pad0, _pad1, _pad2;
};
static_assert(sizeof(KvCacheParams) == 32);
extern const ParamLayout kKvCacheLayout;

struct KvWriteInferCtx {
  graph::Shape k, v, cache;
};
void infer_kv_write(const KvWriteInferCtx& c);

struct KvWritePlanCtx {
  uint32_t n_tokens, n_kv_heads, head_dim, n_ctx;
  int64_t pos;
  bool f16;
  uint32_t max_groups_per_dim;
};
// Throws std::out_of_range when pos + n_tokens > n_ctx.
void plan_kv_write(const KvWritePlanCtx& c, graph::Plan& plan);

}  // namespace wgrt::ops
