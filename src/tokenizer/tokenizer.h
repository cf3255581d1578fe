// Tokenize and detokenize with a Vocab (vocab.h).
//
// tokenize, in the order of Hugging Face `tokenizers`:
//   1. split out the added/special tokens matched on raw text (USER_DEFINED always,
//      CONTROL/UNKNOWN only with parse_special; longest match at the leftmost position);
//   2. normalize each text fragment between them (tokenizer.json normalizer, normalize.h);
//   3. split out the added tokens marked "normalized" (matched on normalized text, their own
//      text normalized too);
//   4. encode each remaining fragment:
//   Spm: spaces → "▁", a "▁" prefix when add_space_prefix (at the start and after a special
//        token, as llama.cpp does), characters merged by best score (or rank), leftovers as
//        <0xXX> byte tokens (else unk);
//   Bpe: pre-tokenizer regexes (PCRE2, UTF + Unicode properties), bytes spelled through the
//        GPT-2 table, merges by lowest rank (ties: leftmost).
// add_special adds BOS/EOS as the vocab says.
//
// detokenize returns the exact bytes (the concatenated pieces); StreamDecoder returns only
// complete UTF-8, holding back a partial sequence until its next bytes arrive and turning bytes
// that can never form UTF-8 into U+FFFD.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/vocab.h"

namespace wgrt::tokenizer {

struct PreTokenizer;  // compiled PCRE2 regexes (pretokenize.h)
struct Normalizer;    // normalize.h

struct Tokenizer {
  Vocab vocab;
  std::unordered_map<std::string, int32_t> token_ids;   // text → id (first id wins)
  std::unordered_map<std::string, int32_t> merge_rank;  // left + '\xff' + right → rank
  std::array<int32_t, 256> byte_token{};                // byte → its token (-1: none)
  struct Special {
    std::string text;
    int32_t id = -1;
    bool always = false;  // USER_DEFINED: matched even without parse_special
  };
  using SpecialTable = std::array<std::vector<Special>, 256>;  // by first byte, longest first
  SpecialTable specials;             // matched on raw text
  SpecialTable normalized_specials;  // matched after normalization (Vocab::normalized_added)
  std::vector<std::string> pieces;                      // [n_vocab] decoded bytes of each token
  std::shared_ptr<const PreTokenizer> pre;              // Bpe only
  std::shared_ptr<const Normalizer> norm;               // null: no normalizer
};

// Builds the lookup tables once. Throws TokenizerError for an inconsistent vocab (a merge of
// unknown tokens, a regex that does not compile, ...).
Tokenizer build_tokenizer(Vocab vocab);

std::vector<int32_t> tokenize(const Tokenizer& tok, std::string_view text, bool add_special,
                              bool parse_special);

// A byte range [begin, end) of a text.
struct TextSpan {
  size_t begin = 0, end = 0;
};
// As tokenize with parse_special, except where a special token's text overlaps a span of
// `plain` (sorted, disjoint): there it is plain text, as tokenize without parse_special reads it
// (USER_DEFINED added tokens still match). For a prompt that mixes a template's own markers
// with untrusted text (a chat's messages: llm/chat.h's tokenize_chat).
std::vector<int32_t> tokenize_with_plain_spans(const Tokenizer& tok, std::string_view text, bool add_special,
                                               std::span<const TextSpan> plain);
// Whether `s` holds the text of a special token that only parse_special would match.
bool has_special_text(const Tokenizer& tok, std::string_view s);
// The spans of `text` (sorted, merged) that come from `untrusted` strings holding a special
// token's text: every occurrence of such a string in `text`, or where a template changed it
// (trimmed, cut), every occurrence of its lines that hold one. Strings without special text
// need no span: they tokenize the same either way.
std::vector<TextSpan> untrusted_spans(const Tokenizer& tok, std::string_view text,
                                      std::span<const std::string_view> untrusted);

// The text as the tokenizer's normalizer leaves it (itself when there is none).
std::string normalize_text(const Tokenizer& tok, std::string_view text);

// The bytes a token stands for. CONTROL tokens give their text only with render_special; an
// UNKNOWN token gives U+FFFD unless render_special. Throws TokenizerError for an id out of range.
std::string token_to_piece(const Tokenizer& tok, int32_t id, bool render_special = false);

// Whole sequence: exact bytes. For Spm with add_space_prefix the dummy space of the first
// piece is dropped, so detokenize(tokenize(s)) == s for lossless vocabs.
std::string detokenize(const Tokenizer& tok, const std::vector<int32_t>& ids,
                       bool render_special = false);

struct StreamDecoder {
  const Tokenizer* tok = nullptr;
  bool render_special = false;
  bool strip_leading_space = false;  // drop the Spm dummy space of the first piece
  std::string pending;               // bytes of an incomplete UTF-8 sequence
};

// sequence_start: the next id begins a tokenized text (prompt start), so the Spm dummy space
// is dropped; false when continuing after a prompt.
StreamDecoder make_stream_decoder(const Tokenizer& tok, bool sequence_start,
                                  bool render_special = false);
// Feeds one id; returns the complete UTF-8 now available (possibly empty).
std::string decode_next(StreamDecoder& d, int32_t id);
// End of stream: whatever is still pending, as U+FFFD.
std::string decode_flush(StreamDecoder& d);

// UTF-8 helpers (also used by the tests).
bool is_valid_utf8(std::string_view s);
// Length of the complete UTF-8 sequence starting at s[i] (1..4), or 0 when s[i] does not start a
// valid sequence; `*incomplete` is set when it could still become valid with more bytes.
size_t utf8_sequence_length(std::string_view s, size_t i, bool* incomplete);

}  // namespace wgrt::tokenizer
