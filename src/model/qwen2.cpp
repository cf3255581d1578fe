// Qwen2 / Qwen2.5: the llama layout with biases on the q, k and v projections and RoPE over
// halves of each head (neox pairs).
#include "model/blocks.h"

namespace wgrt::model {

graph::TensorId build_qwen2(BuildContext& b) {
  graph::TensorId x = embed_tokens(b);
  for (uint32_t l = 0; l < b.c.n_layers; ++l) {
    graph::TensorId h = rms_norm(b, x, wname(l, "attn_norm.weight"), tname("attn_norm", l));
    graph::TensorId attn = self_attention(b, l, h, {.qkv_bias = true});
    x = residual(b, x, attn, tname("attn_residual", l));
    h = rms_norm(b, x, wname(l, "ffn_norm.weight"), tname("ffn_norm", l));
    graph::TensorId ffn = swiglu_ffn(b, l, h);
    x = residual(b, x, ffn, tname("ffn_residual", l));
  }
  return x;
}

}  // namespace wgrt::model
