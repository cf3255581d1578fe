// Qwen3 (dense): the llama layout with an RMS norm over each head of q and k before RoPE
// (neox pairs), no q/k/v biases.
#include "model/blocks.h"

namespace wgrt::model {

Hidden build_qwen3(BuildContext& b) { return llama_layers(b, {.qkv_bias = b.c.qkv_bias, .qk_norm = true}); }

}  // namespace wgrt::model
