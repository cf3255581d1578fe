#include "server/tool_calls.h"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "server/request.h"

namespace wgrt::server {

using nlohmann::ordered_json;

namespace {

constexpr std::string_view kHermesOpen = "<tool_call>", kHermesClose = "</tool_call>";
constexpr std::string_view kMistralMarker = "[TOOL_CALLS]";
constexpr std::string_view kPythonTag = "<|python_tag|>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// One past the end of the JSON object or list that opens at s[pos], by its brackets (strings
// and escapes skipped); npos when it does not close or nests past kMaxJsonDepth (the model's
// text is untrusted input too).
size_t json_end(std::string_view s, size_t pos) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = pos; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxJsonDepth) return std::string_view::npos;
    } else if (c == '}' || c == ']') {
      if (depth == 0) return std::string_view::npos;
      if (--depth == 0) return i + 1;
    } else if (depth == 0) {
      return std::string_view::npos;  // s[pos] does not open an object or a list
    }
  }
  return std::string_view::npos;
}

// The JSON of a whole object or list (trimmed), or nullopt.
std::optional<ordered_json> parse_json(std::string_view s) {
  s = trim(s);
  if (s.empty() || json_end(s, 0) != s.size()) return std::nullopt;
  ordered_json j = ordered_json::parse(s.begin(), s.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// {"name": "f", "<args_key>": {...} or "{...}"}; `need_args`: the arguments key must be there
// (Llama 3.x, whose calls are bare JSON: a JSON answer with a "name" is not a call).
std::optional<ToolCall> call_of(const ordered_json& j, std::initializer_list<const char*> args_keys, bool need_args) {
  if (!j.is_object()) return std::nullopt;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) return std::nullopt;
  const ordered_json* args = nullptr;
  for (const char* key : args_keys)
    if (auto it = j.find(key); it != j.end() && !args) args = &*it;
  ToolCall c;
  c.name = name->get<std::string>();
  if (!args || args->is_null()) {
    if (need_args) return std::nullopt;
    c.arguments = "{}";
  } else if (args->is_object()) {
    c.arguments = args->dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  } else if (args->is_string()) {  // arguments already as text: it must hold an object
    std::optional<ordered_json> a = parse_json(args->get_ref<const std::string&>());
    if (!a || !a->is_object()) return std::nullopt;
    c.arguments = a->dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  } else {
    return std::nullopt;
  }
  return c;
}

ParsedReply as_content(std::string_view reply) { return {std::string(reply), {}}; }

ParsedReply parse_hermes(std::string_view reply) {
  ParsedReply r;
  size_t pos = 0;
  for (size_t open; (open = reply.find(kHermesOpen, pos)) != std::string_view::npos;) {
    r.content += reply.substr(pos, open - pos);
    const size_t body = open + kHermesOpen.size();
    const size_t close = reply.find(kHermesClose, body);
    // A last block may lack its closing tag (the reply ended at the end token).
    const std::string_view inner =
        close == std::string_view::npos ? reply.substr(body) : reply.substr(body, close - body);
    std::optional<ordered_json> j = parse_json(inner);
    std::optional<ToolCall> c = j ? call_of(*j, {"arguments", "parameters"}, false) : std::nullopt;
    if (!c) return as_content(reply);
    r.calls.push_back(std::move(*c));
    pos = close == std::string_view::npos ? reply.size() : close + kHermesClose.size();
  }
  r.content += reply.substr(pos);
  return r;
}

ParsedReply parse_mistral(std::string_view reply) {
  ParsedReply r;
  size_t pos = 0;
  for (size_t m; (m = reply.find(kMistralMarker, pos)) != std::string_view::npos;) {
    r.content += reply.substr(pos, m - pos);
    size_t p = m + kMistralMarker.size();
    while (p < reply.size() && is_space(reply[p])) ++p;
    const size_t end = json_end(reply, p);
    if (end == std::string_view::npos) return as_content(reply);
    std::optional<ordered_json> j = parse_json(reply.substr(p, end - p));
    if (!j) return as_content(reply);
    if (j->is_object()) *j = ordered_json::array({std::move(*j)});
    if (j->empty()) return as_content(reply);
    for (const ordered_json& e : *j) {
      std::optional<ToolCall> c = call_of(e, {"arguments", "parameters"}, false);
      if (!c) return as_content(reply);
      r.calls.push_back(std::move(*c));
    }
    pos = end;
  }
  r.content += reply.substr(pos);
  return r;
}

ParsedReply parse_llama3(std::string_view reply) {
  std::string_view s = trim(reply);
  if (s.starts_with(kPythonTag)) s = trim(s.substr(kPythonTag.size()));
  ParsedReply r;
  size_t p = 0;
  while (p < s.size()) {
    if (s[p] != '{') return as_content(reply);
    const size_t end = json_end(s, p);
    if (end == std::string_view::npos) return as_content(reply);
    std::optional<ordered_json> j = parse_json(s.substr(p, end - p));
    std::optional<ToolCall> c = j ? call_of(*j, {"parameters", "arguments"}, true) : std::nullopt;
    if (!c) return as_content(reply);
    r.calls.push_back(std::move(*c));
    p = end;
    while (p < s.size() && (is_space(s[p]) || s[p] == ';')) ++p;
  }
  if (r.calls.empty()) return as_content(reply);
  return r;
}

std::string_view marker_of(ToolFormat f) {
  switch (f) {
    case ToolFormat::Hermes: return kHermesOpen;
    case ToolFormat::Mistral: return kMistralMarker;
    default: return {};
  }
}

}  // namespace

ToolFormat detect_tool_format(std::string_view t) {
  if (t.find(kHermesOpen) != std::string_view::npos) return ToolFormat::Hermes;
  if (t.find(kMistralMarker) != std::string_view::npos) return ToolFormat::Mistral;
  // Llama 3.x: its header tokens and the JSON call it asks for ("parameters"), or the python tag.
  if (t.find(kPythonTag) != std::string_view::npos ||
      (t.find("<|start_header_id|>") != std::string_view::npos && t.find("\"parameters\"") != std::string_view::npos))
    return ToolFormat::Llama3Json;
  return ToolFormat::None;
}

const char* tool_format_name(ToolFormat f) {
  switch (f) {
    case ToolFormat::None: return "none";
    case ToolFormat::Hermes: return "hermes";
    case ToolFormat::Llama3Json: return "llama3-json";
    case ToolFormat::Mistral: return "mistral";
  }
  return "?";
}

ParsedReply parse_tool_calls(ToolFormat f, std::string_view reply, std::string_view id_base) {
  ParsedReply r;
  switch (f) {
    case ToolFormat::None: return as_content(reply);
    case ToolFormat::Hermes: r = parse_hermes(reply); break;
    case ToolFormat::Llama3Json: r = parse_llama3(reply); break;
    case ToolFormat::Mistral: r = parse_mistral(reply); break;
  }
  if (r.calls.empty()) return as_content(reply);
  r.content = std::string(trim(r.content));
  for (size_t k = 0; k < r.calls.size(); ++k) r.calls[k].id = fmt::format("{}_{}", id_base, k);
  return r;
}

std::string tool_stream_push(ToolStream& s, std::string_view text) {
  if (s.holding) {
    s.pending += text;
    return {};
  }
  if (s.format == ToolFormat::None) return std::string(text);
  if (s.format == ToolFormat::Llama3Json) {
    if (s.started) return std::string(text);
    s.pending += text;
    const std::string_view t = trim(s.pending);
    if (t.starts_with('{') || t.starts_with(kPythonTag)) {
      s.holding = true;
      return {};
    }
    if (t.empty() || kPythonTag.starts_with(t)) return {};  // a call may still open
    s.started = true;
    return std::exchange(s.pending, {});
  }
  const std::string_view marker = marker_of(s.format);
  s.pending += text;
  if (const size_t m = s.pending.find(marker); m != std::string::npos) {
    std::string out = s.pending.substr(0, m);
    s.pending.erase(0, m);
    s.holding = true;
    return out;
  }
  // Keep the longest tail that could be the marker's beginning.
  size_t keep = std::min(s.pending.size(), marker.size() - 1);
  while (keep > 0 && !marker.starts_with(std::string_view(s.pending).substr(s.pending.size() - keep))) --keep;
  std::string out = s.pending.substr(0, s.pending.size() - keep);
  s.pending.erase(0, s.pending.size() - keep);
  return out;
}

ParsedReply tool_stream_finish(ToolStream& s, std::string_view id_base) {
  ParsedReply r = s.holding ? parse_tool_calls(s.format, s.pending, id_base) : ParsedReply{s.pending, {}};
  s.pending.clear();
  s.holding = false;
  return r;
}

}  // namespace wgrt::server
