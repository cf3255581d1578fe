// The vocabulary pre-indexed for constrained sampling, once per model: each token's bytes and a
// byte trie over all of them. A step's allowed-token mask walks the trie with the matcher's
// state, so a prefix no stack can take cuts off every token under it at once.
#pragma once

#include <array>
#include <cstdint>
#include <unordered_map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "grammar/matcher.h"

namespace wgrt::grammar {

struct TokenIndex {
  struct Node {
    uint32_t child_begin = 0, child_end = 0;  // children are contiguous in `nodes`
    uint32_t tok_begin = 0, tok_end = 0;      // tokens ending here, in `ids`
    uint8_t byte = 0;                         // the edge into this node
  };
  std::vector<Node> nodes;  // [0]: the root (the empty prefix)
  std::vector<int32_t> ids;  // depth-first: a subtree's tokens are ids[tok_begin, subtree_end)
  std::vector<uint32_t> subtree_end;  // [node]
  // [node]: the bytes on the edges of its subtree, its own edge's included (4 words of 64 bits).
  std::vector<std::array<uint64_t, 4>> subtree_bytes;
  std::vector<std::string> pieces;  // [n_vocab] bytes; empty for control tokens
  std::vector<int32_t> end_ids;     // allowed only where the grammar is complete (EOS, EOT)
  size_t n_vocab() const { return pieces.size(); }
};

TokenIndex build_token_index(std::vector<std::string> pieces, std::vector<int32_t> end_ids);

// Matcher states met by mask walks, interned, with their transitions by byte filled in as
// they are taken (-2 not yet, -1 dead): a trie node then costs one table lookup, and string
// content, where most tokens are allowed, walks the trie at memory speed.
struct StateCache {
  struct Hash {
    size_t operator()(const MatchState& s) const;
  };
  std::unordered_map<MatchState, int32_t, Hash> ids;
  std::vector<MatchState> states;
  std::vector<std::array<int32_t, 256>> next;
  std::vector<std::array<uint64_t, 4>> loops;  // [state] the bytes that lead back to it (filled on first need)
  std::vector<bool> loops_known;
  size_t arena_nodes = 0;  // the arena's size when filled: a collection renumbers stacks
};

// A grammar attached to one sequence: its matcher and the model's token index.
struct Constraint {
  Matcher m;
  std::shared_ptr<const TokenIndex> index;
  StateCache cache;
};

// Bit i of `words` (n_vocab bits, u32 words, low bit first) set when token i may come next.
void allowed_mask(Constraint& c, std::span<uint32_t> words);
// Advances by a token; false (state unchanged) when the grammar does not allow it. End tokens
// are allowed where the grammar is complete and leave the state alone.
bool accept_token(Constraint& c, int32_t id);
inline size_t mask_words(size_t n_vocab) { return (n_vocab + 31) / 32; }
inline bool mask_bit(std::span<const uint32_t> w, size_t i) { return (w[i / 32] >> (i % 32)) & 1u; }

}  // namespace wgrt::grammar

namespace wgrt::tokenizer {
struct Tokenizer;
}

namespace wgrt::grammar {
// The index of a tokenizer's vocabulary: each token's bytes as decoded text gives them
// (control and unknown tokens have none), EOS and EOT as end tokens.
TokenIndex build_token_index(const tokenizer::Tokenizer& tok);
}  // namespace wgrt::grammar
