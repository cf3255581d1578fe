// The server's request checks, table-driven: each body, the status and the error code OpenAI's
// API gives for it (400 invalid_request_error for wrong types and values, 404 model_not_found)
// or the fields it must parse to.
#include <gtest/gtest.h>

#include "server/request.h"

namespace wgrt::server {
namespace {

using nlohmann::ordered_json;

struct Refused {
  const char* name;
  bool chat;
  const char* body;
  int status;
  const char* code;
  const char* param;  // "" → null
};

const Refused kRefused[] = {
    {"not_json", false, "{\"prompt\": ", 400, "invalid_json", ""},
    {"not_an_object", false, "[1, 2]", 400, "invalid_json", ""},
    {"number_out_of_range", false, "1e400", 400, "invalid_json", ""},
    {"a_string_body", true, "\"hello\"", 400, "invalid_json", ""},
    {"no_prompt", false, "{}", 400, "invalid_value", "prompt"},
    {"prompt_number", false, R"({"prompt": 3})", 400, "invalid_type", "prompt"},
    {"prompt_two_strings", false, R"({"prompt": ["a", "b"]})", 400, "invalid_value", "prompt"},
    {"no_messages", true, "{}", 400, "invalid_value", "messages"},
    {"messages_object", true, R"({"messages": {"role": "user"}})", 400, "invalid_type", "messages"},
    {"messages_empty", true, R"({"messages": []})", 400, "invalid_value", "messages"},
    {"message_not_object", true, R"({"messages": [3]})", 400, "invalid_type", "messages[]"},
    {"message_no_role", true, R"({"messages": [{"content": "hi"}]})", 400, "invalid_value", "messages"},
    {"content_number", true, R"({"messages": [{"role": "user", "content": 5}]})", 400, "invalid_type", "messages"},
    {"content_image_part", true,
     R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})", 400,
     "invalid_value", "messages"},
    {"tool_arguments_bad_json", true,
     R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{"}}]}]})", 400,
     "invalid_value", "messages"},
    {"tool_arguments_number_out_of_range", true,
     R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{\"x\": 1e400}"}}]}]})",
     400, "invalid_value", "messages"},
    {"tools_object", true, R"({"messages": [{"role": "user", "content": "x"}], "tools": {}})", 400, "invalid_type",
     "tools"},
    {"model_number", false, R"({"prompt": "x", "model": 1})", 400, "invalid_type", "model"},
    {"temperature_string", false, R"({"prompt": "x", "temperature": "hot"})", 400, "invalid_type", "temperature"},
    {"temperature_negative", false, R"({"prompt": "x", "temperature": -0.5})", 400, "invalid_value", "temperature"},
    {"temperature_above_2", false, R"({"prompt": "x", "temperature": 2.5})", 400, "invalid_value", "temperature"},
    {"top_p_zero", false, R"({"prompt": "x", "top_p": 0})", 400, "invalid_value", "top_p"},
    {"top_p_above_1", false, R"({"prompt": "x", "top_p": 1.01})", 400, "invalid_value", "top_p"},
    {"top_k_negative", false, R"({"prompt": "x", "top_k": -1})", 400, "invalid_value", "top_k"},
    {"top_k_float", false, R"({"prompt": "x", "top_k": 2.5})", 400, "invalid_type", "top_k"},
    {"min_p_above_1", false, R"({"prompt": "x", "min_p": 3})", 400, "invalid_value", "min_p"},
    {"max_tokens_zero", false, R"({"prompt": "x", "max_tokens": 0})", 400, "invalid_value", "max_tokens"},
    {"max_tokens_string", false, R"({"prompt": "x", "max_tokens": "8"})", 400, "invalid_type", "max_tokens"},
    {"max_tokens_huge", false, R"({"prompt": "x", "max_tokens": 99999999999})", 400, "invalid_value", "max_tokens"},
    {"max_completion_tokens_float", true,
     R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 1.5})", 400, "invalid_type",
     "max_completion_tokens"},
    {"stop_number", false, R"({"prompt": "x", "stop": 7})", 400, "invalid_type", "stop"},
    {"stop_list_of_numbers", false, R"({"prompt": "x", "stop": ["a", 7]})", 400, "invalid_type", "stop"},
    {"stop_five", false, R"({"prompt": "x", "stop": ["a", "b", "c", "d", "e"]})", 400, "invalid_value", "stop"},
    {"seed_float", false, R"({"prompt": "x", "seed": 1.5})", 400, "invalid_type", "seed"},
    {"stream_string", false, R"({"prompt": "x", "stream": "yes"})", 400, "invalid_type", "stream"},
    {"stream_options_list", false, R"({"prompt": "x", "stream": true, "stream_options": []})", 400, "invalid_type",
     "stream_options"},
    {"include_usage_number", false, R"({"prompt": "x", "stream": true, "stream_options": {"include_usage": 1}})", 400,
     "invalid_type", "stream_options.include_usage"},
    {"n_two", false, R"({"prompt": "x", "n": 2})", 400, "unsupported_parameter", "n"},
    {"n_zero", false, R"({"prompt": "x", "n": 0})", 400, "invalid_value", "n"},
    {"presence_penalty", false, R"({"prompt": "x", "presence_penalty": 0.5})", 400, "unsupported_parameter",
     "presence_penalty"},
    {"frequency_penalty", true, R"({"messages": [{"role": "user", "content": "x"}], "frequency_penalty": -1})", 400,
     "unsupported_parameter", "frequency_penalty"},
    {"penalty_out_of_range", false, R"({"prompt": "x", "presence_penalty": 3})", 400, "invalid_value",
     "presence_penalty"},
    {"logprobs", false, R"({"prompt": "x", "logprobs": true})", 400, "unsupported_parameter", "logprobs"},
};

class RequestRefused : public testing::TestWithParam<Refused> {};

TEST_P(RequestRefused, WithStatusCodeAndParam) {
  const Refused& c = GetParam();
  try {
    parse_completion(parse_body(c.body), c.chat);
    FAIL() << c.body << " was accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, c.status) << e.what();
    EXPECT_EQ(e.code, c.code) << e.what();
    EXPECT_EQ(e.param, c.param) << e.what();
    EXPECT_EQ(e.type, "invalid_request_error");
    // OpenAI's error object: {"error": {"code", "message", "param", "type"}}.
    const ordered_json j = error_json(e);
    ASSERT_TRUE(j.contains("error"));
    EXPECT_EQ(j["error"]["code"], c.code);
    EXPECT_EQ(j["error"]["message"], e.what());
    EXPECT_EQ(j["error"]["type"], "invalid_request_error");
    if (*c.param)
      EXPECT_EQ(j["error"]["param"], c.param);
    else
      EXPECT_TRUE(j["error"]["param"].is_null());
  }
}

INSTANTIATE_TEST_SUITE_P(Table, RequestRefused, testing::ValuesIn(kRefused),
                         [](const testing::TestParamInfo<Refused>& i) { return std::string(i.param.name); });

TEST(Request, BadJsonNamesLineAndColumn) {
  try {
    parse_body("{\n  \"prompt\": \"x\",\n  oops\n}");
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_NE(std::string(e.what()).find("line 3, column 3"), std::string::npos) << e.what();
  }
}

TEST(Request, CompletionFieldsParse) {
  const CompletionRequest r = parse_completion(
      parse_body(R"({"model": "m.gguf", "prompt": ["Once"], "temperature": 0, "top_p": 0.5, "top_k": 7,
                     "min_p": 0.1, "max_tokens": 12, "stop": "\n\n", "seed": -3, "stream": true,
                     "stream_options": {"include_usage": true}, "n": 1, "presence_penalty": 0,
                     "frequency_penalty": 0, "logprobs": false, "user": "ignored", "echo": null})"),
      false);
  EXPECT_FALSE(r.chat);
  EXPECT_EQ(r.model, "m.gguf");
  EXPECT_EQ(r.prompt, "Once");
  EXPECT_EQ(r.sampling.temperature, 0.0f);
  EXPECT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 7u);
  EXPECT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_EQ(r.max_tokens, 12);
  EXPECT_EQ(r.stop, std::vector<std::string>{"\n\n"});
  EXPECT_TRUE(r.has_seed);
  EXPECT_EQ(r.sampling.seed, uint64_t(int64_t(-3)));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
}

TEST(Request, DefaultsWhenFieldsAreAbsentOrNull) {
  const CompletionRequest r =
      parse_completion(parse_body(R"({"prompt": "x", "temperature": null, "max_tokens": null, "stop": null})"), false);
  // OpenAI's defaults: temperature 1, top_p 1; no budget but the context; no stop strings.
  EXPECT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_EQ(r.sampling.top_p, 1.0f);
  EXPECT_EQ(r.sampling.min_p, 0.0f);
  EXPECT_EQ(r.max_tokens, -1);
  EXPECT_TRUE(r.stop.empty());
  EXPECT_FALSE(r.has_seed);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
}

TEST(Request, ChatMessagesAreNormalized) {
  const CompletionRequest r = parse_completion(
      parse_body(R"({"messages": [
          {"role": "system", "content": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}]},
          {"role": "user", "content": "Weather?"},
          {"role": "assistant", "content": null,
           "tool_calls": [{"type": "function", "function": {"name": "w", "arguments": "{\"city\": \"Oslo\"}"}}]}],
        "max_completion_tokens": 5, "stop": ["a", "b"]})"),
      true);
  EXPECT_TRUE(r.chat);
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0]["content"], "Be brief.");  // text parts joined
  EXPECT_EQ(r.messages[1]["content"], "Weather?");
  // A tool call's arguments as a JSON string become an object, as templates expect.
  EXPECT_EQ(r.messages[2]["tool_calls"][0]["function"]["arguments"], ordered_json({{"city", "Oslo"}}));
  EXPECT_EQ(r.max_tokens, 5);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "b"}));
}

TEST(Request, UnknownModelIs404) {
  CompletionRequest r = parse_completion(parse_body(R"({"prompt": "x", "model": "gpt-4o"})"), false);
  try {
    check_model(r, "tiny.gguf");
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 404);
    EXPECT_EQ(e.code, "model_not_found");
    EXPECT_NE(std::string(e.what()).find("tiny.gguf"), std::string::npos);
  }
  r.model = "tiny.gguf";
  EXPECT_NO_THROW(check_model(r, "tiny.gguf"));
  r.model = "";
  EXPECT_NO_THROW(check_model(r, "tiny.gguf"));
}

TEST(Request, PromptOverTheContextNamesBothSizes) {
  EXPECT_NO_THROW(check_prompt_fits(511, 512));
  try {
    check_prompt_fits(512, 512, "messages");
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.code, "context_length_exceeded");
    EXPECT_EQ(e.param, "messages");
    const std::string m = e.what();
    EXPECT_NE(m.find("512 tokens"), std::string::npos) << m;
    EXPECT_NE(m.find("holds 512"), std::string::npos) << m;
  }
  EXPECT_THROW(check_prompt_fits(0, 512), ApiError);
}

TEST(Request, TokenizeAndDetokenize) {
  const TokenizeRequest t = parse_tokenize(parse_body(R"({"content": "hi", "add_special": false})"));
  EXPECT_EQ(t.content, "hi");
  EXPECT_FALSE(t.add_special);
  EXPECT_TRUE(parse_tokenize(parse_body(R"({"content": ""})")).add_special);
  EXPECT_THROW(parse_tokenize(parse_body(R"({"content": 1})")), ApiError);
  EXPECT_THROW(parse_tokenize(parse_body(R"({})")), ApiError);

  EXPECT_EQ(parse_detokenize(parse_body(R"({"tokens": [1, 2, 300]})")).tokens, (std::vector<int32_t>{1, 2, 300}));
  EXPECT_THROW(parse_detokenize(parse_body(R"({"tokens": "1 2"})")), ApiError);
  EXPECT_THROW(parse_detokenize(parse_body(R"({"tokens": [1.5]})")), ApiError);
  EXPECT_THROW(parse_detokenize(parse_body(R"({"tokens": [4294967296]})")), ApiError);
  EXPECT_NO_THROW(check_token_ids({0, 257}, 258));
  try {
    check_token_ids({0, 258}, 258);
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_NE(std::string(e.what()).find("tokens[1] = 258"), std::string::npos) << e.what();
  }
  EXPECT_THROW(check_token_ids({-1}, 258), ApiError);
}

// 100k levels of nesting in any field (60-200 KB bodies): refused while parsing, before any
// recursive copy or destructor meets the value (it used to crash the server: a stack overflow).
TEST(Request, DeepNestingIsRefusedBeforeAnyRecursiveWalk) {
  const size_t depth = 100000;
  const std::string lists = std::string(depth, '[') + std::string(depth, ']');
  std::string objects;
  for (size_t i = 0; i < depth; ++i) objects += "{\"a\":";
  objects += "1" + std::string(depth, '}');
  const std::vector<std::string> bodies = {
      R"({"messages": [{"role": "user", "content": )" + lists + "}]}",
      R"({"messages": [{"role": "user", "content": "x"}], "tools": )" + lists + "}",
      R"({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": )" + objects +
          "}}]}]}",
      R"({"prompt": "x", "unknown_field": )" + objects + "}",
      lists,
  };
  for (const std::string& body : bodies) {
    try {
      parse_completion(parse_body(body), true);
      ADD_FAILURE() << "accepted: " << body.substr(0, 80);
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400);
      EXPECT_EQ(e.code, "json_too_deep") << e.what();
      EXPECT_NE(std::string(e.what()).find(std::to_string(kMaxJsonDepth)), std::string::npos) << e.what();
    }
  }
  // At the limit it parses.
  const size_t ok = kMaxJsonDepth - 2;  // the body object and the field's own list included
  const std::string at_limit = R"({"prompt": "x", "extra": )" + std::string(ok, '[') + std::string(ok, ']') + "}";
  EXPECT_NO_THROW(parse_completion(parse_body(at_limit), false));
}

// A body's parsed values cost a bounded multiple of its size: a token list parses, a body of
// empty lists (48 bytes of values per 3 of text) does not.
TEST(Request, ParsedValuesAreBoundedByTheBodySize) {
  std::string tokens = R"({"tokens": [)";
  for (int i = 0; i < 100000; ++i) tokens += (i ? "," : "") + std::to_string(i % 10);
  tokens += "]}";
  EXPECT_EQ(parse_detokenize(parse_body(tokens)).tokens.size(), 100000u);
  std::string empties = R"({"prompt": "x", "junk": [)";
  for (int i = 0; i < 100000; ++i) empties += i ? ",[]" : "[]";
  empties += "]}";
  try {
    parse_body(empties);
    ADD_FAILURE() << "a body of empty lists was accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 413);
    EXPECT_EQ(e.code, "json_too_complex") << e.what();
  }
}

TEST(Request, Endpoints) {
  EXPECT_EQ(endpoint_from_path("/v1/completions"), Endpoint::Completions);
  EXPECT_EQ(endpoint_from_path("/v1/chat/completions"), Endpoint::ChatCompletions);
  EXPECT_EQ(endpoint_from_path("/tokenize"), Endpoint::Tokenize);
  EXPECT_EQ(endpoint_from_path("/detokenize"), Endpoint::Detokenize);
  EXPECT_EQ(endpoint_from_path("/v1/embeddings"), std::nullopt);
}

}  // namespace
}  // namespace wgrt::server
