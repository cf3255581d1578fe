#include "model/blocks.h"

#include <fmt/format.h>

#include <algorithm>

#include "ops/attention/attention.h"
#include "ops/elementwise/elementwise.h"
#include "ops/kv_cache/kv_cache.h"
#include "ops/norm/norm.h"
#include "ops/rope/rope.h"
#include "ops/sampling/sampling.h"
#include "ops/silu_mul/silu_mul.h"
#include "ops/slice/slice.h"

namespace wgrt::model {

// A layer's caches split into at most this many tensors of KV heads: the attention node's routes
// have a kernel per part and the merge (graph::kMaxDispatches).
constexpr uint32_t kMaxCacheParts = 5;

std::string wname(uint32_t layer, const char* what) { return fmt::format("blk.{}.{}", layer, what); }
std::string tname(const char* what, uint32_t layer) { return fmt::format("{}.{}", what, layer); }

graph::TensorId embed_tokens(BuildContext& b) {
  b.embedding = load_embedding(b.g, b.loader, "token_embd.weight", b.c.n_vocab, b.c.dim);
  return apply_embedding(b.g, b.embedding, b.tokens, "token_embd", b.next_token, b.feed);
}

graph::TensorId residual(BuildContext& b, graph::TensorId x, graph::TensorId y, const std::string& out) {
  return ops::add_binary(b.g, {.name = out, .op = ops::Binary::Add, .a = x, .b = y});
}

graph::TensorId layer_vector(BuildContext& b, const std::string& name, uint32_t n) {
  auto it = b.vectors.find(name);
  if (it == b.vectors.end()) it = b.vectors.emplace(name, load_vector(b.g, b.loader, name, n)).first;
  return it->second;
}

bool quantizes_ahead(const BuildContext& b) {
  if (b.o.quantize_ahead >= 0) return b.o.quantize_ahead == 1;
  return ops::linear_q_takes_xq(graph::device_caps(b.g), ops::QuantFormat::Q4gsw, b.o.gemv_int8);
}

namespace {

// Whether the projection of the weights `names` (k columns each) reads its x quantized ahead
// where the node before writes it so: the device's gemvs do (quantizes_ahead), every weight is
// quantized (the fused node's condition) and one of them takes the int8 row. Else the node
// before would write blocks that nothing reads (q2k / q3k weights: linear_q_takes_xq).
bool reads_xq(const BuildContext& b, std::initializer_list<std::string> names, uint32_t k) {
  if (!quantizes_ahead(b)) return false;
  bool takes = false;
  for (const std::string& name : names) {
    const std::optional<ops::QuantFormat> f = linear_quant_format(b.loader, name, k);
    if (!f) return false;
    takes = takes || ops::linear_q_takes_xq(graph::device_caps(b.g), *f, b.o.gemv_int8);
  }
  return takes;
}

// The residual stream's int8 blocks for the projection that reads it now (it takes them).
std::optional<graph::TensorId> take_hidden_xq(BuildContext& b) {
  std::optional<graph::TensorId> t = b.hidden_xq;
  b.hidden_xq.reset();
  return t;
}

// Whether the output projection is the embedding table (tied, or the file has no output.weight).
bool head_is_embedding(const BuildContext& b) {
  return b.c.tied_embeddings || !find_weight(*b.loader.model, "output.weight");
}

// Whether the output head is output_head's fused last-row gemv over a weight whose gemv reads x
// quantized ahead: the last layer's down projection then quantizes its sum ahead for it.
bool head_reads_xq(const BuildContext& b) {
  if (b.out_rows || b.o.all_logits || !quantizes_ahead(b)) return false;
  const LinearWeight& table = b.embedding.table;
  const std::optional<ops::QuantFormat> f =
      !head_is_embedding(b) ? linear_quant_format(b.loader, "output.weight", b.c.dim)
      : table.kind == LinearWeight::Kind::Quant ? std::optional(table.format) : std::nullopt;
  return f && ops::linear_q_takes_xq(graph::device_caps(b.g), *f, b.o.gemv_int8);
}

}  // namespace

namespace {

// A layer's K and V caches: one tensor each, or past the storage binding limit tensors of
// consecutive KV heads (the kernels that write and read them take the parts).
struct LayerCaches {
  graph::TensorId k, v;
  std::vector<ops::KvCachePart> more;
};

LayerCaches add_layer_caches(BuildContext& b, uint32_t l) {
  const ModelConfig& c = b.c;
  const graph::DType dt = b.o.f16_kv ? graph::DType::F16 : graph::DType::F32;
  // A region of n_ctx positions per sequence.
  const uint32_t rows = b.o.n_ctx * b.o.n_seqs;
  const uint64_t device = graph::device_caps(b.g).limits.maxStorageBufferBindingSize;
  const uint64_t head_bytes = graph::dtype_bytes(dt, {1, rows, c.head_dim});
  const uint64_t budget = b.o.max_cache_bytes ? std::min(device, b.o.max_cache_bytes) : device;
  const uint32_t per = uint32_t(std::min<uint64_t>(c.n_kv_heads, budget / head_bytes));
  if (per == 0 || ops::ceil_div(c.n_kv_heads, per) > kMaxCacheParts)
    throw std::invalid_argument(fmt::format(
        "the KV cache of one layer takes {} bytes ({} KV heads of {} positions x {}), past {} storage bindings of {} "
        "bytes (hint: a smaller context or fewer parallel sequences)", head_bytes * c.n_kv_heads, c.n_kv_heads, rows,
        c.head_dim, kMaxCacheParts, budget));
  LayerCaches caches;
  for (uint32_t h0 = 0; h0 < c.n_kv_heads; h0 += per) {
    const uint32_t heads = std::min(per, c.n_kv_heads - h0);
    auto name = [&](const char* what) {
      return per == c.n_kv_heads ? tname(what, l) : fmt::format("{}.{}.heads{}", what, l, h0);
    };
    const graph::TensorId k = ops::add_kv_cache(b.g, name("k_cache"), dt, heads, rows, c.head_dim);
    const graph::TensorId v = ops::add_kv_cache(b.g, name("v_cache"), dt, heads, rows, c.head_dim);
    if (h0 == 0) caches.k = k, caches.v = v;
    else caches.more.push_back({k, v});
  }
  return caches;
}

// Unfused attention core, from the normalized input h: separate projections, RoPE, cache write.
graph::TensorId attention_unfused(BuildContext& b, uint32_t l, graph::TensorId h, const AttentionVariant& v,
                                  const LayerCaches& caches) {
  const ModelConfig& c = b.c;
  const uint32_t q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  auto bias = [&](const char* name) { return v.qkv_bias ? wname(l, name) : std::string(); };
  LinearWeight wq = load_linear(b.g, b.loader, wname(l, "attn_q.weight"), q_dim, c.dim, bias("attn_q.bias"));
  LinearWeight wk = load_linear(b.g, b.loader, wname(l, "attn_k.weight"), kv_dim, c.dim, bias("attn_k.bias"));
  LinearWeight wv = load_linear(b.g, b.loader, wname(l, "attn_v.weight"), kv_dim, c.dim, bias("attn_v.bias"));
  graph::TensorId q = apply_linear(b.g, wq, h, tname("attn_q", l), b.o.gemv_int8);
  graph::TensorId k = apply_linear(b.g, wk, h, tname("attn_k", l), b.o.gemv_int8);
  graph::TensorId vv = apply_linear(b.g, wv, h, tname("attn_v", l), b.o.gemv_int8);
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
                          .head_dim = c.head_dim, .layout = layout, .rows = b.rows});
  k = ops::add_rope(b.g, {.name = tname("attn_k_rope", l), .x = k, .freqs = b.rope_freqs, .pos = b.pos,
                          .head_dim = c.head_dim, .layout = layout, .rows = b.rows});
  ops::add_kv_write(b.g, {.name = tname("kv_write", l), .k = k, .v = vv, .k_cache = caches.k, .v_cache = caches.v,
                          .more = caches.more, .pos = b.pos, .rows = b.rows});
  return q;
}

}  // namespace

graph::TensorId attention_block(BuildContext& b, uint32_t l, graph::TensorId x, const AttentionVariant& v) {
  const ModelConfig& c = b.c;
  const uint32_t q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  const LayerCaches caches = add_layer_caches(b, l);
  graph::TensorId norm = layer_vector(b, wname(l, "attn_norm.weight"), c.dim);
  const std::optional<graph::TensorId> x_xq = take_hidden_xq(b);  // x quantized ahead, times norm

  // Fused: attn_norm inside the q|k|v projection, RoPE of q and k and the cache write after it
  // (in the gemv's epilogue at decode). Caches split by heads take the unfused cache write.
  // Neox RoPE pairs (j, j + head_dim / 2) are made adjacent in the q and k rows at load, so the
  // fused node turns them in the normal layout (and the gemv can: its lanes hold 4 adjacent
  // columns); q·k, the only reader of either, is unchanged.
  std::optional<LinearWeight> wqkv;
  if (!v.qk_norm && c.head_dim % 4 == 0 && caches.more.empty()) {
    std::vector<std::string> biases;
    if (v.qkv_bias) biases = {wname(l, "attn_q.bias"), wname(l, "attn_k.bias"), wname(l, "attn_v.bias")};
    std::vector<std::vector<uint32_t>> orders;
    if (c.rope_neox)
      orders = {neox_pairs_adjacent(c.n_heads, c.head_dim), neox_pairs_adjacent(c.n_kv_heads, c.head_dim), {}};
    wqkv = load_linear_fused(b.g, b.loader, {wname(l, "attn_q.weight"), wname(l, "attn_k.weight"),
                                             wname(l, "attn_v.weight")},
                             {q_dim, kv_dim, kv_dim}, c.dim, FuseLayout::Rows, biases, orders);
  }
  graph::TensorId q;
  if (wqkv) {
    const ops::RopeQkv rope{.freqs = b.rope_freqs, .pos = b.pos, .n_heads = c.n_heads, .n_kv_heads = c.n_kv_heads,
                            .head_dim = c.head_dim, .layout = ops::RopeLayout::Normal,
                            .k_cache = caches.k, .v_cache = caches.v, .rows = b.rows};
    q = ops::add_linear_q(b.g, {.name = tname("attn_qkv_rope", l), .format = wqkv->format, .gs = wqkv->gs, .x = x,
                                .q = wqkv->q.q, .scales = wqkv->q.scales, .bias = wqkv->bias, .norm = norm,
                                .eps = c.norm_eps, .more = wqkv->more, .rope = rope, .gemv_int8 = b.o.gemv_int8,
                                .xq_in = x_xq});
  } else {
    graph::TensorId h = ops::add_rms_norm(b.g, {.name = tname("attn_norm", l), .x = x, .weight = norm, .eps = c.norm_eps});
    q = attention_unfused(b, l, h, v, caches);
  }
  // With several sequences, a step of up to one token per sequence takes flash-decoding. At one
  // token its output is also quantized ahead for the output projection where that one's gemv
  // reads it so.
  LinearWeight wo = load_linear(b.g, b.loader, wname(l, "attn_output.weight"), c.dim, q_dim,
                                wname(l, "attn_output.bias"));
  const bool attn_ahead = reads_xq(b, {wname(l, "attn_output.weight")}, q_dim) && c.head_dim % 16 == 0 &&
                          ops::attention_xq_wanted(c.n_heads * c.head_dim);
  graph::TensorId attn = ops::add_attention(b.g, {.name = tname("attn", l), .q = q, .k_cache = caches.k,
                                                  .v_cache = caches.v, .more_caches = caches.more, .pos = b.pos,
                                                  .n_heads = c.n_heads, .rows = b.rows,
                                                  .decode_max_tokens = b.rows ? b.o.n_seqs : 1,
                                                  .xq_out = attn_ahead});
  if (attn_ahead) b.hidden_xq = ops::attention_xq(b.g, tname("attn", l));
  // The output projection adds the residual in its epilogue (and quantizes the sum ahead for the
  // fused gate|up projection where it reads it so, normalized by ffn_norm).
  std::optional<graph::TensorId> next_norm;
  if (reads_xq(b, {wname(l, "ffn_gate.weight"), wname(l, "ffn_up.weight")}, c.dim))
    next_norm = layer_vector(b, wname(l, "ffn_norm.weight"), c.dim);
  return apply_linear_residual(b, wo, attn, x, tname("attn_residual", l), next_norm);
}

graph::TensorId ffn_block(BuildContext& b, uint32_t l, graph::TensorId x, const AttentionVariant* next) {
  const ModelConfig& c = b.c;
  graph::TensorId norm = layer_vector(b, wname(l, "ffn_norm.weight"), c.dim);
  const std::optional<graph::TensorId> x_xq = take_hidden_xq(b);  // x quantized ahead, times norm
  // Fused: ffn_norm inside the gate|up projection, SiLU(gate) * up in its epilogue (and the
  // product quantized ahead for a quantized down projection).
  std::optional<LinearWeight> gate_up =
      load_linear_fused(b.g, b.loader, {wname(l, "ffn_gate.weight"), wname(l, "ffn_up.weight")}, {c.ff, c.ff}, c.dim,
                        FuseLayout::SwiGlu, {wname(l, "ffn_gate.bias"), wname(l, "ffn_up.bias")});
  LinearWeight down = load_linear(b.g, b.loader, wname(l, "ffn_down.weight"), c.dim, c.ff, wname(l, "ffn_down.bias"));
  graph::TensorId act;
  std::optional<graph::TensorId> act_xq;
  if (gate_up) {
    const bool ahead = reads_xq(b, {wname(l, "ffn_down.weight")}, c.ff);
    act = ops::add_linear_q(b.g, {.name = tname("ffn_act", l), .format = gate_up->format, .gs = gate_up->gs, .x = x,
                                  .q = gate_up->q.q, .scales = gate_up->q.scales, .norm = norm, .eps = c.norm_eps,
                                  .swiglu = true, .gemv_int8 = b.o.gemv_int8, .xq_out = ahead, .xq_in = x_xq});
    if (ahead) act_xq = ops::linear_q_xq(b.g, tname("ffn_act", l));
  } else {
    graph::TensorId h = ops::add_rms_norm(b.g, {.name = tname("ffn_norm", l), .x = x, .weight = norm, .eps = c.norm_eps});
    LinearWeight gate = load_linear(b.g, b.loader, wname(l, "ffn_gate.weight"), c.ff, c.dim, wname(l, "ffn_gate.bias"));
    LinearWeight up = load_linear(b.g, b.loader, wname(l, "ffn_up.weight"), c.ff, c.dim, wname(l, "ffn_up.bias"));
    graph::TensorId g = apply_linear(b.g, gate, h, tname("ffn_gate", l), b.o.gemv_int8);
    graph::TensorId u = apply_linear(b.g, up, h, tname("ffn_up", l), b.o.gemv_int8);
    act = ops::add_silu_mul(b.g, {.name = tname("ffn_act", l), .gate = g, .up = u});
  }
  // down adds the residual (and quantizes the sum ahead for the next layer's q|k|v where that
  // one fuses, attention_block's condition, and reads it so).
  b.hidden_xq = act_xq;
  std::optional<graph::TensorId> next_norm;
  if (next && !next->qk_norm && c.head_dim % 4 == 0 &&
      reads_xq(b, {wname(l + 1, "attn_q.weight"), wname(l + 1, "attn_k.weight"), wname(l + 1, "attn_v.weight")}, c.dim))
    next_norm = layer_vector(b, wname(l + 1, "attn_norm.weight"), c.dim);
  if (!next && head_reads_xq(b)) next_norm = layer_vector(b, "output_norm.weight", c.dim);  // the output head's
  return apply_linear_residual(b, down, act, x, tname("ffn_residual", l), next_norm);
}

graph::TensorId apply_linear_residual(BuildContext& b, const LinearWeight& w, graph::TensorId in, graph::TensorId x,
                                      const std::string& out, std::optional<graph::TensorId> next_norm) {
  const std::optional<graph::TensorId> in_xq = take_hidden_xq(b);  // `in` quantized ahead
  if (w.kind == LinearWeight::Kind::Quant) {
    const bool ahead = next_norm && quantizes_ahead(b) && w.more.empty() && w.n % 16 == 0;
    graph::TensorId y = ops::add_linear_q(b.g, {.name = out, .format = w.format, .gs = w.gs, .x = in, .q = w.q.q,
                                                .scales = w.q.scales, .bias = w.bias, .residual = x, .more = w.more,
                                                .gemv_int8 = b.o.gemv_int8, .xq_out = ahead,
                                                .xq_norm = ahead ? next_norm : std::nullopt, .xq_in = in_xq});
    if (ahead) b.hidden_xq = ops::linear_q_xq(b.g, out);
    return y;
  }
  graph::TensorId y = apply_linear(b.g, w, in, out + ".proj", b.o.gemv_int8);
  return residual(b, x, y, out);
}

void output_head(BuildContext& b, graph::TensorId x, ModelGraph& mg) {
  const ModelConfig& c = b.c;
  const bool tied = head_is_embedding(b);
  graph::TensorId norm = layer_vector(b, "output_norm.weight", c.dim);
  const std::optional<graph::TensorId> x_xq = take_hidden_xq(b);  // x quantized ahead, times norm (head_reads_xq)
  LinearWeight out = tied ? b.embedding.table
                          : load_linear(b.g, b.loader, "output.weight", c.n_vocab, c.dim);
  // Embeddings: the final normed hidden state of every row, only on steps that ask for it (the
  // route "off" dispatches nothing), from the residual stream before any row is picked out.
  mg.hidden = ops::add_rms_norm(b.g, {.name = "hidden_norm", .x = x, .weight = norm, .eps = c.norm_eps,
                                      .enable = mg.want_hidden});
  if (b.out_rows) {
    // One row per sequence that wants logits; no GPU-fed decode.
    x = ops::add_gather_rows(b.g, {.name = "out_hidden", .x = x, .rows = *b.out_rows});
    x = ops::add_rms_norm(b.g, {.name = "output_norm", .x = x, .weight = norm, .eps = c.norm_eps});
    mg.logits = apply_linear(b.g, out, x, "logits", b.o.gemv_int8);
    mg.argmax = ops::add_argmax(b.g, {.name = "argmax", .logits = mg.logits});
  } else if (!b.o.all_logits && out.kind == LinearWeight::Kind::Quant) {
    // Fused: the last row's output_norm, the vocabulary projection and the argmax in one
    // kernel (+ the partials' reduction), the id landing where the next step can read it; at one
    // token x is read quantized ahead where the last down projection wrote it so.
    mg.logits = ops::add_linear_q(b.g, {.name = "logits", .format = out.format, .gs = out.gs, .x = x, .q = out.q.q,
                                        .scales = out.q.scales, .bias = out.bias, .norm = norm, .eps = c.norm_eps,
                                        .last_row = true, .argmax_out = mg.argmax, .more = out.more,
                                        .gemv_int8 = b.o.gemv_int8, .xq_in = x_xq});
  } else {
    if (!b.o.all_logits) x = ops::add_last_rows(b.g, {.name = "last_hidden", .x = x, .count = 1});
    x = ops::add_rms_norm(b.g, {.name = "output_norm", .x = x, .weight = norm, .eps = c.norm_eps});
    mg.logits = apply_linear(b.g, out, x, "logits", b.o.gemv_int8);
    mg.argmax = ops::add_argmax(b.g, {.name = "argmax", .logits = mg.logits, .out = b.next_token});
  }
  ops::TopKOutputs top =
      ops::add_top_k(b.g, {.name = "top_k", .logits = mg.logits, .k = mg.top_k, .enable = b.want_top_k});
  mg.top_ids = top.indices;
  mg.top_logits = top.values;
  if (b.next_token)  // a sampled token where the next step reads it (pipelined sampling)
    ops::add_sample_pick(b.g, {.name = "sample_pick", .candidates = top, .pick = mg.pick, .out = *b.next_token,
                               .enable = mg.want_sample});
  for (graph::TensorId t : {mg.logits, mg.argmax, mg.top_ids, mg.top_logits, mg.hidden}) graph::mark_output(b.g, t);
}

}  // namespace wgrt::model
