#include "model/blocks.h"

#include <fmt/format.h>

#include <algorithm>

#include "ops/attention/attention.h"
#include "ops/elementwise/elementwise.h"
#include "ops/gated_add/gated_add.h"
#include "ops/kv_cache/kv_cache.h"
#include "ops/moe/moe.h"
#include "ops/norm/norm.h"
#include "ops/rope/rope.h"
#include "ops/sampling/sampling.h"
#include "ops/silu_mul/silu_mul.h"
#include "ops/slice/slice.h"

namespace wgrt::model {

// A layer's caches split into at most this many tensors of KV heads: the attention node's routes
// have a kernel per part and the merge (graph::kMaxDispatches).
constexpr uint32_t kMaxCacheParts = 5;

std::string tname(const char* what, uint32_t layer) { return fmt::format("{}.{}", what, layer); }

ForwardPlan plan_forward(const BuildContext& b, const AttentionVariant& attention) {
  return plan_forward(b.g, b.loader, b.c, b.o, attention, b.rows.has_value());
}

Hidden embed_tokens(BuildContext& b) {
  b.embedding = load_embedding(b.g, b.loader, "token_embd.weight", b.c.n_vocab, b.c.dim);
  return {apply_embedding(b.g, b.embedding, b.tokens, "token_embd", b.next_token, b.feed), std::nullopt};
}

graph::TensorId residual(BuildContext& b, graph::TensorId x, graph::TensorId y, const std::string& out) {
  return ops::add_binary(b.g, {.name = out, .op = ops::Binary::Add, .a = x, .b = y});
}

graph::TensorId layer_vector(BuildContext& b, const std::string& name, uint32_t n) {
  auto it = b.vectors.find(name);
  if (it == b.vectors.end()) it = b.vectors.emplace(name, load_vector(b.g, b.loader, name, n, b.c.norm_offset)).first;
  return it->second;
}

graph::TensorId layer_rope_freqs(const BuildContext& b, uint32_t layer) {
  return layer_rope_local(b.c, layer) ? b.rope_freqs_local : b.rope_freqs;
}

LayerCaches add_layer_caches(BuildContext& b, uint32_t l) {
  const ModelConfig& c = b.c;
  const graph::DType kt = kv_cache_dtype(b.o, false), vt = kv_cache_dtype(b.o, true);
  if ((kt == graph::DType::F32) != (vt == graph::DType::F32))
    throw std::invalid_argument(fmt::format("KV cache types k {} and v {}: an f32 cache pairs only with an f32 one "
                                            "(hint: -ctk and -ctv both f32, or each f16 or q8_0)",
                                            graph::dtype_name(kt), graph::dtype_name(vt)));
  if ((kt == graph::DType::Q8_0 || vt == graph::DType::Q8_0) && c.head_dim % ops::kQ8Block != 0)
    throw std::invalid_argument(fmt::format("a q8_0 KV cache needs a head_dim that is a multiple of {}; this model's "
                                            "is {} (hint: -ctk f16 -ctv f16)", ops::kQ8Block, c.head_dim));
  const uint32_t rows = b.o.n_ctx * b.o.n_seqs;  // a region of n_ctx positions per sequence
  const uint32_t per = cache_heads_per_part(b.g, c, b.o);
  if (per == 0 || ops::ceil_div(c.n_kv_heads, per) > kMaxCacheParts) {
    const uint64_t device = graph::device_caps(b.g).limits.maxStorageBufferBindingSize;
    const uint64_t budget = b.o.max_cache_bytes ? std::min(device, b.o.max_cache_bytes) : device;
    const uint64_t head_bytes = std::max(graph::dtype_bytes(kt, {1, rows, c.head_dim}),
                                         graph::dtype_bytes(vt, {1, rows, c.head_dim}));
    throw std::invalid_argument(fmt::format(
        "the KV cache of one layer takes {} bytes ({} KV heads of {} positions x {}), past {} storage bindings of {} "
        "bytes (hint: a smaller context or fewer parallel sequences)", head_bytes * c.n_kv_heads, c.n_kv_heads, rows,
        c.head_dim, kMaxCacheParts, budget));
  }
  LayerCaches caches;
  for (uint32_t h0 = 0; h0 < c.n_kv_heads; h0 += per) {
    const uint32_t heads = std::min(per, c.n_kv_heads - h0);
    auto name = [&](const char* what) {
      return per == c.n_kv_heads ? tname(what, l) : fmt::format("{}.{}.heads{}", what, l, h0);
    };
    const graph::TensorId k = ops::add_kv_cache(b.g, name("k_cache"), kt, heads, rows, c.head_dim);
    const graph::TensorId v = ops::add_kv_cache(b.g, name("v_cache"), vt, heads, rows, c.head_dim);
    if (h0 == 0) caches.k = k, caches.v = v;
    else caches.more.push_back({k, v});
  }
  return caches;
}

namespace {

// attention_qkv, one node per step: the norm, separate projections, q/k norms, RoPE, cache write.
graph::TensorId qkv_unfused(BuildContext& b, uint32_t l, graph::TensorId x, const AttentionVariant& v,
                            const LayerCaches& caches) {
  const ModelConfig& c = b.c;
  const uint32_t q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  graph::TensorId norm = layer_vector(b, wname(l, "attn_norm.weight"), c.dim);
  graph::TensorId h = ops::add_rms_norm(b.g, {.name = tname("attn_norm", l), .x = x, .weight = norm, .eps = c.norm_eps});
  auto bias = [&](const char* name) { return v.qkv_bias ? wname(l, name) : std::string(); };
  LinearWeight wq = load_linear(b.g, b.loader, wname(l, "attn_q.weight"), q_dim, c.dim, bias("attn_q.bias"));
  LinearWeight wk = load_linear(b.g, b.loader, wname(l, "attn_k.weight"), kv_dim, c.dim, bias("attn_k.bias"));
  LinearWeight wv = load_linear(b.g, b.loader, wname(l, "attn_v.weight"), kv_dim, c.dim, bias("attn_v.bias"));
  graph::TensorId q = apply_linear(b.g, wq, h, tname("attn_q", l), b.o.gemv_int8);
  graph::TensorId k = apply_linear(b.g, wk, h, tname("attn_k", l), b.o.gemv_int8);
  graph::TensorId vv = apply_linear(b.g, wv, h, tname("attn_v", l), b.o.gemv_int8);
  if (v.qk_norm) {
    graph::TensorId qn = load_vector(b.g, b.loader, wname(l, "attn_q_norm.weight"), c.head_dim, c.norm_offset);
    graph::TensorId kn = load_vector(b.g, b.loader, wname(l, "attn_k_norm.weight"), c.head_dim, c.norm_offset);
    q = ops::add_rms_norm(b.g, {.name = tname("attn_q_norm", l), .x = q, .weight = qn, .eps = c.norm_eps,
                                .row_size = c.head_dim});
    k = ops::add_rms_norm(b.g, {.name = tname("attn_k_norm", l), .x = k, .weight = kn, .eps = c.norm_eps,
                                .row_size = c.head_dim});
  }
  const ops::RopeLayout layout = c.rope_neox ? ops::RopeLayout::Neox : ops::RopeLayout::Normal;
  q = ops::add_rope(b.g, {.name = tname("attn_q_rope", l), .x = q, .freqs = layer_rope_freqs(b, l), .pos = b.pos,
                          .head_dim = c.head_dim, .layout = layout, .rows = b.rows});
  k = ops::add_rope(b.g, {.name = tname("attn_k_rope", l), .x = k, .freqs = layer_rope_freqs(b, l), .pos = b.pos,
                          .head_dim = c.head_dim, .layout = layout, .rows = b.rows});
  ops::add_kv_write(b.g, {.name = tname("kv_write", l), .k = k, .v = vv, .k_cache = caches.k, .v_cache = caches.v,
                          .more = caches.more, .pos = b.pos, .rows = b.rows});
  return q;
}

}  // namespace

graph::TensorId attention_qkv(BuildContext& b, const LayerPlan& p, uint32_t l, const Hidden& x,
                              const AttentionVariant& v, const LayerCaches& caches) {
  if (!p.fused_qkv) return qkv_unfused(b, l, x.x, v, caches);
  // attn_norm inside the q|k|v projection, RoPE of q and k and the cache write after it (in the
  // gemv's epilogue at decode). Neox RoPE pairs (j, j + head_dim / 2) are made adjacent in the q
  // and k rows at load, so the fused node turns them in the normal layout (and the gemv can: its
  // lanes hold 4 adjacent columns); q·k, the only reader of either, is unchanged.
  const ModelConfig& c = b.c;
  const uint32_t q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  std::vector<std::string> biases;
  if (v.qkv_bias) biases = {wname(l, "attn_q.bias"), wname(l, "attn_k.bias"), wname(l, "attn_v.bias")};
  std::vector<std::vector<uint32_t>> orders;
  if (c.rope_neox) orders = {neox_pairs_adjacent(c.n_heads, c.head_dim), neox_pairs_adjacent(c.n_kv_heads, c.head_dim), {}};
  const std::optional<LinearWeight> w =
      load_linear_fused(b.g, b.loader, {wname(l, "attn_q.weight"), wname(l, "attn_k.weight"), wname(l, "attn_v.weight")},
                        {q_dim, kv_dim, kv_dim}, c.dim, FuseLayout::Rows, biases, orders);
  if (!w) throw std::logic_error(fmt::format("layer {}: the plan fuses q|k|v but the weights do not", l));
  ops::RopeQkv rope{.freqs = layer_rope_freqs(b, l), .pos = b.pos, .n_heads = c.n_heads, .n_kv_heads = c.n_kv_heads,
                    .head_dim = c.head_dim, .layout = ops::RopeLayout::Normal,
                    .k_cache = caches.k, .v_cache = caches.v, .rows = b.rows};
  if (v.qk_norm) {  // each head's norm weight in the rows' order (neox pairs made adjacent)
    const std::vector<uint32_t> order = c.rope_neox ? neox_pairs_adjacent(1, c.head_dim) : std::vector<uint32_t>{};
    rope.q_norm = load_vector(b.g, b.loader, wname(l, "attn_q_norm.weight"), c.head_dim, c.norm_offset, order);
    rope.k_norm = load_vector(b.g, b.loader, wname(l, "attn_k_norm.weight"), c.head_dim, c.norm_offset, order);
    rope.norm_eps = c.norm_eps;
  }
  return ops::add_linear_q(b.g, {.name = tname("attn_qkv_rope", l), .format = w->format, .gs = w->gs, .x = x.x,
                                 .q = w->q.q, .scales = w->q.scales, .bias = w->bias,
                                 .norm = layer_vector(b, wname(l, "attn_norm.weight"), c.dim), .eps = c.norm_eps,
                                 .more = w->more, .rope = rope, .gemv_int8 = b.o.gemv_int8, .xq_in = x.xq});
}

Hidden attend(BuildContext& b, const LayerPlan& p, uint32_t l, graph::TensorId q, const LayerCaches& caches) {
  graph::TensorId a = ops::add_attention(b.g, {.name = tname("attn", l), .q = q, .k_cache = caches.k,
                                               .v_cache = caches.v, .more_caches = caches.more, .pos = b.pos,
                                               .n_heads = b.c.n_heads, .scale = attention_scale(b.c),
                                               .window = layer_window(b.c, l), .softcap = b.c.attn_softcap,
                                               .rows = b.rows,
                                               .decode_max_tokens = b.rows ? b.o.n_seqs : 1,
                                               .xq_out = p.attention_xq});
  if (!p.attention_xq) return {a, std::nullopt};
  return {a, ops::attention_xq(b.g, tname("attn", l))};
}

Hidden linear_residual(BuildContext& b, uint32_t l, const char* what, uint32_t n_out, uint32_t k, const Hidden& in,
                       graph::TensorId x, const std::string& xq_norm, const char* out_name) {
  const std::string weight = fmt::format("{}.weight", what), bias = fmt::format("{}.bias", what);
  const LinearWeight w = load_linear(b.g, b.loader, wname(l, weight.c_str()), n_out, k, wname(l, bias.c_str()));
  const std::string out = tname(out_name, l);
  if (w.kind != LinearWeight::Kind::Quant) {
    graph::TensorId y = apply_linear(b.g, w, in.x, out + ".proj", b.o.gemv_int8);
    return {residual(b, x, y, out), std::nullopt};
  }
  // The epilogue writes the sum quantized ahead from one tensor of whole 16-row blocks.
  const bool ahead = !xq_norm.empty() && w.more.empty() && w.n % 16 == 0;
  const std::optional<graph::TensorId> norm =
      ahead ? std::optional(layer_vector(b, xq_norm, b.c.dim)) : std::nullopt;
  graph::TensorId y = ops::add_linear_q(b.g, {.name = out, .format = w.format, .gs = w.gs, .x = in.x, .q = w.q.q,
                                              .scales = w.q.scales, .bias = w.bias, .residual = x, .more = w.more,
                                              .gemv_int8 = b.o.gemv_int8, .xq_out = ahead, .xq_norm = norm,
                                              .xq_in = in.xq});
  if (!ahead) return {y, std::nullopt};
  return {y, ops::linear_q_xq(b.g, out)};
}

Hidden ffn_swiglu(BuildContext& b, const LayerPlan& p, uint32_t l, const Hidden& x) {
  const ModelConfig& c = b.c;
  const ops::GateAct act_fn = c.gelu_gate ? ops::GateAct::GeluTanh : ops::GateAct::Silu;
  graph::TensorId norm = layer_vector(b, wname(l, "ffn_norm.weight"), c.dim);
  if (p.fused_gate_up) {
    const std::optional<LinearWeight> w =
        load_linear_fused(b.g, b.loader, {wname(l, "ffn_gate.weight"), wname(l, "ffn_up.weight")}, {c.ff, c.ff}, c.dim,
                          FuseLayout::SwiGlu, {wname(l, "ffn_gate.bias"), wname(l, "ffn_up.bias")});
    if (!w) throw std::logic_error(fmt::format("layer {}: the plan fuses gate|up but the weights do not", l));
    graph::TensorId act = ops::add_linear_q(b.g, {.name = tname("ffn_act", l), .format = w->format, .gs = w->gs,
                                                  .x = x.x, .q = w->q.q, .scales = w->q.scales, .norm = norm,
                                                  .eps = c.norm_eps, .swiglu = true, .act = act_fn,
                                                  .gemv_int8 = b.o.gemv_int8,
                                                  .xq_out = p.act_xq, .xq_in = x.xq});
    if (!p.act_xq) return {act, std::nullopt};
    return {act, ops::linear_q_xq(b.g, tname("ffn_act", l))};
  }
  graph::TensorId h = ops::add_rms_norm(b.g, {.name = tname("ffn_norm", l), .x = x.x, .weight = norm, .eps = c.norm_eps});
  LinearWeight gate = load_linear(b.g, b.loader, wname(l, "ffn_gate.weight"), c.ff, c.dim, wname(l, "ffn_gate.bias"));
  LinearWeight up = load_linear(b.g, b.loader, wname(l, "ffn_up.weight"), c.ff, c.dim, wname(l, "ffn_up.bias"));
  graph::TensorId g = apply_linear(b.g, gate, h, tname("ffn_gate", l), b.o.gemv_int8);
  graph::TensorId u = apply_linear(b.g, up, h, tname("ffn_up", l), b.o.gemv_int8);
  return {ops::add_silu_mul(b.g, {.name = tname("ffn_act", l), .gate = g, .up = u, .act = act_fn}), std::nullopt};
}

namespace {

// The experts' node of weight w (ffn_down_exps, ...): for every (token, slot) pair, x's row
// j / x_div times the rows of expert ids[j].
ops::LinearQExpertsDesc experts_desc(BuildContext& b, const ExpertsWeight& w, graph::TensorId x, graph::TensorId ids,
                                     uint32_t x_div, bool swiglu, const std::string& out,
                                     std::optional<graph::TensorId> norm) {
  return {.name = out, .format = w.format, .gs = w.gs, .x = x, .ids = ids, .q = w.q.q, .scales = w.q.scales,
          .n_expert = w.n_expert, .x_div = x_div, .swiglu = swiglu, .act = ops::GateAct::Silu,
          .gemv_int8 = b.o.gemv_int8, .norm = norm, .eps = b.c.norm_eps};
}

graph::TensorId experts_proj(BuildContext& b, const ExpertsWeight& w, graph::TensorId x, graph::TensorId ids,
                             uint32_t x_div, bool swiglu, const std::string& out,
                             std::optional<graph::TensorId> norm = std::nullopt) {
  return ops::add_linear_q_experts(b.g, experts_desc(b, w, x, ids, x_div, swiglu, out, norm));
}

}  // namespace

// The FFN's norm runs inside the router and the gate|up kernels (each normalizes the rows of x it
// reads), so no kernel writes the normalized rows.
Hidden ffn_moe(BuildContext& b, uint32_t l, const Hidden& x) {
  const ModelConfig& c = b.c;
  const uint32_t k = c.n_experts_used, ff = c.expert_ff;
  graph::TensorId norm = layer_vector(b, wname(l, "ffn_norm.weight"), c.dim);
  const LinearWeight router = load_linear(b.g, b.loader, wname(l, "ffn_gate_inp.weight"), c.n_experts, c.dim);
  graph::TensorId logits = apply_linear(b.g, router, x.x, tname("ffn_router", l), b.o.gemv_int8,
                                        LinearNorm{norm, c.norm_eps});
  const ops::MoeRouteDesc route_desc{.name = tname("ffn_route", l), .logits = logits, .n_used = k,
                                     .norm = c.expert_norm};
  // gate|up: a row of x per token (k pairs each), SiLU(gate) * up in the kernel's epilogue, the
  // token's experts chosen in the same node (ops::add_linear_q_experts_routed).
  const std::string gate = wname(l, "ffn_gate_exps.weight"), up = wname(l, "ffn_up_exps.weight");
  graph::TensorId act;
  ops::MoeRoute route;
  if (std::optional<ExpertsWeight> gu = load_experts(b.g, b.loader, {gate, up}, ff, c.dim, c.n_experts)) {
    const ops::ExpertsRouted r = ops::add_linear_q_experts_routed(
        b.g, experts_desc(b, *gu, x.x, {}, k, true, tname("ffn_act", l), norm), route_desc);
    act = r.y;
    route = {r.ids, r.weights};
  } else {
    route = ops::add_moe_route(b.g, route_desc);
    const ExpertsWeight wg = *load_experts(b.g, b.loader, {gate}, ff, c.dim, c.n_experts);
    const ExpertsWeight wu = *load_experts(b.g, b.loader, {up}, ff, c.dim, c.n_experts);
    act = ops::add_silu_mul(b.g, {.name = tname("ffn_act", l),
                                  .gate = experts_proj(b, wg, x.x, route.ids, k, false, tname("ffn_gate", l), norm),
                                  .up = experts_proj(b, wu, x.x, route.ids, k, false, tname("ffn_up", l), norm)});
  }
  const ExpertsWeight wd = *load_experts(b.g, b.loader, {wname(l, "ffn_down_exps.weight")}, c.dim, ff, c.n_experts);
  graph::TensorId down = experts_proj(b, wd, act, route.ids, 1, false, tname("ffn_down", l));
  return {ops::add_moe_combine(b.g, {.name = tname("ffn_residual", l), .experts = down, .weights = route.weights,
                                     .residual = x.x, .n_used = k}),
          std::nullopt};
}

// Three nodes where gate and up fuse (one format): gate|up with the norm inside, down, and
// gated_add normalizing x for its gate itself; else plain nodes around the norm's rows.
Hidden ffn_shared_expert(BuildContext& b, uint32_t l, const Hidden& x, const Hidden& moe_out) {
  const ModelConfig& c = b.c;
  const uint32_t ff = c.shared_expert_ff;
  graph::TensorId norm = layer_vector(b, wname(l, "ffn_norm.weight"), c.dim);
  const std::string gate_name = wname(l, "ffn_gate_shexp.weight"), up_name = wname(l, "ffn_up_shexp.weight");
  graph::TensorId w = load_vector(b.g, b.loader, wname(l, "ffn_gate_inp_shexp.weight"), c.dim);
  graph::TensorId act;
  ops::GatedAddDesc gated{.name = tname("ffn_shexp_residual", l), .x = moe_out.x, .w = w};
  if (std::optional<LinearWeight> gu = load_linear_fused(b.g, b.loader, {gate_name, up_name}, {ff, ff}, c.dim,
                                                          FuseLayout::SwiGlu)) {
    // gate|up with the FFN's norm and SiLU(gate)·up inside one kernel; the gate's sigmoid
    // normalizes x itself, so no kernel writes the normed rows.
    act = ops::add_linear_q(b.g, {.name = tname("ffn_shexp_act", l), .format = gu->format, .gs = gu->gs, .x = x.x,
                                  .q = gu->q.q, .scales = gu->q.scales, .norm = norm, .eps = c.norm_eps,
                                  .swiglu = true, .gemv_int8 = b.o.gemv_int8});
    gated.h = x.x;
    gated.norm = norm;
    gated.eps = c.norm_eps;
  } else {
    graph::TensorId h = ops::add_rms_norm(b.g, {.name = tname("ffn_shexp_norm", l), .x = x.x, .weight = norm,
                                                .eps = c.norm_eps});
    const LinearWeight gate = load_linear(b.g, b.loader, gate_name, ff, c.dim);
    const LinearWeight up = load_linear(b.g, b.loader, up_name, ff, c.dim);
    act = ops::add_silu_mul(b.g, {.name = tname("ffn_shexp_act", l),
                                  .gate = apply_linear(b.g, gate, h, tname("ffn_shexp_gate", l), b.o.gemv_int8),
                                  .up = apply_linear(b.g, up, h, tname("ffn_shexp_up", l), b.o.gemv_int8)});
    gated.h = h;
  }
  const LinearWeight down = load_linear(b.g, b.loader, wname(l, "ffn_down_shexp.weight"), c.dim, ff);
  gated.y = apply_linear(b.g, down, act, tname("ffn_shexp_down", l), b.o.gemv_int8);
  return {ops::add_gated_add(b.g, gated), std::nullopt};
}

namespace {

// The logits soft-capped where the model says (Gemma 2); the fused head is not taken then
// (head_fuses), so the argmax reads the capped logits.
graph::TensorId final_softcap(BuildContext& b, graph::TensorId logits) {
  if (b.c.final_softcap == 0) return logits;
  return ops::add_unary(b.g, {.name = "logits_capped", .op = ops::Unary::Softcap, .x = logits,
                              .value = b.c.final_softcap});
}

}  // namespace

void output_head(BuildContext& b, const Hidden& hidden, ModelGraph& mg) {
  const ModelConfig& c = b.c;
  const bool tied = b.c.tied_embeddings || !find_weight(*b.loader.model, "output.weight");
  graph::TensorId norm = layer_vector(b, "output_norm.weight", c.dim);
  LinearWeight out = tied ? b.embedding.table : load_linear(b.g, b.loader, "output.weight", c.n_vocab, c.dim);
  graph::TensorId x = hidden.x;
  // Embeddings: the final normed hidden state of every row, only on steps that ask for it (the
  // route "off" dispatches nothing), from the residual stream before any row is picked out.
  mg.hidden = ops::add_rms_norm(b.g, {.name = "hidden_norm", .x = x, .weight = norm, .eps = c.norm_eps,
                                      .enable = mg.want_hidden});
  if (head_fuses(b.g, b.loader, b.c, b.o, b.rows.has_value())) {
    // The last row's output_norm, the vocabulary projection and the argmax in one kernel (+ the
    // partials' reduction), the id landing where the next step can read it; at one token x is
    // read quantized ahead where the last down projection wrote it so.
    mg.logits = ops::add_linear_q(b.g, {.name = "logits", .format = out.format, .gs = out.gs, .x = x, .q = out.q.q,
                                        .scales = out.q.scales, .bias = out.bias, .norm = norm, .eps = c.norm_eps,
                                        .last_row = true, .argmax_out = mg.argmax, .more = out.more,
                                        .gemv_int8 = b.o.gemv_int8, .xq_in = hidden.xq});
  } else if (b.out_rows) {
    // One row per sequence that wants logits, output_norm inside the projection; their argmax
    // lands in next_token, row r where a fed step's token r reads it (greedy batched decode,
    // pipelined).
    x = ops::add_gather_rows(b.g, {.name = "out_hidden", .x = x, .rows = *b.out_rows});
    mg.logits = final_softcap(b, apply_linear(b.g, out, x, "logits", b.o.gemv_int8, LinearNorm{norm, c.norm_eps}));
    mg.argmax = ops::add_argmax(b.g, {.name = "argmax", .logits = mg.logits, .out = b.next_token});
  } else {
    if (!b.o.all_logits) x = ops::add_last_rows(b.g, {.name = "last_hidden", .x = x, .count = 1});
    mg.logits = final_softcap(b, apply_linear(b.g, out, x, "logits", b.o.gemv_int8, LinearNorm{norm, c.norm_eps}));
    mg.argmax = ops::add_argmax(b.g, {.name = "argmax", .logits = mg.logits, .out = b.next_token});
  }
  // Bias, penalties and a grammar's mask, in place, on steps that ask (llm/batch.h stage_adjust):
  // after the argmax (a step adjusted so reads its top-k), before the top-k, the GPU's sampled
  // pick and the normalizer.
  mg.adjust = ops::add_logit_adjust(
      b.g, {.name = "logit_adjust", .logits = mg.logits,
            .enable = graph::add_symbol(b.g, {.name = "want_adjust", .lo = 0, .hi = 1})});
  ops::TopKOutputs top =
      ops::add_top_k(b.g, {.name = "top_k", .logits = mg.logits, .k = mg.top_k, .enable = b.want_top_k});
  mg.top_ids = top.indices;
  mg.top_logits = top.values;
  if (b.next_token)  // sampled tokens where the next step reads them (pipelined sampling), a row each
    ops::add_sample_pick(b.g, {.name = "sample_pick", .candidates = top, .pick = mg.pick, .out = *b.next_token,
                               .enable = mg.want_sample});
  mg.logprob_norm = ops::add_logsumexp(b.g, {.name = "logprob_norm", .logits = mg.logits, .enable = mg.want_logprobs});
  for (graph::TensorId t : {mg.logits, mg.argmax, mg.top_ids, mg.top_logits, mg.logprob_norm, mg.hidden})
    graph::mark_output(b.g, t);
}

}  // namespace wgrt::model
