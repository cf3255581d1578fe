#include "tokenizer/tokenizer.h"

#include <fmt/format.h>

#include <string.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>
#include <queue>

#include "tokenizer/normalize.h"
#include "tokenizer/pretokenize.h"

namespace wgrt::tokenizer {

namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";        // "▁" U+2581
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Bytes of the character at s[i]; a byte that does not start valid UTF-8 is a symbol of its
// own (so a stray lead byte never swallows the bytes after it).
size_t char_length(std::string_view s, size_t i) {
  bool incomplete = false;
  size_t len = utf8_sequence_length(s, i, &incomplete);
  return len == 0 ? 1 : len;
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    if (s.substr(i, from.size()) == from) {
      out += to;
      i += from.size();
    } else {
      out += s[i++];
    }
  }
  return out;
}

// The byte of a "<0xXX>" token text, or -1.
int byte_token_value(std::string_view text) {
  int b = 0;
  if (text.size() != 6 || !text.starts_with("<0x") || text[5] != '>') return -1;
  auto [end, ec] = std::from_chars(text.data() + 3, text.data() + 5, b, 16);
  return ec == std::errc() && end == text.data() + 5 ? b : -1;
}

// Decodes a byte-level BPE token: each code point back to its byte. A code point outside the
// GPT-2 table (some converted vocabs hold raw text) is kept as UTF-8.
std::string byte_level_decode(std::string_view text) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    bool incomplete = false;
    size_t len = utf8_sequence_length(text, i, &incomplete);
    if (len == 0) {
      out += text[i++];
      continue;
    }
    uint32_t cp = static_cast<uint8_t>(text[i]);
    if (len > 1) {
      cp &= 0x7F >> len;
      for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<uint8_t>(text[i + k]) & 0x3F);
    }
    int b = codepoint_to_byte(cp);
    if (b >= 0) {
      out += static_cast<char>(b);
    } else {
      out.append(text.substr(i, len));
    }
    i += len;
  }
  return out;
}

// ---- merging -----------------------------------------------------------------------------

struct Symbol {
  uint32_t start = 0, len = 0;  // bytes of the working string; len 0: merged away
  int32_t prev = -1, next = -1;
};

struct Candidate {
  double key;  // lower merges first
  int32_t left, right;
  uint32_t len;
  bool operator<(const Candidate& o) const {  // priority_queue pops the "largest"
    if (key != o.key) return key > o.key;
    return left > o.left;  // ties: leftmost first
  }
};

// Splits `s` into UTF-8 characters, then merges adjacent symbols while `key_of` finds a pair
// (lowest key first, leftmost on ties). Returns the surviving symbols in order.
template <typename KeyOf>
std::vector<std::string_view> merge_symbols(std::string_view s, const KeyOf& key_of) {
  std::vector<Symbol> sym;
  for (uint32_t i = 0; i < s.size();) {
    uint32_t len = static_cast<uint32_t>(char_length(s, i));
    int32_t idx = static_cast<int32_t>(sym.size());
    sym.push_back({i, len, idx - 1, -1});
    if (idx > 0) sym[idx - 1].next = idx;
    i += len;
  }
  std::priority_queue<Candidate> queue;
  auto consider = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    std::optional<double> key = key_of(s.substr(sym[l].start, sym[l].len), s.substr(sym[r].start, sym[r].len));
    if (key) queue.push({*key, l, r, sym[l].len + sym[r].len});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) consider(i, i + 1);
  while (!queue.empty()) {
    Candidate c = queue.top();
    queue.pop();
    Symbol& l = sym[c.left];
    Symbol& r = sym[c.right];
    if (l.len == 0 || r.len == 0 || l.next != c.right || l.len + r.len != c.len) continue;  // stale
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = c.left;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }
  std::vector<std::string_view> out;
  for (int32_t i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) out.push_back(s.substr(sym[i].start, sym[i].len));
  return out;
}

std::string pair_key(std::string_view a, std::string_view b) {
  std::string k;
  k.reserve(a.size() + b.size() + 1);
  k.append(a);
  k += '\xff';  // never inside UTF-8
  k.append(b);
  return k;
}

int32_t find_id(const Tokenizer& t, std::string_view text) {
  auto it = t.token_ids.find(std::string(text));
  return it == t.token_ids.end() ? -1 : it->second;
}

std::vector<std::string_view> merge_by_rank(const Tokenizer& t, std::string_view s) {
  return merge_symbols(s, [&](std::string_view a, std::string_view b) -> std::optional<double> {
    auto it = t.merge_rank.find(pair_key(a, b));
    if (it == t.merge_rank.end()) return std::nullopt;
    return static_cast<double>(it->second);
  });
}

std::vector<std::string_view> merge_by_score(const Tokenizer& t, std::string_view s) {
  std::string joined;
  return merge_symbols(s, [&](std::string_view a, std::string_view b) -> std::optional<double> {
    joined.assign(a);
    joined.append(b);
    int32_t id = find_id(t, joined);
    if (id < 0) return std::nullopt;
    return -static_cast<double>(t.vocab.scores[id]);
  });
}

// ---- per-fragment encoders ------------------------------------------------------------

void encode_spm(const Tokenizer& t, std::string_view frag, bool prefix, std::vector<int32_t>& out) {
  std::string s;
  s.reserve(frag.size() + 8);
  if (prefix) s += kSpace;
  for (char c : frag) {
    if (c == ' ') {
      s += kSpace;
    } else {
      s += c;
    }
  }
  const auto symbols = t.vocab.merges.empty() ? merge_by_score(t, s) : merge_by_rank(t, s);
  for (std::string_view sym : symbols) {
    int32_t id = find_id(t, sym);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char c : sym) {  // byte fallback
      int32_t b = t.byte_token[static_cast<uint8_t>(c)];
      if (b < 0) b = t.vocab.unk_id;
      if (b >= 0) out.push_back(b);
    }
  }
}

void encode_bpe(const Tokenizer& t, std::string_view frag, bool prefix, std::vector<int32_t>& out) {
  std::string with_space;
  if (prefix && t.vocab.add_space_prefix && (frag.empty() || frag[0] != ' ')) {
    with_space = " ";
    with_space.append(frag);
    frag = with_space;
  }
  std::string word;
  for (std::string_view piece : pre_tokenize(*t.pre, frag)) {
    word.clear();
    for (char c : piece) append_utf8(word, byte_to_codepoint(static_cast<uint8_t>(c)));
    if (t.vocab.ignore_merges) {
      int32_t id = find_id(t, word);
      if (id >= 0) {
        out.push_back(id);
        continue;
      }
    }
    for (std::string_view sym : merge_by_rank(t, word)) {
      int32_t id = find_id(t, sym);
      if (id >= 0) {
        out.push_back(id);
        continue;
      }
      // Not a token: one token per byte (each spelled as one character).
      for (size_t i = 0; i < sym.size();) {
        size_t len = char_length(sym, i);
        int32_t b = find_id(t, sym.substr(i, len));
        if (b < 0) b = t.vocab.unk_id;
        if (b >= 0) out.push_back(b);
        i += len;
      }
    }
  }
}

void encode_fragment(const Tokenizer& t, std::string_view frag, bool after_special,
                     std::vector<int32_t>& out) {
  if (frag.empty()) return;
  if (t.vocab.kind == ModelKind::Spm) {
    encode_spm(t, frag, after_special && t.vocab.add_space_prefix, out);
  } else {
    encode_bpe(t, frag, after_special, out);
  }
}

void check_id(const Tokenizer& t, int32_t id) {
  if (id < 0 || id >= t.vocab.n_vocab())
    throw TokenizerError(fmt::format("token id {} is out of range for the {}-token vocabulary of {} "
                                     "(hint: the ids come from another model?)",
                                     id, t.vocab.n_vocab(), t.vocab.source));
}

}  // namespace

// ---- build ---------------------------------------------------------------------------------

Tokenizer build_tokenizer(Vocab vocab) {
  Tokenizer t;
  t.vocab = std::move(vocab);
  const Vocab& v = t.vocab;
  const size_t n = v.tokens.size();
  if (v.types.size() != n)
    throw TokenizerError(fmt::format("{}: {} token types for {} tokens (hint: the vocab is inconsistent)",
                                     v.source, v.types.size(), n));
  if (v.kind == ModelKind::Spm && v.merges.empty() && v.scores.size() != n)
    throw TokenizerError(fmt::format("{}: {} scores for {} tokens (hint: a SentencePiece vocab needs "
                                     "one score per token, or merges)",
                                     v.source, v.scores.size(), n));
  for (int32_t id : {v.bos_id, v.eos_id, v.eot_id, v.unk_id, v.pad_id})
    if (id >= static_cast<int32_t>(n))
      throw TokenizerError(fmt::format("{}: special token id {} is out of range for {} tokens "
                                       "(hint: the vocab is inconsistent)", v.source, id, n));

  t.token_ids.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (v.tokens[i].empty()) continue;
    t.token_ids.emplace(v.tokens[i], static_cast<int32_t>(i));
  }
  t.merge_rank.reserve(v.merges.size());
  for (size_t r = 0; r < v.merges.size(); ++r)
    t.merge_rank.emplace(pair_key(v.merges[r].first, v.merges[r].second), static_cast<int32_t>(r));

  t.byte_token.fill(-1);
  for (int b = 0; b < 256; ++b) {
    std::string text;
    if (v.kind == ModelKind::Spm) {
      text = fmt::format("<0x{:02X}>", b);
    } else {
      append_utf8(text, byte_to_codepoint(static_cast<uint8_t>(b)));
    }
    t.byte_token[b] = find_id(t, text);
  }

  std::vector<bool> normalized(n, false);
  for (int32_t id : v.normalized_added)
    if (id >= 0 && id < static_cast<int32_t>(n)) normalized[id] = true;
  if (!v.normalizers.empty()) t.norm = compile_normalizer(v.normalizers, v.source);
  for (size_t i = 0; i < n; ++i) {
    TokenType ty = v.types[i];
    if (v.tokens[i].empty()) continue;
    if (ty != TokenType::Control && ty != TokenType::UserDefined && ty != TokenType::Unknown) continue;
    Tokenizer::Special s{v.tokens[i], static_cast<int32_t>(i), ty == TokenType::UserDefined};
    if (normalized[i] && t.norm) {
      s.text = normalize(*t.norm, s.text);  // matched against normalized text
      if (s.text.empty()) continue;
      t.normalized_specials[static_cast<uint8_t>(s.text[0])].push_back(std::move(s));
    } else {
      t.specials[static_cast<uint8_t>(s.text[0])].push_back(std::move(s));
    }
  }
  for (auto* table : {&t.specials, &t.normalized_specials})
    for (auto& list : *table)
      std::stable_sort(list.begin(), list.end(),
                       [](const auto& a, const auto& b) { return a.text.size() > b.text.size(); });

  t.pieces.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string& text = v.tokens[i];
    switch (v.types[i]) {
      case TokenType::Byte:
        if (int b = byte_token_value(text); b >= 0) {
          t.pieces[i] = std::string(1, static_cast<char>(b));
        } else {
          t.pieces[i] = text;
        }
        break;
      case TokenType::Control:
      case TokenType::Unknown:
        t.pieces[i] = text;  // shown only with render_special
        break;
      case TokenType::UserDefined:
        t.pieces[i] = v.kind == ModelKind::Spm ? replace_all(text, kSpace, " ") : text;
        break;
      default:
        t.pieces[i] = v.kind == ModelKind::Spm ? replace_all(text, kSpace, " ") : byte_level_decode(text);
        break;
    }
  }

  if (v.kind == ModelKind::Bpe) {
    if (v.pre_regexes.empty())
      throw TokenizerError(fmt::format("{}: byte-level BPE without a pre-tokenizer regex (hint: set "
                                       "tokenizer.ggml.pre, or a Split/ByteLevel pre_tokenizer)",
                                       v.source));
    t.pre = compile_pre_tokenizer(v.pre_regexes, v.source);
  }
  return t;
}

// ---- tokenize ------------------------------------------------------------------------------

namespace {

// Calls on_text(fragment) and on_special(id) over `text` in order, splitting out the tokens of
// `table` (longest match at the leftmost position): USER_DEFINED ones always, the others where
// special(pos, len) allows.
template <typename Special, typename OnText, typename OnSpecial>
void split_specials(const Tokenizer::SpecialTable& table, std::string_view text, const Special& special,
                    const OnText& on_text, const OnSpecial& on_special) {
  size_t frag_start = 0, i = 0;
  while (i < text.size()) {
    const Tokenizer::Special* hit = nullptr;
    for (const auto& s : table[static_cast<uint8_t>(text[i])]) {
      if (text.substr(i, s.text.size()) == s.text && (s.always || special(i, s.text.size()))) {
        hit = &s;
        break;
      }
    }
    if (!hit) {
      ++i;
      continue;
    }
    if (i > frag_start) on_text(text.substr(frag_start, i - frag_start));
    on_special(hit->id);
    i += hit->text.size();
    frag_start = i;
  }
  if (frag_start < text.size()) on_text(text.substr(frag_start));
}

// Whether [pos, pos + len) overlaps a span of `plain` (sorted, disjoint).
bool overlaps(std::span<const TextSpan> plain, size_t pos, size_t len) {
  auto it = std::upper_bound(plain.begin(), plain.end(), pos, [](size_t p, const TextSpan& s) { return p < s.end; });
  return it != plain.end() && it->begin < pos + len;
}

std::vector<int32_t> tokenize_impl(const Tokenizer& t, std::string_view text, bool add_special, bool parse_special,
                                   std::span<const TextSpan> plain) {
  const Vocab& v = t.vocab;
  std::vector<int32_t> out;
  if (add_special && v.add_bos && v.bos_id >= 0) out.push_back(v.bos_id);
  auto on_special = [&](int32_t id) { out.push_back(id); };
  // Every fragment starts at the text's start or after an added token: a boundary for the
  // Spm dummy prefix and the byte-level prefix space.
  auto encode = [&](std::string_view frag) { encode_fragment(t, frag, /*after_special=*/true, out); };
  auto special = [&](size_t pos, size_t len) { return parse_special && !overlaps(plain, pos, len); };
  split_specials(t.specials, text, special, [&](std::string_view frag) {
    if (!t.norm) return encode(frag);
    // After normalization positions no longer map back: a fragment that touches a plain span
    // reads specials as text throughout.
    const bool frag_special = parse_special && !overlaps(plain, size_t(frag.data() - text.data()), frag.size());
    const std::string normalized = normalize(*t.norm, frag);
    split_specials(t.normalized_specials, normalized, [&](size_t, size_t) { return frag_special; }, encode,
                   on_special);
  }, on_special);
  if (add_special && v.add_eos && v.eos_id >= 0) out.push_back(v.eos_id);
  return out;
}

}  // namespace

std::string normalize_text(const Tokenizer& t, std::string_view text) {
  return t.norm ? normalize(*t.norm, text) : std::string(text);
}

std::vector<int32_t> tokenize(const Tokenizer& t, std::string_view text, bool add_special,
                              bool parse_special) {
  return tokenize_impl(t, text, add_special, parse_special, {});
}

std::vector<int32_t> tokenize_with_plain_spans(const Tokenizer& t, std::string_view text, bool add_special,
                                               std::span<const TextSpan> plain) {
  return tokenize_impl(t, text, add_special, /*parse_special=*/true, plain);
}

bool has_special_text(const Tokenizer& t, std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i)
    for (const auto& sp : t.specials[static_cast<uint8_t>(s[i])])
      if (!sp.always && s.substr(i, sp.text.size()) == sp.text) return true;
  return false;
}

std::vector<TextSpan> untrusted_spans(const Tokenizer& t, std::string_view text,
                                      std::span<const std::string_view> untrusted) {
  std::vector<TextSpan> spans;
  // memmem (two-way search): linear, whatever a hostile string repeats.
  auto find = [&](std::string_view needle, size_t from) -> size_t {
    if (from > text.size()) return std::string_view::npos;
    const void* p = ::memmem(text.data() + from, text.size() - from, needle.data(), needle.size());
    return p ? size_t(static_cast<const char*>(p) - text.data()) : std::string_view::npos;
  };
  auto mark_all = [&](std::string_view needle) {
    bool found = false;
    for (size_t at = find(needle, 0); !needle.empty() && at != std::string_view::npos; at = find(needle, at + 1)) {
      spans.push_back({at, at + needle.size()});
      found = true;
    }
    return found;
  };
  for (std::string_view u : untrusted) {
    if (!has_special_text(t, u) || mark_all(u)) continue;
    // Not found whole (the template cut or trimmed it): its lines that hold a special text.
    for (size_t b = 0; b < u.size();) {
      size_t e = u.find('\n', b);
      if (e == std::string_view::npos) e = u.size();
      std::string_view line = u.substr(b, e - b);
      while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front()))) line.remove_prefix(1);
      while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.remove_suffix(1);
      if (has_special_text(t, line)) mark_all(line);
      b = e + 1;
    }
  }
  std::sort(spans.begin(), spans.end(), [](const TextSpan& a, const TextSpan& b) { return a.begin < b.begin; });
  std::vector<TextSpan> merged;
  for (const TextSpan& sp : spans) {
    if (!merged.empty() && sp.begin <= merged.back().end)
      merged.back().end = std::max(merged.back().end, sp.end);
    else
      merged.push_back(sp);
  }
  return merged;
}

// ---- detokenize ----------------------------------------------------------------------------

std::string token_to_piece(const Tokenizer& t, int32_t id, bool render_special) {
  check_id(t, id);
  TokenType ty = t.vocab.types[id];
  if (!render_special) {
    if (ty == TokenType::Control) return {};
    if (ty == TokenType::Unknown) return std::string(kReplacement);
  }
  return t.pieces[id];
}

std::string detokenize(const Tokenizer& t, const std::vector<int32_t>& ids, bool render_special) {
  std::string out;
  bool strip = t.vocab.kind == ModelKind::Spm && t.vocab.add_space_prefix;
  for (int32_t id : ids) {
    std::string piece = token_to_piece(t, id, render_special);
    if (strip && !piece.empty()) {
      if (piece[0] == ' ') piece.erase(0, 1);
      strip = false;
    }
    out += piece;
  }
  return out;
}

StreamDecoder make_stream_decoder(const Tokenizer& t, bool sequence_start, bool render_special) {
  StreamDecoder d;
  d.tok = &t;
  d.render_special = render_special;
  d.strip_leading_space = sequence_start && t.vocab.kind == ModelKind::Spm && t.vocab.add_space_prefix;
  return d;
}

std::string decode_next(StreamDecoder& d, int32_t id) {
  std::string piece = token_to_piece(*d.tok, id, d.render_special);
  if (d.strip_leading_space && !piece.empty()) {
    if (piece[0] == ' ') piece.erase(0, 1);
    d.strip_leading_space = false;
  }
  d.pending += piece;
  std::string out;
  size_t i = 0;
  while (i < d.pending.size()) {
    bool incomplete = false;
    size_t len = utf8_sequence_length(d.pending, i, &incomplete);
    if (len > 0) {
      out.append(d.pending, i, len);
      i += len;
    } else if (incomplete) {
      break;  // wait for the rest of this character
    } else {
      out += kReplacement;
      i += 1;
    }
  }
  d.pending.erase(0, i);
  return out;
}

std::string decode_flush(StreamDecoder& d) {
  std::string out = d.pending.empty() ? std::string() : std::string(kReplacement);
  d.pending.clear();
  return out;
}

// ---- UTF-8 ---------------------------------------------------------------------------------

size_t utf8_sequence_length(std::string_view s, size_t i, bool* incomplete) {
  *incomplete = false;
  const auto b0 = static_cast<uint8_t>(s[i]);
  if (b0 < 0x80) return 1;
  size_t need = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 3;
    if (b0 == 0xE0) lo = 0xA0;  // no overlong forms
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // <= U+10FFFF
  } else {
    return 0;
  }
  for (size_t k = 1; k < need; ++k) {
    if (i + k >= s.size()) {
      *incomplete = true;
      return 0;
    }
    const auto b = static_cast<uint8_t>(s[i + k]);
    if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return 0;
  }
  return need;
}

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    bool incomplete = false;
    size_t len = utf8_sequence_length(s, i, &incomplete);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

}  // namespace wgrt::tokenizer
