// The GPU logit adjustment (ops/sampling/logit_adjust.h) against the sampler's CPU rule
// (llm::adjusted_logits) plus the grammar mask: prime vocabularies, several rows with
// different samplers (bias, penalties, both, a mask, nothing), ties, -inf, NaN and negative
// logits, and a route that stays off.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <random>

#include "llm/sampler.h"
#include "ops/sampling/logit_adjust.h"
#include "support/device.h"
#include "support/op_harness.h"
#include "support/random.h"

namespace wgrt::test {
namespace {

using namespace graph;
constexpr float kInf = std::numeric_limits<float>::infinity();

enum class Fill { Uniform, Ties, NegInf, WithNaN, Negative };

std::vector<float> make_logits(uint32_t rows, uint32_t vocab, Fill fill, uint32_t seed) {
  auto v = random_floats(size_t(rows) * vocab, seed, -20.f, 20.f);
  for (size_t i = 0; i < v.size(); ++i) {
    switch (fill) {
      case Fill::Uniform: break;
      case Fill::Ties: v[i] = std::floor(v[i] / 8.f); break;
      case Fill::NegInf: if (i % 3 == 0) v[i] = -kInf; break;
      case Fill::WithNaN: if (i % 5 == 2) v[i] = std::numeric_limits<float>::quiet_NaN(); break;
      case Fill::Negative: v[i] = -std::abs(v[i]) - 0.5f; break;
    }
  }
  return v;
}

// Row r's sampler: a mix of bias and penalties over tokens of the vocabulary (row 3 has none).
llm::Sampler row_sampler(uint32_t r, uint32_t vocab, uint32_t seed) {
  std::mt19937 rng(seed + r);
  llm::SamplerParams p;
  p.repeat_last_n = 48;
  if (r % 4 == 0 || r % 4 == 2) {
    p.repeat_penalty = 1.3f;
    p.presence_penalty = 0.7f;
    p.frequency_penalty = 0.35f;
  }
  if (r % 4 == 1 || r % 4 == 2) {
    for (uint32_t i = 0; i < 12; ++i) {
      const int32_t id = int32_t(rng() % vocab);
      bool dup = false;
      for (const auto& b : p.logit_bias) dup |= b.first == id;
      if (!dup) p.logit_bias.emplace_back(id, float(int(rng() % 41) - 20) * 0.75f);
    }
    if (r % 4 == 1) p.logit_bias.emplace_back(int32_t(vocab + 3), 5.0f);  // past the vocabulary: skipped
  }
  llm::Sampler s = llm::make_sampler(p);
  for (int i = 0; i < 80; ++i) llm::accept_token(s, int32_t(rng() % std::min<uint32_t>(vocab, 40)));  // repeats
  return s;
}

bool same(float a, float b) { return a == b || (std::isnan(a) && std::isnan(b)); }

void expect_adjust(uint32_t max_rows, uint32_t vocab, Fill fill, std::vector<uint32_t> row_steps) {
  Graph g(device());
  TensorId l = add_input(g, {.name = "logits", .max_shape = {max_rows, vocab}, .dynamic_dims = 1});
  SymbolId on = add_symbol(g, {.name = "on", .lo = 0, .hi = 1});
  ops::LogitAdjust a = ops::add_logit_adjust(g, {.name = "adjust", .logits = l, .enable = on});
  mark_output(g, l);
  build(g);
  const uint32_t words = (vocab + 31) / 32;
  uint32_t step = 0;
  for (uint32_t rows : row_steps) {
    const uint32_t seed = rows * 31 + vocab + step++;
    std::vector<float> lv = make_logits(rows, vocab, fill, seed), want = lv;
    std::vector<ops::LogitAdjustRow> heads(max_rows, ops::LogitAdjustRow{0, 0, 1.f, 0.f, 1.f, 0, 0, 0});
    std::vector<ops::LogitAdjustEntry> entries(size_t(max_rows) * ops::kLogitAdjustMaxEntries);
    std::vector<uint32_t> allow(size_t(max_rows) * words, 0);
    std::mt19937 rng(seed);
    for (uint32_t r = 0; r < rows; ++r) {
      llm::Sampler s = row_sampler(r, vocab, seed);
      const bool mask = r % 3 == 1;
      std::vector<llm::AdjustEntry> e = llm::adjust_entries(s);
      heads[r] = {uint32_t(e.size()), mask ? 1u : 0u, s.params.repeat_penalty, s.params.presence_penalty,
                  1.0f / s.params.repeat_penalty, 0, 0, 0};
      for (size_t i = 0; i < e.size(); ++i)
        entries[r * ops::kLogitAdjustMaxEntries + i] = {uint32_t(e[i].id), e[i].count, e[i].bias, e[i].freq_sub};
      // The reference: the sampler's own rule, then the mask.
      float* row = want.data() + size_t(r) * vocab;
      const auto logit = [&](int32_t id) { return size_t(id) < vocab ? row[id] : 0.f; };
      for (const llm::Candidate& c : llm::adjusted_logits(s, logit))
        if (size_t(c.id) < vocab) row[c.id] = c.logit;
      if (!mask) continue;
      for (uint32_t w = 0; w < words; ++w) allow[r * words + w] = uint32_t(rng()) & uint32_t(rng());  // ~1/4 allowed
      for (uint32_t i = 0; i < vocab; ++i)
        if (!((allow[r * words + i / 32] >> (i % 32)) & 1u)) row[i] = -kInf;
    }
    ShapeInput sh{l, {rows, vocab}};
    SymbolInput sym{on, 1};
    update(g, {&sh, 1}, {&sym, 1});
    write_tensor<float>(g, l, lv);
    write_tensor<ops::LogitAdjustRow>(g, a.rows, heads);
    write_tensor<ops::LogitAdjustEntry>(g, a.entries, entries);
    write_tensor<uint32_t>(g, a.allow, allow);
    execute(g);
    const std::vector<float> got = read_output<float>(g, l);
    ASSERT_EQ(got.size(), want.size());
    size_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (!same(got[i], want[i]) && bad++ < 5)
        ADD_FAILURE() << fmt::format("step {} rows {}: row {} token {}: got {} want {} (before {})", step, rows,
                                     i / vocab, i % vocab, got[i], want[i], lv[i]);
    EXPECT_EQ(bad, 0u);
  }
}

TEST(LogitAdjust, MatchesCpuRule) {
  for (uint32_t vocab : {31u, 97u, 257u, 1009u, 4099u})
    for (Fill f : {Fill::Uniform, Fill::Ties, Fill::NegInf, Fill::WithNaN, Fill::Negative}) {
      SCOPED_TRACE(fmt::format("vocab {} fill {}", vocab, int(f)));
      expect_adjust(5, vocab, f, {5, 1, 3});
    }
}

TEST(LogitAdjust, OffRouteLeavesLogits) {
  const uint32_t vocab = 101;
  Graph g(device());
  TensorId l = add_input(g, {.name = "logits", .max_shape = {2, vocab}, .dynamic_dims = 1});
  SymbolId on = add_symbol(g, {.name = "on", .lo = 0, .hi = 1});
  ops::LogitAdjust a = ops::add_logit_adjust(g, {.name = "adjust", .logits = l, .enable = on});
  mark_output(g, l);
  build(g);
  std::vector<float> lv = make_logits(2, vocab, Fill::Uniform, 7);
  const ops::LogitAdjustRow head{1, 1, 2.f, 1.f, 0, 0, 0, 0};
  const ops::LogitAdjustEntry e{5, 3, 4.f, 1.f};
  ShapeInput sh{l, {2, vocab}};
  SymbolInput sym{on, 0};
  update(g, {&sh, 1}, {&sym, 1});
  write_tensor<float>(g, l, lv);
  write_tensor(g, a.rows, &head, sizeof head);
  write_tensor(g, a.entries, &e, sizeof e);
  execute(g);
  EXPECT_EQ(read_output<float>(g, l), lv);
  // On, the same inputs mask row 0 (an allow tensor of zeros); row 1 (no entries, no mask) stays.
  sym.value = 1;
  update(g, {&sh, 1}, {&sym, 1});
  write_tensor<float>(g, l, lv);
  std::vector<uint32_t> zeros(2 * ((vocab + 31) / 32), 0);
  write_tensor<uint32_t>(g, a.allow, zeros);
  execute(g);
  const std::vector<float> got = read_output<float>(g, l);
  for (uint32_t i = 0; i < vocab; ++i) {
    EXPECT_EQ(got[i], -kInf) << i;
    EXPECT_EQ(got[vocab + i], lv[vocab + i]) << i;
  }
}

}  // namespace
}  // namespace wgrt::test
