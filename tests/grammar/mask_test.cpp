// The allowed-token mask (a trie walk) against a brute-force reference: each token's bytes fed
// to a fresh copy of the matcher, on random grammars and random vocabularies.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/gbnf.h"
#include "grammar/token_index.h"

using namespace wgrt::grammar;

namespace {

const std::vector<std::string> kUnits = {"a", "b", "c", "x", "é", "€", "\xE2", "\x82\xAC", " "};

std::string random_grammar(std::mt19937& rng) {
  auto r = [&](int n) { return int(rng() % uint32_t(n)); };
  const int n_rules = 1 + r(4);
  std::string g;
  for (int i = 0; i < n_rules; ++i) {
    g += (i == 0 ? std::string("root") : fmt::format("r{}", i)) + " ::= ";
    const int n_alts = 1 + r(3);
    for (int a = 0; a < n_alts; ++a) {
      if (a) g += " | ";
      const int n_items = r(4);
      bool consumed = false;
      for (int k = 0; k < n_items; ++k) {
        std::string item;
        switch (r(4)) {
          case 0: item = "\"" + kUnits[size_t(r(6))] + (r(2) ? kUnits[size_t(r(6))] : "") + "\""; break;
          case 1: item = r(3) == 0 ? "[a-c€]" : r(2) ? "[^b]" : "[!-Z]"; break;
          case 2: {
            // Refs to later rules anywhere; to any rule only after a byte was consumed.
            int to = consumed ? r(n_rules) : i + 1 + r(std::max(1, n_rules - i - 1));
            item = to >= n_rules ? "\"x\"" : (to == 0 ? std::string("root") : fmt::format("r{}", to));
            break;
          }
          default: item = "(\"a\" | \"é\" \"b\")"; break;
        }
        const char* ops[] = {"", "", "*", "+", "?", "{1,2}", "{0,3}"};
        item += ops[r(7)];
        g += " " + item;
        consumed = true;
      }
      if (n_items == 0) g += "\"\"";
    }
    g += "\n";
  }
  return g;
}

TokenIndex random_vocab(std::mt19937& rng, size_t n) {
  std::vector<std::string> pieces(n);
  for (size_t i = 0; i < n; ++i) {
    if (i % 17 == 5) continue;  // a control token: no bytes
    if (i % 5 == 1) {
      // ASCII runs, so the root has many children (the walk's whole-subtree shortcut runs there).
      const size_t len = 1 + rng() % 3;
      for (size_t k = 0; k < len; ++k) pieces[i] += char('!' + rng() % 64);
      continue;
    }
    const size_t len = 1 + rng() % 4;
    for (size_t k = 0; k < len; ++k) pieces[i] += kUnits[rng() % kUnits.size()];
  }
  return build_token_index(std::move(pieces), {int32_t(n - 1)});
}

// The mask as one token at a time would see it: each token's bytes fed to the matcher from the
// step's state (restored after each; the arena only grows, shared stacks stay valid).
std::vector<bool> brute_mask(Constraint& c) {
  const TokenIndex& t = *c.index;
  std::vector<bool> m(t.n_vocab());
  const MatchState saved = c.m.state;
  for (size_t i = 0; i < m.size(); ++i) {
    if (std::find(t.end_ids.begin(), t.end_ids.end(), int32_t(i)) != t.end_ids.end()) {
      m[i] = is_complete(saved);
    } else {
      m[i] = !t.pieces[i].empty() && accept_bytes(c.m, t.pieces[i]);
      c.m.state = saved;
    }
  }
  return m;
}

}  // namespace

TEST(GrammarMask, TrieWalkEqualsBruteForceOnRandomGrammars) {
  std::mt19937 rng(1234);
  size_t n_grammars = 0, n_steps = 0, n_allowed = 0;
  for (int trial = 0; trial < 80; ++trial) {
    const std::string text = random_grammar(rng);
    std::shared_ptr<const Grammar> g;
    try {
      g = std::make_shared<const Grammar>(parse_gbnf(text));
    } catch (const GrammarError&) {
      continue;  // a random grammar may be left-recursive through an empty rule
    }
    ++n_grammars;
    auto index = std::make_shared<const TokenIndex>(random_vocab(rng, 200 + rng() % 100));
    Constraint c{make_matcher(g), index};
    for (int step = 0; step < 12; ++step) {
      std::vector<uint32_t> words(mask_words(index->n_vocab()));
      allowed_mask(c, words);
      const std::vector<bool> want = brute_mask(c);
      std::vector<int32_t> allowed;
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_EQ(mask_bit(words, i), want[i]) << "token " << i << " '" << index->pieces[i] << "' at step " << step
                                               << " of\n" << text;
        if (want[i]) allowed.push_back(int32_t(i));
      }
      ++n_steps;
      n_allowed += allowed.size();
      if (allowed.empty()) break;
      const int32_t pick = allowed[rng() % allowed.size()];
      ASSERT_TRUE(accept_token(c, pick));
      if (pick == int32_t(index->n_vocab() - 1)) break;
    }
  }
  EXPECT_GT(n_grammars, 30u);
  EXPECT_GT(n_allowed, n_steps);  // the walks were not all dead ends
}

TEST(GrammarMask, EndTokenOnlyWhereComplete) {
  auto g = std::make_shared<const Grammar>(parse_gbnf("root ::= \"ab\" \"c\"?"));
  auto index = std::make_shared<const TokenIndex>(build_token_index({"a", "b", "c", "ab", "abc", ""}, {5}));
  Constraint c{make_matcher(g), index};
  std::vector<uint32_t> w(1);
  allowed_mask(c, w);
  EXPECT_EQ(w[0], 0b11001u);  // a, ab, abc
  ASSERT_TRUE(accept_token(c, 3));
  allowed_mask(c, w);
  EXPECT_EQ(w[0], 0b100100u);  // c or the end
  EXPECT_FALSE(accept_token(c, 0));
}
