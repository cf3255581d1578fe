// Llama 1/2/3/3.1/3.2: pre-norm decoder, grouped-query attention with RoPE (llama3
// frequency scaling through the rope table), SwiGLU feed-forward, optional tied embeddings.
#include "model/blocks.h"

namespace wgrt::model {

graph::TensorId build_llama(BuildContext& b) {
  graph::TensorId x = embed_tokens(b);
  for (uint32_t l = 0; l < b.c.n_layers; ++l) {
    graph::TensorId h = rms_norm(b, x, wname(l, "attn_norm.weight"), tname("attn_norm", l));
    graph::TensorId attn = self_attention(b, l, h, {});
    x = residual(b, x, attn, tname("attn_residual", l));
    h = rms_norm(b, x, wname(l, "ffn_norm.weight"), tname("ffn_norm", l));
    graph::TensorId ffn = swiglu_ffn(b, l, h);
    x = residual(b, x, ffn, tname("ffn_residual", l));
  }
  return x;
}

}  // namespace wgrt::model
