// tokenizer.json normalizers against an independent implementation (@huggingface/tokenizers,
// JavaScript, reference_tokenizer.h): the normalized text and the token ids of each text, per
// normalizer type on a tiny byte-level tokenizer, and Qwen 3's real tokenizer.json (NFC) on
// precomposed and decomposed texts.
#include <gtest/gtest.h>

#include <gmock/gmock.h>

#include "reference_tokenizer.h"
#include "tokenizer/pretokenize.h"

namespace wgrt::tokenizer::test {
namespace {

using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;

// Texts that tell the normalizers apart: composed and decomposed accents (in and out of
// canonical order), compatibility characters, case, Unicode spaces, Hangul jamo, singletons
// and a composition exclusion (U+0958). No final sigma and no U+0085/U+FEFF: there the
// tokenizers' languages disagree among themselves (context casing, what counts as a space).
const std::vector<std::string> kTexts = {
    "H\u00e9llo W\u00d6RLD",
    "  padded\t text \n",
    "cafe\u0301 vs caf\u00e9",
    "\u1e9b\u0323 and \u017f\u0323\u0307",
    "\ufb01ne \u2460 \uff76\uff80\uff76\uff85 \u3300",
    "\u0130stanbul \u01c5emal \u0391\u0392\u0393",
    "Tie\u0302\u0301ng Vie\u0323\u0302t Vie\u0302\u0323t",
    "\u1112\u1161\u11ab\u1100\u1173\u11af",
    "\u212b \u2126 \u0958",
    "x\u00a0y\u3000z  a   b",
    "\U0001F469\u200d\U0001F4BB xxaxx",
};

// A byte-level BPE tokenizer whose vocabulary is every byte plus two merges: its ids spell the
// normalized bytes, so comparing ids compares what the normalizer produced.
json tiny_tokenizer(const json& normalizer, const json& added = json::array()) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) {
    std::string s;
    append_utf8(s, byte_to_codepoint(static_cast<uint8_t>(b)));
    vocab[s] = b;
  }
  vocab["he"] = 256;
  vocab["ll"] = 257;
  return json{{"normalizer", normalizer},
              {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
              {"decoder", {{"type", "ByteLevel"}}},
              {"post_processor", nullptr},
              {"added_tokens", added},
              {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"h e", "l l"}}}}};
}

Tokenizer build(const json& tokenizer_json) {
  return build_tokenizer(vocab_from_tokenizer_json_text(tokenizer_json.dump(), "", "tiny.json"));
}

// wgrt and the reference agree on every text: normalized text and ids (added tokens parsed,
// as the reference always does).
void expect_matches_reference(const std::string& label, const json& tokenizer_json,
                              const std::vector<std::string>& texts) {
  const Tokenizer tok = build(tokenizer_json);
  const auto ref = reference_encode({{"tokenizer", tokenizer_json}}, texts);
  ASSERT_EQ(ref.size(), texts.size()) << label;
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(normalize_text(tok, texts[i]), ref[i].normalized) << label << " on '" << texts[i] << "'";
    EXPECT_EQ(ids_str(tokenize(tok, texts[i], false, true)), ids_str(ref[i].ids))
        << label << " on '" << texts[i] << "'";
  }
}

struct NormCase {
  const char* label;
  json normalizer;
};

TEST(TokenizerNormalizers, EachTypeMatchesReference) {
  WGRT_REQUIRE_REFERENCE();
  const json nfd = {{"type", "NFD"}};
  const std::vector<NormCase> cases = {
      {"NFC", {{"type", "NFC"}}},
      {"NFD", nfd},
      {"NFKC", {{"type", "NFKC"}}},
      {"NFKD", {{"type", "NFKD"}}},
      {"Lowercase", {{"type", "Lowercase"}}},
      {"Strip both", {{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}}},
      {"Strip left", {{"type", "Strip"}, {"strip_left", true}, {"strip_right", false}}},
      {"Strip right", {{"type", "Strip"}, {"strip_left", false}, {"strip_right", true}}},
      {"StripAccents", {{"type", "StripAccents"}}},
      {"NFD+StripAccents",
       {{"type", "Sequence"}, {"normalizers", {nfd, {{"type", "StripAccents"}}, {{"type", "NFC"}}}}}},
      {"Replace string", {{"type", "Replace"}, {"pattern", {{"String", "  "}}}, {"content", "_"}}},
      {"Replace string (accent)", {{"type", "Replace"}, {"pattern", {{"String", "\u00e9"}}}, {"content", "E"}}},
      {"Replace regex", {{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", " "}}},
      {"Replace regex (empty matches)", {{"type", "Replace"}, {"pattern", {{"Regex", "x*"}}}, {"content", "-"}}},
      {"Replace regex (delete)", {{"type", "Replace"}, {"pattern", {{"Regex", "[aeiou]"}}}, {"content", ""}}},
      {"Prepend", {{"type", "Prepend"}, {"prepend", ">>"}}},
      {"Prepend \u2581 (byte-level)", {{"type", "Prepend"}, {"prepend", "\u2581"}}},
      {"Sequence",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}},
          {{"type", "NFKC"}},
          {{"type", "Lowercase"}},
          {{"type", "Replace"}, {"pattern", {{"Regex", " +"}}}, {"content", "_"}},
          {{"type", "Prepend"}, {"prepend", "^"}}}}}},
  };
  for (const NormCase& c : cases) expect_matches_reference(c.label, tiny_tokenizer(c.normalizer), kTexts);
}

// Facts of Unicode, to read beside the reference comparison.
TEST(TokenizerNormalizers, UnicodeForms) {
  auto norm = [](const char* type, const std::string& text) {
    return normalize_text(build(tiny_tokenizer({{"type", type}})), text);
  };
  EXPECT_EQ(norm("NFC", "cafe\u0301"), "caf\u00e9");
  EXPECT_EQ(norm("NFD", "caf\u00e9"), "cafe\u0301");
  EXPECT_EQ(norm("NFC", "Vie\u0302\u0323t"), "Vi\u1ec7t");       // marks reordered, then composed
  EXPECT_EQ(norm("NFC", "\u0958"), "\u0915\u093c");              // a composition exclusion
  EXPECT_EQ(norm("NFC", "\u212b"), "\u00c5");                    // a singleton
  EXPECT_EQ(norm("NFC", "\ufb01"), "\ufb01");                    // compatibility: only NFK*
  EXPECT_EQ(norm("NFKC", "\ufb01 \u2460"), "fi 1");
  EXPECT_EQ(norm("NFKD", "\u1e9b\u0323"), "s\u0323\u0307");
  EXPECT_EQ(norm("Lowercase", "\u0130I\u00c9"), "i\u0307i\u00e9");
  // Bytes that are not UTF-8 pass through; the text around them is still normalized.
  EXPECT_EQ(norm("NFC", "e\u0301\xff" "e\u0301\xc3"), "\u00e9\xff\u00e9\xc3");
  EXPECT_EQ(norm("Lowercase", "A\x80" "B"), "a\x80" "b");
  EXPECT_EQ(norm("StripAccents", "a\u0301\xfe"), "a\xfe");
}

// Added tokens marked "normalized" are matched after the normalizer, against their normalized
// text; the others on raw text before it (and not inside normalized text).
TEST(TokenizerNormalizers, AddedTokensNormalizedOrNot) {
  WGRT_REQUIRE_REFERENCE();
  const json added = {
      {{"id", 258}, {"content", "HeLLo"}, {"special", false}, {"normalized", true}},
      {{"id", 259}, {"content", "ABC"}, {"special", false}, {"normalized", false}},
      {{"id", 260}, {"content", "<X>"}, {"special", true}, {"normalized", false}},
      {{"id", 261}, {"content", "Caf\u00e9"}, {"special", false}},  // normalized by default
  };
  const json lower_nfc = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Lowercase"}}}}};
  const json tj = tiny_tokenizer(lower_nfc, added);
  const Tokenizer tok = build(tj);
  EXPECT_EQ(tok.vocab.normalized_added, (std::vector<int32_t>{258, 261}));
  const std::vector<std::string> texts = {
      "say HELLO<X>hello", "ABC abc aBc", "x<X>ABCHeLLo", "CAFE\u0301 caf\u00e9<X>", "<x> HeLLo"};
  expect_matches_reference("added tokens", tj, texts);
  const auto ids = tokenize(tok, "say HELLO<X>ABCabc", false, true);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 258), 1);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 259), 1);  // only the raw "ABC"
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 260), 1);
}

// The SentencePiece pair (Prepend "▁", Replace " " → "▁") stays what Spm mode does itself.
TEST(TokenizerNormalizers, SentencePiecePairFolds) {
  json vocab = {{"<unk>", 0}, {"\u2581", 1}, {"a", 2}, {"\u2581a", 3}, {"<0x62>", 4}};
  json tj = {{"normalizer",
              {{"type", "Sequence"},
               {"normalizers",
                {{{"type", "Prepend"}, {"prepend", "\u2581"}},
                 {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}},
                 {{"type", "NFKC"}}}}}},
             {"pre_tokenizer", nullptr},
             {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"\u2581 a"}},
                        {"byte_fallback", true}, {"unk_token", "<unk>"}}}};
  const Tokenizer tok = build(tj);
  EXPECT_EQ(tok.vocab.kind, ModelKind::Spm);
  EXPECT_TRUE(tok.vocab.add_space_prefix);
  ASSERT_EQ(tok.vocab.normalizers.size(), 1u);
  EXPECT_EQ(tok.vocab.normalizers[0].kind, NormKind::Nfkc);
  // "ａ ab": NFKC turns the fullwidth ａ into a; "b" is only a byte token.
  EXPECT_EQ(tokenize(tok, "\uff41 ab", false, false), (std::vector<int32_t>{3, 3, 4}));
  EXPECT_EQ(detokenize(tok, {3, 3, 4}), "a ab");
}

TEST(TokenizerNormalizers, Errors) {
  auto error = [](const json& normalizer) -> std::string {
    try {
      build(tiny_tokenizer(normalizer));
    } catch (const TokenizerError& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_THAT(error({{"type", "BertNormalizer"}, {"lowercase", true}}),
              AllOf(HasSubstr("tiny.json"), HasSubstr("normalizer"), HasSubstr("'BertNormalizer'"),
                    HasSubstr("not supported"), HasSubstr("hint")));
  EXPECT_THAT(error({{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Precompiled"}}}}}),
              AllOf(HasSubstr("normalizer.normalizers[1]"), HasSubstr("'Precompiled'")));
  EXPECT_THAT(error({{"type", "Replace"}, {"pattern", {{"Regex", "(["}}}, {"content", ""}}),
              AllOf(HasSubstr("tiny.json"), HasSubstr("/([/"), HasSubstr("hint")));
  EXPECT_THAT(error({{"type", "Replace"}, {"pattern", "x"}, {"content", ""}}),
              AllOf(HasSubstr("normalizer.pattern"), HasSubstr("Regex")));
  EXPECT_THAT(error({{"type", "Prepend"}}), AllOf(HasSubstr("normalizer"), HasSubstr("\"prepend\"")));
  json tj = tiny_tokenizer(nullptr);
  tj["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "WhitespaceSplit"}}}}};
  try {
    build(tj);
    ADD_FAILURE() << "an unknown pre-tokenizer must not load";
  } catch (const TokenizerError& e) {
    EXPECT_THAT(std::string(e.what()), AllOf(HasSubstr("tiny.json"), HasSubstr("pre_tokenizer.pretokenizers[0]"),
                                             HasSubstr("'WhitespaceSplit'")));
  }
}

// Qwen 3 declares NFC: decomposed accents must give the ids of the precomposed text, as the
// reference gives them.
TEST(TokenizerNormalizers, Qwen3NfcAndNfdMatchReference) {
  const std::string path = json_dir() + "/qwen3/tokenizer.json";
  WGRT_REQUIRE_FILE(path);
  WGRT_REQUIRE_REFERENCE();
  const Tokenizer& tok = cached("json:qwen3");
  // {NFC text, the same text decomposed}
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"caf\u00e9", "cafe\u0301"},
      {"Am\u00e9lie \u00fcber na\u00efve fa\u00e7ade", "Ame\u0301lie u\u0308ber nai\u0308ve fac\u0327ade"},
      {"Ti\u1ebfng Vi\u1ec7t", "Tie\u0302\u0301ng Vie\u0323\u0302t"},
      {"Ti\u1ebfng Vi\u1ec7t", "Tie\u0302\u0301ng Vie\u0302\u0323t"},  // marks out of order
      {"\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8", "\u1112\u1161\u11ab\u1100\u116e\u11a8\u110b\u1165 \u1110\u1166\u11a8\u1109\u1173\u1110\u1173"},
      {"\u03ac\u03bb\u03c6\u03b1 \u1f00", "\u03b1\u0301\u03bb\u03c6\u03b1 \u03b1\u0313"},
      {"\u00c5ngstr\u00f6m", "\u212bngstro\u0308m"},
      {"<|im_start|>user\nCaf\u00e9?<|im_end|>", "<|im_start|>user\nCafe\u0301?<|im_end|>"},
      {"<think>\u00e9</think>\u00c0", "<think>e\u0301</think>A\u0300"},
  };
  std::vector<std::string> texts;
  for (const auto& [nfc, nfd] : pairs) {
    texts.push_back(nfc);
    texts.push_back(nfd);
  }
  // NFC keeps compatibility characters and the composition exclusion decomposed.
  texts.push_back("\ufb01 \u2460 \uff76 \u0958 \U0001F469\u200d\U0001F4BB");
  texts.push_back("<|im_start|>\u0301a");  // a mark right after an added token
  const auto ref = reference_encode({{"tokenizer_path", path}}, texts);
  ASSERT_EQ(ref.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto got = tokenize(tok, texts[i], false, true);
    EXPECT_EQ(ids_str(got), ids_str(ref[i].ids)) << "'" << texts[i] << "'";
    EXPECT_EQ(normalize_text(tok, texts[i]), ref[i].normalized) << "'" << texts[i] << "'";
    EXPECT_EQ(detokenize(tok, got, /*render_special=*/true), ref[i].normalized);
  }
  for (size_t p = 0; p < pairs.size(); ++p)
    EXPECT_EQ(tokenize(tok, pairs[p].first, false, true), tokenize(tok, pairs[p].second, false, true))
        << "'" << pairs[p].second << "' decomposed tokenizes unlike its NFC form";
}

}  // namespace
}  // namespace wgrt::tokenizer::test
