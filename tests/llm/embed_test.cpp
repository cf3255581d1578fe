// Embeddings (llm/embed.h): the graph's hidden output against the independent CPU forward pass
// (tests/reference/transformer_ref), pooled by a plain computation here; mean / cls / last-token
// pooling from the file's metadata, Qwen3-Embedding-style files (qwen3, last token, EOS added
// by the vocabulary), several steps per text, a batched session, and the hidden route left
// off for every other step.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "llm/batch.h"
#include "llm/embed.h"
#include "llm/session.h"
#include "model/random_model.h"
#include "ops/norm/norm.h"
#include "reference/transformer_ref.h"
#include "support/device.h"

namespace wgrt::llm {
namespace {

using ::testing::HasSubstr;

model::GgufWriter tiny(model::Arch arch, uint32_t seed) {
  model::RandomModelSpec spec;
  spec.arch = arch;
  spec.dim = 64;
  spec.n_layers = 2;
  spec.n_heads = 4;
  spec.n_kv_heads = 2;
  spec.head_dim = 16;
  spec.ff = 128;
  spec.seed = seed;
  return model::make_random_model(spec);
}

Session open(const model::GgufWriter& w, uint32_t max_batch, uint32_t n_seqs = 1) {
  Session s;
  s.dev = &test::device();
  s.model = model::open_gguf_bytes(model::gguf_serialize(w), "embed.gguf");
  s.tok = tokenizer::build_tokenizer(tokenizer::vocab_from_gguf(*s.model.gguf));
  model::BuildOptions o;
  o.n_ctx = 32;
  o.max_batch = max_batch;
  o.n_seqs = n_seqs;
  o.f16_kv = false;
  o.gemv_int8 = 0;
  s.mg = model::build_model(*s.dev, s.model, o);
  if (n_seqs > 1) s.seq_past.assign(n_seqs, 0);
  return s;
}

// The final normed hidden states [tokens, dim] of the CPU reference.
std::vector<float> reference_hidden(const Session& s, const std::vector<int32_t>& tokens) {
  const model::ModelConfig& c = s.model.config;
  ref::TransformerConfig r;
  r.n_vocab = c.n_vocab, r.dim = c.dim, r.n_layers = c.n_layers, r.n_heads = c.n_heads;
  r.n_kv_heads = c.n_kv_heads, r.head_dim = c.head_dim, r.ff = c.ff, r.norm_eps = c.norm_eps;
  r.rope_theta = c.rope_theta, r.rope_neox = c.rope_neox, r.rope_freq_factors = c.rope_freq_factors;
  r.qkv_bias = c.qkv_bias, r.qk_norm = c.qk_norm;
  ref::Weights w;
  for (const auto& [name, view] : s.model.weights) w[name] = model::weight_to_f32(view);
  std::vector<float> hidden;
  ref::transformer_forward(r, w, tokens, &hidden);
  return hidden;
}

// Pooled and normalized by the plainest loops: the yardstick for embed.
std::vector<float> expected(const std::vector<float>& hidden, size_t rows, size_t d, model::Pooling p) {
  std::vector<double> v(d, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    const bool take = p == model::Pooling::Mean || (p == model::Pooling::Cls && r == 0) ||
                      (p == model::Pooling::Last && r + 1 == rows);
    for (size_t i = 0; i < d && take; ++i) v[i] += hidden[r * d + i] / (p == model::Pooling::Mean ? double(rows) : 1);
  }
  double n = 0;
  for (double x : v) n += x * x;
  std::vector<float> out(d);
  for (size_t i = 0; i < d; ++i) out[i] = float(v[i] / std::sqrt(n));
  return out;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, float tol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol) << what << " [" << i << "]";
    norm += double(got[i]) * got[i];
  }
  EXPECT_NEAR(norm, 1.0, 1e-5) << what << ": not unit length";
}

TEST(EmbedPool, RowsAsPlainLoops) {
  const size_t rows = 3, d = 5;
  std::vector<float> h(rows * d);
  for (size_t i = 0; i < h.size(); ++i) h[i] = float(i % 7) - 2.5f + 0.25f * float(i);
  EXPECT_EQ(pool_rows(h, rows, d, model::Pooling::Cls), std::vector<float>(h.begin(), h.begin() + d));
  EXPECT_EQ(pool_rows(h, rows, d, model::Pooling::Last), std::vector<float>(h.end() - d, h.end()));
  const std::vector<float> mean = pool_rows(h, rows, d, model::Pooling::Mean);
  for (size_t i = 0; i < d; ++i) EXPECT_FLOAT_EQ(mean[i], (h[i] + h[d + i] + h[2 * d + i]) / 3.f);
  EXPECT_THROW(pool_rows(h, rows, d, model::Pooling::None), std::invalid_argument);
  EXPECT_THROW(pool_rows(h, rows + 1, d, model::Pooling::Mean), std::invalid_argument);

  std::vector<float> v = {3, 4, 0};
  normalize_l2(v);
  EXPECT_EQ(v, (std::vector<float>{0.6f, 0.8f, 0.f}));
  std::vector<float> zero = {0, 0};
  normalize_l2(zero);
  EXPECT_EQ(zero, (std::vector<float>{0, 0}));
  const std::vector<float> t = truncate_embedding(std::vector<float>{0.6f, 0.0f, 0.8f}, 2);
  EXPECT_EQ(t, (std::vector<float>{1.f, 0.f}));
  EXPECT_THROW(truncate_embedding(v, 4), std::invalid_argument);
  EXPECT_THROW(truncate_embedding(v, 0), std::invalid_argument);
}

// Each pooling, from the file's metadata (none: mean), in one step and in steps of 3 tokens, on
// a session of one sequence and on sequence 1 of a batched one.
TEST(Embed, MatchesReferenceForEachPooling) {
  struct Case {
    model::Arch arch;
    int pooling_type;  // -1: no key
    model::Pooling want;
  };
  const Case cases[] = {{model::Arch::Llama, -1, model::Pooling::Mean},
                        {model::Arch::Llama, 1, model::Pooling::Mean},
                        {model::Arch::Mistral, 2, model::Pooling::Cls},
                        {model::Arch::Qwen2, 3, model::Pooling::Last}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(model::arch_name(c.arch)) + " pooling " + std::to_string(c.pooling_type));
    model::GgufWriter w = tiny(c.arch, 11 + uint32_t(c.arch));
    if (c.pooling_type >= 0)
      model::gguf_set_u32(w, std::string(model::arch_name(c.arch)) + ".pooling_type", uint32_t(c.pooling_type));
    for (uint32_t max_batch : {32u, 3u})
      for (uint32_t n_seqs : {1u, 2u}) {
        Session s = open(w, max_batch, n_seqs);
        ASSERT_EQ(s.model.config.pooling, c.want);
        EXPECT_EQ(s.model.config.pooling_declared, c.pooling_type >= 0);
        const std::vector<int32_t> tokens = embedding_tokens(s.tok, "The quick brown fox");
        ASSERT_GE(tokens.size(), 8u);
        const std::vector<float> hidden = reference_hidden(s, tokens);
        const std::vector<float> want = expected(hidden, tokens.size(), s.mg.n_embd, c.want);
        const uint32_t seq = n_seqs - 1;
        const std::vector<float> got = embed(s, seq, tokens);
        expect_close(got, want, 2e-3f, max_batch == 3 ? "steps of 3" : "one step");
        EXPECT_EQ(seq_pos(s, seq), 0u) << "the sequence's cache is left empty";
        // The same text again gives the same vector (nothing of the first run stays).
        EXPECT_EQ(embed(s, seq, tokens), got);
      }
  }
}

// Qwen3-Embedding-style: qwen3, last-token pooling, the vocabulary appends its end token, which
// is the token pooled.
TEST(Embed, Qwen3LastTokenWithEos) {
  model::GgufWriter w = tiny(model::Arch::Qwen3, 5);
  model::gguf_set_u32(w, "qwen3.pooling_type", 3);
  model::gguf_set_bool(w, "tokenizer.ggml.add_eos_token", true);
  Session s = open(w, 4);
  ASSERT_TRUE(s.model.config.qk_norm);
  const std::vector<int32_t> tokens = embedding_tokens(s.tok, "what is an embedding?");
  ASSERT_EQ(tokens.back(), s.tok.vocab.eos_id) << "the vocabulary's add_eos appends the end token";
  const std::vector<float> hidden = reference_hidden(s, tokens);
  expect_close(embed(s, 0, tokens), expected(hidden, tokens.size(), s.mg.n_embd, model::Pooling::Last), 2e-3f,
               "qwen3 last token");
  // Without the end token the vector differs: it is the one the model family pools.
  const std::vector<int32_t> no_eos(tokens.begin(), tokens.end() - 1);
  const std::vector<float> other = embed(s, 0, no_eos);
  double diff = 0;
  const std::vector<float> with = embed(s, 0, tokens);
  for (size_t i = 0; i < other.size(); ++i) diff += std::fabs(other[i] - with[i]);
  EXPECT_GT(diff, 1e-2);
}

// The hidden output runs only on the embedding's steps: generation's steps (before and after)
// keep it on the idle route and dispatch no more kernels than before any embedding.
TEST(Embed, HiddenRouteOffForOtherSteps) {
  Session s = open(tiny(model::Arch::Llama, 3), 8);
  graph::Graph& g = *s.mg.graph;
  const graph::NodeId node = graph::find_node(g, "hidden_norm");
  const std::vector<int32_t> prompt = {256, 72, 105};
  eval(s, prompt, {}, Readout::Argmax);
  EXPECT_EQ(graph::active_route(g, node), ops::kRmsNormOff);
  const uint32_t dispatches = graph::active_dispatches(g);
  const int32_t first = read_argmax(s);
  (void)embed(s, 0, prompt);
  EXPECT_EQ(graph::active_route(g, node), ops::kRmsNormOff);
  reset(s);
  eval(s, prompt, {}, Readout::Argmax);
  EXPECT_EQ(graph::active_dispatches(g), dispatches);
  EXPECT_EQ(read_argmax(s), first) << "generation after an embedding is unchanged";
}

TEST(Embed, RefusesBadInput) {
  model::GgufWriter w = tiny(model::Arch::Llama, 2);
  Session s = open(w, 8);
  EXPECT_THAT([&] { embed(s, 0, {}); }, ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("no tokens")));
  const std::vector<int32_t> long_text(33, 72);
  EXPECT_THAT([&] { embed(s, 0, long_text); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("pass the context of 32")));
  const std::vector<int32_t> bad = {72, 100000};
  EXPECT_THAT([&] { embed(s, 0, bad); },
              ::testing::ThrowsMessage<std::invalid_argument>(HasSubstr("outside the vocabulary")));
  // Pooling none makes no single vector.
  model::gguf_set_u32(w, "llama.pooling_type", 0);
  Session none = open(w, 8);
  EXPECT_THAT(embedding_refusal(none.model.config), HasSubstr("pooling type is none"));
  EXPECT_THROW(embed(none, 0, std::vector<int32_t>{72}), std::invalid_argument);
  model::gguf_set_u32(w, "llama.pooling_type", 9);
  EXPECT_THROW(open(w, 8), model::ModelError);
}

}  // namespace
}  // namespace wgrt::llm
