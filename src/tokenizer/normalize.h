// Text normalizers of a Hugging Face tokenizer.json ("normalizer"), applied where the
// `tokenizers` library applies them: to each piece of text between the added tokens that are
// matched on raw text, before pre-tokenization (tokenizer.h says the whole order).
//
// Unicode forms (NFC, NFD, NFKC, NFKD), case mapping and character categories come from
// utf8proc. Text that is not valid UTF-8 is normalized run by run: each invalid byte passes
// through unchanged, so no input is refused.
//
//   NFC | NFD | NFKC | NFKD   the Unicode normalization forms
//   Lowercase                 per character: its lowercase (U+0130 "İ" becomes "i" + U+0307,
//                             as Unicode's unconditional special casing says; no context rules)
//   Strip                     leading / trailing White_Space characters (strip_left/right)
//   StripAccents              drops every mark (categories Mn, Mc, Me); usually after NFD
//   Replace                   every match of a literal string or a regex (PCRE2) → content
//   Prepend                   a prefix before non-empty text
//   Sequence                  the steps in order (flattened when read)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace wgrt::tokenizer {

enum class NormKind : uint8_t { Nfc, Nfd, Nfkc, Nfkd, Lowercase, Strip, StripAccents, Replace, Prepend };
const char* norm_kind_name(NormKind k);

struct NormStep {
  NormKind kind = NormKind::Nfc;
  std::string pattern;        // Replace: the literal text, or the regex when `regex`
  bool regex = false;         // Replace
  std::string content;        // Replace: the replacement; Prepend: the prefix
  bool strip_left = false;    // Strip
  bool strip_right = false;   // Strip
};

struct Normalizer;  // the steps with their regexes compiled

// Compiles the Replace regexes; throws TokenizerError naming the pattern and `where`.
std::shared_ptr<const Normalizer> compile_normalizer(const std::vector<NormStep>& steps,
                                                     const std::string& where);
std::string normalize(const Normalizer& n, std::string_view text);

}  // namespace wgrt::tokenizer
