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
  Arch arch = Arch::Llama;
  uint32_t dim = 64, n_layers = 2, n_heads = 4, n_kv_heads = 2, head_dim = 16, ff = 128;
  uint32_t n_ctx_train = 2048;
  float rope_theta = 10000.f;
  std::vector<float> rope_freq_factors;  // written as rope_freqs.weight when non-empty
  bool tied_embeddings = false;
  GgmlType matrix_type = GgmlType::F32;  // attention and feed-forward weights
  GgmlType embd_type = GgmlType::F32;    // token_embd (and output)
  uint32_t seed = 1;
  std::string name = "wgrt random";
  // Tokenizer metadata (tokenizer.ggml.*) copied into the file; its token count is the
  // vocabulary size. Empty: a byte-level vocabulary of 256 bytes plus BOS and EOS.
  const GgufFile* vocab_from = nullptr;
};

GgufWriter make_random_model(const RandomModelSpec& spec);

// wgrt's built-in default model: small, deterministic, random weights, byte-level tokens.
RandomModelSpec default_model_spec();

}  // namespace wgrt::model
