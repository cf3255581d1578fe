#include "model/plan.h"

#include <fmt/format.h>

#include <algorithm>

#include "ops/attention/attention.h"
#include "ops/common.h"
#include "ops/linear_q/linear_q.h"
#include "ops/rope/rope.h"

namespace wgrt::model {

std::string wname(uint32_t layer, const char* what) { return fmt::format("blk.{}.{}", layer, what); }

namespace {

// Whether the fused projections write their outputs quantized ahead: BuildOptions::quantize_ahead,
// else where this device's one-row gemvs read that (linear_q_takes_xq).
bool quantizes_ahead(const graph::Graph& g, const BuildOptions& o) {
  if (o.quantize_ahead >= 0) return o.quantize_ahead == 1;
  return ops::linear_q_takes_xq(graph::device_caps(g), ops::QuantFormat::Q4gsw, o.gemv_int8);
}

// Whether the projection of the weights `names` (k columns each) reads its x quantized ahead
// where the node before writes it so: every weight quantized (the fused node's condition) and
// one of them takes the int8 row (not q2k / q3k alone: linear_q_takes_xq).
bool reads_xq(const graph::Graph& g, const Loader& l, const BuildOptions& o, std::initializer_list<std::string> names,
              uint32_t k) {
  if (!quantizes_ahead(g, o)) return false;
  bool takes = false;
  for (const std::string& name : names) {
    const std::optional<ops::QuantFormat> f = linear_quant_format(l, name, k);
    if (!f) return false;
    takes = takes || ops::linear_q_takes_xq(graph::device_caps(g), *f, o.gemv_int8);
  }
  return takes;
}

}  // namespace

namespace {

// The output projection's weight: the embedding table where tied (or the file has no output.weight).
std::string head_weight(const Loader& l, const ModelConfig& c) {
  const bool tied = c.tied_embeddings || !find_weight(*l.model, "output.weight");
  return tied ? "token_embd.weight" : "output.weight";
}

}  // namespace

bool head_fuses(const graph::Graph&, const Loader& loader, const ModelConfig& c, const BuildOptions& o,
                bool multi_seq) {
  return !multi_seq && !o.all_logits && c.final_softcap == 0 &&
         linear_quant_format(loader, head_weight(loader, c), c.dim).has_value();
}

uint32_t cache_heads_per_part(const graph::Graph& g, const ModelConfig& c, const BuildOptions& o) {
  const uint32_t rows = o.n_ctx * o.n_seqs;  // a region of n_ctx positions per sequence
  const uint64_t device = graph::device_caps(g).limits.maxStorageBufferBindingSize;
  const uint64_t head_bytes = std::max(graph::dtype_bytes(kv_cache_dtype(o, false), {1, rows, c.head_dim}),
                                       graph::dtype_bytes(kv_cache_dtype(o, true), {1, rows, c.head_dim}));
  const uint64_t budget = o.max_cache_bytes ? std::min(device, o.max_cache_bytes) : device;
  return uint32_t(std::min<uint64_t>(c.n_kv_heads, budget / head_bytes));
}

ForwardPlan plan_forward(const graph::Graph& g, const Loader& loader, const ModelConfig& c, const BuildOptions& o,
                         const AttentionVariant& attention, bool multi_seq) {
  const uint32_t q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  const bool caches_whole = cache_heads_per_part(g, c, o) >= c.n_kv_heads;
  // The fused node's rope_qkv writes caches of one dtype (f32, f16 or q8_0); mixed ones (f16 K with
  // q8_0 V, ...) take kv_write.
  const bool one_cache_dtype = kv_cache_dtype(o, false) == kv_cache_dtype(o, true);
  ForwardPlan plan;
  plan.layers.resize(c.n_layers);
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    LayerPlan& p = plan.layers[l];
    // q/k norms: rope_qkv normalizes each head after the projection (whole heads a workgroup).
    p.fused_qkv = (!attention.qk_norm || ops::rope_qkv_norms(c.head_dim)) && c.head_dim % 4 == 0 && caches_whole &&
                  one_cache_dtype &&
                  linear_fuses(g, loader, {wname(l, "attn_q.weight"), wname(l, "attn_k.weight"),
                                           wname(l, "attn_v.weight")},
                               {q_dim, kv_dim, kv_dim}, c.dim, FuseLayout::Rows);
    p.attention_xq = reads_xq(g, loader, o, {wname(l, "attn_output.weight")}, q_dim) && c.head_dim % 16 == 0 &&
                     ops::attention_xq_wanted(q_dim);
    p.fused_gate_up = linear_fuses(g, loader, {wname(l, "ffn_gate.weight"), wname(l, "ffn_up.weight")},
                                   {c.ff, c.ff}, c.dim, FuseLayout::SwiGlu);
    p.act_xq = p.fused_gate_up && reads_xq(g, loader, o, {wname(l, "ffn_down.weight")}, c.ff);
    if (p.fused_gate_up && reads_xq(g, loader, o, {wname(l, "ffn_gate.weight"), wname(l, "ffn_up.weight")}, c.dim))
      p.attn_output_xq_norm = wname(l, "ffn_norm.weight");
  }
  plan.fused_head = head_fuses(g, loader, c, o, multi_seq);
  const std::optional<ops::QuantFormat> head_format = linear_quant_format(loader, head_weight(loader, c), c.dim);
  // Down's sum goes quantized ahead to the next layer's fused q|k|v, or to the fused head.
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    LayerPlan& p = plan.layers[l];
    if (c.n_experts) continue;  // the layer ends in moe_combine, which writes no xq
    if (l + 1 < c.n_layers) {
      if (plan.layers[l + 1].fused_qkv &&
          reads_xq(g, loader, o, {wname(l + 1, "attn_q.weight"), wname(l + 1, "attn_k.weight"),
                                  wname(l + 1, "attn_v.weight")}, c.dim))
        p.down_xq_norm = wname(l + 1, "attn_norm.weight");
    } else if (plan.fused_head && quantizes_ahead(g, o) &&
               ops::linear_q_takes_xq(graph::device_caps(g), *head_format, o.gemv_int8)) {
      p.down_xq_norm = "output_norm.weight";
    }
  }
  return plan;
}

}  // namespace wgrt::model
