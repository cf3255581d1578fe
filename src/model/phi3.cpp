// Phi-3 and Phi-4 (GGUF architecture phi3): the llama layer, pre-norm with grouped-query
// attention, RoPE on neox pairs and a SwiGLU feed-forward, no biases. The file fuses q|k|v into
// attn_qkv and gate|up into ffn_up; opening it splits them into views under llama's names
// (model_file.cpp, split_fused_weights) and the forward plan fuses them again for the kernels.
// Long-context files scale RoPE by LongRoPE: short or long per-pair divisors chosen for the
// graph's context, and q·k scaled by the square of the rotation's attention factor
// (config.h: rope_factors_for, attention_scale; both applied in transformer.cpp and attend).
#include "model/blocks.h"

namespace wgrt::model {

Hidden build_phi3(BuildContext& b) { return llama_layers(b, {}); }

}  // namespace wgrt::model
