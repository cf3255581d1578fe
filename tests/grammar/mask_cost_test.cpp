// The cost of a step's mask on Llama 3's vocabulary (128k tokens): the index is built once per
// model, the mask once per constrained token. Logs the figures docs/STRUCTURED_OUTPUT.md quotes.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/token_index.h"
#include "model/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

using namespace wgrt;
using namespace wgrt::grammar;

TEST(GrammarMaskCost, Llama3VocabularyPerToken) {
  const std::string path = WGRT_SOURCE_DIR "/.deps/llama-vocab/models/ggml-vocab-llama-bpe.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is missing (hint: tools/setup-test-data.sh)";
  using clock = std::chrono::steady_clock;
  const auto ms = [](clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  model::GgufFile f = model::open_gguf(path);
  tokenizer::Tokenizer tok = tokenizer::build_tokenizer(tokenizer::vocab_from_gguf(f));
  auto t0 = clock::now();
  auto index = std::make_shared<const TokenIndex>(build_token_index(tok));
  const double build_ms = ms(clock::now() - t0);
  const std::string gbnf = json_schema_to_gbnf(nlohmann::ordered_json::parse(
      R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"]})"));
  Constraint c{make_matcher(std::make_shared<const Grammar>(parse_gbnf(gbnf))), index};
  std::vector<uint32_t> w(mask_words(index->n_vocab()));
  // Walk a fixed reply token by token (greedy tokenization of the text), timing each mask.
  const std::string reply = R"({"name": "Ada Lovelace, who wrote the first program", "age": 36})";
  std::vector<int32_t> ids = tokenizer::tokenize(tok, reply, false, false);
  double total = 0, worst = 0;
  for (int32_t id : ids) {
    auto t = clock::now();
    allowed_mask(c, w);
    const double d = ms(clock::now() - t);
    total += d, worst = std::max(worst, d);
    ASSERT_TRUE(mask_bit(w, size_t(id))) << "token " << id << " '" << index->pieces[size_t(id)] << "'";
    ASSERT_TRUE(accept_token(c, id));
  }
  allowed_mask(c, w);
  EXPECT_TRUE(is_complete(c.m.state));
  EXPECT_TRUE(mask_bit(w, size_t(tok.vocab.eos_id)) || mask_bit(w, size_t(tok.vocab.eot_id)));
  std::printf("[ grammar ] llama3 vocab %zu tokens: index %.1f ms once; mask %.3f ms/token mean, %.3f ms worst over "
              "%zu tokens\n", index->n_vocab(), build_ms, total / double(ids.size()), worst, ids.size());
}
