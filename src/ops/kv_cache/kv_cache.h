// KV-cache write: the live n_tokens rows of k and v ([n_tokens, n_kv_heads * head_dim], f32)
// go to cache positions pos .. pos + n_tokens - 1, pos being a graph symbol; with
// KvCacheDesc::rows, row i goes to cache row b_i + p_i of the table (KvRows below).
//
// Cache layout: a graph State tensor of fixed shape [n_kv_heads, n_ctx, head_dim], so one KV
// head's keys are contiguous (attention streams them per head). A cache past the device's
// storage binding limit is several tensors of consecutive KV heads (KvCachePart), each a
// binding of its own: kv_write and attention run a kernel per part. dtype F32, or F16 packed two
// per u32 with pack2x16float (element d of a row is half d % 2 of word d / 2): half the bytes
// for decode, which is bound by reading the cache. Writing past n_ctx is rejected by plan.
//
// q8_0 caches (DType::Q8_0; -ctk/-ctv q8_0): each row of head_dim values (head_dim a multiple of
// 32) is blocks of 32, value = d * q with q an int8 and d an f16 scale, quantized as
// d = amax / 127, q = round(x / d) (ties away from zero; d = 0 gives q = 0). The tensor holds two
// planes: first the quants of every row in row order (head_dim bytes a row, byte e of the row is
// element e, 4 to a u32 low byte first), then the scales, q8_scale_words(head_dim) u32 words a row
// (block b's d is half b % 2 of the row's word b / 2, pack2x16float; an odd count's last half is 0).
// A part of n rows [heads, n_ctx] thus takes n * head_dim bytes of quants then n * words * 4 of
// scales: 34 bytes per 32 values where head_dim is a multiple of 64, 53% of f16. K and V may
// differ in dtype (f16 K with q8_0 V, ...); the attention kernels read q8_0 natively.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "graph/graph.h"
#include "ops/common.h"

namespace wgrt::ops {

// Per-token KV placement, for steps whose tokens come from several sequences (continuous
// batching; docs/DESIGN.md). `table` is an input u32 [max_tokens, 2] whose live rows match the
// step's tokens: row i = (p_i, b_i), token i's position in its sequence and the first cache row
// of its sequence's region. Token i turns at position p_i, its k and v land at cache row
// b_i + p_i, and its query attends cache rows b_i .. b_i + p_i. The tokens of one sequence are
// contiguous in the step with increasing positions; the caller checks that, and that every
// b_i + p_i < n_ctx (kernels clamp, so a bad table cannot write outside the caches).
// Ops given no table place token i at position pos + i of the one sequence (the `pos` symbol).
struct KvRows {
  graph::TensorId table;     // u32 [max_tokens, 2] input (dynamic dim 0 = n_tokens)
  graph::SymbolId max_keys;  // max over the step's tokens of p_i + 1: attention's split, checked <= n_ctx
};

// Further KV heads of a layer's caches: k and v [heads, n_ctx, head_dim], the same n_ctx,
// head_dim and dtype as the first part's.
struct KvCachePart {
  graph::TensorId k, v;
};

struct KvCacheDesc {
  std::string name;  // node name, e.g. "kv_write.3"
  graph::TensorId k;  // [n_tokens, n_kv_heads * head_dim] f32, n_tokens may vary
  graph::TensorId v;  // same shape as k
  graph::TensorId k_cache;  // State [n_kv_heads, n_ctx, head_dim], F32, F16 or Q8_0
  graph::TensorId v_cache;  // same shape as k_cache, any of those dtypes
  std::vector<KvCachePart> more;  // the caches' further KV heads, in order
  graph::SymbolId pos;      // first position written (without rows)
  std::optional<KvRows> rows;  // per-token positions and regions instead of pos
};

constexpr uint32_t kKvCacheWorkgroup = 256;  // kv_cache.wgsl WG (ops/kernel_constants.cpp writes it)
constexpr uint32_t kQ8Block = 32;  // values per q8_0 block
// u32 words of one q8_0 row's f16 block scales.
constexpr uint32_t q8_scale_words(uint32_t head_dim) { return (head_dim / kQ8Block + 1) / 2; }
// Threads kv_write runs per cache row: a word of an f32 / f16 row, a scale word (two blocks) of a q8_0 row.
uint32_t kv_write_units(graph::DType dtype, uint32_t head_dim);

// A cache tensor of the layout above (role State); dtype F32, F16 or Q8_0 (head_dim a multiple
// of 32, else std::invalid_argument).
graph::TensorId add_kv_cache(graph::Graph& g, const std::string& name, graph::DType dtype,
                             uint32_t n_kv_heads, uint32_t n_ctx, uint32_t head_dim);

graph::NodeId add_kv_write(graph::Graph& g, const KvCacheDesc& d);

// The KV heads of each part of a layer's caches ((k_cache, v_cache) then `more`), checking that
// the parts are State tensors sharing the first's dtype, n_ctx and head_dim (std::invalid_argument
// naming `name`).
std::vector<uint32_t> kv_part_heads(const graph::Graph& g, const std::string& name, graph::TensorId k_cache,
                                    graph::TensorId v_cache, const std::vector<KvCachePart>& more);

// KvRows helpers for the ops that take rows (kv_write, rope, rope_qkv, linear_q, attention).
// The kernels read the table through the WGSL part kv_rows.wgsl under the override TABLE; the
// binding exists in both modes, so without rows it is bound to a tensor the kernel already
// reads (`fallback`, read-only there), never read through it: no extra buffer, no extra read.
//   check_kv_rows: `rows` names a u32 [max_tokens, 2] input with dynamic dim 0 whose max
//     rows match the op's and a known max_keys symbol (std::invalid_argument naming `name`).
//   kv_rows_binding: the table, or `fallback`.
//   check_kv_rows_live: at infer, the table's live rows are the op's n_tokens.
//   check_max_keys: at plan, 1 <= max_keys <= n_ctx (std::out_of_range naming `name`).
void check_kv_rows(const graph::Graph& g, const std::string& name, const KvRows& rows, uint32_t max_tokens);
inline graph::TensorId kv_rows_binding(const std::optional<KvRows>& rows, graph::TensorId fallback) {
  return rows ? rows->table : fallback;
}
void check_kv_rows_live(const std::string& name, const graph::Shape& table, uint32_t n_tokens);
void check_max_keys(const std::string& name, int64_t max_keys, uint32_t n_ctx);

struct KvCacheParams {
  uint32_t n_tokens, n_kv_heads, head_dim, pos_sym;  // n_kv_heads: this part's; pos_sym: pos's symbol block index
  uint32_t n_ctx, head_off, row_heads, units;    // the part's first KV head; KV heads per k/v row; kv_write_units
};
static_assert(sizeof(KvCacheParams) == 32);
extern const ParamLayout kKvCacheLayout;

struct KvWriteInferCtx {
  graph::Shape k, v, cache;
  uint32_t n_kv_heads = 0;  // all parts' (0: the cache's)
};
void infer_kv_write(const KvWriteInferCtx& c);

struct KvWritePlanCtx {
  uint32_t n_tokens;
  std::span<const uint32_t> part_heads;  // each cache part's KV heads: a kernel each
  uint32_t head_dim, n_ctx;
  int64_t pos;  // with rows: the max_keys symbol's value (checked; kernels read pos from the symbol block)
  uint32_t pos_sym;  // that symbol
  uint32_t units;  // threads per cache row: the larger kv_write_units of k's and v's dtype
  uint32_t max_groups_per_dim;
  bool rows = false;
};
// Throws std::out_of_range when pos + n_tokens > n_ctx (with rows: max_keys > n_ctx).
void plan_kv_write(const KvWritePlanCtx& c, graph::Plan& plan);

}  // namespace wgrt::ops
