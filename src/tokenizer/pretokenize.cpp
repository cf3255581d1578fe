#include "tokenizer/pretokenize.h"

#include <array>
#include <fmt/format.h>

#include "tokenizer/pcre2_handles.h"
#include "tokenizer/vocab.h"

namespace wgrt::tokenizer {

struct PreTokenizer {
  std::vector<std::unique_ptr<pcre2_code, CodeDeleter>> codes;
  std::vector<std::string> patterns;
};

std::shared_ptr<const PreTokenizer> compile_pre_tokenizer(const std::vector<std::string>& regexes,
                                                          const std::string& where) {
  auto p = std::make_shared<PreTokenizer>();
  for (const std::string& re : regexes) {
    int err = 0;
    PCRE2_SIZE off = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(re.data()), re.size(),
                                     PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off,
                                     nullptr);
    if (!code) {
      std::array<PCRE2_UCHAR, 256> msg{};
      pcre2_get_error_message(err, msg.data(), msg.size());
      throw TokenizerError(fmt::format(
          "{}: pre-tokenizer regex /{}/ does not compile at offset {}: {} (hint: wgrt uses PCRE2 "
          "syntax; Oniguruma-only constructs need rewriting)",
          where, re, off, reinterpret_cast<const char*>(msg.data())));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // best effort: falls back to the interpreter
    p->codes.emplace_back(code);
    p->patterns.push_back(re);
  }
  return p;
}

namespace {

void split_one(pcre2_code* code, pcre2_match_data* md, std::string_view piece,
               std::vector<std::string_view>& out) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
  size_t pos = 0, gap_start = 0;
  while (pos < piece.size()) {
    int rc = pcre2_match(code, subject, piece.size(), pos, 0, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      std::array<PCRE2_UCHAR, 256> msg{};
      pcre2_get_error_message(rc, msg.data(), msg.size());
      throw TokenizerError(fmt::format("pre-tokenizer: PCRE2 match failed: {}",
                                       reinterpret_cast<const char*>(msg.data())));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t b = ov[0], e = ov[1];
    if (e == b) {  // an empty match splits nothing: step over one character
      pos = b + 1;
      while (pos < piece.size() && (static_cast<uint8_t>(piece[pos]) & 0xC0) == 0x80) ++pos;
      continue;
    }
    if (b > gap_start) out.push_back(piece.substr(gap_start, b - gap_start));
    out.push_back(piece.substr(b, e - b));
    gap_start = pos = e;
  }
  if (gap_start < piece.size()) out.push_back(piece.substr(gap_start));
}

}  // namespace

std::vector<std::string_view> pre_tokenize(const PreTokenizer& p, std::string_view text) {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  pieces.push_back(text);
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(pcre2_match_data_create(4, nullptr));
  for (const auto& code : p.codes) {
    std::vector<std::string_view> next;
    next.reserve(pieces.size() * 2);
    for (std::string_view piece : pieces) split_one(code.get(), md.get(), piece, next);
    pieces = std::move(next);
  }
  return pieces;
}

namespace {

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes keep their code point, the other 68
// bytes (0-32, 127-160, 173) take 256, 257, ... in byte order.
struct ByteTable {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 324> from_cp{};
  ByteTable() {
    from_cp.fill(-1);
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      to_cp[b] = printable ? b : next++;
      from_cp[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteTable& byte_table() {
  static const ByteTable t;
  return t;
}

}  // namespace

uint32_t byte_to_codepoint(uint8_t b) { return byte_table().to_cp[b]; }

int codepoint_to_byte(uint32_t cp) {
  return cp < byte_table().from_cp.size() ? byte_table().from_cp[cp] : -1;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace wgrt::tokenizer
