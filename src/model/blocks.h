// The pieces the architecture builders assemble, each naming its intermediate tensors by
// layer ("attn_norm.3") so dumps can be diffed against a reference by name.
#pragma once

#include <string>

#include "graph/graph.h"
#include "model/loader.h"
#include "model/transformer.h"

namespace wgrt::model {

struct BuildContext {
  graph::Graph& g;
  Loader& loader;
  const ModelConfig& c;
  const BuildOptions& o;
  graph::TensorId tokens;
  graph::SymbolId pos;
  graph::TensorId rope_freqs;
  EmbeddingWeight embedding;  // set by embed_tokens; the output projection when tied
};

// "blk.3.attn_q.weight" style weight names and "attn_q.3" style tensor names.
std::string wname(uint32_t layer, const char* what);
std::string tname(const char* what, uint32_t layer);

graph::TensorId embed_tokens(BuildContext& b);
graph::TensorId rms_norm(BuildContext& b, graph::TensorId x, const std::string& weight, const std::string& out);
graph::TensorId residual(BuildContext& b, graph::TensorId x, graph::TensorId y, const std::string& out);

struct AttentionVariant {
  bool qkv_bias = false;  // qwen2
  bool qk_norm = false;   // qwen3: RMS norm over each head of q and k before RoPE
};
// Grouped-query self-attention with RoPE over the layer's KV cache; returns the output
// projection's result [n_tokens, dim].
graph::TensorId self_attention(BuildContext& b, uint32_t layer, graph::TensorId h, const AttentionVariant& v);

// SwiGLU feed-forward: down(silu(gate(h)) * up(h)).
graph::TensorId swiglu_ffn(BuildContext& b, uint32_t layer, graph::TensorId h);

// Final norm, the last position's row (unless all_logits), output projection and GPU
// sampling reductions; fills the graph outputs of `mg`.
void output_head(BuildContext& b, graph::TensorId x, ModelGraph& mg);

// The architecture builders (one file each): embeddings to the last hidden state.
graph::TensorId build_llama(BuildContext& b);
graph::TensorId build_mistral(BuildContext& b);
graph::TensorId build_qwen2(BuildContext& b);
graph::TensorId build_qwen3(BuildContext& b);

}  // namespace wgrt::model
