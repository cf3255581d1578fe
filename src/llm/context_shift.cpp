#include "llm/context_shift.h"

#include <algorithm>
#include <map>

namespace wgrt::llm {

using nlohmann::ordered_json;

namespace {

bool is_system(const ordered_json& m) {
  const std::string role = m.is_object() ? m.value("role", "") : "";
  return role == "system" || role == "developer";
}

bool is_user(const ordered_json& m) { return m.is_object() && m.value("role", "") == "user"; }

}  // namespace

std::vector<std::pair<size_t, size_t>> droppable_turns(const ordered_json& messages) {
  std::vector<std::pair<size_t, size_t>> turns;
  size_t first = 0;
  while (first < messages.size() && is_system(messages[first])) ++first;
  for (size_t i = first + 1; i < messages.size(); ++i)
    if (is_user(messages[i])) {
      turns.emplace_back(first, i);
      first = i;
    }
  return turns;  // [first, size) is the last turn: it stays
}

ordered_json drop_turns(const ordered_json& messages, size_t n) {
  const std::vector<std::pair<size_t, size_t>> turns = droppable_turns(messages);
  if (n == 0 || turns.empty()) return messages;
  n = std::min(n, turns.size());
  const size_t from = turns.front().first, to = turns[n - 1].second;
  ordered_json kept = ordered_json::array();
  for (size_t i = 0; i < messages.size(); ++i)
    if (i < from || i >= to) kept.push_back(messages[i]);
  return kept;
}

size_t reply_room(uint32_t n_ctx, int32_t max_tokens) {
  if (max_tokens >= 1) return std::clamp<size_t>(size_t(max_tokens), 1, std::max<size_t>(n_ctx / 2, 1));
  return std::max<size_t>(n_ctx / 4, 1);
}

std::optional<FittedChat> fit_chat(const ordered_json& messages, uint32_t n_ctx, size_t room,
                                   const std::function<std::vector<int32_t>(const ordered_json&)>& tokens_of) {
  const size_t n_turns = droppable_turns(messages).size();
  std::map<size_t, std::vector<int32_t>> probes;  // turns dropped -> the prompt
  auto prompt = [&](size_t k) -> const std::vector<int32_t>& {
    auto it = probes.find(k);
    if (it == probes.end()) it = probes.emplace(k, tokens_of(drop_turns(messages, k))).first;
    return it->second;
  };
  auto fits = [&](size_t k, size_t r) { return prompt(k).size() + r <= n_ctx; };
  // The fewest drops that leave room `r`, if any (dropping more never lengthens the prompt).
  auto fewest = [&](size_t r) -> std::optional<size_t> {
    if (fits(0, r)) return 0;
    if (!fits(n_turns, r)) return std::nullopt;
    size_t lo = 0, hi = n_turns;  // !fits(lo), fits(hi)
    while (hi - lo > 1) {
      const size_t mid = lo + (hi - lo) / 2;
      (fits(mid, r) ? hi : lo) = mid;
    }
    return hi;
  };
  std::optional<size_t> k = fewest(room);
  if (!k) k = fewest(1);
  if (!k) return std::nullopt;
  FittedChat f;
  f.messages = drop_turns(messages, *k);
  f.tokens = prompt(*k);
  f.dropped_turns = *k;
  f.dropped_messages = messages.size() - f.messages.size();
  const size_t whole = prompt(0).size();
  f.dropped_tokens = whole > f.tokens.size() ? whole - f.tokens.size() : 0;
  return f;
}

}  // namespace wgrt::llm
