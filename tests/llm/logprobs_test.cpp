// Log-probabilities, logit bias and penalties at the pick (llm/batch.h pick_next_row): on a
// small model, one sequence and a batched step, against a CPU reference computed in double from
// the step's own logits (read back whole): the GPU's normalizer, the chosen token's value and the
// top alternatives; a biased or penalized pick is the CPU-adjusted row's best.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "llm/batch.h"
#include "llm/generate.h"
#include "llm/session.h"
#include "support/device.h"

namespace wgrt::llm {
namespace {

model::BuildOptions options(uint32_t n_seqs) {
  model::BuildOptions o;
  o.n_ctx = 32;
  o.max_batch = 8;
  o.n_seqs = n_seqs;
  return o;
}

double log_sum_exp(const std::vector<float>& row) {
  const double m = *std::max_element(row.begin(), row.end());
  double s = 0;
  for (float x : row) s += std::exp(double(x) - m);
  return m + std::log(s);
}

// Token ids by logit, best first (lower id on ties).
std::vector<int32_t> ranked(const std::vector<float>& row) {
  std::vector<int32_t> ids(row.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return row[size_t(a)] > row[size_t(b)]; });
  return ids;
}

void expect_logprobs(const PickLogprobs& lp, const std::vector<float>& row, int32_t id, uint32_t n_top) {
  const double norm = log_sum_exp(row);
  EXPECT_EQ(lp.chosen.id, id);
  EXPECT_NEAR(lp.chosen.logprob, double(row[size_t(id)]) - norm, 1e-4);
  ASSERT_EQ(lp.top.size(), n_top);
  const std::vector<int32_t> best = ranked(row);
  for (uint32_t i = 0; i < n_top; ++i) {
    EXPECT_EQ(lp.top[i].id, best[i]) << "alternative " << i;
    EXPECT_NEAR(lp.top[i].logprob, double(row[size_t(best[i])]) - norm, 1e-4) << "alternative " << i;
  }
  // They are log-probabilities: at most 0, and the alternatives' mass at most 1.
  double mass = 0;
  for (const TokenLogprob& t : lp.top) mass += std::exp(double(t.logprob));
  EXPECT_LE(mass, 1.0 + 1e-4);
}

TEST(Logprobs, OneSequenceMatchesTheCpuReference) {
  Session s = open_session(test::device(), kRandomModel, options(1));
  const std::vector<int32_t> prompt = {1, 5, 9, 2};
  Sampler greedy = make_sampler({.temperature = 0});
  eval(s, prompt, {}, Readout::All, nullptr, /*logprobs=*/true);
  const std::vector<float> row = read_logits(s);
  PickLogprobs lp;
  const int32_t id = pick_next_row(s, greedy, 0, &lp, 5);
  EXPECT_EQ(id, ranked(row)[0]);
  expect_logprobs(lp, row, id, 5);
  // A sampled pick from the top-k (the GPU's candidates) gets its own value.
  Sampler hot = make_sampler({.temperature = 1.5f, .top_k = 20, .top_p = 1, .min_p = 0, .seed = 3});
  eval(s, std::vector<int32_t>{id}, {}, Readout::All, nullptr, true);
  const std::vector<float> row2 = read_logits(s);
  for (int i = 0; i < 3; ++i) {
    const int32_t drawn = pick_next_row(s, hot, 0, &lp, 0);
    expect_logprobs(lp, row2, drawn, 0);
  }
}

// Two sequences in one step: row 0 greedy with log-probabilities, row 1 with a logit bias that
// bans its best token and penalties; the banned token is never picked, and the log-probabilities
// stay the model's (before the bias).
TEST(Logprobs, BatchedRowsWithBiasAndPenalties) {
  Session s = open_session(test::device(), kRandomModel, options(2));
  const std::vector<int32_t> p0 = {3, 4, 5}, p1 = {7, 1, 7, 2};
  const SeqPart parts[] = {{0, p0, true}, {1, p1, true}};
  eval_seqs(s, parts, Readout::All, nullptr, /*logprobs=*/true);
  const size_t v = s.mg.n_vocab;
  const std::vector<float> all = read_logits(s);
  ASSERT_EQ(all.size(), 2 * v);
  const std::vector<float> r0(all.begin(), all.begin() + long(v)), r1(all.begin() + long(v), all.end());

  Sampler greedy = make_sampler({.temperature = 0});
  PickLogprobs lp;
  const int32_t a = pick_next_row(s, greedy, 0, &lp, 3);
  expect_logprobs(lp, r0, a, 3);

  const int32_t banned = ranked(r1)[0];
  SamplerParams bp{.temperature = 0, .repeat_penalty = 1.5f, .presence_penalty = 0.4f, .frequency_penalty = 0.3f,
                   .logit_bias = {{banned, -100.0f}}};
  Sampler biased = make_sampler(bp);
  for (int32_t id : p1) accept_token(biased, id);
  std::vector<float> adjusted = r1;
  adjust_logits(biased, adjusted);
  const int32_t b = pick_next_row(s, biased, 1, &lp, 2);
  EXPECT_NE(b, banned);
  EXPECT_EQ(b, ranked(adjusted)[0]);
  expect_logprobs(lp, r1, b, 2);

  // +100 forces a token the model ranks last.
  Sampler forced = make_sampler({.temperature = 0, .logit_bias = {{ranked(r1).back(), 100.0f}}});
  EXPECT_EQ(pick_next_row(s, forced, 1), ranked(r1).back());
}

// Steps without log-probabilities run no normalizer: its node is idle.
TEST(Logprobs, StepsWithoutThemRunNothingMore) {
  Session s = open_session(test::device(), kRandomModel, options(1));
  const std::vector<int32_t> prompt = {1, 2};
  eval(s, prompt, {}, Readout::Argmax);
  eval(s, std::vector<int32_t>{3}, {}, Readout::Argmax);
  const uint32_t plain = graph::active_dispatches(*s.mg.graph);
  eval(s, std::vector<int32_t>{4}, {}, Readout::Argmax, nullptr, true);
  EXPECT_GT(graph::active_dispatches(*s.mg.graph), plain);
  eval(s, std::vector<int32_t>{5}, {}, Readout::Argmax);
  EXPECT_EQ(graph::active_dispatches(*s.mg.graph), plain);
}

}  // namespace
}  // namespace wgrt::llm
