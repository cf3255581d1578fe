// Gemma 2 and Gemma 3 (text; GGUF architectures gemma2, gemma3). Per layer:
//   h = attn_norm(x) → q, k, v (Gemma 3: RMS norms over each head of q and k) → RoPE (neox
//   pairs; Gemma 3's local layers at their own base, model/transformer.cpp) → attention within
//   the layer's sliding window (local layers; config.h layer_window), scores scaled by
//   query_pre_attn_scalar^-0.5 and soft-capped (Gemma 2) → attn_output → post_attention_norm
//   → x += that; then ffn_norm → gelu_tanh(h Wgᵀ) ⊙ h Wuᵀ (GeGLU; one node where the plan fuses
//   gate|up, model/blocks.h ffn_swiglu) → ffn_down → post_ffw_norm → x += that (each post-norm
//   and its add one kernel).
// The embeddings are scaled by sqrt(n_embd) (ModelConfig::embd_scale) and the output is tied by
// default, its logits soft-capped where the model says (Gemma 2: 30; output_head). Every norm
// weight is w + 1 of the checkpoint's w (the GGUF converter added it; Hugging Face checkpoints
// get it at load, ModelConfig::norm_offset). The KV cache of a local layer is as long as a
// global one's: the window masks keys (and skips whole tiles and chunks before it), it does not drop them.
#include <fmt/format.h>

#include "model/blocks.h"
#include "ops/elementwise/elementwise.h"
#include "ops/norm/norm.h"
#include "ops/silu_mul/silu_mul.h"

namespace wgrt::model {

namespace {

// The residual stream plus the RMS norm of a sublayer's output y by the layer's weight `what`
// (a post-norm), in one kernel, named `out`.
graph::TensorId post_norm_residual(BuildContext& b, uint32_t l, graph::TensorId stream, graph::TensorId y,
                                   const char* what, const char* out) {
  graph::TensorId w = layer_vector(b, wname(l, what), b.c.dim);
  return ops::add_rms_norm(b.g, {.name = tname(out, l), .x = y, .weight = w, .eps = b.c.norm_eps, .residual = stream});
}

// h W_whatᵀ for the layer's weight `what` ([n, k]).
graph::TensorId project(BuildContext& b, uint32_t l, const char* what, graph::TensorId h, uint32_t n, uint32_t k,
                        const char* out) {
  const std::string weight = fmt::format("{}.weight", what);
  LinearWeight w = load_linear(b.g, b.loader, wname(l, weight.c_str()), n, k);
  return apply_linear(b.g, w, h, tname(out, l), b.o.gemv_int8);
}

}  // namespace

Hidden build_gemma(BuildContext& b) {
  const ModelConfig& c = b.c;
  const uint32_t q_dim = c.n_heads * c.head_dim;
  const AttentionVariant variant{.qk_norm = c.qk_norm};
  // The llama plan's q|k|v and gate|up fusions apply (the norm in the gate|up node's prologue,
  // GeGLU in its epilogue); its residual fusions do not: Gemma's post-norms come between.
  const ForwardPlan plan = plan_forward(b, variant);
  Hidden e = embed_tokens(b);
  graph::TensorId x = e.x;
  if (c.embd_scale > 0)
    x = ops::add_unary(b.g, {.name = "token_embd_scaled", .op = ops::Unary::Scale, .x = x, .value = c.embd_scale});
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    LayerPlan p{};
    p.fused_qkv = plan.layers[l].fused_qkv;
    p.fused_gate_up = plan.layers[l].fused_gate_up;
    const LayerCaches caches = add_layer_caches(b, l);
    const graph::TensorId q = attention_qkv(b, p, l, {x, std::nullopt}, variant, caches);
    const Hidden a = attend(b, p, l, q, caches);
    graph::TensorId o = project(b, l, "attn_output", a.x, c.dim, q_dim, "attn_output");
    x = post_norm_residual(b, l, x, o, "post_attention_norm.weight", "attn_residual");
    const Hidden act = ffn_swiglu(b, p, l, {x, std::nullopt});  // act_xq off: down reads act
    graph::TensorId d = project(b, l, "ffn_down", act.x, c.dim, c.ff, "ffn_down");
    x = post_norm_residual(b, l, x, d, "post_ffw_norm.weight", "ffn_residual");
  }
  return {x, std::nullopt};
}

}  // namespace wgrt::model
