// Mistral 7B: exactly the llama forward pass (GQA, RoPE, SwiGLU). Its sliding window (4096)
// only matters past that context, so build_model refuses contexts past it (ModelConfig).
#include "model/blocks.h"

namespace wgrt::model {

Hidden build_mistral(BuildContext& b) { return build_llama(b); }

}  // namespace wgrt::model
