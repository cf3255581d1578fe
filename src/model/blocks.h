// The pieces the architecture builders assemble, each naming its intermediate tensors by
// layer ("attn_norm.3") so dumps can be diffed against a reference by name.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "graph/graph.h"
#include "model/loader.h"
#include "model/plan.h"
#include "model/transformer.h"
#include "ops/kv_cache/kv_cache.h"

namespace wgrt::model {

// The residual stream between steps: x, and its int8 blocks (times the norm weight of the fused
// projection that reads it next) where the step that wrote x wrote them too (the LayerPlan's
// *_xq_norm, linear_q's xq_out). The reader takes them as its xq_in.
struct Hidden {
  graph::TensorId x;
  std::optional<graph::TensorId> xq;
};

struct BuildContext {
  graph::Graph& g;
  Loader& loader;
  const ModelConfig& c;
  const BuildOptions& o;
  graph::TensorId tokens;
  graph::SymbolId pos;
  graph::TensorId rope_freqs;
  EmbeddingWeight embedding;  // set by embed_tokens; the output projection when tied
  std::optional<graph::TensorId> next_token;  // State u32 [n_seqs]: the readout rows' greedy picks, fed to the next step
  graph::SymbolId feed;                       // 1: the embedding reads next_token
  graph::SymbolId want_top_k;
  std::optional<ops::KvRows> rows;         // several sequences per step (BuildOptions::n_seqs > 1)
  std::optional<graph::TensorId> out_rows; // with rows: the step rows the output head keeps
  std::map<std::string, graph::TensorId> vectors;  // layer_vector's, by weight name
  // Local layers' RoPE table (ModelConfig::rope_theta_local; layer_rope_local); else rope_freqs.
  graph::TensorId rope_freqs_local = rope_freqs;
};

// Layer l's RoPE table: rope_freqs, or rope_freqs_local on a local layer of its own base.
graph::TensorId layer_rope_freqs(const BuildContext& b, uint32_t layer);

// A [n] f32 norm weight (plus ModelConfig::norm_offset), loaded once however many steps ask for it.
graph::TensorId layer_vector(BuildContext& b, const std::string& name, uint32_t n);

// "attn_q.3" style tensor names (weight names: plan.h wname).
std::string tname(const char* what, uint32_t layer);

// plan_forward for this build.
ForwardPlan plan_forward(const BuildContext& b, const AttentionVariant& attention);

Hidden embed_tokens(BuildContext& b);
graph::TensorId residual(BuildContext& b, graph::TensorId x, graph::TensorId y, const std::string& out);

// A layer's K and V caches: one tensor each, or past the storage binding limit tensors of
// consecutive KV heads (the kernels that write and read them take the parts).
struct LayerCaches {
  graph::TensorId k, v;
  std::vector<ops::KvCachePart> more;
};
LayerCaches add_layer_caches(BuildContext& b, uint32_t layer);

// q = rope(attn_norm(x) Wqᵀ), and K = rope(attn_norm(x) Wkᵀ), V = attn_norm(x) Wvᵀ written to
// the caches at the step's positions (with the variant's biases and q/k norms). Fused
// (p.fused_qkv): one node, RoPE and the cache write in its epilogue. Returns q.
graph::TensorId attention_qkv(BuildContext& b, const LayerPlan& p, uint32_t layer, const Hidden& x,
                              const AttentionVariant& v, const LayerCaches& caches);

// softmax(q Kᵀ / √head_dim) V over the cache, causal, grouped-query, within the layer's sliding
// window (layer_window) and soft-capped where the model says (ModelConfig::attn_softcap); with
// several sequences a step of up to one token per sequence takes flash-decoding. Quantized ahead
// for attn_output where p.attention_xq.
Hidden attend(BuildContext& b, const LayerPlan& p, uint32_t layer, graph::TensorId q, const LayerCaches& caches);

// x + in Wᵀ for the layer's weight `what` ([n_out, k]; its bias where the file has one), the
// residual added in linear_q's epilogue for quantized weights, which also writes the sum quantized
// ahead, times the norm weight `xq_norm`, where that is not empty (LayerPlan).
Hidden linear_residual(BuildContext& b, uint32_t layer, const char* what, uint32_t n_out, uint32_t k, const Hidden& in,
                       graph::TensorId x, const std::string& xq_norm, const char* out);

// act(h Wgᵀ) ⊙ h Wuᵀ, h = ffn_norm(x), act SiLU (GELU-tanh for Gemma: GeGLU). Fused
// (p.fused_gate_up): one node, the norm in its prologue and the product in its epilogue
// (quantized ahead for down where p.act_xq).
Hidden ffn_swiglu(BuildContext& b, const LayerPlan& p, uint32_t layer, const Hidden& x);

// A mixture-of-experts FFN and its residual: h = ffn_norm(x); the router's logits h W_rᵀ
// (ffn_gate_inp) pick each token's n_experts_used experts and their weights on the GPU
// (ops/moe/moe.h moe_route); each (token, expert) pair runs act(h Wgₑᵀ) ⊙ h Wuₑᵀ and its down
// projection on that expert's rows only (linear_q.h add_linear_q_experts: one node for gate|up
// where their formats match); moe_combine adds Σ wₑ yₑ to x.
Hidden ffn_moe(BuildContext& b, uint32_t layer, const Hidden& x);

// Qwen2-MoE's shared expert, after ffn_moe: moe_out + sigmoid(h · w_s) · FFN_s(h), h =
// ffn_norm(x) of the layer's FFN input x, FFN_s the SwiGLU of ffn_gate_shexp / ffn_up_shexp /
// ffn_down_shexp (ModelConfig::shared_expert_ff rows), w_s ffn_gate_inp_shexp [dim]
// (ops/gated_add).
Hidden ffn_shared_expert(BuildContext& b, uint32_t layer, const Hidden& x, const Hidden& moe_out);

// Final norm, the last position's row (unless all_logits; with several sequences the rows of
// out_rows), output projection (soft-capped where ModelConfig::final_softcap says) and GPU
// sampling reductions; fills the graph outputs of `mg`.
void output_head(BuildContext& b, const Hidden& x, ModelGraph& mg);

// The architecture builders (one file each): embeddings to the last hidden state.
Hidden build_llama(BuildContext& b);
Hidden build_mistral(BuildContext& b);
Hidden build_qwen2(BuildContext& b);
Hidden build_qwen3(BuildContext& b);
Hidden build_qwen3moe(BuildContext& b);
Hidden build_qwen2moe(BuildContext& b);
Hidden build_phi3(BuildContext& b);
Hidden build_gemma(BuildContext& b);  // gemma2 and gemma3
// The llama layer stack with the attention variant (qwen2's biases, qwen3's q/k norms).
Hidden llama_layers(BuildContext& b, const AttentionVariant& attention);

}  // namespace wgrt::model
