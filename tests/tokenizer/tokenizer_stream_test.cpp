// The streaming decoder: only complete UTF-8 leaves it, partial sequences from byte-fallback and
// byte-level pieces are held back, and bytes that can never form UTF-8 become U+FFFD.
#include <gtest/gtest.h>

#include "tokenizer_fixture.h"

namespace wgrt::tokenizer::test {
namespace {

const std::vector<std::string> kTexts = {
    "Hello world",
    "naïve café, Ünïcödé",
    "日本語のテキストと中文",
    "🦙🦙 llamas 🚀🔥 and 👩‍👩‍👧 families",
    "ស្វាគមន៍",   // Khmer: mostly byte fallback in llama's SentencePiece vocab
    "\xF0\x9F\x98\x80x\xE2\x82\xAC",
    "  leading spaces\n\ttabs\r\n",
};

void check_stream(const Tokenizer& tok, const std::string& what) {
  for (const std::string& text : kTexts) {
    const auto ids = tokenize(tok, text, true, false);
    StreamDecoder d = make_stream_decoder(tok, true);
    std::string streamed;
    for (int32_t id : ids) {
      const std::string chunk = decode_next(d, id);
      ASSERT_TRUE(is_valid_utf8(chunk)) << what << ": '" << text << "'";
      streamed += chunk;
    }
    streamed += decode_flush(d);
    EXPECT_EQ(streamed, text) << what;
    EXPECT_EQ(detokenize(tok, ids), text) << what;
  }
}

TEST(TokenizerStream, ValidUtf8AtEveryStep) {
  for (const char* name : {"llama-spm", "gpt-2"}) {
    WGRT_REQUIRE_FILE(gguf_path(name));
    check_stream(cached(std::string("gguf:") + name), name);
  }
}

// "🦙" is not in llama's vocab: four <0xXX> byte tokens; nothing leaves until the fourth.
TEST(TokenizerStream, HoldsBackByteFallbackPieces) {
  WGRT_REQUIRE_FILE(gguf_path("llama-spm"));
  const Tokenizer& tok = cached("gguf:llama-spm");
  const std::string llama = "\xF0\x9F\xA6\x99";
  auto ids = tokenize(tok, "a" + llama, false, false);
  ASSERT_GE(ids.size(), 4u);
  ids.erase(ids.begin(), ids.end() - 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(tok.vocab.types[ids[i]], TokenType::Byte);
    EXPECT_EQ(token_to_piece(tok, ids[i]), std::string(1, llama[i]));
  }
  StreamDecoder d = make_stream_decoder(tok, false);
  EXPECT_EQ(decode_next(d, ids[0]), "");
  EXPECT_EQ(decode_next(d, ids[1]), "");
  EXPECT_EQ(decode_next(d, ids[2]), "");
  EXPECT_EQ(decode_next(d, ids[3]), llama);
  EXPECT_EQ(decode_flush(d), "");
}

TEST(TokenizerStream, InvalidBytesBecomeReplacement) {
  WGRT_REQUIRE_FILE(gguf_path("llama-spm"));
  const Tokenizer& tok = cached("gguf:llama-spm");
  auto byte = [&](uint8_t b) { return tok.byte_token[b]; };
  StreamDecoder d = make_stream_decoder(tok, false);
  EXPECT_EQ(decode_next(d, byte(0x80)), "\xEF\xBF\xBD");  // stray continuation byte
  EXPECT_EQ(decode_next(d, byte(0xE2)), "");
  EXPECT_EQ(decode_next(d, byte(0x41)), "\xEF\xBF\xBD" "A");  // lead byte cut short
  EXPECT_EQ(decode_next(d, byte(0xC3)), "");
  EXPECT_EQ(decode_flush(d), "\xEF\xBF\xBD");  // unfinished at the end
  EXPECT_THROW(decode_next(d, tok.vocab.n_vocab()), TokenizerError);
  EXPECT_THROW(token_to_piece(tok, -1), TokenizerError);
}

TEST(TokenizerStream, Utf8Validation) {
  EXPECT_TRUE(is_valid_utf8("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\xA6\x99"));
  EXPECT_FALSE(is_valid_utf8("\xC0\x80"));          // overlong
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xE2\x82"));          // truncated
}

}  // namespace
}  // namespace wgrt::tokenizer::test
