// Qwen3 (dense): the llama layout with an RMS norm over each head of q and k before RoPE
// (neox pairs), no q/k/v biases.
#include "model/blocks.h"

namespace wgrt::model {

graph::TensorId build_qwen3(BuildContext& b) {
  const AttentionVariant attention{.qkv_bias = b.c.qkv_bias, .qk_norm = true};
  graph::TensorId x = embed_tokens(b);
  for (uint32_t l = 0; l < b.c.n_layers; ++l) {
    x = attention_block(b, l, x, attention);
    x = ffn_block(b, l, x, l + 1 < b.c.n_layers ? &attention : nullptr);
  }
  return x;
}

}  // namespace wgrt::model
