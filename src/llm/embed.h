// Embeddings: a text's tokens go through the model's graph as one prefill (chunks of max_batch
// on one sequence), each step computing the final normed hidden state of its tokens (the graph's
// `hidden` output, run only on these steps: model/transformer.h); the rows are read back and
// pooled on the CPU (mean: every row, cls: the first, last: the last; a read of one row for the
// latter two), then L2-normalized, as OpenAI's embeddings are.
//
// Pooling comes from the model (ModelConfig::pooling): GGUF `<arch>.pooling_type`, a Hugging
// Face directory's sentence-transformers 1_Pooling/config.json, else the mean of the tokens (a
// generative model served for embeddings). Last-token models (Qwen3-Embedding) read the end
// token their vocabulary appends (tokenizer.ggml.add_eos_token): embedding_tokens adds it.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "llm/session.h"
#include "model/config.h"

namespace wgrt::llm {

// The tokens of `text` for an embedding: BOS and EOS as the vocabulary adds them, special
// tokens' texts read as those tokens (as a completion prompt).
std::vector<int32_t> embedding_tokens(const tokenizer::Tokenizer& tok, std::string_view text);

// Why the model cannot pool an embedding ("" when it can): pooling none or rank.
std::string embedding_refusal(const model::ModelConfig& c);

// The embedding of `tokens` (at most the context, at least one), run on sequence `seq` of the
// session from position 0: the sequence's cache is overwritten and left empty (reset_seq).
// Returns n_embd values, L2-normalized. Throws std::invalid_argument, with nothing run, for no
// tokens, more than the context, an id outside the vocabulary or a model that pools none.
std::vector<float> embed(Session& s, uint32_t seq, std::span<const int32_t> tokens);

// Pools `rows` hidden states [rows, n_embd] as `p` does (not normalized): the CPU half of embed,
// and the tests' yardstick.
std::vector<float> pool_rows(std::span<const float> hidden, size_t rows, size_t n_embd, model::Pooling p);

// Scales v to unit L2 norm (a zero vector stays zero).
void normalize_l2(std::span<float> v);

// The first `dims` values of a normalized embedding, renormalized: its embedding in `dims`
// dimensions for a model trained Matryoshka-style (ModelConfig::matryoshka).
std::vector<float> truncate_embedding(std::span<const float> v, size_t dims);

}  // namespace wgrt::llm
