// Template source → tokens. Whitespace handling, as the reference applies it:
//   - one trailing "\n" of the whole template is dropped;
//   - lstrip_blocks: spaces and tabs from a line start up to "{%", "{#" (or "{-") go;
//   - trim_blocks: a "\n" right after "%}", "#}" (or "-}") goes;
//   - "{%-" / "{{-" / "{#-" strip the whitespace ending the text before; "-%}" / "-}}" / "-#}"
//     skip the whitespace after.
// Positions stay those of the original source, for messages.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "chat/ast.h"

namespace wgrt::chat {

std::string where(const std::string& name, SourcePos p) { return fmt::format("{}:{}:{}: ", name, p.line, p.col); }

size_t js_space_at(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  unsigned char c = s[i];
  if (c == ' ' || (c >= '\t' && c <= '\r')) return 1;
  auto at = [&](size_t k) { return i + k < s.size() ? (unsigned char)s[i + k] : 0; };
  if (c == 0xc2 && at(1) == 0xa0) return 2;
  if (c == 0xe1 && at(1) == 0x9a && at(2) == 0x80) return 3;
  if (c == 0xe2 && at(1) == 0x80 && ((at(2) >= 0x80 && at(2) <= 0x8a) || at(2) == 0xa8 || at(2) == 0xa9 || at(2) == 0xaf))
    return 3;
  if (c == 0xe2 && at(1) == 0x81 && at(2) == 0x9f) return 3;
  if (c == 0xe3 && at(1) == 0x80 && at(2) == 0x80) return 3;
  if (c == 0xef && at(1) == 0xbb && at(2) == 0xbf) return 3;
  return 0;
}

size_t js_space_before(std::string_view s, size_t end) {
  for (size_t n = 1; n <= 3 && n <= end; ++n)
    if (js_space_at(s, end - n) == n) return n;
  return 0;
}

std::string js_trim(std::string_view s, bool left, bool right) {
  size_t b = 0, e = s.size();
  while (left && b < e) {
    size_t n = js_space_at(s, b);
    if (!n) break;
    b += n;
  }
  while (right && e > b) {
    size_t n = js_space_before(s.substr(0, e), e);
    if (!n) break;
    e -= n;
  }
  return std::string(s.substr(b, e - b));
}

namespace {

struct Lexer {
  std::string_view src;
  const std::string& name;
  size_t p = 0;
  std::vector<Token> out;
  std::vector<uint32_t> line_starts{0};

  SourcePos pos_of(size_t at) const {
    size_t line = std::upper_bound(line_starts.begin(), line_starts.end(), uint32_t(at)) - line_starts.begin();
    return {uint32_t(line), uint32_t(at - line_starts[line - 1] + 1)};
  }
  [[noreturn]] void fail(size_t at, const std::string& what) const {
    throw TemplateError(where(name, pos_of(at)) + what);
  }
  bool starts(std::string_view s) const { return src.substr(p, s.size()) == s; }
  bool tag_start(size_t at) const {
    return at + 1 < src.size() && src[at] == '{' && (src[at + 1] == '%' || src[at + 1] == '{' || src[at + 1] == '#');
  }
  // trim_blocks: this "\n" follows "%}", "#}" or "-}".
  bool trimmed_newline(size_t at) const {
    return src[at] == '\n' && at >= 2 && src[at - 1] == '}' &&
           (src[at - 2] == '%' || src[at - 2] == '#' || src[at - 2] == '-');
  }
  // lstrip_blocks: from a line start, spaces/tabs then "{%", "{#" or "{-": where the tag starts.
  size_t lstripped(size_t at) const {
    if (at != 0 && src[at - 1] != '\n') return at;
    size_t q = at;
    while (q < src.size() && (src[q] == ' ' || src[q] == '\t')) ++q;
    if (q > at && q + 1 < src.size() && src[q] == '{' && (src[q + 1] == '%' || src[q + 1] == '#' || src[q + 1] == '-'))
      return q;
    return at;
  }
  void strip_previous_text() {
    if (out.empty() || out.back().type != Tok::Text) return;
    out.back().text = js_trim(out.back().text, false, true);
    if (out.back().text.empty()) out.pop_back();
  }
  void skip_space() {
    while (size_t n = js_space_at(src, p)) p += n;
  }
  void push(Tok t, std::string text, size_t at) { out.push_back({t, std::move(text), pos_of(at)}); }

  void text() {
    size_t start = p;
    std::string t;
    while (p < src.size() && !tag_start(p)) {
      size_t q = lstripped(p);
      if (q != p) {
        p = q;
        continue;
      }
      if (!trimmed_newline(p)) t += src[p];
      ++p;
    }
    if (!t.empty()) push(Tok::Text, std::move(t), start);
  }

  void comment() {
    size_t start = p;
    p += 2;
    if (p < src.size() && src[p] == '-') {
      ++p;
      strip_previous_text();
    }
    size_t end = src.find("#}", p);
    if (end == std::string_view::npos) fail(start, "unclosed comment: '{#' without '#}'");
    bool strip_after = end > p && src[end - 1] == '-';
    push(Tok::Comment, std::string(src.substr(p, end - p)), start);
    p = end + 2;
    if (strip_after) skip_space();
    else if (p < src.size() && src[p] == '\n') ++p;  // trim_blocks
  }

  void string_literal() {
    size_t start = p;
    char quote = src[p++];
    std::string s;
    while (true) {
      if (p >= src.size()) fail(start, "unterminated string literal (hint: close it with " + std::string(1, quote) + ")");
      char c = src[p];
      if (c == quote) break;
      if (c == '\\') {
        if (p + 1 >= src.size()) fail(p, "unterminated string literal");
        char e = src[p + 1];
        p += 2;
        switch (e) {
          case 'n': s += '\n'; break;
          case 't': s += '\t'; break;
          case 'r': s += '\r'; break;
          case 'b': s += '\b'; break;
          case 'f': s += '\f'; break;
          case 'v': s += '\v'; break;
          case '\'': s += '\''; break;
          case '"': s += '"'; break;
          case '\\': s += '\\'; break;
          case 'x':
          case 'u': {
            size_t n = e == 'x' ? 2 : 4;
            std::string hex(src.substr(p, n));
            if (hex.size() != n || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
              fail(p - 2, fmt::format("invalid escape \\{}{} in a string literal", e, hex));
            uint32_t cp = uint32_t(std::stoul(hex, nullptr, 16));
            p += n;
            if (cp < 0x80) {
              s += char(cp);
            } else if (cp < 0x800) {
              s += char(0xc0 | (cp >> 6));
              s += char(0x80 | (cp & 0x3f));
            } else {
              s += char(0xe0 | (cp >> 12));
              s += char(0x80 | ((cp >> 6) & 0x3f));
              s += char(0x80 | (cp & 0x3f));
            }
            break;
          }
          default: fail(p - 2, fmt::format("unknown escape \\{} in a string literal", e));
        }
        continue;
      }
      if (!trimmed_newline(p)) s += c;
      ++p;
    }
    ++p;
    push(Tok::String, std::move(s), start);
  }

  // Inside {% %} or {{ }}: until the closing delimiter.
  void tag(Tok open, size_t tag_pos) {
    const bool is_stmt = open == Tok::OpenStmt;
    int braces = 0;
    while (true) {
      skip_space();
      if (p >= src.size())
        fail(tag_pos, is_stmt ? "unclosed statement: '{%' without '%}'" : "unclosed expression: '{{' without '}}'");
      size_t at = p;
      if (is_stmt && (starts("-%}") || starts("%}"))) {
        bool strip = src[p] == '-';
        p += strip ? 3 : 2;
        push(Tok::CloseStmt, "%}", at);
        if (strip) skip_space();
        else if (p < src.size() && src[p] == '\n') ++p;  // trim_blocks
        return;
      }
      if (!is_stmt && braces == 0 && (starts("-}}") || starts("}}"))) {
        bool strip = src[p] == '-';
        p += strip ? 3 : 2;
        push(Tok::CloseExpr, "}}", at);
        if (strip) skip_space();
        return;
      }
      char c = src[p];
      if (c == '\'' || c == '"') {
        string_literal();
        continue;
      }
      if (std::isdigit((unsigned char)c)) {
        size_t b = p;
        while (p < src.size() && std::isdigit((unsigned char)src[p])) ++p;
        bool after_dot = !out.empty() && out.back().type == Tok::Dot;
        bool is_float = false;
        if (!after_dot && p + 1 < src.size() && src[p] == '.' && std::isdigit((unsigned char)src[p + 1])) {
          is_float = true;
          ++p;
          while (p < src.size() && std::isdigit((unsigned char)src[p])) ++p;
        }
        push(is_float ? Tok::Float : Tok::Int, std::string(src.substr(b, p - b)), b);
        continue;
      }
      if (std::isalnum((unsigned char)c) || c == '_') {
        size_t b = p;
        while (p < src.size() && (std::isalnum((unsigned char)src[p]) || src[p] == '_')) ++p;
        push(Tok::Ident, std::string(src.substr(b, p - b)), b);
        continue;
      }
      static const std::pair<const char*, Tok> table[] = {
          {"(", Tok::LParen}, {")", Tok::RParen}, {"[", Tok::LBracket}, {"]", Tok::RBracket}, {"{", Tok::LBrace},
          {"}", Tok::RBrace}, {",", Tok::Comma}, {".", Tok::Dot}, {":", Tok::Colon}, {"|", Tok::Pipe},
          {"<=", Tok::Op}, {">=", Tok::Op}, {"==", Tok::Op}, {"!=", Tok::Op}, {"<", Tok::Op}, {">", Tok::Op},
          {"+", Tok::Op}, {"-", Tok::Op}, {"~", Tok::Op}, {"**", Tok::Op}, {"*", Tok::Op}, {"//", Tok::Op},
          {"/", Tok::Op}, {"%", Tok::Op}, {"=", Tok::Assign},
      };
      bool matched = false;
      for (const auto& [seq, type] : table) {
        if (!starts(seq)) continue;
        if (type == Tok::LBrace) ++braces;
        if (type == Tok::RBrace) --braces;
        push(type, seq, p);
        p += std::string_view(seq).size();
        matched = true;
        break;
      }
      if (!matched)
        fail(p, fmt::format("unexpected character '{}' inside {} (hint: chat templates use the Jinja subset "
                            "described in src/chat/jinja.h)", c, is_stmt ? "'{% %}'" : "'{{ }}'"));
    }
  }

  void run() {
    if (!src.empty() && src.back() == '\n') src.remove_suffix(1);
    for (size_t i = 0; i < src.size(); ++i)
      if (src[i] == '\n') line_starts.push_back(uint32_t(i + 1));
    while (p < src.size()) {
      if (!tag_start(p)) {
        text();
        continue;
      }
      size_t at = p;
      if (src[p + 1] == '#') {
        comment();
        continue;
      }
      Tok open = src[p + 1] == '%' ? Tok::OpenStmt : Tok::OpenExpr;
      p += 2;
      if (p < src.size() && src[p] == '-') {
        ++p;
        strip_previous_text();
      }
      push(open, open == Tok::OpenStmt ? "{%" : "{{", at);
      tag(open, at);
    }
    push(Tok::End, "", src.size());
  }
};

}  // namespace

std::vector<Token> lex(std::string_view source, const std::string& name) {
  Lexer l{source, name};
  l.run();
  return std::move(l.out);
}

}  // namespace wgrt::chat
