#include "grammar/token_index.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace wgrt::grammar {

namespace {

// Fills node `at` for the tokens sorted[lo, hi) that share a prefix of `depth` bytes.
void build_node(TokenIndex& t, const std::vector<int32_t>& sorted, size_t lo, size_t hi, size_t depth, uint32_t at) {
  const auto& p = t.pieces;
  size_t i = lo;
  t.nodes[at].tok_begin = uint32_t(t.ids.size());
  while (i < hi && p[size_t(sorted[i])].size() == depth) t.ids.push_back(sorted[i++]);
  t.nodes[at].tok_end = uint32_t(t.ids.size());
  std::vector<std::pair<size_t, size_t>> groups;
  while (i < hi) {
    const uint8_t b = uint8_t(p[size_t(sorted[i])][depth]);
    size_t j = i;
    while (j < hi && uint8_t(p[size_t(sorted[j])][depth]) == b) ++j;
    groups.emplace_back(i, j);
    i = j;
  }
  const uint32_t first = uint32_t(t.nodes.size());
  t.nodes[at].child_begin = first;
  t.nodes[at].child_end = first + uint32_t(groups.size());
  t.nodes.resize(t.nodes.size() + groups.size());
  for (size_t k = 0; k < groups.size(); ++k) {
    t.nodes[first + k].byte = uint8_t(p[size_t(sorted[groups[k].first])][depth]);
    build_node(t, sorted, groups[k].first, groups[k].second, depth + 1, uint32_t(first + k));
  }
}

struct Walk {
  Constraint& c;
  std::span<uint32_t> words;
  std::vector<MatchState> states;  // one per depth, reused
  void visit(uint32_t node, size_t depth) {
    const TokenIndex& t = *c.index;
    const TokenIndex::Node n = t.nodes[node];
    if (states.size() <= depth + 1) states.resize(depth + 2);
    for (uint32_t ch = n.child_begin; ch < n.child_end; ++ch) {
      step_byte(c.m, states[depth], t.nodes[ch].byte, states[depth + 1]);
      if (is_dead(states[depth + 1])) continue;
      for (uint32_t k = t.nodes[ch].tok_begin; k < t.nodes[ch].tok_end; ++k) {
        const uint32_t id = uint32_t(t.ids[k]);
        words[id / 32] |= 1u << (id % 32);
      }
      visit(ch, depth + 1);
    }
  }
};

}  // namespace

TokenIndex build_token_index(std::vector<std::string> pieces, std::vector<int32_t> end_ids) {
  TokenIndex t;
  t.pieces = std::move(pieces);
  t.end_ids = std::move(end_ids);
  std::vector<int32_t> sorted;
  for (size_t i = 0; i < t.pieces.size(); ++i)
    if (!t.pieces[i].empty() && std::find(t.end_ids.begin(), t.end_ids.end(), int32_t(i)) == t.end_ids.end())
      sorted.push_back(int32_t(i));
  std::sort(sorted.begin(), sorted.end(), [&](int32_t a, int32_t b) { return t.pieces[size_t(a)] < t.pieces[size_t(b)]; });
  t.nodes.resize(1);
  build_node(t, sorted, 0, sorted.size(), 0, 0);
  return t;
}

void allowed_mask(Constraint& c, std::span<uint32_t> words) {
  const TokenIndex& t = *c.index;
  if (words.size() < mask_words(t.n_vocab()))
    throw std::invalid_argument(fmt::format("allowed_mask: {} words for {} tokens", words.size(), t.n_vocab()));
  std::fill(words.begin(), words.end(), 0u);
  collect_garbage(c.m);
  Walk w{c, words, {c.m.state}};
  w.visit(0, 0);
  if (is_complete(c.m.state))
    for (int32_t id : t.end_ids)
      if (id >= 0 && size_t(id) < t.n_vocab()) words[size_t(id) / 32] |= 1u << (uint32_t(id) % 32);
}

bool accept_token(Constraint& c, int32_t id) {
  const TokenIndex& t = *c.index;
  if (id < 0 || size_t(id) >= t.n_vocab()) return false;
  if (std::find(t.end_ids.begin(), t.end_ids.end(), id) != t.end_ids.end()) return is_complete(c.m.state);
  const std::string& p = t.pieces[size_t(id)];
  return !p.empty() && accept_bytes(c.m, p);
}

}  // namespace wgrt::grammar

