// Qwen2 / Qwen2.5: the llama layout with biases on the q, k and v projections and RoPE over
// halves of each head (neox pairs).
#include "model/blocks.h"

namespace wgrt::model {

Hidden build_qwen2(BuildContext& b) { return llama_layers(b, {.qkv_bias = true, .qk_norm = b.c.qk_norm}); }

}  // namespace wgrt::model
