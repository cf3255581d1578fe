// A decoder-only transformer as one wgrt graph, built at its maximum shape (max_batch tokens
// per step, n_ctx positions of KV cache) from a model file, for any supported architecture.
//
// Inputs per step: `tokens` (u32 [n_tokens], n_tokens ≤ max_batch) and the symbols `pos` (the
// position of the first token), `feed` and `want_top_k`. Outputs: the logits of the last token
// ([1, n_vocab]), or of every token with all_logits; and GPU sampling results over them
// (argmax, top-k). With want_hidden = 1 (embeddings, llm/embed.h) also `hidden`: the final
// normed hidden state of every token of the step; other steps run no kernel for it.
//
// Several sequences (n_seqs > 1, continuous batching): the KV caches hold a region of n_ctx
// positions per sequence, and a step's tokens may come from any of them. Per step the host
// writes `kv_rows` (ops::KvRows: each token's position and region), the symbol `max_keys`,
// and `out_rows` (the step rows whose logits it wants, one per sequence at most); outputs have
// a row per entry of out_rows. Their argmax lands in `next_token` (u32 [n_seqs], row r for
// out_rows entry r), and a step of single tokens with feed = 1 embeds row t of it as its token t
// (pipelined batched decode, llm/batch.h submit_fed_seqs); with want_sample = 1 row r's token
// is sampled from its top-k on the GPU with row r of `pick` instead.
//
// Pipelined decode (without all_logits): the argmax lands in the State tensor `next_token`,
// and a step with feed = 1 embeds that id instead of `tokens`, so the host can submit step
// t + 1 before reading step t's token. Top-k runs only on steps with want_top_k = 1; with
// want_sample = 1 a token sampled from it on the GPU replaces the argmax in next_token, so
// sampled decoding pipelines too. With want_logprobs = 1 the step also computes each row's
// log-softmax normalizer (logprob_norm), so the top-k's logits become log-probabilities.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "graph/graph.h"
#include "model/loader.h"
#include "model/model_file.h"
#include "ops/sampling/logit_adjust.h"

namespace wgrt::model {

// n_ctx 0: the model's trained context (n_ctx_train), at most this; 2048 where the file does not
// say. A sliding window does not bound it: the attention kernels apply it (layer_window).
constexpr uint32_t kDefaultMaxCtx = 2048;
uint32_t default_ctx(const ModelConfig& c);

struct BuildOptions {
  uint32_t n_ctx = 2048;     // 0: default_ctx
  uint32_t max_batch = 64;   // prefill chunk size
  bool f16_kv = true;        // KV cache in f16 (half the bytes decode reads)
  // The K and V caches' dtypes (F32, F16 or Q8_0; -ctk/-ctv), each in place of f16_kv's where set.
  // An f32 cache pairs only with an f32 one; q8_0 needs a head_dim that is a multiple of 32.
  std::optional<graph::DType> cache_type_k, cache_type_v;
  bool all_logits = false;   // logits of every position (perplexity, --dump-logits)
  uint32_t top_k = 64;       // candidates the GPU hands the sampler
  int gemv_int8 = -1;        // the decode gemvs' activations: 1 int8, 0 f32, -1 the device's (ops::gemv_takes_int8)
  // The fused projections write their outputs quantized ahead for the next gemv (linear_q's
  // xq_out / xq_in): 1 on, 0 off, -1 wherever the device's gemvs read that (ops::linear_q_takes_xq).
  int quantize_ahead = -1;
  uint32_t n_seqs = 1;       // sequences a step may mix, each with n_ctx positions of KV cache
  // The most bytes one layer's K (or V) cache tensor may take: 0 is the device's storage binding
  // limit; a cache past it is split into tensors of KV heads. Tests set it low.
  uint64_t max_cache_bytes = 0;
  LoadOptions load;
};

// The dtype of the K (v: V) cache for these options.
inline graph::DType kv_cache_dtype(const BuildOptions& o, bool v) {
  const std::optional<graph::DType>& t = v ? o.cache_type_v : o.cache_type_k;
  return t ? *t : o.f16_kv ? graph::DType::F16 : graph::DType::F32;
}

struct ModelGraph {
  std::unique_ptr<graph::Graph> graph;
  graph::TensorId tokens;
  graph::SymbolId pos;
  graph::TensorId logits;     // [rows, n_vocab]
  graph::TensorId argmax;     // [rows] u32; without all_logits the State `next_token` [n_seqs]
  graph::SymbolId feed;       // 1: embed next_token (pipelined decode); only without all_logits
  graph::SymbolId want_top_k; // 1: run top-k this step
  graph::SymbolId want_sample;  // 1: sample from the top-k on the GPU into next_token (needs want_top_k)
  graph::SymbolId want_hidden;  // 1: compute `hidden` this step
  graph::TensorId hidden;     // [n_tokens, dim]: output_norm of every row of the step (want_hidden)
  graph::TensorId pick;       // u32 [n_seqs, 8] ops::PickParams per readout row, written for sampled steps
  graph::TensorId top_ids;    // [rows, top_k] u32
  graph::TensorId top_logits; // [rows, top_k] f32
  graph::SymbolId want_logprobs;  // 1: compute logprob_norm this step
  graph::TensorId logprob_norm;   // [rows] f32: log sum exp of each logits row (ops::add_logsumexp)
  graph::TensorId kv_rows;    // n_seqs > 1: u32 [n_tokens, 2] (position, first cache row) per token
  graph::SymbolId max_keys;   // n_seqs > 1: max over the step's tokens of position + 1
  graph::TensorId out_rows;   // n_seqs > 1: u32 [n_out] step rows whose logits are wanted
  // Logit bias, penalties and a grammar mask applied in place before the top-k (and the sampled
  // pick, the normalizer) on steps with adjust.enable = 1; the argmax (next_token) is not
  // adjusted, so such a step's pick reads the top-k.
  ops::LogitAdjust adjust;
  uint32_t n_vocab = 0;
  uint32_t n_embd = 0;        // the hidden state's width
  uint32_t n_ctx = 0;         // positions per sequence
  uint32_t n_seqs = 1;
  uint32_t max_batch = 0;
  uint32_t top_k = 0;
  bool all_logits = false;
  uint64_t weight_bytes = 0;
};

// Builds, allocates and uploads the weights. Throws ModelError for model problems and
// std::invalid_argument for options the device cannot hold.
ModelGraph build_model(gpu::Device& dev, const ModelFile& m, const BuildOptions& o);

}  // namespace wgrt::model
