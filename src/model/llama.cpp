// Llama 1/2/3/3.1/3.2: pre-norm decoder, grouped-query attention with RoPE (llama3
// frequency scaling through the rope table), SwiGLU feed-forward, optional tied embeddings,
// q/k/v biases and q/k norms where the file has them (HF attention_bias).
#include "model/blocks.h"

namespace wgrt::model {

graph::TensorId build_llama(BuildContext& b) {
  const AttentionVariant attention{.qkv_bias = b.c.qkv_bias, .qk_norm = b.c.qk_norm};
  graph::TensorId x = embed_tokens(b);
  for (uint32_t l = 0; l < b.c.n_layers; ++l) {
    x = attention_block(b, l, x, attention);
    x = ffn_block(b, l, x, l + 1 < b.c.n_layers ? &attention : nullptr);
  }
  return x;
}

}  // namespace wgrt::model
