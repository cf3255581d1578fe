// Rotary position embedding on x [n_tokens, n_heads * head_dim]; row i sits at position
// pos + i, where `pos` is a graph symbol, or with `rows` (kv_cache.h KvRows) at p_i. Within each head the first n_rot dims rotate in
// pairs, the rest pass through:
//   normal (llama, GGUF):   pairs (2j, 2j + 1)
//   neox   (qwen, HF):      pairs (j, j + n_rot / 2)
// pair j turns by angle (pos + i) * inv_freq[j], inv_freq[j] = theta^(-2j / n_rot), with
// optional llama3 frequency scaling and per-pair frequency factors.
//
// Frequencies are computed on the CPU, in double, into a weight tensor (`add_rope_freqs`,
// filled with `rope_freq_table` after build, like any weight; one table serves every layer).
// Each entry is inv_freq / 2π (turns per position) as a 0.64 fixed-point fraction in two
// u32 (hi, lo). The kernel multiplies it by the integer position in 64-bit integer arithmetic,
// which wraps exactly at whole turns: the angle reaches sin/cos already reduced to [-π, π)
// with an error of ~1e-7 rad at any position, where f32 `pos * inv_freq` would be off by
// ~1e-2 rad at position 100k.
#pragma once

#include <optional>
#include <vector>

#include "graph/graph.h"
#include "ops/common.h"
#include "ops/kv_cache/kv_cache.h"

namespace wgrt::ops {

enum class RopeLayout : uint8_t { Normal, Neox };

// The published llama3 rope_scaling (Llama 3.1+ config.json "rope_type": "llama3").
struct Llama3RopeScaling {
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_position = 8192;  // original_max_position_embeddings
};

struct RopeFreqs {
  uint32_t n_rot = 0;  // rotated dims per head (even)
  double theta = 10000.0;
  std::optional<Llama3RopeScaling> llama3;
  std::vector<float> freq_factors;  // empty, or n_rot / 2 divisors of inv_freq (GGUF rope_freqs)
};

// inv_freq[j] for j < n_rot / 2, in double (scaling and factors applied).
std::vector<double> rope_inv_freqs(const RopeFreqs& f);
// The table's contents: [n_rot / 2][2] u32 = (hi, lo) of inv_freq / 2π * 2^64.
std::vector<uint32_t> rope_freq_table(const RopeFreqs& f);
// A weight [n_rot / 2, 2] u32 to hold rope_freq_table(f); write it after build.
graph::TensorId add_rope_freqs(graph::Graph& g, std::string name, uint32_t n_rot);

struct RopeDesc {
  std::string name;       // node and output name, e.g. "q_rope.3"
  graph::TensorId x;      // [n_tokens, n_heads * head_dim] f32
  graph::TensorId freqs;  // from add_rope_freqs, [n_rot / 2, 2] u32
  graph::SymbolId pos;    // position of row 0
  uint32_t head_dim = 0;
  uint32_t n_rot = 0;     // 0: head_dim
  RopeLayout layout = RopeLayout::Normal;
  std::optional<KvRows> rows;  // per-token positions (KvRows::table's p_i) instead of pos + i
};

graph::TensorId add_rope(graph::Graph& g, const RopeDesc& d);

// RoPE of q and k and the KV-cache write in one dispatch, from a fused projection
// qkv [n_tokens, (n_heads + 2 n_kv_heads) * head_dim] (q heads, then k, then v): returns the
// rotated q [n_tokens, n_heads * head_dim]; the rotated k and v go to the caches
// [n_kv_heads, n_ctx, head_dim] (f32 or f16, State tensors) at positions pos + row; with
// `rows`, q and k of row i turn at p_i and k, v go to cache row b_i + p_i (KvRows).
// Replaces rope(q), rope(k) and kv_write; the same rotation (rope_turn.wgsl). linear_q runs
// the same kernel after its q|k|v projection, or the rotation in its gemv's epilogue
// (LinearQDesc::rope): RopeQkv is what both take.
struct RopeQkv {
  graph::TensorId freqs;
  graph::SymbolId pos;
  uint32_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
  uint32_t n_rot = 0;  // 0: head_dim; a multiple of 4
  RopeLayout layout = RopeLayout::Normal;
  graph::TensorId k_cache, v_cache;
  std::optional<KvRows> rows;  // per-token positions and cache regions instead of pos + row
  // Qwen3, Gemma 3: each q and k head RMS-normalized over head_dim (eps norm_eps) and times these
  // f32 [head_dim] weights (in qkv's element order) before it turns; head_dim / 4 must divide
  // kRopeWorkgroup (a workgroup holds whole heads). Both or neither.
  std::optional<graph::TensorId> q_norm, k_norm;
  float norm_eps = 1e-6f;
};
// Whether rope_qkv normalizes q and k heads of this size (RopeQkv::q_norm).
bool rope_qkv_norms(uint32_t head_dim);
struct RopeQkvDesc {
  std::string name;  // node and output (rotated q) name, e.g. "attn_q_rope.3"
  graph::TensorId qkv;
  RopeQkv rope;
};
graph::TensorId add_rope_qkv(graph::Graph& g, const RopeQkvDesc& d);

// rope_qkv's checks and kernel, for a node that runs it (add_rope_qkv, linear_q): checks the
// spec against a qkv of `width` columns and up to `max_tokens` rows (throws
// std::invalid_argument naming `name`).
// The caches are of one dtype: f32, f16 or q8_0 (q8: the entry rope_qkv_q8 stages a workgroup's
// whole heads and quantizes them per block of 32, as kv_write does; head_dim a multiple of 32, at
// most kRopeQ8MaxHeadDim).
struct RopeQkvCaches {
  uint32_t n_ctx = 0, n_rot = 0;
  bool f16 = false;
  bool q8 = false;
};
constexpr uint32_t kRopeWorkgroup = 256;  // rope.wgsl WG (ops/kernel_constants.cpp writes it)
constexpr uint32_t kRopeQ8MaxHeadDim = 4 * kRopeWorkgroup;  // rope.wgsl q8_stage: 4 values a thread
RopeQkvCaches check_rope_qkv(const graph::Graph& g, const std::string& name, const RopeQkv& r, uint32_t width,
                             uint32_t max_tokens);
graph::KernelSpec rope_qkv_kernel(const RopeQkv& r, const RopeQkvCaches& c, graph::TensorId qkv, graph::TensorId q);
// The symbol a plan passes as `pos` below: r.pos, or with rows r.rows->max_keys.
inline graph::SymbolId rope_qkv_symbol(const RopeQkv& r) { return r.rows ? r.rows->max_keys : r.pos; }
// n tokens at `pos` must fit the caches (with r.rows: `pos` is max_keys, 1..n_ctx): throws
// std::out_of_range naming `name` otherwise.
void check_rope_positions(const std::string& name, const RopeQkv& r, const RopeQkvCaches& c, uint32_t n,
                          int64_t pos);
// Its params and grid for n tokens at `pos` (checked as above).
void plan_rope_qkv(const std::string& name, const RopeQkv& r, const RopeQkvCaches& c, uint32_t n, int64_t pos,
                   uint32_t max_groups_per_dim, graph::ParamBlock& params, graph::Grid& grid);
// The bytes it moves for n tokens.
uint64_t rope_qkv_bytes(const RopeQkv& r, const RopeQkvCaches& c, uint64_t n);

struct RopeParams {
  uint32_t n_tokens;
  uint32_t n_heads;
  uint32_t head_dim;
  uint32_t n_rot;
  uint32_t pos_sym;  // the graph's symbol block index of pos (its value is read there)
  uint32_t neox;  // 1: pairs (j, j + n_rot / 2)
  uint32_t n_kv_heads;  // rope_qkv
  uint32_t n_ctx;       // rope_qkv: positions per cache head
};
static_assert(sizeof(RopeParams) == 32);
extern const ParamLayout kRopeLayout;

struct RopeInferCtx {
  graph::Shape x;
  uint32_t head_dim;
};
graph::Shape infer_rope(const RopeInferCtx& c);

struct RopePlanCtx {
  graph::Shape x;
  uint32_t head_dim, n_rot;
  int64_t pos;       // checked here; the kernel reads it from the symbol block
  uint32_t pos_sym;  // its symbol
  RopeLayout layout;
  uint32_t max_groups_per_dim;
  bool rows = false;  // positions from the table: pos unused
};
void plan_rope(const RopePlanCtx& c, graph::Plan& plan);

}  // namespace wgrt::ops
