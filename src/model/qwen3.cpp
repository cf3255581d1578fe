// Qwen3: the llama layout with an RMS norm over each head of q and k before RoPE (neox pairs),
// no q/k/v biases. Qwen3-MoE: the same attention, each layer's FFN a mixture of experts
// (ModelConfig::n_experts; llama_layers takes ffn_moe).
#include "model/blocks.h"

namespace wgrt::model {

Hidden build_qwen3(BuildContext& b) { return llama_layers(b, {.qkv_bias = b.c.qkv_bias, .qk_norm = true}); }

Hidden build_qwen3moe(BuildContext& b) { return llama_layers(b, {.qk_norm = true}); }

}  // namespace wgrt::model
