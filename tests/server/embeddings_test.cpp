// POST /v1/embeddings' request checks and response (server/embeddings.h), without a model:
// every input shape OpenAI takes, a 400 naming the field for each bad one, dimensions against
// the model's width and Matryoshka flag, base64 as little-endian f32.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <vector>

#include "server/embeddings.h"

namespace wgrt::server {
namespace {

using nlohmann::ordered_json;

EmbeddingRequest parse(const char* body) { return parse_embeddings(ordered_json::parse(body)); }

TEST(EmbeddingsRequest, TakesEachInputShape) {
  EmbeddingRequest r = parse(R"({"input": "hello", "model": "any"})");
  EXPECT_EQ(r.texts, std::vector<std::string>{"hello"});
  EXPECT_TRUE(r.token_ids.empty());
  EXPECT_EQ(r.model, "any");
  EXPECT_FALSE(r.base64);
  EXPECT_FALSE(r.dimensions);
  r = parse(R"({"input": ["a", "b c"], "encoding_format": "base64", "dimensions": 16, "user": "u1"})");
  EXPECT_EQ(r.texts, (std::vector<std::string>{"a", "b c"}));
  EXPECT_TRUE(r.base64);
  EXPECT_EQ(r.dimensions, 16);
  r = parse(R"({"input": [1, 2, 3]})");
  EXPECT_EQ(r.token_ids, (std::vector<std::vector<int32_t>>{{1, 2, 3}}));
  EXPECT_TRUE(r.texts.empty());
  r = parse(R"({"input": [[1, 2], [3]], "encoding_format": "float", "dimensions": null})");
  EXPECT_EQ(r.token_ids, (std::vector<std::vector<int32_t>>{{1, 2}, {3}}));
  EXPECT_FALSE(r.base64);
}

TEST(EmbeddingsRequest, RefusesBadFieldsByName) {
  struct Case {
    const char* body;
    const char* code;
    const char* param;
  };
  const Case cases[] = {
      {R"({})", "invalid_value", "input"},
      {R"({"input": null})", "invalid_value", "input"},
      {R"({"input": ""})", "invalid_value", "input"},
      {R"({"input": []})", "invalid_value", "input"},
      {R"({"input": ["a", ""]})", "invalid_value", "input"},
      {R"({"input": [[]]})", "invalid_value", "input"},
      {R"({"input": 5})", "invalid_type", "input"},
      {R"({"input": {"text": "a"}})", "invalid_type", "input"},
      {R"({"input": ["a", 1]})", "invalid_type", "input"},
      {R"({"input": [1, "a"]})", "invalid_type", "input"},
      {R"({"input": [[1], 2]})", "invalid_type", "input"},
      {R"({"input": [1.5]})", "invalid_type", "input"},
      {R"({"input": [-1]})", "invalid_value", "input"},
      {R"({"input": [4294967296]})", "invalid_value", "input"},
      {R"({"input": [true]})", "invalid_type", "input"},
      {R"({"input": "a", "model": 3})", "invalid_type", "model"},
      {R"({"input": "a", "encoding_format": "int8"})", "invalid_value", "encoding_format"},
      {R"({"input": "a", "encoding_format": 1})", "invalid_type", "encoding_format"},
      {R"({"input": "a", "dimensions": 0})", "invalid_value", "dimensions"},
      {R"({"input": "a", "dimensions": -3})", "invalid_value", "dimensions"},
      {R"({"input": "a", "dimensions": 1.5})", "invalid_type", "dimensions"},
      {R"({"input": "a", "dimensions": "8"})", "invalid_type", "dimensions"},
      {R"({"input": "a", "user": 7})", "invalid_type", "user"},
      {R"({"input": "a", "truncate": true})", "unknown_parameter", "truncate"},
  };
  for (const Case& c : cases) {
    try {
      parse(c.body);
      ADD_FAILURE() << c.body << ": accepted";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400) << c.body;
      EXPECT_EQ(e.code, c.code) << c.body << ": " << e.what();
      EXPECT_EQ(e.param, c.param) << c.body << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(c.param), std::string::npos) << e.what();
    }
  }
  std::string many = R"({"input": [)";
  for (size_t i = 0; i <= kMaxEmbeddingInputs; ++i) many += i ? ", \"a\"" : "\"a\"";
  EXPECT_THROW(parse((many + "]}").c_str()), ApiError);
}

TEST(EmbeddingsRequest, DimensionsAgainstTheModel) {
  EmbeddingRequest r;
  EXPECT_NO_THROW(check_dimensions(r, 64, false));
  r.dimensions = 64;
  EXPECT_NO_THROW(check_dimensions(r, 64, false));
  r.dimensions = 32;
  try {
    check_dimensions(r, 64, false);
    ADD_FAILURE() << "a truncation accepted without Matryoshka metadata";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "dimensions");
    EXPECT_NE(std::string(e.what()).find("Matryoshka"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(check_dimensions(r, 64, true));
  r.dimensions = 65;
  EXPECT_THROW(check_dimensions(r, 64, true), ApiError);
}

TEST(EmbeddingsResponse, Base64IsLittleEndianF32) {
  EXPECT_EQ(base64_f32(std::vector<float>{}), "");
  EXPECT_EQ(base64_f32(std::vector<float>{1.0f}), "AACAPw==");  // 00 00 80 3f
  EXPECT_EQ(base64_f32(std::vector<float>{1.0f, -2.0f}), "AACAPwAAAMA=");
  EXPECT_EQ(base64_f32(std::vector<float>{0.f, 0.f, 0.f}), "AAAAAAAAAAAAAAAA");
}

TEST(EmbeddingsResponse, OpenAIShape) {
  const ordered_json j = embeddings_json({{0.6f, 0.8f}, {1.f, 0.f}}, false, "m", 7);
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["model"], "m");
  ASSERT_EQ(j["data"].size(), 2u);
  EXPECT_EQ(j["data"][1]["object"], "embedding");
  EXPECT_EQ(j["data"][1]["index"], 1);
  EXPECT_EQ(j["data"][0]["embedding"], (std::vector<float>{0.6f, 0.8f}));
  EXPECT_EQ(j["usage"]["prompt_tokens"], 7);
  EXPECT_EQ(j["usage"]["total_tokens"], 7);
  const ordered_json b = embeddings_json({{1.f}}, true, "m", 1);
  EXPECT_EQ(b["data"][0]["embedding"], "AACAPw==");
}

// Every field of /v1/embeddings is in docs/SERVER.md's field table with its status.
TEST(EmbeddingsRequest, FieldsAreDocumented) {
  std::ifstream in(WGRT_SOURCE_DIR "/docs/SERVER.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), {});
  ASSERT_FALSE(doc.empty());
  for (const FieldRule& f : kEmbeddingFields) {
    const std::string row = fmt::format("| `{}` | embeddings | {} | {} |", f.name,
                                        f.use == FieldUse::Implemented ? "implemented" : "ignored", f.note);
    EXPECT_NE(doc.find(row), std::string::npos) << "docs/SERVER.md lacks the row\n" << row;
  }
}

}  // namespace
}  // namespace wgrt::server
