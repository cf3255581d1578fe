#include "model/blocks.h"

#include <fmt/format.h>

#include "ops/attention/attention.h"
#include "ops/elementwise/elementwise.h"
#include "ops/kv_cache/kv_cache.h"
#include "ops/norm/norm.h"
#include "ops/rope/rope.h"
#include "ops/sampling/sampling.h"
#include "ops/silu_mul/silu_mul.h"
#include "ops/slice/slice.h"

namespace wgrt::model {

std::string wname(uint32_t layer, const char* what) { return fmt::format("blk.{}.{}", layer, what); }
std::string tname(const char* what, uint32_t layer) { return fmt::format("{}.{}", what, layer); }

graph::TensorId embed_tokens(BuildContext& b) {
  b.embedding = load_embedding(b.g, b.loader, "token_embd.weight", b.c.n_vocab, b.c.dim);
  return apply_embedding(b.g, b.embedding, b.tokens, "token_embd");
}

graph::TensorId rms_norm(BuildContext& b, graph::TensorId x, const std::string& weight, const std::string& out) {
  graph::TensorId w = load_vector(b.g, b.loader, weight, b.c.dim);
  return ops::add_rms_norm(b.g, {.name = out, .x = x, .weight = w, .eps = b.c.norm_eps});
}

graph::TensorId residual(BuildContext& b, graph::TensorId x, graph::TensorId y, const std::string& out) {
  return ops::add_binary(b.g, {.name = out, .op = ops::Binary::Add, .a = x, .b = y});
}

graph::TensorId self_attention(BuildContext& b, uint32_t l, graph::TensorId h, const AttentionVariant& v) {
  const ModelConfig& c = b.c;
  const uint32_t q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  auto bias = [&](const char* name) { return v.qkv_bias ? wname(l, name) : std::string(); };
  LinearWeight wq = load_linear(b.g, b.loader, wname(l, "attn_q.weight"), q_dim, c.dim, bias("attn_q.bias"));
  LinearWeight wk = load_linear(b.g, b.loader, wname(l, "attn_k.weight"), kv_dim, c.dim, bias("attn_k.bias"));
  LinearWeight wv = load_linear(b.g, b.loader, wname(l, "attn_v.weight"), kv_dim, c.dim, bias("attn_v.bias"));
  LinearWeight wo = load_linear(b.g, b.loader, wname(l, "attn_output.weight"), c.dim, q_dim);

  graph::TensorId q = apply_linear(b.g, wq, h, tname("attn_q", l));
  graph::TensorId k = apply_linear(b.g, wk, h, tname("attn_k", l));
  graph::TensorId vv = apply_linear(b.g, wv, h, tname("attn_v", l));
  if (v.qk_norm) {
    graph::TensorId qn = load_vector(b.g, b.loader, wname(l, "attn_q_norm.weight"), c.head_dim);
    graph::TensorId kn = load_vector(b.g, b.loader, wname(l, "attn_k_norm.weight"), c.head_dim);
    q = ops::add_rms_norm(b.g, {.name = tname("attn_q_norm", l), .x = q, .weight = qn, .eps = c.norm_eps,
                                .row_size = c.head_dim});
    k = ops::add_rms_norm(b.g, {.name = tname("attn_k_norm", l), .x = k, .weight = kn, .eps = c.norm_eps,
                                .row_size = c.head_dim});
  }
  const ops::RopeLayout layout = c.rope_neox ? ops::RopeLayout::Neox : ops::RopeLayout::Normal;
  q = ops::add_rope(b.g, {.name = tname("attn_q_rope", l), .x = q, .freqs = b.rope_freqs, .pos = b.pos,
                          .head_dim = c.head_dim, .layout = layout});
  k = ops::add_rope(b.g, {.name = tname("attn_k_rope", l), .x = k, .freqs = b.rope_freqs, .pos = b.pos,
                          .head_dim = c.head_dim, .layout = layout});

  const graph::DType cache_type = b.o.f16_kv ? graph::DType::F16 : graph::DType::F32;
  graph::TensorId k_cache = ops::add_kv_cache(b.g, tname("k_cache", l), cache_type, c.n_kv_heads, b.o.n_ctx, c.head_dim);
  graph::TensorId v_cache = ops::add_kv_cache(b.g, tname("v_cache", l), cache_type, c.n_kv_heads, b.o.n_ctx, c.head_dim);
  ops::add_kv_write(b.g, {.name = tname("kv_write", l), .k = k, .v = vv, .k_cache = k_cache, .v_cache = v_cache,
                          .pos = b.pos});
  graph::TensorId attn = ops::add_attention(b.g, {.name = tname("attn", l), .q = q, .k_cache = k_cache,
                                                  .v_cache = v_cache, .pos = b.pos, .n_heads = c.n_heads});
  return apply_linear(b.g, wo, attn, tname("attn_out", l));
}

graph::TensorId swiglu_ffn(BuildContext& b, uint32_t l, graph::TensorId h) {
  const ModelConfig& c = b.c;
  LinearWeight gate = load_linear(b.g, b.loader, wname(l, "ffn_gate.weight"), c.ff, c.dim);
  LinearWeight up = load_linear(b.g, b.loader, wname(l, "ffn_up.weight"), c.ff, c.dim);
  LinearWeight down = load_linear(b.g, b.loader, wname(l, "ffn_down.weight"), c.dim, c.ff);
  graph::TensorId g = apply_linear(b.g, gate, h, tname("ffn_gate", l));
  graph::TensorId u = apply_linear(b.g, up, h, tname("ffn_up", l));
  graph::TensorId act = ops::add_silu_mul(b.g, {.name = tname("ffn_act", l), .gate = g, .up = u});
  return apply_linear(b.g, down, act, tname("ffn_down", l));
}

void output_head(BuildContext& b, graph::TensorId x, ModelGraph& mg) {
  const ModelConfig& c = b.c;
  if (!b.o.all_logits) x = ops::add_last_rows(b.g, {.name = "last_hidden", .x = x, .count = 1});
  x = rms_norm(b, x, "output_norm.weight", "output_norm");
  const bool tied = c.tied_embeddings || !find_weight(*b.loader.model, "output.weight");
  LinearWeight out = tied ? b.embedding.table : load_linear(b.g, b.loader, "output.weight", c.n_vocab, c.dim);
  mg.logits = apply_linear(b.g, out, x, "logits");
  mg.argmax = ops::add_argmax(b.g, {.name = "argmax", .logits = mg.logits});
  ops::TopKOutputs top = ops::add_top_k(b.g, {.name = "top_k", .logits = mg.logits, .k = mg.top_k});
  mg.top_ids = top.indices;
  mg.top_logits = top.values;
  for (graph::TensorId t : {mg.logits, mg.argmax, mg.top_ids, mg.top_logits}) graph::mark_output(b.g, t);
}

}  // namespace wgrt::model
