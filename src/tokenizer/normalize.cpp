#include "tokenizer/normalize.h"

#include <fmt/format.h>
#include <utf8proc.h>

#include <array>
#include <cstdlib>

#include "tokenizer/pcre2_handles.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"

namespace wgrt::tokenizer {

const char* norm_kind_name(NormKind k) {
  switch (k) {
    case NormKind::Nfc: return "NFC";
    case NormKind::Nfd: return "NFD";
    case NormKind::Nfkc: return "NFKC";
    case NormKind::Nfkd: return "NFKD";
    case NormKind::Lowercase: return "Lowercase";
    case NormKind::Strip: return "Strip";
    case NormKind::StripAccents: return "StripAccents";
    case NormKind::Replace: return "Replace";
    case NormKind::Prepend: return "Prepend";
  }
  return "?";
}

struct Normalizer {
  std::vector<NormStep> steps;
  std::vector<std::unique_ptr<pcre2_code, CodeDeleter>> codes;  // [steps] regex Replace, else null
};

std::shared_ptr<const Normalizer> compile_normalizer(const std::vector<NormStep>& steps,
                                                     const std::string& where) {
  auto n = std::make_shared<Normalizer>();
  n->steps = steps;
  for (const NormStep& s : steps) {
    pcre2_code* code = nullptr;
    if (s.kind == NormKind::Replace && s.regex) {
      int err = 0;
      PCRE2_SIZE off = 0;
      code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(s.pattern.data()), s.pattern.size(),
                           PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off, nullptr);
      if (!code) {
        std::array<PCRE2_UCHAR, 256> msg{};
        pcre2_get_error_message(err, msg.data(), msg.size());
        throw TokenizerError(fmt::format(
            "{}: Replace normalizer regex /{}/ does not compile at offset {}: {} (hint: wgrt uses "
            "PCRE2 syntax; Oniguruma-only constructs need rewriting)",
            where, s.pattern, off, reinterpret_cast<const char*>(msg.data())));
      }
    }
    n->codes.emplace_back(code);
  }
  return n;
}

namespace {

uint32_t decode_codepoint(std::string_view s, size_t i, size_t len) {
  uint32_t cp = static_cast<uint8_t>(s[i]);
  if (len == 1) return cp;
  cp &= 0x7Fu >> len;
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
  return cp;
}

// Calls on_run(valid UTF-8 run) and on_byte(invalid byte) over `s`, in order.
template <typename OnRun, typename OnByte>
void for_each_run(std::string_view s, const OnRun& on_run, const OnByte& on_byte) {
  size_t run = 0, i = 0;
  while (i < s.size()) {
    bool incomplete = false;
    size_t len = utf8_sequence_length(s, i, &incomplete);
    if (len > 0) {
      i += len;
      continue;
    }
    if (i > run) on_run(s.substr(run, i - run));
    on_byte(s[i]);
    run = ++i;
  }
  if (i > run) on_run(s.substr(run, i - run));
}

// Calls f(code point) for each character of a valid run.
template <typename F>
void for_each_codepoint(std::string_view run, const F& f) {
  for (size_t i = 0; i < run.size();) {
    bool incomplete = false;
    size_t len = utf8_sequence_length(run, i, &incomplete);
    f(decode_codepoint(run, i, len), run.substr(i, len));
    i += len;
  }
}

std::string unicode_form(std::string_view text, utf8proc_option_t form) {
  std::string out;
  out.reserve(text.size());
  for_each_run(
      text,
      [&](std::string_view run) {
        utf8proc_uint8_t* dst = nullptr;
        utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(run.data()),
                                          static_cast<utf8proc_ssize_t>(run.size()), &dst,
                                          static_cast<utf8proc_option_t>(UTF8PROC_STABLE | form));
        std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(dst, &std::free);
        if (n < 0)
          throw TokenizerError(fmt::format("normalizer: utf8proc failed on {} bytes of text: {}",
                                           run.size(), utf8proc_errmsg(n)));
        out.append(reinterpret_cast<const char*>(dst), static_cast<size_t>(n));
      },
      [&](char b) { out += b; });
  return out;
}

std::string lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for_each_run(
      text,
      [&](std::string_view run) {
        for_each_codepoint(run, [&](uint32_t cp, std::string_view) {
          if (cp == 0x130) {  // the one unconditional multi-character lowercase mapping
            out += "i\xCC\x87";
            return;
          }
          append_utf8(out, static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
        });
      },
      [&](char b) { out += b; });
  return out;
}

bool is_white_space(uint32_t cp) {
  if ((cp >= 0x09 && cp <= 0x0D) || cp == 0x85) return true;  // the White_Space controls
  utf8proc_category_t c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return c == UTF8PROC_CATEGORY_ZS || c == UTF8PROC_CATEGORY_ZL || c == UTF8PROC_CATEGORY_ZP;
}

// Length of the leading (or trailing) White_Space characters of `s`.
size_t white_space_prefix(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    bool incomplete = false;
    size_t len = utf8_sequence_length(s, i, &incomplete);
    if (len == 0 || !is_white_space(decode_codepoint(s, i, len))) break;
    i += len;
  }
  return i;
}

size_t white_space_suffix(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;  // back to the lead byte of the last character
    while (start > 0 && end - start < 4 && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80) --start;
    bool incomplete = false;
    size_t len = utf8_sequence_length(s, start, &incomplete);
    if (len != end - start || !is_white_space(decode_codepoint(s, start, len))) break;
    end = start;
  }
  return s.size() - end;
}

std::string strip(std::string_view text, const NormStep& s) {
  if (s.strip_left) text.remove_prefix(white_space_prefix(text));
  if (s.strip_right) text.remove_suffix(white_space_suffix(text));
  return std::string(text);
}

std::string strip_accents(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for_each_run(
      text,
      [&](std::string_view run) {
        for_each_codepoint(run, [&](uint32_t cp, std::string_view bytes) {
          utf8proc_category_t c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
          if (c != UTF8PROC_CATEGORY_MN && c != UTF8PROC_CATEGORY_MC && c != UTF8PROC_CATEGORY_ME)
            out.append(bytes);
        });
      },
      [&](char b) { out += b; });
  return out;
}

std::string replace_literal(std::string_view text, const NormStep& s) {
  if (s.pattern.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  for (size_t hit; (hit = text.find(s.pattern, i)) != std::string_view::npos; i = hit + s.pattern.size()) {
    out.append(text.substr(i, hit - i));
    out += s.content;
  }
  out.append(text.substr(i));
  return out;
}

// Every match → content. An empty match inserts content and steps over one character, as a
// global regex replace does.
std::string replace_regex(std::string_view text, pcre2_code* code, const std::string& content) {
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(pcre2_match_data_create_from_pattern(code, nullptr));
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::string out;
  out.reserve(text.size());
  size_t pos = 0, copied = 0;
  while (pos <= text.size()) {
    int rc = pcre2_match(code, subject, text.size(), pos, 0, md.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      std::array<PCRE2_UCHAR, 256> msg{};
      pcre2_get_error_message(rc, msg.data(), msg.size());
      throw TokenizerError(fmt::format("Replace normalizer: PCRE2 match failed: {}",
                                       reinterpret_cast<const char*>(msg.data())));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    const size_t b = ov[0], e = ov[1];
    out.append(text.substr(copied, b - copied));
    out += content;
    copied = pos = e;
    if (e == b) {  // empty: keep the next character, then look again after it
      if (pos == text.size()) break;
      bool incomplete = false;
      size_t len = utf8_sequence_length(text, pos, &incomplete);
      pos += len == 0 ? 1 : len;
      out.append(text.substr(copied, pos - copied));
      copied = pos;
    }
  }
  if (copied < text.size()) out.append(text.substr(copied));
  return out;
}

}  // namespace

std::string normalize(const Normalizer& n, std::string_view text) {
  std::string s(text);
  for (size_t i = 0; i < n.steps.size(); ++i) {
    const NormStep& step = n.steps[i];
    switch (step.kind) {
      case NormKind::Nfc: s = unicode_form(s, UTF8PROC_COMPOSE); break;
      case NormKind::Nfd: s = unicode_form(s, UTF8PROC_DECOMPOSE); break;
      case NormKind::Nfkc:
        s = unicode_form(s, static_cast<utf8proc_option_t>(UTF8PROC_COMPOSE | UTF8PROC_COMPAT));
        break;
      case NormKind::Nfkd:
        s = unicode_form(s, static_cast<utf8proc_option_t>(UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT));
        break;
      case NormKind::Lowercase: s = lowercase(s); break;
      case NormKind::Strip: s = strip(s, step); break;
      case NormKind::StripAccents: s = strip_accents(s); break;
      case NormKind::Replace:
        s = step.regex ? replace_regex(s, n.codes[i].get(), step.content) : replace_literal(s, step);
        break;
      case NormKind::Prepend:
        if (!s.empty()) s.insert(0, step.content);
        break;
    }
  }
  return s;
}

}  // namespace wgrt::tokenizer
