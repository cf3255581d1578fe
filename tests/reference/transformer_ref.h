// An independent CPU forward pass for llama-family decoders (llama 2/3, mistral, qwen2,
// qwen3, qwen3moe, qwen2moe, phi3 after its split, gemma2/3), on f32 weights, in the plainest loops (double accumulation). It shares no code
// with src/: it is the yardstick for the GPU graph.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace wgrt::ref {

struct TransformerConfig {
  uint32_t n_vocab = 0, dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, ff = 0;
  float norm_eps = 1e-5f;
  float rope_theta = 10000.f;
  bool rope_neox = false;            // pairs (j, j + d/2) instead of (2j, 2j + 1)
  std::vector<float> rope_freq_factors;  // per pair divisor of the frequency (llama 3.1); empty = 1
  float rope_attn_factor = 1.f;          // LongRoPE (phi3): q and k rotated and scaled by it
  bool qkv_bias = false;             // qwen2
  bool qk_norm = false;              // qwen3: RMS norm over each head of q and k
  // Gemma 2/3: post_attention_norm and post_ffw_norm on the sublayers' outputs before each
  // residual add, gelu_tanh(gate) * up, the embeddings times embd_scale, the scores scaled by
  // attn_scale and soft-capped (cap * tanh(s / cap)), local layers attending the last
  // sliding_window keys with RoPE base rope_theta_local (no freq factors), final soft-capping.
  bool gemma = false;
  float embd_scale = 0, attn_scale = 0, attn_softcap = 0, final_softcap = 0, rope_theta_local = 0;
  uint32_t sliding_window = 0;  // every layer's when local_layers is empty (mistral, phi3)
  std::vector<bool> local_layers;
  // Mixture of experts (qwen3moe, Mixtral): the FFN is the n_experts_used experts with the
  // largest router logits (ffn_gate_inp [E, dim]; ties to the lower expert), each a SwiGLU of
  // expert_ff rows, summed by their softmax weights (over all E, or over the chosen ones where
  // expert_norm). ffn_gate_exps / ffn_up_exps [E * expert_ff, dim], ffn_down_exps [E * dim,
  // expert_ff]: expert e's rows from e times its row count.
  uint32_t n_experts = 0, n_experts_used = 0, expert_ff = 0;
  bool expert_norm = true;
  // Qwen2-MoE's shared expert, beside the chosen ones: sigmoid(h · ffn_gate_inp_shexp [dim]) times
  // a SwiGLU of ffn_gate_shexp / ffn_up_shexp [shared_expert_ff, dim], ffn_down_shexp [dim,
  // shared_expert_ff]. 0: none.
  uint32_t shared_expert_ff = 0;
};

// Weights by GGUF-style name, f32, row-major [out, in] for matrices:
//   token_embd.weight [n_vocab, dim], output_norm.weight [dim], output.weight [n_vocab, dim]
//   (absent: tied to token_embd), blk.<i>.attn_norm.weight, attn_q/k/v/output.weight,
//   attn_q/k/v.bias, attn_q_norm/attn_k_norm.weight [head_dim], ffn_norm.weight,
//   ffn_gate/ffn_up.weight [ff, dim], ffn_down.weight [dim, ff]; gemma: post_attention_norm and
//   post_ffw_norm.weight [dim] (the norm weights as applied, the 1 of Gemma's 1 + w included).
using Weights = std::map<std::string, std::vector<float>>;

// Logits [tokens.size(), n_vocab] for a whole sequence from position 0; `hidden`, when given,
// gets the final normed hidden states [tokens.size(), dim] (output_norm's output) appended;
// `router_margin`, when given (experts), each token's smallest lead of its last chosen expert's
// router logit over the best one left out, across the layers: where rounding could choose
// otherwise.
std::vector<float> transformer_forward(const TransformerConfig& c, const Weights& w,
                                       const std::vector<int32_t>& tokens, std::vector<float>* hidden = nullptr,
                                       std::vector<float>* router_margin = nullptr);

}  // namespace wgrt::ref
