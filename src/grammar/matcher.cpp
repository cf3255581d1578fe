#include "grammar/matcher.h"

#include <algorithm>

namespace wgrt::grammar {

namespace {

constexpr uint32_t kMinCodePoint[5] = {0, 0, 0x80, 0x800, 0x10000};  // by sequence length

int32_t push(StackArena& a, uint32_t pos, int32_t parent) {
  const uint64_t key = (uint64_t(pos) << 32) | uint32_t(parent);
  auto [it, fresh] = a.intern.try_emplace(key, int32_t(a.nodes.size()));
  if (fresh) a.nodes.push_back({pos, parent, parent < 0 ? 1u : a.nodes[size_t(parent)].depth + 1});
  return it->second;
}

// Expands a stack until its top is a Chars element (or it is empty), into `out`.
void expand(const Grammar& g, StackArena& a, int32_t id, std::vector<int32_t>& out) {
  while (true) {
    if (id < 0) {
      out.push_back(-1);
      return;
    }
    const StackArena::Node n = a.nodes[size_t(id)];
    if (n.depth > kMaxStackDepth) return;
    const Element& e = g.elems[n.pos];
    if (e.kind == Element::Chars) {
      out.push_back(id);
      return;
    }
    if (e.kind == Element::End) {
      id = n.parent;
      continue;
    }
    // A reference: resume after it (a tail reference resumes at the parent), under each alternative.
    const int32_t rest = g.elems[n.pos + 1].kind == Element::End ? n.parent : push(a, n.pos + 1, n.parent);
    const auto [b, en] = g.rule_alts[e.a];
    for (uint32_t k = b; k < en; ++k) expand(g, a, push(a, g.alt_starts[k], rest), out);
    return;
  }
}

void normalize(std::vector<int32_t>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  if (v.size() > kMaxStacks) v.resize(kMaxStacks);
}

const std::vector<int32_t>& advance(Matcher& m, int32_t id, uint32_t cp) {
  const uint64_t key = (uint64_t(uint32_t(id)) << 32) | cp;
  auto it = m.arena.advanced.find(key);
  if (it != m.arena.advanced.end()) return it->second;
  std::vector<int32_t> out;
  const StackArena::Node n = m.arena.nodes[size_t(id)];
  if (chars_match(*m.g, m.g->elems[n.pos], cp)) expand(*m.g, m.arena, push(m.arena, n.pos + 1, n.parent), out);
  normalize(out);
  return m.arena.advanced.emplace(key, std::move(out)).first->second;
}

}  // namespace

Matcher make_matcher(std::shared_ptr<const Grammar> g) {
  Matcher m{std::move(g), {}, {}};
  const Grammar& gr = *m.g;
  const auto [b, e] = gr.rule_alts[gr.root];
  for (uint32_t k = b; k < e; ++k) expand(gr, m.arena, push(m.arena, gr.alt_starts[k], -1), m.state.stacks);
  normalize(m.state.stacks);
  return m;
}

bool is_complete(const MatchState& s) { return s.need == 0 && !s.stacks.empty() && s.stacks.front() == -1; }

void step_byte(Matcher& m, const MatchState& from, uint8_t b, MatchState& to) {
  to.stacks.clear();
  uint32_t cp = 0;
  if (from.need == 0) {
    if (b < 0x80) {
      cp = b;
    } else {
      const int need = b >= 0xC2 && b <= 0xDF ? 1 : b >= 0xE0 && b <= 0xEF ? 2 : b >= 0xF0 && b <= 0xF4 ? 3 : 0;
      if (need == 0) return;  // not a UTF-8 lead byte
      to.need = uint8_t(need);
      to.len = uint8_t(need + 1);
      to.partial = b & (0x3Fu >> need);
    }
  } else {
    if ((b & 0xC0) != 0x80) return;
    to.need = uint8_t(from.need - 1);
    to.len = from.len;
    to.partial = (from.partial << 6) | (b & 0x3Fu);
  }
  if (from.need == 0 && b < 0x80) {
    to.need = 0;
  } else if (to.need > 0) {
    // Mid code point: keep the stacks that some completion of it could advance.
    // Only shortest forms of scalar values count: an overlong or surrogate or past-U+10FFFF
    // sequence is dead as soon as its bytes say so.
    const uint32_t shift = 6u * to.need;
    const uint32_t lo = std::max(to.partial << shift, kMinCodePoint[to.len]);
    const uint32_t hi = std::min((to.partial << shift) | ((1u << shift) - 1), 0x10FFFFu);
    if (lo > hi || (lo >= 0xD800 && hi <= 0xDFFF)) return;
    for (int32_t id : from.stacks)
      if (id >= 0 && chars_match_any(*m.g, m.g->elems[m.arena.nodes[size_t(id)].pos], lo, hi)) to.stacks.push_back(id);
    return;
  } else {
    cp = to.partial;
    if (cp < kMinCodePoint[to.len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return;
  }
  to.partial = 0;
  for (int32_t id : from.stacks) {
    if (id < 0) continue;
    const std::vector<int32_t>& nx = advance(m, id, cp);
    to.stacks.insert(to.stacks.end(), nx.begin(), nx.end());
  }
  normalize(to.stacks);
}

bool accept_bytes(Matcher& m, std::string_view bytes) {
  MatchState cur = m.state, nx;
  for (char c : bytes) {
    step_byte(m, cur, uint8_t(c), nx);
    if (is_dead(nx)) return false;
    std::swap(cur, nx);
  }
  m.state = std::move(cur);
  return true;
}

void collect_garbage(Matcher& m, size_t max_nodes) {
  if (m.arena.nodes.size() <= max_nodes) return;
  StackArena fresh;
  const std::vector<StackArena::Node>& old = m.arena.nodes;
  std::vector<int32_t> map(old.size(), -2);
  const auto copy = [&](auto&& self, int32_t id) -> int32_t {
    if (id < 0) return -1;
    if (map[size_t(id)] != -2) return map[size_t(id)];
    const int32_t parent = self(self, old[size_t(id)].parent);
    return map[size_t(id)] = push(fresh, old[size_t(id)].pos, parent);
  };
  for (int32_t& id : m.state.stacks) id = copy(copy, id);
  normalize(m.state.stacks);
  m.arena = std::move(fresh);
}

}  // namespace wgrt::grammar
