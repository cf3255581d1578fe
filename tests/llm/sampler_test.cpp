// Sampler: greedy, cuts (top-k, top-p, min-p), temperature, penalties, logit bias, seeds.
#include <gtest/gtest.h>

#include <map>

#include "llm/sampler.h"

namespace wgrt::llm {
namespace {

std::vector<Candidate> logits(std::initializer_list<float> v) {
  std::vector<Candidate> c;
  int32_t id = 0;
  for (float x : v) c.push_back({id++, x});
  return c;
}

std::map<int32_t, int> histogram(SamplerParams p, std::initializer_list<float> v, int draws) {
  Sampler s = make_sampler(p);
  std::map<int32_t, int> h;
  for (int i = 0; i < draws; ++i) {
    auto c = logits(v);
    ++h[sample(s, c)];
  }
  return h;
}

TEST(Sampler, GreedyTakesMaxLowestIdOnTies) {
  Sampler s = make_sampler({.temperature = 0});
  auto c = logits({1, 5, 3, 5});
  EXPECT_EQ(sample(s, c), 1);
}

TEST(Sampler, TopKLimitsChoices) {
  auto h = histogram({.temperature = 1, .top_k = 2, .top_p = 1, .min_p = 0, .seed = 1}, {0, 1, 2, 3, 4}, 500);
  EXPECT_EQ(h.size(), 2u);
  EXPECT_GT(h[4], h[3]);
}

TEST(Sampler, TopPAndMinPCut) {
  // p ≈ {0.867, 0.117, 0.016}: top-p 0.9 keeps two; min-p 0.2 keeps one.
  auto h = histogram({.temperature = 1, .top_k = 0, .top_p = 0.9f, .min_p = 0, .seed = 2}, {4, 2, 0}, 400);
  EXPECT_EQ(h.count(2), 0u);
  EXPECT_GT(h[1], 0);
  h = histogram({.temperature = 1, .top_k = 0, .top_p = 1, .min_p = 0.2f, .seed = 3}, {4, 2, 0}, 200);
  EXPECT_EQ(h.size(), 1u);
}

TEST(Sampler, TemperatureFlattens) {
  auto cold = histogram({.temperature = 0.2f, .top_k = 0, .top_p = 1, .min_p = 0, .seed = 4}, {1, 0}, 1000);
  auto hot = histogram({.temperature = 5.f, .top_k = 0, .top_p = 1, .min_p = 0, .seed = 4}, {1, 0}, 1000);
  EXPECT_GT(cold[0], 950);
  EXPECT_LT(hot[0], 650);
  EXPECT_GT(hot[0], 450);
}

TEST(Sampler, SeedsRepeat) {
  SamplerParams p{.temperature = 1, .top_k = 0, .top_p = 1, .min_p = 0, .seed = 42};
  EXPECT_EQ(histogram(p, {0, 0.5f, 1, 0.2f}, 300), histogram(p, {0, 0.5f, 1, 0.2f}, 300));
}

TEST(Sampler, RepetitionPenaltyDemotes) {
  Sampler s = make_sampler({.temperature = 0, .repeat_penalty = 2.f});
  accept_token(s, 0);
  auto c = logits({3, 2});  // 3 / 2 = 1.5 < 2
  EXPECT_EQ(sample(s, c), 1);
  EXPECT_TRUE(needs_all_logits(s.params));
}

// Each rule on its own against hand-computed logits, then all three with a bias: the repeat rule
// first (divide positive, multiply negative), presence and frequency after, over the window.
TEST(Sampler, PenaltiesAndBiasAdjustTheLogits) {
  std::vector<float> row = {2, -1, 4, 0.5f, 3};
  auto adjusted = [&](SamplerParams p, std::initializer_list<int32_t> recent) {
    Sampler s = make_sampler(p);
    for (int32_t id : recent) accept_token(s, id);
    std::vector<float> r = row;
    adjust_logits(s, r);
    return r;
  };
  EXPECT_EQ(adjusted({.repeat_penalty = 2}, {0, 1, 0}), (std::vector<float>{1, -2, 4, 0.5f, 3}));
  EXPECT_EQ(adjusted({.presence_penalty = 0.5f}, {0, 1, 0}), (std::vector<float>{1.5f, -1.5f, 4, 0.5f, 3}));
  EXPECT_EQ(adjusted({.frequency_penalty = 0.25f}, {0, 1, 0}), (std::vector<float>{1.5f, -1.25f, 4, 0.5f, 3}));
  // Token 0 counted twice: 2 / 2 - 1 - 0.5 * 2 = -1; token 4 is outside the window of 3.
  EXPECT_EQ(adjusted({.repeat_penalty = 2, .presence_penalty = 1, .frequency_penalty = 0.5f, .repeat_last_n = 3,
                      .logit_bias = {{2, -100}, {3, 10}}},
                     {4, 0, 1, 0}),
            (std::vector<float>{-1, -3.5f, -96, 10.5f, 3}));
  EXPECT_EQ(adjusted({.repeat_last_n = 0, .logit_bias = {{1, 5}}}, {1}), (std::vector<float>{2, 4, 4, 0.5f, 3}));
  EXPECT_FALSE(needs_all_logits({}));
  EXPECT_TRUE(needs_all_logits({.presence_penalty = 0.1f}));
  EXPECT_TRUE(needs_all_logits({.frequency_penalty = -0.1f}));
  EXPECT_TRUE(needs_all_logits({.logit_bias = {{0, 1}}}));
}

TEST(Sampler, LogitBiasBansAndForces) {
  // Greedy would take 2; -100 bans it, +100 forces 0; sampling at T = 1 never draws the banned.
  Sampler ban = make_sampler({.temperature = 0, .logit_bias = {{2, -100}}});
  auto c = logits({1, 0, 5});
  EXPECT_EQ(sample(ban, c), 0);
  Sampler force = make_sampler({.temperature = 0, .logit_bias = {{0, 100}}});
  c = logits({1, 0, 5});
  EXPECT_EQ(sample(force, c), 0);
  auto h = histogram({.temperature = 1, .top_k = 0, .top_p = 1, .min_p = 0, .logit_bias = {{2, -100}}, .seed = 9},
                     {1, 1, 1}, 300);
  EXPECT_EQ(h.count(2), 0u);
  EXPECT_GT(h[0], 100);
  EXPECT_GT(h[1], 100);
}

TEST(Sampler, BadParametersRejected) {
  EXPECT_THROW(make_sampler({.logit_bias = {{1, 1}, {1, 2}}}), std::invalid_argument);
  EXPECT_THROW(make_sampler({.logit_bias = {{-1, 1}}}), std::invalid_argument);
  EXPECT_THROW(make_sampler({.temperature = -1}), std::invalid_argument);
  EXPECT_THROW(make_sampler({.top_p = 0}), std::invalid_argument);
  EXPECT_THROW(make_sampler({.min_p = 2}), std::invalid_argument);
}

}  // namespace
}  // namespace wgrt::llm
