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
  t.subtree_end.resize(t.nodes.size());
  t.subtree_bytes.resize(t.nodes.size(), {0, 0, 0, 0});
  for (size_t k = 0; k < groups.size(); ++k) {
    const uint8_t b = uint8_t(p[size_t(sorted[groups[k].first])][depth]);
    t.nodes[first + k].byte = b;
    t.subtree_bytes[first + k][b / 64] |= uint64_t(1) << (b % 64);
    build_node(t, sorted, groups[k].first, groups[k].second, depth + 1, uint32_t(first + k));
    for (int w = 0; w < 4; ++w) t.subtree_bytes[at][size_t(w)] |= t.subtree_bytes[first + k][size_t(w)];
  }
  t.subtree_end[at] = uint32_t(t.ids.size());
}

int32_t intern(StateCache& c, const MatchState& st) {
  auto [it, fresh] = c.ids.try_emplace(st, int32_t(c.states.size()));
  if (fresh) {
    c.states.push_back(st);
    std::array<int32_t, 256> unknown;
    unknown.fill(-2);
    c.next.push_back(unknown);
    c.loops.push_back({0, 0, 0, 0});
    c.loops_known.push_back(false);
  }
  return it->second;
}

struct Walk {
  Constraint& c;
  std::span<uint32_t> words;
  MatchState scratch;
  int32_t next(int32_t sid, uint8_t b) {
    int32_t n = c.cache.next[size_t(sid)][b];
    if (n != -2) return n;
    const MatchState from = c.cache.states[size_t(sid)];
    step_byte(c.m, from, b, scratch);
    n = is_dead(scratch) ? -1 : intern(c.cache, scratch);
    c.cache.next[size_t(sid)][b] = n;
    return n;
  }
  // The bytes that leave state `sid` unchanged (string content, for one).
  const std::array<uint64_t, 4>& loops(int32_t sid) {
    if (!c.cache.loops_known[size_t(sid)]) {
      std::array<uint64_t, 4> l{0, 0, 0, 0};
      for (int b = 0; b < 256; ++b)
        if (next(sid, uint8_t(b)) == sid) l[size_t(b / 64)] |= uint64_t(1) << (b % 64);
      c.cache.loops[size_t(sid)] = l;
      c.cache.loops_known[size_t(sid)] = true;
    }
    return c.cache.loops[size_t(sid)];
  }
  void visit(uint32_t node, int32_t sid) {
    const TokenIndex& t = *c.index;
    const TokenIndex::Node n = t.nodes[node];
    // Worth its 256 transitions only where many subtrees hang (near the root).
    static constexpr std::array<uint64_t, 4> kNone{0, 0, 0, 0};
    const std::array<uint64_t, 4> loop = n.child_end - n.child_begin >= 32 ? loops(sid) : kNone;
    for (uint32_t ch = n.child_begin; ch < n.child_end; ++ch) {
      const auto& sub = t.subtree_bytes[ch];
      if ((loop[0] | loop[1] | loop[2] | loop[3]) != 0 && (sub[0] & ~loop[0]) == 0 && (sub[1] & ~loop[1]) == 0 && (sub[2] & ~loop[2]) == 0 && (sub[3] & ~loop[3]) == 0) {
        // Every byte below keeps the state: every token of the subtree is allowed.
        for (uint32_t k = t.nodes[ch].tok_begin; k < t.subtree_end[ch]; ++k) {
          const uint32_t id = uint32_t(t.ids[k]);
          words[id / 32] |= 1u << (id % 32);
        }
        continue;
      }
      const int32_t nx = next(sid, t.nodes[ch].byte);
      if (nx < 0) continue;
      for (uint32_t k = t.nodes[ch].tok_begin; k < t.nodes[ch].tok_end; ++k) {
        const uint32_t id = uint32_t(t.ids[k]);
        words[id / 32] |= 1u << (id % 32);
      }
      visit(ch, nx);
    }
  }
};

}  // namespace

size_t StateCache::Hash::operator()(const MatchState& s) const {
  size_t h = std::hash<uint64_t>()((uint64_t(s.partial) << 8) | s.need);
  for (int32_t id : s.stacks) h = h * 1000003u ^ std::hash<int32_t>()(id);
  return h;
}

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
  t.subtree_end.resize(1);
  t.subtree_bytes.resize(1, {0, 0, 0, 0});
  build_node(t, sorted, 0, sorted.size(), 0, 0);
  return t;
}

void allowed_mask(Constraint& c, std::span<uint32_t> words) {
  const TokenIndex& t = *c.index;
  if (words.size() < mask_words(t.n_vocab()))
    throw std::invalid_argument(fmt::format("allowed_mask: {} words for {} tokens", words.size(), t.n_vocab()));
  std::fill(words.begin(), words.end(), 0u);
  collect_garbage(c.m);
  // Stack ids are renumbered by a collection; a cache past its size starts afresh.
  if (c.m.arena.nodes.size() < c.cache.arena_nodes || c.cache.states.size() > 50000) c.cache = {};
  Walk w{c, words, {}};
  const int32_t root = intern(c.cache, c.m.state);
  w.visit(0, root);
  c.cache.arena_nodes = c.m.arena.nodes.size();
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

