#include "grammar/gbnf.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>

namespace wgrt::grammar {

namespace {

using Seq = std::vector<Element>;
using Alts = std::vector<Seq>;

struct Parser {
  Parser(std::string_view t, const GbnfLimits& l) : text(t), lim(l) {}
  std::string_view text;
  const GbnfLimits& lim;
  size_t pos = 0;
  std::vector<Alts> rules;
  std::vector<std::string> names;
  std::vector<bool> defined;
  std::vector<size_t> first_use;  // where an undefined rule was first named
  std::map<std::string, uint32_t, std::less<>> ids;
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  size_t n_elements = 0;

  [[noreturn]] void fail(size_t at, std::string_view what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < text.size(); ++i) {
      if (text[i] == '\n') ++line, col = 1;
      else ++col;
    }
    throw GrammarError(fmt::format("grammar line {} column {}: {}", line, col, what));
  }
  bool eof() const { return pos >= text.size(); }
  char peek(size_t k = 0) const { return pos + k < text.size() ? text[pos + k] : '\0'; }

  void skip_space() {
    while (!eof()) {
      char c = peek();
      if (c == '#') {
        while (!eof() && peek() != '\n') ++pos;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos;
      } else {
        break;
      }
    }
  }
  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }
  std::string_view parse_name() {
    size_t b = pos;
    while (!eof() && name_char(peek())) ++pos;
    if (b == pos) fail(b, "expected a rule name");
    return text.substr(b, pos - b);
  }
  // Whether `name ::=` starts here (the next rule; newlines do not end a rule by themselves).
  bool at_rule_start() const {
    size_t p = pos;
    while (p < text.size() && name_char(text[p])) ++p;
    if (p == pos) return false;
    while (p < text.size() && (text[p] == ' ' || text[p] == '\t' || text[p] == '\n' || text[p] == '\r')) ++p;
    return text.substr(p, 3) == "::=";
  }
  uint32_t rule_id(std::string_view name, size_t at) {
    auto it = ids.find(name);
    if (it != ids.end()) return it->second;
    if (rules.size() >= lim.max_elements) fail(at, "too many rules");
    uint32_t id = uint32_t(rules.size());
    ids.emplace(std::string(name), id);
    rules.emplace_back();
    names.emplace_back(name);
    defined.push_back(false);
    first_use.push_back(at);
    return id;
  }
  uint32_t new_rule(std::string_view base, Alts alts) {
    uint32_t id = uint32_t(rules.size());
    std::string name = fmt::format("{}_{}", base, id);
    ids.emplace(name, id);
    rules.push_back(std::move(alts));
    names.push_back(std::move(name));
    defined.push_back(true);
    first_use.push_back(0);
    return id;
  }
  void count(size_t n, size_t at) {
    n_elements += n;
    if (n_elements > lim.max_elements)
      fail(at, fmt::format("the grammar expands past {} elements (hint: smaller repetition counts)", lim.max_elements));
  }

  static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  // One code point of a literal or class, escapes decoded; UTF-8 text decoded.
  uint32_t parse_char() {
    size_t at = pos;
    if (eof()) fail(at, "unexpected end of grammar inside a literal or class");
    unsigned char c = uint8_t(peek());
    if (c == '\\') {
      ++pos;
      char e = peek();
      ++pos;
      switch (e) {
        case 'n': return '\n';
        case 't': return '\t';
        case 'r': return '\r';
        case '\\': return '\\';
        case '"': return '"';
        case '\'': return '\'';
        case '[': return '[';
        case ']': return ']';
        case '-': return '-';
        case '^': return '^';
        case 'x': case 'u': case 'U': {
          int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t v = 0;
          for (int i = 0; i < n; ++i) {
            int h = hex_value(peek());
            if (h < 0) fail(pos, fmt::format("expected {} hex digits after \\{}", n, e));
            v = v * 16 + uint32_t(h);
            ++pos;
          }
          if (v > 0x10FFFF) fail(at, "escape past U+10FFFF");
          return v;
        }
        default: fail(at, "unknown escape (hint: \\n \\t \\r \\\\ \\\" \\[ \\] \\xHH \\uHHHH \\UHHHHHHHH)");
      }
    }
    ++pos;
    if (c < 0x80) return c;
    int need = c >= 0xF0 && c <= 0xF4 ? 3 : c >= 0xE0 ? 2 : c >= 0xC2 && c < 0xE0 ? 1 : -1;
    if (need < 0 || c > 0xF4) fail(at, "invalid UTF-8 in the grammar");
    uint32_t v = c & (0x3F >> need);
    for (int i = 0; i < need; ++i) {
      unsigned char d = uint8_t(peek());
      if ((d & 0xC0) != 0x80) fail(pos, "invalid UTF-8 in the grammar");
      v = (v << 6) | (d & 0x3F);
      ++pos;
    }
    return v;
  }
  Element chars(std::vector<std::pair<uint32_t, uint32_t>> r, bool negated) {
    Element e{Element::Chars, negated, uint32_t(ranges.size()), uint32_t(r.size())};
    ranges.insert(ranges.end(), r.begin(), r.end());
    return e;
  }
  Seq parse_literal() {
    size_t at = pos;
    ++pos;  // "
    Seq s;
    while (true) {
      if (eof()) fail(at, "unterminated string literal (expected '\"')");
      if (peek() == '"') break;
      uint32_t cp = parse_char();
      s.push_back(chars({{cp, cp}}, false));
    }
    ++pos;
    return s;
  }
  Seq parse_class() {
    size_t at = pos;
    ++pos;  // [
    bool neg = false;
    if (peek() == '^') neg = true, ++pos;
    std::vector<std::pair<uint32_t, uint32_t>> r;
    while (true) {
      if (eof()) fail(at, "unterminated character class (expected ']')");
      if (peek() == ']') break;
      uint32_t lo = parse_char(), hi = lo;
      if (peek() == '-' && peek(1) != ']' && pos + 1 < text.size()) {
        ++pos;
        hi = parse_char();
        if (hi < lo) fail(at, "a character range goes backwards");
      }
      r.emplace_back(lo, hi);
      if (r.size() > 4096) fail(at, "a character class with more than 4096 ranges");
    }
    ++pos;
    return {chars(std::move(r), neg)};
  }
  uint32_t parse_count() {
    size_t at = pos;
    uint64_t v = 0;
    if (!(peek() >= '0' && peek() <= '9')) fail(at, "expected a number in {m,n}");
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + uint64_t(peek() - '0');
      if (v > lim.max_repeat) fail(at, fmt::format("a repetition count past {}", lim.max_repeat));
      ++pos;
    }
    return uint32_t(v);
  }
  // Applies one postfix operator to `item` (one or more elements).
  Seq repeat(Seq item, uint32_t lo, uint32_t hi, bool unbounded, size_t at) {
    Element x = item.size() == 1 ? item[0] : Element{Element::Ref, false, new_rule("group", Alts{item}), 0};
    count(size_t(lo) + (unbounded ? 2 : 2 * size_t(hi - lo)), at);
    Seq out(lo, x);
    if (unbounded) {
      uint32_t r = new_rule("star", {});
      rules[r] = Alts{Seq{x, Element{Element::Ref, false, r, 0}}, Seq{}};
      out.push_back({Element::Ref, false, r, 0});
    } else if (hi > lo) {
      uint32_t prev = new_rule("opt", Alts{Seq{x}, Seq{}});
      for (uint32_t k = 1; k < hi - lo; ++k)
        prev = new_rule("opt", Alts{Seq{x, Element{Element::Ref, false, prev, 0}}, Seq{}});
      out.push_back({Element::Ref, false, prev, 0});
    }
    return out;
  }
  Seq parse_sequence(uint32_t depth) {
    Seq seq;
    while (true) {
      skip_space();
      if (eof() || peek() == '|' || peek() == ')' || at_rule_start()) return seq;
      size_t at = pos;
      Seq item;
      char c = peek();
      if (c == '"') {
        item = parse_literal();
      } else if (c == '[') {
        item = parse_class();
      } else if (c == '.') {
        ++pos;
        item = {chars({}, true)};
      } else if (c == '(') {
        if (depth >= lim.max_depth) fail(at, fmt::format("groups nested deeper than {}", lim.max_depth));
        ++pos;
        Alts alts = parse_alternatives(depth + 1);
        skip_space();
        if (peek() != ')') fail(pos, "expected ')'");
        ++pos;
        item = {Element{Element::Ref, false, new_rule("group", std::move(alts)), 0}};
      } else if (name_char(c)) {
        std::string_view n = parse_name();
        item = {Element{Element::Ref, false, rule_id(n, at), 0}};
      } else {
        fail(at, fmt::format("unexpected '{}' (expected a literal, [class], rule name, '(' or '|')", c));
      }
      count(item.size(), at);
      // Postfix operators apply to the item just read (no space needed before them).
      while (!eof()) {
        char op = peek();
        if (op == '*') ++pos, item = repeat(std::move(item), 0, 0, true, at);
        else if (op == '+') ++pos, item = repeat(std::move(item), 1, 0, true, at);
        else if (op == '?') ++pos, item = repeat(std::move(item), 0, 1, false, at);
        else if (op == '{') {
          ++pos;
          skip_space();
          uint32_t lo = parse_count(), hi = lo;
          bool unb = false;
          skip_space();
          if (peek() == ',') {
            ++pos;
            skip_space();
            if (peek() == '}') unb = true;
            else hi = parse_count();
          }
          skip_space();
          if (peek() != '}') fail(pos, "expected '}' to close {m,n}");
          ++pos;
          if (!unb && hi < lo) fail(at, "{m,n} with n < m");
          item = repeat(std::move(item), lo, hi, unb, at);
        } else break;
      }
      seq.insert(seq.end(), item.begin(), item.end());
    }
  }
  Alts parse_alternatives(uint32_t depth) {
    Alts alts;
    alts.push_back(parse_sequence(depth));
    while (true) {
      skip_space();
      if (peek() != '|') return alts;
      ++pos;
      alts.push_back(parse_sequence(depth));
    }
  }
  void parse_rule() {
    size_t at = pos;
    std::string_view n = parse_name();
    skip_space();
    if (text.substr(pos, 3) != "::=") fail(pos, fmt::format("expected '::=' after the rule name '{}'", n));
    pos += 3;
    uint32_t id = rule_id(n, at);
    if (defined[id]) fail(at, fmt::format("rule '{}' is defined twice", n));
    defined[id] = true;
    rules[id] = parse_alternatives(0);
    skip_space();
    if (!eof() && !at_rule_start())
      fail(pos, fmt::format("unexpected '{}' (expected a new rule 'name ::=')", peek()));
  }
};

// Rules that can match the empty string, to a fixed point.
std::vector<bool> nullable_rules(const std::vector<Alts>& rules) {
  std::vector<bool> nul(rules.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules.size(); ++r) {
      if (nul[r]) continue;
      for (const Seq& s : rules[r]) {
        bool all = std::all_of(s.begin(), s.end(), [&](const Element& e) { return e.kind == Element::Ref && nul[e.a]; });
        if (all) {
          nul[r] = changed = true;
          break;
        }
      }
    }
  }
  return nul;
}

// A rule that can reach itself before consuming a byte would make the matcher loop.
void check_left_recursion(const Parser& p) {
  std::vector<bool> nul = nullable_rules(p.rules);
  std::vector<std::vector<uint32_t>> first(p.rules.size());
  for (size_t r = 0; r < p.rules.size(); ++r)
    for (const Seq& s : p.rules[r])
      for (const Element& e : s) {
        if (e.kind != Element::Ref) break;
        first[r].push_back(e.a);
        if (!nul[e.a]) break;
      }
  std::vector<uint8_t> mark(p.rules.size(), 0);  // 0 new, 1 on the path, 2 done
  std::vector<std::pair<uint32_t, size_t>> stack;
  for (uint32_t s = 0; s < p.rules.size(); ++s) {
    if (mark[s]) continue;
    stack.push_back({s, 0});
    mark[s] = 1;
    while (!stack.empty()) {
      auto& [r, i] = stack.back();
      if (i == first[r].size()) {
        mark[r] = 2;
        stack.pop_back();
        continue;
      }
      uint32_t nx = first[r][i++];
      if (mark[nx] == 1)
        throw GrammarError(fmt::format("grammar: rule '{}' is left-recursive (hint: rewrite 'a ::= a x | y' as "
                                       "'a ::= y x*')", p.names[nx]));
      if (mark[nx] == 0) mark[nx] = 1, stack.push_back({nx, 0});
    }
  }
}

}  // namespace

Grammar parse_gbnf(std::string_view text, const GbnfLimits& limits) {
  Parser p(text, limits);
  if (text.size() > limits.max_text)
    throw GrammarError(fmt::format("grammar: {} bytes, past the limit of {}", text.size(), limits.max_text));
  p.skip_space();
  if (p.eof()) throw GrammarError("grammar: empty (hint: define 'root ::= ...')");
  while (!p.eof()) {
    p.parse_rule();
    p.skip_space();
  }
  for (size_t r = 0; r < p.rules.size(); ++r)
    if (!p.defined[r]) p.fail(p.first_use[r], fmt::format("rule '{}' is used but never defined", p.names[r]));
  auto root = p.ids.find("root");
  if (root == p.ids.end()) throw GrammarError("grammar: no 'root' rule (hint: the start rule is named root)");
  check_left_recursion(p);

  Grammar g;
  g.root = root->second;
  g.ranges = std::move(p.ranges);
  g.rule_names = std::move(p.names);
  for (const Alts& alts : p.rules) {
    uint32_t b = uint32_t(g.alt_starts.size());
    for (const Seq& s : alts) {
      g.alt_starts.push_back(uint32_t(g.elems.size()));
      g.elems.insert(g.elems.end(), s.begin(), s.end());
      g.elems.push_back({});
    }
    g.rule_alts.emplace_back(b, uint32_t(g.alt_starts.size()));
  }
  return g;
}

bool chars_match(const Grammar& g, const Element& e, uint32_t cp) {
  bool in = false;
  for (uint32_t i = 0; i < e.n && !in; ++i) in = cp >= g.ranges[e.a + i].first && cp <= g.ranges[e.a + i].second;
  return in != e.negated;
}

bool chars_match_any(const Grammar& g, const Element& e, uint32_t lo, uint32_t hi) {
  if (!e.negated) {
    for (uint32_t i = 0; i < e.n; ++i)
      if (g.ranges[e.a + i].first <= hi && g.ranges[e.a + i].second >= lo) return true;
    return false;
  }
  // Negated: some code point of [lo, hi] lies outside every range.
  uint64_t cur = lo;
  for (bool moved = true; moved && cur <= hi;) {
    moved = false;
    for (uint32_t i = 0; i < e.n; ++i)
      if (g.ranges[e.a + i].first <= cur && g.ranges[e.a + i].second >= cur) {
        cur = uint64_t(g.ranges[e.a + i].second) + 1;
        moved = true;
      }
  }
  return cur <= hi;
}

}  // namespace wgrt::grammar
