// Bias, penalties and grammar applied on the GPU (llm/batch.h stage_adjust) give the same
// tokens as the CPU path that reads the whole logits row: greedy and seeded sampled runs on a
// small model, and the cases that must fall back to the CPU.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "grammar/gbnf.h"
#include "llm/batch.h"
#include "llm/constrain.h"
#include "llm/generate.h"
#include "llm/session.h"
#include "support/device.h"

namespace wgrt::llm {
namespace {

model::BuildOptions options() {
  model::BuildOptions o;
  o.n_ctx = 64;
  o.max_batch = 8;
  return o;
}

// n tokens generated after a fixed prompt, adjusted on the GPU (`gpu`) or on the CPU from
// the whole row; stops at an end token.
std::vector<int32_t> run(Session& s, const SamplerParams& p, bool gpu, int n) {
  reset(s);
  Sampler sp = make_sampler(p);
  constrain(s, sp);
  const std::vector<int32_t> prompt = {256, 72, 101, 108, 108, 111, 44, 32, 119, 111};
  for (int32_t id : prompt) accept_token(sp, id);
  Sampler* const rows[] = {&sp};
  auto readout = [&] {
    if (!gpu) return Readout::Logits;
    EXPECT_TRUE(stage_adjust(s, rows));
    return Readout::TopK;
  };
  eval(s, prompt, {}, readout());
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    const int32_t id = pick_next(s, sp);
    EXPECT_FALSE(sp.gpu_adjusted);
    out.push_back(id);
    if (is_end_token(s, id) || s.n_past >= s.mg.n_ctx) break;
    eval(s, std::span<const int32_t>(&id, 1), {}, readout());
  }
  return out;
}

SamplerParams base(float temperature) {
  SamplerParams p;
  p.temperature = temperature;
  p.top_k = 20;
  p.top_p = 0.9f;
  p.min_p = 0.02f;
  p.seed = 11;
  return p;
}

TEST(GpuAdjust, SameTokensAsTheCpuPath) {
  Session s = open_session(test::device(), kRandomModel, options());
  const auto grammar = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(R"(root ::= [a-z]{3,12} "." )"));
  for (float temp : {0.0f, 0.9f}) {
    SamplerParams bias = base(temp);
    bias.logit_bias = {{101, 3.0f}, {32, -100.0f}, {111, 1.5f}, {200, 2.0f}};
    SamplerParams pen = base(temp);
    pen.repeat_penalty = 1.4f;
    pen.presence_penalty = 0.5f;
    pen.frequency_penalty = 0.3f;
    SamplerParams both = pen;
    both.logit_bias = bias.logit_bias;
    SamplerParams gram = base(temp);
    gram.grammar = grammar;
    SamplerParams gram_pen = pen;
    gram_pen.grammar = grammar;
    int which = 0;
    for (const SamplerParams& p : {bias, pen, both, gram, gram_pen}) {
      SCOPED_TRACE(testing::Message() << "temperature " << temp << ", case " << which++);
      const std::vector<int32_t> cpu = run(s, p, false, 24), gpu = run(s, p, true, 24);
      EXPECT_EQ(gpu, cpu);
      EXPECT_FALSE(gpu.empty());
    }
  }
}

TEST(GpuAdjust, FallsBackWhereTheGpuCannot) {
  Session s = open_session(test::device(), kRandomModel, options());
  SamplerParams p = base(0.8f);
  p.repeat_penalty = 1.2f;
  Sampler ok = make_sampler(p);
  EXPECT_TRUE(can_adjust_on_gpu(s, ok));
  p.top_k = 0;  // every candidate: the whole row
  Sampler all = make_sampler(p);
  EXPECT_FALSE(can_adjust_on_gpu(s, all));
  Sampler* const rows[] = {&all};
  EXPECT_FALSE(stage_adjust(s, rows));  // nothing staged: the step reads the row for the CPU
  EXPECT_FALSE(s.adjust_next);
  EXPECT_FALSE(all.gpu_adjusted);
  Sampler plain = make_sampler(base(0.8f));  // nothing to adjust: the top-k as it is
  EXPECT_FALSE(can_adjust_on_gpu(s, plain));
  // A penalty window of more distinct tokens than the entries hold.
  SamplerParams wide = base(0.0f);
  wide.frequency_penalty = 0.1f;
  wide.repeat_last_n = 4 * ops::kLogitAdjustMaxEntries;
  Sampler w = make_sampler(wide);
  for (uint32_t i = 0; i < ops::kLogitAdjustMaxEntries; ++i) accept_token(w, int32_t(i));
  EXPECT_TRUE(can_adjust_on_gpu(s, w));
  accept_token(w, int32_t(ops::kLogitAdjustMaxEntries));
  EXPECT_FALSE(can_adjust_on_gpu(s, w));
}

TEST(GpuAdjust, GenerateFollowsTheGrammar) {
  Session s = open_session(test::device(), kRandomModel, options());
  GenerateOptions o;
  o.prompt = "Say:";
  o.n_predict = 20;
  o.sampling = base(0.7f);
  o.sampling.grammar = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(R"(root ::= "ab" [0-9]{2,4} )"));
  std::string text;
  generate(s, o, [&](std::string_view t) { text += t; });
  EXPECT_TRUE(text.size() >= 4 && text.size() <= 6 && text.starts_with("ab")) << text;
}

}  // namespace
}  // namespace wgrt::llm
