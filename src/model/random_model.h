// Deterministic random-weight llama-family models written with wgrt's own GGUF writer:
// test fixtures, and the default model of `wgrt run` (labelled as random weights).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/gguf_writer.h"

namespace wgrt::model {

struct RandomModelSpec {
  Arch arch = Arch::Llama;  // phi3: q|k|v and gate|up fused in the file, as its files have them;
                            // gemma2/3: the post-norms (and gemma3's q/k norms), gemma2 tied
  uint32_t dim = 64, n_layers = 2, n_heads = 4, n_kv_heads = 2, head_dim = 64, ff = 128;
  uint32_t n_ctx_train = 2048;
  // Mixture of experts (qwen3moe, qwen2moe, or llama as Mixtral's files): every layer's FFN is
  // n_experts experts of expert_ff rows (ffn_gate_inp F32 [dim, E], ffn_{gate,up,down}_exps of
  // matrix_type), n_experts_used per token. 0: a dense FFN of ff rows. qwen2moe's shared expert:
  // ffn_{gate,up,down}_shexp of shared_expert_ff rows (matrix_type) and ffn_gate_inp_shexp F32 [dim].
  uint32_t n_experts = 0, n_experts_used = 0, expert_ff = 0, shared_expert_ff = 0;
  // The routers drawn this many times wider than a matrix: tests keep each token's chosen experts
  // clear of the rest by more than rounding.
  float router_scale = 1;
  float rope_theta = 10000.f;
  std::vector<float> rope_freq_factors;  // written as rope_freqs.weight when non-empty
  // LongRoPE (rope_factors_short/long.weight and their metadata) when non-empty.
  std::vector<float> rope_factors_short, rope_factors_long;
  uint32_t n_ctx_orig = 0;
  float rope_attn_factor = 1.f;
  bool tied_embeddings = false;
  bool qkv_bias = false;  // q/k/v biases for any architecture (qwen2 always has them)
  bool qk_norm = false;   // q/k RMS norms for any architecture (qwen3 always has them)
  // gemma2/3 metadata, written where non-zero: attention.sliding_window (and its layer pattern),
  // rope.freq_base_swa, the soft-capping keys, linear rope scaling (rope.scaling.type/factor).
  uint32_t sliding_window = 0, swa_pattern = 0;
  float rope_theta_local = 0, attn_softcap = 0, final_softcap = 0, rope_linear_factor = 0;
  std::vector<std::string> extra_tensors;  // F32 [dim] tensors no architecture reads (tests)
  GgmlType matrix_type = GgmlType::F32;  // attention and feed-forward weights
  GgmlType embd_type = GgmlType::F32;    // token_embd (and output)
  uint32_t seed = 1;
  std::string name = "wgrt random";
  // Tokenizer metadata (tokenizer.ggml.*) copied into the file; its token count is the
  // vocabulary size. Empty: a byte-level vocabulary of 256 bytes plus BOS and EOS.
  const GgufFile* vocab_from = nullptr;
  // Pads the vocabulary with unused tokens up to this size (0: as the vocabulary has it), for
  // the shapes of real models (128256 for Llama 3).
  uint32_t n_vocab = 0;
};

// Shapes of well-known models with random weights, for benchmarks: "tiny", "llama-3.2-1b",
// "llama-3.1-8b", "qwen2.5-0.5b", "phi-3-mini-128k", "gemma-3-1b", "gemma-2-2b", "qwen3-30b-a3b",
// "qwen1.5-moe-a2.7b"; and "qwen2moe-tiny" (tiny's shape with 8 experts and a shared expert), for
// tests. Throws std::invalid_argument for other names.
RandomModelSpec preset_model_spec(const std::string& name);

GgufWriter make_random_model(const RandomModelSpec& spec);

// Writes the model of `spec` straight to `path`, drawing and quantizing rows on `threads`
// threads from a counter-based generator: for models too big to build in memory (an 8B model
// in F16 is 16 GB). Same tensors, shapes and value scales as make_random_model, not the same
// values.
void write_random_model(const RandomModelSpec& spec, const std::string& path, unsigned threads);

// wgrt's built-in default model: small, deterministic, random weights, byte-level tokens.
RandomModelSpec default_model_spec();

}  // namespace wgrt::model
