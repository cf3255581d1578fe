// llama.cpp's tokenizer test vectors (vocab-only GGUF + .inp/.out pairs; the .out ids were
// produced by the models' reference tokenizers). As llama.cpp's test-tokenizer-0 does, cases
// are tokenized without BOS/EOS and without parsing special-token text.
#include <gtest/gtest.h>

#include "tokenizer_fixture.h"

namespace wgrt::tokenizer::test {
namespace {

class TokenizerVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerVectors, CasesMatchAndRoundTrip) {
  const std::string name = GetParam();
  WGRT_REQUIRE_FILE(gguf_path(name) + ".inp");
  const Tokenizer& tok = cached("gguf:" + name);
  const auto cases = load_cases(name);
  ASSERT_FALSE(cases.empty());
  size_t passed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto got = tokenize(tok, cases[i].text, /*add_special=*/false, /*parse_special=*/false);
    if (got == cases[i].ids) {
      ++passed;
    } else {
      ADD_FAILURE() << name << " case " << i << " '" << cases[i].text << "'\n  expected:"
                    << ids_str(cases[i].ids) << "\n  got:     " << ids_str(got);
    }
  }
  std::printf("[ vectors  ] %s: %zu/%zu cases\n", name.c_str(), passed, cases.size());
  EXPECT_EQ(passed, cases.size());

  // These vocabs are lossless (byte fallback / byte-level): decode(encode(s)) == s, and the
  // stream decoder, fed one id at a time, emits valid UTF-8 at every step that adds up to s.
  for (const Case& c : cases) {
    const auto ids = tokenize(tok, c.text, false, false);
    EXPECT_EQ(detokenize(tok, ids), c.text) << name << ": '" << c.text << "'";
    StreamDecoder d = make_stream_decoder(tok, /*sequence_start=*/true);
    std::string streamed;
    for (int32_t id : ids) {
      std::string chunk = decode_next(d, id);
      EXPECT_TRUE(is_valid_utf8(chunk)) << name << ": '" << c.text << "' id " << id;
      streamed += chunk;
    }
    streamed += decode_flush(d);
    EXPECT_EQ(streamed, c.text) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, TokenizerVectors,
                         ::testing::Values("llama-spm", "phi-3", "llama-bpe", "qwen2", "gpt-2",
                                           "qwen35", "starcoder", "refact", "command-r", "mpt",
                                           "falcon"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string s = p.param;
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

}  // namespace
}  // namespace wgrt::tokenizer::test
