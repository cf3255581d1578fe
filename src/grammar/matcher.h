// Matching bytes against a grammar: a set of parse stacks advanced one byte at a time.
//
// A stack is a list of positions (indices into Grammar::elems): the top is the next element to
// match and always a Chars element; those below are where to resume once a rule ends. Stacks
// are hash-consed in an arena (equal stacks have equal ids, -1 is the empty stack: the grammar
// is complete there), so a set of stacks is a sorted vector of ids and advancing a stack by a
// code point is memoized. Bytes build UTF-8 code points; a partial one prunes stacks whose top
// cannot match any code point it may still become.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "grammar/gbnf.h"

namespace wgrt::grammar {

struct MatchState {
  std::vector<int32_t> stacks;  // sorted, distinct; -1: complete
  uint32_t partial = 0;         // bits of a UTF-8 code point under way
  uint8_t need = 0;             // its continuation bytes still to come
  uint8_t len = 0;              // its length in bytes (2 to 4), for the shortest-form check
  bool operator==(const MatchState&) const = default;
};

struct StackArena {
  struct Node {
    uint32_t pos;
    int32_t parent;
    uint32_t depth;
  };
  std::vector<Node> nodes;
  std::unordered_map<uint64_t, int32_t> intern;                 // (pos, parent) → id
  std::unordered_map<uint64_t, std::vector<int32_t>> advanced;  // (stack, code point) → stacks
};

struct Matcher {
  std::shared_ptr<const Grammar> g;
  StackArena arena;
  MatchState state;
};

inline constexpr uint32_t kMaxStackDepth = 2048;  // deeper nesting is not matched
inline constexpr size_t kMaxStacks = 4096;        // ambiguity past this is cut

Matcher make_matcher(std::shared_ptr<const Grammar> g);
// The state after byte `b`; its stacks are empty when the byte cannot be matched.
void step_byte(Matcher& m, const MatchState& from, uint8_t b, MatchState& to);
inline bool is_dead(const MatchState& s) { return s.stacks.empty(); }
bool is_complete(const MatchState& s);
// Advances the matcher's own state by `bytes`; false (state unchanged) when they do not match.
bool accept_bytes(Matcher& m, std::string_view bytes);
// Rebuilds the arena with only the current state's stacks once it grows past `max_nodes`.
void collect_garbage(Matcher& m, size_t max_nodes = 1 << 20);

}  // namespace wgrt::grammar
