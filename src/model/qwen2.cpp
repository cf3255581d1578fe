// Qwen2 / Qwen2.5: the llama layout with biases on the q, k and v projections and RoPE over
// halves of each head (neox pairs).
#include "model/blocks.h"

namespace wgrt::model {

graph::TensorId build_qwen2(BuildContext& b) {
  const AttentionVariant attention{.qkv_bias = true, .qk_norm = b.c.qk_norm};
  graph::TensorId x = embed_tokens(b);
  for (uint32_t l = 0; l < b.c.n_layers; ++l) {
    x = attention_block(b, l, x, attention);
    x = ffn_block(b, l, x, l + 1 < b.c.n_layers ? &attention : nullptr);
  }
  return x;
}

}  // namespace wgrt::model
