// GBNF grammars: the text format (rules `name ::= alternatives`, "literals", [classes],
// [^negated], `.`, ( groups ), * + ? {m,n}, # comments, a `root` rule) parsed into a flat form
// the matcher walks.
//
// Flat form: every alternative of every rule is a run of elements in `elems`, ended by an End
// element; a position in a parse is an index into `elems`. Groups and repetitions become
// generated rules (X* is R ::= X R | empty), so the matcher only sees Chars, Ref and End.
// Text comes from requests: sizes, nesting and repetition counts are bounded, and an error
// names the line and column and what was expected.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace wgrt::grammar {

struct GrammarError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

struct Element {
  enum Kind : uint8_t { End, Chars, Ref };
  Kind kind = End;
  bool negated = false;  // Chars: matches a code point in none of its ranges
  uint32_t a = 0;        // Chars: first range in Grammar::ranges; Ref: rule id
  uint32_t n = 0;        // Chars: number of ranges
};

struct Grammar {
  std::vector<Element> elems;                            // alternatives, each ended by End
  std::vector<uint32_t> alt_starts;                      // position of each alternative's first element
  std::vector<std::pair<uint32_t, uint32_t>> rule_alts;  // [rule] → range of alt_starts
  std::vector<std::pair<uint32_t, uint32_t>> ranges;     // code point ranges [lo, hi] of Chars elements
  std::vector<std::string> rule_names;                   // [rule], generated rules as name_N
  uint32_t root = 0;
};

struct GbnfLimits {
  size_t max_text = 256 * 1024;    // bytes of grammar text
  size_t max_elements = 200000;    // flat elements after expanding repetitions
  uint32_t max_depth = 64;         // nested groups
  uint32_t max_repeat = 10000;     // m and n of {m,n}
};

// Parses GBNF text; the start rule is `root`. Throws GrammarError "grammar line L column C: ...".
Grammar parse_gbnf(std::string_view text, const GbnfLimits& limits = {});

// Whether Chars element `e` matches code point `cp`.
bool chars_match(const Grammar& g, const Element& e, uint32_t cp);
// Whether it matches some code point in [lo, hi].
bool chars_match_any(const Grammar& g, const Element& e, uint32_t lo, uint32_t hi);

}  // namespace wgrt::grammar
