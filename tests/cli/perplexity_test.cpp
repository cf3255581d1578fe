// `wgrt perplexity`'s scoring (llm::perplexity_windows), by hand: llama-perplexity's windows
// (chunks of n_ctx, BOS in each chunk's first place, only positions [n_ctx/2, n_ctx - 1)
// scored, the remainder left out) and its +/- (the standard error of the mean NLL through exp).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "llm/generate.h"

namespace wgrt::llm {
namespace {

TEST(CliPerplexity, HandComputedTwoChunks) {
  // n_ctx 4: 9 tokens make 2 chunks (the 9th is left out); each scores position 2 only,
  // predicting the chunk's 4th token: 1 in chunk 0, 0 in chunk 1.
  const std::vector<int32_t> tokens = {1, 0, 1, 1, 0, 1, 0, 0, 1};
  const float ln3 = std::log(3.0f);
  std::vector<std::vector<int32_t>> seen;
  auto logits = [&](std::span<const int32_t> chunk, const std::function<void(size_t, const float*)>& row) {
    seen.emplace_back(chunk.begin(), chunk.end());
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (size_t pos = 0; pos < chunk.size(); ++pos) {
      // chunk 0: p(1) = 3/4; chunk 1: p(0) = 1/2; every other position NaN (so scoring it shows).
      const float scored[2] = {0.0f, seen.size() == 1 ? ln3 : 0.0f}, unscored[2] = {nan, nan};
      row(pos, pos == 2 ? scored : unscored);
    }
  };
  std::vector<size_t> progress;
  PerplexityResult r = perplexity_windows(tokens, 4, 2, /*bos=*/7, logits,
                                          [&](const PerplexityResult& run) { progress.push_back(run.n_scored); });
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], (std::vector<int32_t>{7, 0, 1, 1}));  // BOS in place of the first token
  EXPECT_EQ(seen[1], (std::vector<int32_t>{7, 1, 0, 0}));
  EXPECT_EQ(progress, (std::vector<size_t>{1, 2}));
  EXPECT_EQ(r.n_scored, 2u);
  EXPECT_EQ(r.n_chunks, 2u);
  // NLLs ln(4/3) and ln 2: PPL = exp(mean) = sqrt(8/3); the standard error of the mean of two
  // values is half their distance, ln(3/2)/2, times PPL.
  EXPECT_NEAR(r.nll, std::log(4.0 / 3) + std::log(2.0), 1e-6);
  EXPECT_NEAR(r.perplexity(), std::sqrt(8.0 / 3), 1e-6);
  EXPECT_NEAR(r.error(), std::sqrt(8.0 / 3) * std::log(1.5) / 2, 1e-6);
}

TEST(CliPerplexity, SecondHalfOnlyAndNoBos) {
  // n_ctx 6: positions 3 and 4 scored in each chunk; no BOS: chunks passed as they are.
  std::vector<int32_t> tokens(13);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int32_t(i % 3);
  size_t chunk_index = 0;
  auto logits = [&](std::span<const int32_t> chunk, const std::function<void(size_t, const float*)>& row) {
    EXPECT_EQ(chunk[0], tokens[chunk_index * 6]);
    ++chunk_index;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float uniform[3] = {0, 0, 0}, unscored[3] = {nan, nan, nan};
    for (size_t pos = 0; pos < chunk.size(); ++pos) row(pos, pos == 3 || pos == 4 ? uniform : unscored);
  };
  PerplexityResult r = perplexity_windows(tokens, 6, 3, /*bos=*/-1, logits);
  EXPECT_EQ(r.n_scored, 4u);
  EXPECT_NEAR(r.perplexity(), 3.0, 1e-9);  // uniform over 3
  EXPECT_TRUE(std::isnan(r.error()));      // every NLL equal: no spread to report
}

TEST(CliPerplexity, NeedsTwoChunks) {
  EXPECT_EQ(perplexity_chunks(8, 4), 2u);
  EXPECT_EQ(perplexity_chunks(11, 4), 2u);
  EXPECT_THROW(perplexity_chunks(7, 4), std::invalid_argument);
  try {
    perplexity_chunks(7, 4);
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("needs at least 8"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("hint"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace wgrt::llm
