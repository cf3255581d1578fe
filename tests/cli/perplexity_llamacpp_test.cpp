// `wgrt perplexity`'s number against one computed from llama.cpp's own CPU logits of the same
// file (tests/reference/llamacpp_ref, dlopened; skipped when tools/setup-test-data.sh has not
// fetched it), with llama-perplexity's windows: the same chunks (a BOS first: the llama vocab
// adds one), the same second halves scored. The two differ only by the runtimes' rounding.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "llm/generate.h"
#include "llm/session.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "model/random_model.h"
#include "reference/llamacpp_ref.h"
#include "support/device.h"
#include "support/hf_fixture.h"
#include "tokenizer/tokenizer.h"

namespace wgrt {
namespace {

namespace lc = ref::llamacpp;

const std::string kVocab = WGRT_SOURCE_DIR "/.deps/llama-vocab/models/ggml-vocab-llama-spm.gguf";

TEST(CliPerplexity, MatchesLlamaCppLogitsWithItsWindows) {
  if (!std::filesystem::exists(kVocab)) GTEST_SKIP() << "vocab test data absent: run tools/setup-test-data.sh";
  if (std::string why = lc::unavailable_reason(); !why.empty()) GTEST_SKIP() << why;

  // A tiny F16 llama with the real 32000-token vocabulary (it adds a BOS).
  const std::string path = test::temp_dir("ppl-llamacpp") + "/tiny-f16.gguf";
  {
    model::GgufFile vocab = model::open_gguf(kVocab);
    model::RandomModelSpec spec;
    spec.dim = 128;
    spec.n_layers = 2;
    spec.n_heads = 4;
    spec.n_kv_heads = 2;
    spec.head_dim = 32;
    spec.ff = 256;
    spec.matrix_type = model::GgmlType::F16;
    spec.embd_type = model::GgmlType::F16;
    spec.seed = 23;
    spec.vocab_from = &vocab;
    model::gguf_write_file(model::make_random_model(spec), path);
  }
  model::BuildOptions o;
  o.n_ctx = 16;
  o.max_batch = 16;
  o.all_logits = true;
  llm::Session s = llm::open_session(test::device(), path, o);
  ASSERT_TRUE(s.tok.vocab.add_bos);
  const std::string text =
      "The quick brown fox jumps over the lazy dog. A stitch in time saves nine. Every cloud has a silver "
      "lining, and the early bird catches the worm.";
  const std::vector<int32_t> tokens = tokenizer::tokenize(s.tok, text, /*add_special=*/true, /*parse_special=*/false);
  ASSERT_GE(tokens.size(), 32u);

  const llm::PerplexityResult wgrt = llm::perplexity(s, tokens);
  const size_t n_vocab = s.mg.n_vocab;
  auto llamacpp_logits = [&](std::span<const int32_t> chunk, const std::function<void(size_t, const float*)>& row) {
    const lc::Logits l = lc::cpu_logits(path, chunk);
    ASSERT_EQ(l.n_vocab, n_vocab);
    for (size_t pos = 0; pos < chunk.size(); ++pos) row(pos, &l.rows[pos * n_vocab]);
  };
  const llm::PerplexityResult ref =
      llm::perplexity_windows(tokens, o.n_ctx, n_vocab, s.tok.vocab.bos_id, llamacpp_logits);

  EXPECT_EQ(wgrt.n_scored, ref.n_scored);
  EXPECT_EQ(wgrt.n_scored, (tokens.size() / 16) * 7);  // 7 = 16 - 16/2 - 1 a chunk
  EXPECT_NEAR(wgrt.perplexity(), ref.perplexity(), 2e-3 * ref.perplexity())
      << fmt::format("wgrt {:.4f} +/- {:.5f}, from llama.cpp's logits {:.4f} +/- {:.5f}", wgrt.perplexity(),
                     wgrt.error(), ref.perplexity(), ref.error());
  EXPECT_NEAR(wgrt.error(), ref.error(), 2e-2 * ref.error());
}

}  // namespace
}  // namespace wgrt
