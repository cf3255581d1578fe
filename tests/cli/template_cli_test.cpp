// `wgrt template` as a user meets it: the model's template (GGUF metadata or
// tokenizer_config.json beside a Hugging Face checkpoint) with its BOS/EOS texts,
// --chat-template overriding it, tool-call arguments given as a JSON string, and clear errors
// for bad files (exit 1) and bad flags (exit 2).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sys/wait.h>

#include "model/gguf_writer.h"
#include "model/random_model.h"
#include "support/hf_fixture.h"

namespace wgrt {
namespace {

struct Result {
  int code = -1;
  std::string out, err;
};

Result wgrt_template(const std::string& args) {
  std::string dir = test::temp_dir("tmplcli-run");
  std::string cmd = std::string(WGRT_BINARY) + " template " + args + " >" + dir + "/out 2>" + dir + "/err";
  int status = std::system(cmd.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  auto slurp = [](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  };
  r.out = slurp(dir + "/out");
  r.err = slurp(dir + "/err");
  return r;
}

// A llama-3-like template: BOS, headers, tool calls printed from their (object) arguments.
const char* kTemplate =
    "{{- bos_token }}\n"
    "{%- for m in messages %}\n"
    "    {{- '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' }}\n"
    "    {%- if m.tool_calls is defined %}\n"
    "        {%- for c in m.tool_calls %}{{ c.function.name }}({{ c.function.arguments | tojson }}) city={{ c.function.arguments.city }}{% endfor %}\n"
    "    {%- else %}\n"
    "        {{- m['content'] | trim }}\n"
    "    {%- endif %}\n"
    "    {{- '<|eot_id|>' }}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}\n"
    "{%- if tools is defined %}[{{ tools | length }} tools]{% endif %}{{ eos_token }}\n";

struct Files {
  std::string dir, gguf, bare_gguf, hf, messages, tools, calls;
};

const Files& files() {
  static Files f = [] {
    Files x;
    x.dir = test::temp_dir("tmplcli");
    model::GgufWriter w = model::make_random_model(model::RandomModelSpec{});
    x.bare_gguf = x.dir + "/bare.gguf";
    model::gguf_write_file(w, x.bare_gguf);
    model::gguf_set_string(w, "tokenizer.chat_template", kTemplate);
    x.gguf = x.dir + "/chat.gguf";
    model::gguf_write_file(w, x.gguf);
    x.hf = x.dir + "/hf";
    std::filesystem::create_directories(x.hf);
    nlohmann::ordered_json cfg = {
        {"bos_token", {{"__type", "AddedToken"}, {"content", "<s>"}}},
        {"eos_token", "</s>"},
        {"chat_template", nlohmann::ordered_json::array({{{"name", "default"}, {"template", "{{ bos_token }}D:{{ messages | length }}{{ eos_token }}"}},
                                                        {{"name", "tool_use"}, {"template", "T:{{ tools[0].name }}"}}})}};
    std::ofstream(x.hf + "/tokenizer_config.json") << cfg.dump();
    x.messages = x.dir + "/messages.json";
    std::ofstream(x.messages) << R"([{"role": "system", "content": " Be brief. "}, {"role": "user", "content": "Hi"}])";
    x.tools = x.dir + "/tools.json";
    std::ofstream(x.tools) << R"([{"name": "get_weather"}])";
    x.calls = x.dir + "/calls.json";
    std::ofstream(x.calls) << R"({"messages": [{"role": "user", "content": "Weather?"}, {"role": "assistant", "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}]})";
    return x;
  }();
  return f;
}

TEST(TemplateCli, GgufTemplateWithItsBosAndEos) {
  Result r = wgrt_template("-m " + files().gguf + " --messages " + files().messages);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
            "<|end_of_text|>");
  r = wgrt_template("-m " + files().gguf + " --messages " + files().messages + " --no-generation-prompt --tools " +
                    files().tools);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>[1 tools]<|end_of_text|>");
}

TEST(TemplateCli, ToolCallArgumentsGivenAsAStringBecomeAnObject) {
  Result r = wgrt_template("-m " + files().gguf + " --messages " + files().calls + " --no-generation-prompt");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWeather?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nget_weather({\"city\": \"Paris\"}) city=Paris<|eot_id|>"
            "<|end_of_text|>");
}

TEST(TemplateCli, HuggingFaceDirectoryAndNamedTemplates) {
  Result r = wgrt_template("-m " + files().hf + " --messages " + files().messages);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "<s>D:2</s>");
  r = wgrt_template("-m " + files().hf + " --messages " + files().messages + " --tools " + files().tools);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "T:get_weather");
  // chat_template.jinja beside tokenizer_config.json takes precedence.
  std::string hf2 = files().dir + "/hf2";
  std::filesystem::create_directories(hf2);
  std::filesystem::copy_file(files().hf + "/tokenizer_config.json", hf2 + "/tokenizer_config.json",
                             std::filesystem::copy_options::overwrite_existing);
  std::ofstream(hf2 + "/chat_template.jinja") << "J{{ bos_token }}{{ messages[-1].content }}{{ eos_token }}\n";
  r = wgrt_template("-m " + hf2 + " --messages " + files().messages);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "J<s>Hi</s>");
}

TEST(TemplateCli, ChatTemplateFileOverridesTheModels) {
  std::string t = files().dir + "/over.jinja";
  std::ofstream(t) << "{% for m in messages %}{{ m.role[0] }}{% endfor %}|{{ bos_token }}\n";
  Result r = wgrt_template("-m " + files().gguf + " --chat-template " + t + " --messages " + files().messages);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "su|<|begin_of_text|>");
  // A model without a template still gives its BOS text.
  r = wgrt_template("-m " + files().bare_gguf + " --chat-template " + t + " --messages " + files().messages);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "su|<|begin_of_text|>");
  r = wgrt_template("--chat-template " + t + " --messages " + files().messages);  // no model: no bos_token
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "su|");
}

TEST(TemplateCli, BadFilesExitOne) {
  const std::string dir = files().dir;
  std::ofstream(dir + "/bad.json") << "[{\"role\": \"user\",\n \"content\": }]";
  Result r = wgrt_template("-m " + files().gguf + " --messages " + dir + "/bad.json");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("bad.json:2:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not valid JSON"), std::string::npos) << r.err;

  r = wgrt_template("-m " + files().gguf + " --messages " + dir + "/none.json");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("none.json: no such file"), std::string::npos) << r.err;

  std::ofstream(dir + "/norole.json") << R"([{"content": "x"}])";
  r = wgrt_template("-m " + files().gguf + " --messages " + dir + "/norole.json");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("message 0"), std::string::npos) << r.err;

  std::ofstream(dir + "/badargs.json")
      << R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{not json"}}]}])";
  r = wgrt_template("-m " + files().gguf + " --messages " + dir + "/badargs.json");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("message 0: tool call 0"), std::string::npos) << r.err;

  r = wgrt_template("-m " + files().bare_gguf + " --messages " + files().messages);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no tokenizer.chat_template"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--chat-template"), std::string::npos) << r.err;

  r = wgrt_template("-m " + dir + "/missing.gguf --messages " + files().messages);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("no such file"), std::string::npos) << r.err;

  std::ofstream(dir + "/syntax.jinja") << "ok\n{% for m in messages %}{{ m.role }\n";
  r = wgrt_template("--chat-template " + dir + "/syntax.jinja --messages " + files().messages);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("syntax.jinja:2:"), std::string::npos) << r.err;
}

TEST(TemplateCli, BadFlagsExitTwo) {
  for (std::string args : {std::string("--messages"), "-m " + files().gguf, "--messages " + files().messages,
                           "-m " + files().gguf + " --messages " + files().messages + " --enable-thinking maybe"}) {
    Result r = wgrt_template(args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find("hint"), std::string::npos) << args << ": " << r.err;
  }
}

}  // namespace
}  // namespace wgrt
