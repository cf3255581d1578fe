// Malformed tokenizer input gives an error naming what, where, and a hint; never a crash.
#include <gtest/gtest.h>

#include <gmock/gmock.h>

#include "model/gguf_writer.h"
#include "tokenizer_fixture.h"

namespace wgrt::tokenizer::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string json_error(const std::string& text, const std::string& config = "") {
  try {
    vocab_from_tokenizer_json_text(text, config, "bad/tokenizer.json");
  } catch (const TokenizerError& e) {
    return e.what();
  }
  return "(no error)";
}

const char* kGoodJson = R"({
  "added_tokens": [{"id": 5, "content": "<|end|>", "special": true}],
  "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
  "post_processor": null,
  "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "Ġab": 4},
            "merges": ["a b", ["Ġ", "ab"]]}
})";

TEST(TokenizerErrors, TinyJsonWorks) {
  Tokenizer tok = build_tokenizer(vocab_from_tokenizer_json_text(kGoodJson, "", "tiny"));
  EXPECT_EQ(tokenize(tok, "ab ab", false, false), (std::vector<int32_t>{2, 4}));
  EXPECT_EQ(tokenize(tok, "ab<|end|>", false, true), (std::vector<int32_t>{2, 5}));
  EXPECT_EQ(tok.vocab.eot_id, 5);
}

TEST(TokenizerErrors, MalformedJson) {
  EXPECT_THAT(json_error("{\"model\": {\"type\": \"BPE\""),
              AllOf(HasSubstr("bad/tokenizer.json"), HasSubstr("not valid JSON at byte"), HasSubstr("hint")));
  EXPECT_THAT(json_error("[1, 2]"), HasSubstr("not a JSON object"));
  EXPECT_THAT(json_error("{}"), AllOf(HasSubstr("has no \"model\""), HasSubstr("hint")));
  EXPECT_THAT(json_error(R"({"model": {"type": "Unigram", "vocab": {}}})"),
              AllOf(HasSubstr("model.type"), HasSubstr("'Unigram' is not supported")));
  EXPECT_THAT(json_error(R"({"model": {"type": "BPE", "vocab": {"a": -3}}})"),
              AllOf(HasSubstr("model.vocab[\"a\"]"), HasSubstr("-3")));
  EXPECT_THAT(json_error(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}}})"),
              HasSubstr("ids must be unique"));
  EXPECT_THAT(json_error(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["ab"]},
                             "pre_tokenizer": {"type": "ByteLevel"}})"),
              AllOf(HasSubstr("model.merges[0]"), HasSubstr("'ab'")));
  EXPECT_THAT(json_error(R"({"model": {"type": "BPE", "vocab": {"a": 0}},
                             "added_tokens": [{"content": "x"}]})"),
              AllOf(HasSubstr("added_tokens[0]"), HasSubstr("\"id\"")));
  EXPECT_THAT(json_error(R"({"model": {"type": "BPE", "vocab": {"a": 0}},
                             "pre_tokenizer": {"type": "Whitespace"}})"),
              AllOf(HasSubstr("pre_tokenizer"), HasSubstr("'Whitespace'")));
  EXPECT_THAT(json_error(R"({"model": {"type": "BPE", "vocab": {"a": 0}}})"),
              HasSubstr("neither ByteLevel nor Metaspace"));
  EXPECT_THAT(json_error(kGoodJson, R"({"bos_token": "<s>"})"),
              AllOf(HasSubstr("tokenizer_config.json"), HasSubstr("bos_token '<s>'")));
  // A broken regex fails when the tokenizer is built (PCRE2 compiles it there).
  try {
    build_tokenizer(vocab_from_tokenizer_json_text(
        R"({"model": {"type": "BPE", "vocab": {"a": 0}},
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
              {"type": "Split", "pattern": {"Regex": "(["}}, {"type": "ByteLevel", "use_regex": false}]}})",
        "", "bad.json"));
    ADD_FAILURE() << "a broken regex must not build";
  } catch (const TokenizerError& e) {
    EXPECT_THAT(std::string(e.what()), AllOf(HasSubstr("bad.json"), HasSubstr("/([/"), HasSubstr("hint")));
  }
  try {
    vocab_from_tokenizer_json("/nonexistent/tokenizer.json");
    ADD_FAILURE();
  } catch (const TokenizerError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("/nonexistent/tokenizer.json: cannot be read"));
  }
}

model::GgufWriter tiny_spm() {
  model::GgufWriter w;
  model::gguf_set_string(w, "tokenizer.ggml.model", "llama");
  model::gguf_set_strings(w, "tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a"});
  model::gguf_set_f32s(w, "tokenizer.ggml.scores", {0, 0, 0, -1, -2});
  model::gguf_set_i32s(w, "tokenizer.ggml.token_type", {2, 3, 3, 1, 1});
  return w;
}

std::string gguf_error(const model::GgufWriter& w) {
  const auto bytes = model::gguf_serialize(w);
  try {
    build_tokenizer(vocab_from_gguf(model::parse_gguf(bytes, "tiny.gguf")));
  } catch (const std::exception& e) {  // TokenizerError or model::GgufError
    return e.what();
  }
  return "(no error)";
}

model::GgufWriter without(model::GgufWriter w, const std::string& key) {
  std::erase_if(w.kv, [&](const auto& kv) { return kv.first == key; });
  return w;
}

TEST(TokenizerErrors, GgufKeys) {
  EXPECT_EQ(gguf_error(tiny_spm()), "(no error)");
  EXPECT_THAT(gguf_error(without(tiny_spm(), "tokenizer.ggml.model")),
              AllOf(HasSubstr("tiny.gguf"), HasSubstr("tokenizer.ggml.model"), HasSubstr("missing")));
  EXPECT_THAT(gguf_error(without(tiny_spm(), "tokenizer.ggml.tokens")),
              AllOf(HasSubstr("tokenizer.ggml.tokens"), HasSubstr("missing")));
  EXPECT_THAT(gguf_error(without(tiny_spm(), "tokenizer.ggml.scores")),
              AllOf(HasSubstr("tokenizer.ggml.scores"), HasSubstr("missing")));
  model::GgufWriter w = tiny_spm();
  model::gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 9);
  EXPECT_THAT(gguf_error(w), AllOf(HasSubstr("tokenizer.ggml.bos_token_id = 9"), HasSubstr("out of range")));
  w = tiny_spm();
  model::gguf_set_i32s(w, "tokenizer.ggml.token_type", {1, 1});
  EXPECT_THAT(gguf_error(w), HasSubstr("token_type has 2 entries"));
  w = tiny_spm();
  model::gguf_set_string(w, "tokenizer.ggml.model", "bert");
  EXPECT_THAT(gguf_error(w), AllOf(HasSubstr("'bert' is not supported"), HasSubstr("hint")));
  w = tiny_spm();
  model::gguf_set_string(w, "tokenizer.ggml.model", "gpt2");
  EXPECT_THAT(gguf_error(w), AllOf(HasSubstr("tokenizer.ggml.merges"), HasSubstr("missing")));
  model::gguf_set_strings(w, "tokenizer.ggml.merges", {"a"});
  EXPECT_THAT(gguf_error(w), HasSubstr("tokenizer.ggml.merges[0] = 'a'"));
  model::gguf_set_strings(w, "tokenizer.ggml.merges", {"a a"});
  model::gguf_set_string(w, "tokenizer.ggml.pre", "made-up");
  EXPECT_THAT(gguf_error(w), AllOf(HasSubstr("tokenizer.ggml.pre 'made-up'"), HasSubstr("tokenizer.json")));
}

TEST(TokenizerErrors, TinySpmTokenizes) {
  const auto bytes = model::gguf_serialize(tiny_spm());
  Tokenizer tok = build_tokenizer(vocab_from_gguf(model::parse_gguf(bytes, "tiny.gguf")));
  // "a a" → "▁a▁a": no "▁a" token and no <0xXX> tokens, so "▁", "a", "▁", "a".
  EXPECT_EQ(tokenize(tok, "a a", true, false), (std::vector<int32_t>{1, 3, 4, 3, 4}));
  // "b" is neither a token nor covered by byte tokens: <unk>.
  EXPECT_EQ(tokenize(tok, "b", false, false), (std::vector<int32_t>{3, 0}));
  EXPECT_EQ(detokenize(tok, {1, 3, 4, 3, 4}), "a a");
}

}  // namespace
}  // namespace wgrt::tokenizer::test
