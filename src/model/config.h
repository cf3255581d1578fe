// The hyperparameters of a llama-family decoder, from GGUF metadata or a Hugging Face
// config.json. Architectures: llama (1/2/3/3.1/3.2, and Mixtral: a llama whose FFNs are
// experts), mistral, qwen2/2.5, qwen3, qwen3moe (Qwen3-MoE: qwen3's attention, experts' FFNs),
// qwen2moe (Qwen1.5-MoE, Qwen2-MoE: qwen2's attention, experts' FFNs and a shared expert), phi3 (Phi-3 and Phi-4: the llama layer with q|k|v and gate|up fused in the file, and
// LongRoPE), gemma2 and gemma3 (text; model/gemma.cpp).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/gguf.h"

namespace wgrt::model {

struct ModelError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class Arch : uint8_t { Llama, Mistral, Qwen2, Qwen3, Qwen3Moe, Qwen2Moe, Phi3, Gemma2, Gemma3 };
const char* arch_name(Arch a);

// How an embedding pools the final normed hidden states of a text's tokens into one vector.
// The values are GGUF's `<arch>.pooling_type` numbers. Rank (rerankers) pools no embedding.
enum class Pooling : uint8_t { None = 0, Mean = 1, Cls = 2, Last = 3, Rank = 4 };
const char* pooling_name(Pooling p);

struct ModelConfig {
  Arch arch = Arch::Llama;
  uint32_t n_vocab = 0;
  uint32_t dim = 0;          // embedding width
  uint32_t n_layers = 0;
  uint32_t n_heads = 0;
  uint32_t n_kv_heads = 0;
  uint32_t head_dim = 0;
  uint32_t ff = 0;           // feed-forward width
  // Mixture of experts (Qwen3-MoE, Mixtral, Qwen2-MoE): every layer's FFN is n_experts SwiGLU
  // experts of expert_ff rows, n_experts_used of them chosen per token by a router
  // (ffn_gate_inp), their outputs summed by the router's softmax weights, renormalized over the
  // chosen ones where expert_norm (model/blocks.h ffn_moe). n_experts 0: a dense FFN of ff rows.
  uint32_t n_experts = 0, n_experts_used = 0, expert_ff = 0;
  bool expert_norm = true;
  // Qwen2-MoE's shared expert: a SwiGLU FFN of this many rows that every token runs beside its
  // chosen experts, its output times sigmoid(h · ffn_gate_inp_shexp) (model/blocks.h
  // ffn_shared_expert). 0: none.
  uint32_t shared_expert_ff = 0;
  uint32_t n_ctx_train = 0;
  float norm_eps = 1e-5f;
  float rope_theta = 10000.f;
  bool rope_neox = false;    // rotate (j, j + d/2) pairs (HF layout) instead of (2j, 2j + 1)
  std::vector<float> rope_freq_factors;  // llama 3.1 scaling, a divisor per pair; empty = none
  // LongRoPE (phi3): a divisor per pair for contexts up to n_ctx_orig (short) and past it (long),
  // one set chosen for the graph's context (rope_factors_for); and the factor the rotation
  // multiplies q and k by (cos and sin times rope_attn_factor, so q·k times its square).
  std::vector<float> rope_factors_short, rope_factors_long;
  uint32_t n_ctx_orig = 0;
  float rope_attn_factor = 1.f;
  bool tied_embeddings = false;
  bool qkv_bias = false;     // qwen2
  bool qk_norm = false;      // qwen3
  uint32_t sliding_window = 0;  // keys attended per query (0: all); every layer's (mistral, phi3) or the local ones'
  // Gemma 2 and 3. The layers that attend through sliding_window (local; the others are global),
  // a flag per layer; empty: the window is not applied per layer (mistral's refusal above).
  std::vector<bool> local_layers;
  float rope_theta_local = 0;  // local layers' RoPE base, without rope_freq_factors (0: as global layers)
  float embd_scale = 0;        // the embeddings times this (Gemma: sqrt(dim)); 0: none
  bool gelu_gate = false;      // the gated FFN's activation is GELU (tanh; Gemma's GeGLU), not SiLU
  // Added to every RMS norm weight at load: Hugging Face Gemma checkpoints store w of x * (1 + w);
  // llama.cpp's converter adds the 1 to the GGUF's weights already (0 there).
  float norm_offset = 0;
  float attn_scale = 0;        // q·k scale where the model sets its own (Gemma: query_pre_attn_scalar^-0.5); 0: none
  float attn_softcap = 0;      // attention logit soft-capping, cap * tanh(s / cap) (Gemma 2: 50); 0: none
  float final_softcap = 0;     // final logit soft-capping (Gemma 2: 30); 0: none
  // Embeddings (llm/embed.h): GGUF `<arch>.pooling_type` or sentence-transformers'
  // 1_Pooling/config.json; a file that says neither is a generative model served for
  // embeddings, pooled by the mean of its tokens (pooling_declared false).
  Pooling pooling = Pooling::Mean;
  bool pooling_declared = false;
  // Trained Matryoshka-style (GGUF `wgrt.embedding.matryoshka`, config.json "matryoshka"): a
  // vector's first d values, renormalized, are its embedding in d dimensions.
  bool matryoshka = false;
};

// From GGUF metadata (general.architecture selects; tensors refine tied/bias flags).
ModelConfig config_from_gguf(const GgufFile& f);
// From a parsed config.json (`path` for messages).
ModelConfig config_from_hf(const nlohmann::json& j, const std::string& path);
// The pooling a sentence-transformers 1_Pooling/config.json names (`path` for messages); throws
// ModelError for a mode wgrt does not pool (max, weighted mean, ...) or none set.
Pooling pooling_from_sentence_transformers(const nlohmann::json& j, const std::string& path);

// The published llama 3 frequency scaling as per-pair divisors.
std::vector<float> llama3_freq_factors(uint32_t head_dim, float theta, float factor,
                                       float low_freq_factor, float high_freq_factor,
                                       uint32_t original_max_positions);

// The rope divisors a graph of `n_ctx` positions uses: rope_freq_factors where the file has them,
// else LongRoPE's long set past n_ctx_orig and its short set up to it (empty: none).
const std::vector<float>& rope_factors_for(const ModelConfig& c, uint32_t n_ctx);
// Attention's score scale: attn_scale where set, else 1 / sqrt(head_dim), times rope_attn_factor squared.
float attention_scale(const ModelConfig& c);
// Layer l's sliding window (AttentionDesc::window): sliding_window on every layer when no layers
// are marked local (mistral, phi3), else on the local ones; 0 on the others.
uint32_t layer_window(const ModelConfig& c, uint32_t layer);
// Whether layer l takes the local RoPE table (rope_theta_local; model/transformer.cpp).
bool layer_rope_local(const ModelConfig& c, uint32_t layer);

// Checks the numbers agree (heads divide, head_dim even, ...); throws ModelError with a hint.
void validate_config(const ModelConfig& c, const std::string& where);

}  // namespace wgrt::model
