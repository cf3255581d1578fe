// Qwen2 / Qwen2.5: the llama layout with biases on the q, k and v projections and RoPE over
// halves of each head (neox pairs). Qwen2-MoE (Qwen1.5-MoE, Qwen2-57B-A14B): the same attention,
// each layer's FFN a mixture of experts (not renormalized) plus a shared expert scaled by its own
// sigmoid gate (ModelConfig::shared_expert_ff; llama_layers takes ffn_moe, ffn_shared_expert).
#include "model/blocks.h"

namespace wgrt::model {

Hidden build_qwen2(BuildContext& b) { return llama_layers(b, {.qkv_bias = true, .qk_norm = b.c.qk_norm}); }

Hidden build_qwen2moe(BuildContext& b) { return llama_layers(b, {.qkv_bias = true, .qk_norm = b.c.qk_norm}); }

}  // namespace wgrt::model
