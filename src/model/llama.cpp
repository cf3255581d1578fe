// Llama 1/2/3/3.1/3.2: pre-norm decoder, grouped-query attention with RoPE (llama3
// frequency scaling through the rope table), SwiGLU feed-forward, optional tied embeddings,
// q/k/v biases and q/k norms where the file has them (HF attention_bias). Mixtral: the same
// layer with a mixture of experts for the feed-forward (ModelConfig::n_experts, ffn_moe).
#include "model/blocks.h"

namespace wgrt::model {

Hidden llama_layers(BuildContext& b, const AttentionVariant& attention) {
  const ModelConfig& c = b.c;
  const uint32_t q_dim = c.n_heads * c.head_dim;
  const ForwardPlan plan = plan_forward(b, attention);  // which steps fuse: model/plan.h
  Hidden x = embed_tokens(b);
  for (uint32_t l = 0; l < c.n_layers; ++l) {
    const LayerPlan& p = plan.layers[l];
    const LayerCaches caches = add_layer_caches(b, l);
    const graph::TensorId q = attention_qkv(b, p, l, x, attention, caches);  // q; K, V into the caches
    const Hidden a = attend(b, p, l, q, caches);                             // softmax(q Kᵀ / √d) V
    x = linear_residual(b, l, "attn_output", c.dim, q_dim, a, x.x, p.attn_output_xq_norm, "attn_residual");
    if (c.n_experts) {
      const Hidden moe = ffn_moe(b, l, x);                                   // x + Σ wₑ FFNₑ(h), top-k experts
      x = c.shared_expert_ff ? ffn_shared_expert(b, l, x, moe) : moe;        // + σ(h·w_s) FFN_s(h)
      continue;
    }
    const Hidden f = ffn_swiglu(b, p, l, x);                                 // SiLU(h Wgᵀ) ⊙ h Wuᵀ
    x = linear_residual(b, l, "ffn_down", c.dim, c.ff, f, x.x, p.down_xq_norm, "ffn_residual");
  }
  return x;
}

Hidden build_llama(BuildContext& b) {
  return llama_layers(b, {.qkv_bias = b.c.qkv_bias, .qk_norm = b.c.qk_norm});
}

}  // namespace wgrt::model
