// The sampler with a grammar: only allowed tokens are drawn, whatever the logits, and the end
// token comes once the grammar is complete.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <regex>
#include <string>

#include "grammar/gbnf.h"
#include "grammar/token_index.h"
#include "llm/sampler.h"

using namespace wgrt;

TEST(SamplerGrammar, DrawsOnlyAllowedTokensUntilTheEnd) {
  std::vector<std::string> pieces;
  for (int c = 32; c < 127; ++c) pieces.push_back(std::string(1, char(c)));
  for (const char* s : {"yes", "no", ", ", "12", "ab", "zz"}) pieces.push_back(s);
  pieces.push_back("");  // end
  const int32_t end = int32_t(pieces.size() - 1);
  auto index = std::make_shared<const grammar::TokenIndex>(grammar::build_token_index(pieces, {end}));
  auto g = std::make_shared<const grammar::Grammar>(
      grammar::parse_gbnf(R"(root ::= ("yes" | "no") ", " [0-9]{1,3} " " [a-z]{2,5} ".")"));
  std::mt19937 rng(3);
  for (float temp : {0.0f, 0.7f, 1.5f}) {
    for (int trial = 0; trial < 10; ++trial) {
      llm::SamplerParams p{.temperature = temp, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = uint64_t(trial)};
      p.grammar = g;
      llm::Sampler s = llm::make_sampler(p);
      s.constraint = std::make_shared<grammar::Constraint>(grammar::Constraint{grammar::make_matcher(g), index, {}});
      ASSERT_TRUE(llm::needs_all_logits(p));
      std::string out;
      bool ended = false;
      for (int step = 0; step < 40 && !ended; ++step) {
        std::vector<llm::Candidate> cands(pieces.size());
        std::normal_distribution<float> logit(0, 3);
        for (size_t i = 0; i < cands.size(); ++i) cands[i] = {int32_t(i), logit(rng)};
        const int32_t id = llm::sample(s, cands);
        if (id == end) ended = true;
        else out += pieces[size_t(id)];
      }
      EXPECT_TRUE(ended) << out;
      EXPECT_TRUE(std::regex_match(out, std::regex("(yes|no), [0-9]{1,3} [a-z]{2,5}\\."))) << out;
    }
  }
}

TEST(SamplerGrammar, NoConstraintAttachedIsALogicError) {
  llm::SamplerParams p;
  p.grammar = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf("root ::= \"a\""));
  llm::Sampler s = llm::make_sampler(p);
  std::vector<llm::Candidate> c{{0, 1.0f}};
  EXPECT_THROW(llm::sample(s, c), std::logic_error);
}
