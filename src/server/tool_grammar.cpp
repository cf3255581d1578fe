#include "server/tool_grammar.h"

#include <fmt/format.h>

#include "grammar/json_schema.h"
#include "server/request.h"

namespace wgrt::server {

namespace {

std::string gbnf_literal(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += char(c);
    else if (c < 0x20) out += fmt::format("\\x{:02X}", c);
    else out += char(c);
  }
  return out + "\"";
}

ApiError bad(const std::string& what) { return ApiError(400, "invalid_request_error", "invalid_value", what, "tool_choice"); }

}  // namespace

std::string tool_call_gbnf(ToolFormat f, const nlohmann::ordered_json& tools, const std::string& only) {
  if (f != ToolFormat::Hermes && f != ToolFormat::Llama3Json)
    throw bad(fmt::format("'tool_choice' forces a call, but the model's template uses the {} tool-call format, which "
                          "wgrt has no grammar for (hint: \"auto\", or a Hermes/Qwen or Llama 3.x template)",
                          tool_format_name(f)));
  const char* args_key = f == ToolFormat::Llama3Json ? "parameters" : "arguments";
  std::string rules, alts;
  size_t k = 0;
  for (const auto& t : tools) {
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object()) continue;
    const auto& fn = t["function"];
    const std::string name = fn.contains("name") && fn["name"].is_string() ? fn["name"].get<std::string>() : "";
    if (name.empty() || (!only.empty() && name != only)) continue;
    const nlohmann::ordered_json params =
        fn.contains("parameters") && !fn["parameters"].is_null() ? fn["parameters"] : nlohmann::ordered_json::object();
    const std::string rule = fmt::format("args{}", k++);
    try {
      rules += grammar::json_schema_rules(params, rule);
    } catch (const grammar::GrammarError& e) {
      throw bad(fmt::format("tool '{}': its parameters: {}", name.substr(0, 64), e.what()));
    }
    const std::string head = nlohmann::ordered_json(name).dump();
    alts += (alts.empty() ? "" : " | ") + gbnf_literal("{\"name\": " + head + ", \"" + args_key + "\": ") + " " +
            rule + " \"}\"";
  }
  if (alts.empty()) throw bad("'tool_choice' forces a call, but no tool has a function with a name");
  std::string root = f == ToolFormat::Hermes ? "root ::= tcall (\"\\n\" tcall)*\ntcall ::= \"<tool_call>\\n\" call \"\\n</tool_call>\"\n"
                                             : "root ::= call\n";
  return root + "call ::= " + alts + "\n" + rules + grammar::json_base_rules();
}

std::shared_ptr<const grammar::Grammar> tool_call_grammar(ToolFormat f, const nlohmann::ordered_json& tools,
                                                          const std::string& only) {
  const std::string g = tool_call_gbnf(f, tools, only);
  try {
    return std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(g));
  } catch (const grammar::GrammarError& e) {
    throw bad(fmt::format("the tools' call grammar: {}", e.what()));
  }
}

}  // namespace wgrt::server
