// Sampler: greedy, cuts (top-k, top-p, min-p), temperature, penalty, seeds.
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

TEST(Sampler, BadParametersRejected) {
  EXPECT_THROW(make_sampler({.temperature = -1}), std::invalid_argument);
  EXPECT_THROW(make_sampler({.top_p = 0}), std::invalid_argument);
  EXPECT_THROW(make_sampler({.min_p = 2}), std::invalid_argument);
}

}  // namespace
}  // namespace wgrt::llm
