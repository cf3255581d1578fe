#include "server/request.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "chat/chat_template.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"

namespace wgrt::server {

using nlohmann::ordered_json;

ApiError invalid_request(const std::string& message, const std::string& param) {
  return ApiError(400, "invalid_request_error", "invalid_value", message, param);
}

ordered_json error_json(const ApiError& e) {
  auto or_null = [](const std::string& s) { return s.empty() ? ordered_json(nullptr) : ordered_json(s); };
  return {{"error", {{"code", or_null(e.code)}, {"message", e.what()}, {"param", or_null(e.param)}, {"type", e.type}}}};
}

std::optional<Endpoint> endpoint_from_path(std::string_view path) {
  if (path == "/v1/completions" || path == "/completions") return Endpoint::Completions;
  if (path == "/v1/chat/completions" || path == "/chat/completions") return Endpoint::ChatCompletions;
  if (path == "/tokenize") return Endpoint::Tokenize;
  if (path == "/detokenize") return Endpoint::Detokenize;
  return std::nullopt;
}

namespace {

// What a parsed body may cost in memory, estimated as it parses: a JSON value's node, plus the
// heap of a container or of a string past the short-string buffer. The bound keeps a request's
// memory a small multiple of its body's size, whatever its shape.
size_t json_cost(nlohmann::json::parse_event_t ev, const ordered_json& parsed) {
  using E = nlohmann::json::parse_event_t;
  constexpr size_t kNode = 16, kHeap = 32, kShortString = 15;
  switch (ev) {
    case E::object_start:
    case E::array_start: return kNode + kHeap;
    case E::key:
    case E::value: {
      const size_t n = parsed.is_string() ? parsed.get_ref<const std::string&>().size() : 0;
      return kNode + (n > kShortString ? kHeap + n : 0);
    }
    default: return 0;
  }
}

}  // namespace

ordered_json parse_body(std::string_view body) {
  ordered_json j;
  size_t cost = 0;
  const size_t budget = kJsonCostPerByte * body.size() + (64u << 10);
  // Checked as the parser goes (nlohmann's parser is iterative): a value past the depth limit is
  // never built, so nothing recursive (copy, comparison, dump) ever meets it.
  const ordered_json::parser_callback_t check = [&](int depth, nlohmann::json::parse_event_t ev, ordered_json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if ((ev == E::object_start || ev == E::array_start) && size_t(depth) >= kMaxJsonDepth)
      throw ApiError(400, "invalid_request_error", "json_too_deep",
                     fmt::format("the request body nests objects and lists deeper than the limit of {} levels "
                                 "(hint: flatten the data)", kMaxJsonDepth));
    cost += json_cost(ev, parsed);
    if (cost > budget)
      throw ApiError(413, "invalid_request_error", "json_too_complex",
                     fmt::format("the request body holds too many JSON values for its {} bytes (over {} bytes of "
                                 "parsed values; hint: send fewer, larger values)", body.size(), budget));
    return true;
  };
  try {
    j = ordered_json::parse(body.begin(), body.end(), check);
  } catch (const nlohmann::json::out_of_range& e) {  // a number past double's range: 1e400
    throw ApiError(400, "invalid_request_error", "invalid_json",
                   fmt::format("the request body is not valid JSON: {}", e.what()));
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is 1-based; say where, as line:column, for a hand-written body.
    size_t line = 1, col = 1;
    for (size_t i = 0; i + 1 < e.byte && i < body.size(); ++i) {
      if (body[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw ApiError(400, "invalid_request_error", "invalid_json",
                   fmt::format("the request body is not valid JSON (line {}, column {}): {}", line, col, e.what()));
  }
  if (!j.is_object())
    throw ApiError(400, "invalid_request_error", "invalid_json",
                   fmt::format("the request body must be a JSON object, not {} (hint: send {{\"field\": ...}})",
                               j.type_name()));
  return j;
}

namespace {

// A field that may be absent or null (both mean "not given", as OpenAI's API reads them).
const ordered_json* field(const ordered_json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}
ordered_json* field(ordered_json& body, const char* name) {
  return const_cast<ordered_json*>(field(std::as_const(body), name));  // the same lookup, on a body it owns
}

ApiError wrong_type(const char* name, const char* expected, const ordered_json& got) {
  return ApiError(400, "invalid_request_error", "invalid_type",
                  fmt::format("'{}' must be {}, not {}", name, expected, got.type_name()), name);
}

std::optional<double> number_in(const ordered_json& body, const char* name, double lo, double hi,
                                bool lo_open = false) {
  const ordered_json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw wrong_type(name, "a number", *v);
  const double x = v->get<double>();
  if (!std::isfinite(x) || x > hi || x < lo || (lo_open && x == lo))
    throw invalid_request(fmt::format("'{}' is {}, outside {}{}, {}]", name, v->dump(), lo_open ? "(" : "[", lo, hi),
                          name);
  return x;
}

std::optional<int64_t> integer_in(const ordered_json& body, const char* name, int64_t lo, int64_t hi) {
  const ordered_json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) throw wrong_type(name, "an integer", *v);
  if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    throw invalid_request(fmt::format("'{}' is {}, above {}", name, v->dump(), hi), name);
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) throw invalid_request(fmt::format("'{}' is {}, outside [{}, {}]", name, x, lo, hi), name);
  return x;
}

std::optional<bool> boolean(const ordered_json& body, const char* name) {
  const ordered_json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) throw wrong_type(name, "true or false", *v);
  return v->get<bool>();
}

// OpenAI's content: a string, or a list of parts of which wgrt reads the text ones.
std::string message_text(const ordered_json& content, size_t index) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    throw ApiError(400, "invalid_request_error", "invalid_type",
                   fmt::format("messages[{}].content must be a string or a list of parts, not {}", index,
                               content.type_name()), "messages");
  std::string text;
  for (size_t k = 0; k < content.size(); ++k) {
    const ordered_json& part = content[k];
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
      throw invalid_request(fmt::format("messages[{}].content[{}]: only {{\"type\": \"text\", \"text\": ...}} parts "
                                        "are supported", index, k), "messages");
    text += part["text"].get<std::string>();
  }
  return text;
}

ordered_json parse_messages(ordered_json& body) {
  ordered_json* v = field(body, "messages");
  if (!v) throw invalid_request("'messages' is required (a list of {\"role\", \"content\"} objects)", "messages");
  if (!v->is_array()) throw wrong_type("messages", "a list", *v);
  if (v->empty()) throw invalid_request("'messages' is empty (hint: send at least one user message)", "messages");
  ordered_json out = std::move(*v);  // moved, not copied: a request costs its body's memory once
  for (size_t i = 0; i < out.size(); ++i) {
    ordered_json& m = out[i];
    if (!m.is_object()) throw wrong_type("messages[]", "an object", m);
    if (auto c = m.find("content"); c != m.end() && !c->is_null()) *c = message_text(*c, i);
    // An assistant's tool-call turn comes back from clients with content null, which templates
    // read as text ('</think>' in content): it is the empty text.
    else if (m.contains("tool_calls") && !m["tool_calls"].is_null()) m["content"] = "";
  }
  try {
    return chat::normalize_messages(out);
  } catch (const std::invalid_argument& e) {
    throw invalid_request(e.what(), "messages");
  }
}

std::string parse_prompt(const ordered_json& body) {
  const ordered_json* v = field(body, "prompt");
  if (!v) throw invalid_request("'prompt' is required (a string)", "prompt");
  if (v->is_string()) return v->get<std::string>();
  if (v->is_array() && v->size() == 1 && (*v)[0].is_string()) return (*v)[0].get<std::string>();
  if (v->is_array())
    throw invalid_request("'prompt' as a list must hold exactly one string (batched prompts are not supported)",
                          "prompt");
  throw wrong_type("prompt", "a string", *v);
}

std::vector<std::string> parse_stop(const ordered_json& body) {
  const ordered_json* v = field(body, "stop");
  if (!v) return {};
  if (v->is_string()) return {v->get<std::string>()};
  if (!v->is_array()) throw wrong_type("stop", "a string or a list of strings", *v);
  if (v->size() > 4) throw invalid_request(fmt::format("'stop' has {} strings, at most 4 are allowed", v->size()), "stop");
  std::vector<std::string> out;
  for (const ordered_json& s : *v) {
    if (!s.is_string()) throw wrong_type("stop", "a string or a list of strings", s);
    out.push_back(s.get<std::string>());
  }
  return out;
}

}  // namespace

namespace {

constexpr uint8_t kBoth = kChat | kText;
using enum FieldUse;

// The words docs/SERVER.md's table repeats (a test holds them together).
constexpr FieldRule kFieldTable[] = {
    {"model", kBoth, Implemented, "any name is accepted: one model is served; responses name it by its id"},
    {"messages", kChat, Implemented, "text content (a string or text parts); other parts are refused"},
    {"prompt", kText, Implemented, "a string, or a list of one string"},
    {"temperature", kBoth, Implemented, "[0, 2]; 0 is greedy"},
    {"top_p", kBoth, Implemented, "(0, 1]"},
    {"top_k", kBoth, Implemented, "an integer >= 0 (0: off); default 40"},
    {"min_p", kBoth, Implemented, "[0, 1]"},
    {"max_tokens", kBoth, Implemented, ">= 1; default: until an end token or the context is full"},
    {"max_completion_tokens", kChat, Implemented, "as max_tokens"},
    {"stop", kBoth, Implemented, "a string or a list of up to 4"},
    {"seed", kBoth, Implemented, "an integer: the same seed and request give the same text"},
    {"stream", kBoth, Implemented, "server-sent events ending in data: [DONE]"},
    {"stream_options", kBoth, Implemented,
     "include_usage is implemented; include_obfuscation is ignored (no obfuscation field is sent)"},
    {"tools", kChat, Implemented,
     "given to the chat template; the reply's tool calls (Hermes/Qwen <tool_call>, Llama 3.x JSON, Mistral "
     "[TOOL_CALLS], as the template shows) come back as tool_calls"},
    {"tool_choice", kChat, Implemented,
     "\"auto\" (the default); \"none\" leaves the tools out of the prompt and parses no calls; \"required\" or a "
     "named function holds the reply to a call by a grammar made from the tools' parameter schemas (Hermes/Qwen "
     "and Llama 3.x JSON formats)"},
    {"parallel_tool_calls", kChat, Implemented,
     "true (the default) is accepted; false with tools is refused (wgrt cannot hold the model to one call)"},
    {"enable_thinking", kChat, Implemented, "wgrt extension: the template's enable_thinking variable"},
    {"chat_template_kwargs", kChat, Implemented, "an object; its enable_thinking is read, other keys are refused"},
    {"echo", kText, Implemented, "true puts the prompt before the generated text (streamed: in the first chunk)"},
    {"n", kBoth, Implemented,
     "1 to 16 choices, each its own sequence of the batched step (prefilled each); with a seed, choice i samples "
     "with seed + i"},
    {"best_of", kText, Refused, "1 only"},
    {"logprobs", kBoth, Implemented,
     "chat: true returns each token's log-probability (and top_logprobs alternatives); completions: an integer "
     "0 to 20, the alternatives per token. The model's distribution: log-softmax of the logits at temperature 1, "
     "before logit_bias and penalties"},
    {"top_logprobs", kChat, Implemented, "0 to 20 alternatives per token; needs logprobs: true"},
    {"presence_penalty", kBoth, Implemented,
     "-2 to 2, subtracted from the logit of each token among the last repeat_last_n (the prompt's included)"},
    {"frequency_penalty", kBoth, Implemented,
     "-2 to 2, times a token's count among the last repeat_last_n, subtracted from its logit"},
    {"repeat_penalty", kBoth, Implemented,
     "(0, 10]: the last repeat_last_n tokens' positive logits divided by it, negative ones multiplied"},
    {"repeat_last_n", kBoth, Implemented, "the tokens the penalties look at: 0 to 2^20 (default 64), -1 all"},
    {"logit_bias", kBoth, Implemented,
     "an object of token ids (as strings) to -100..100 added to their logits; -100 bans a token"},
    {"response_format", kBoth, Implemented,
     "text; json_object (any JSON object); json_schema with json_schema.schema (types, properties, required, "
     "enum, const, items, anyOf, additionalProperties, min/max items and length), by constrained sampling; "
     "strict is accepted"},
    {"grammar", kBoth, Implemented, "a GBNF grammar (start rule root) the reply is held to"},
    {"json_schema", kBoth, Implemented, "a JSON schema the reply is held to (as response_format json_schema)"},
    {"suffix", kText, Refused, "\"\" only: fill-in-the-middle is not implemented"},
    {"functions", kChat, Refused, "deprecated by OpenAI: send tools"},
    {"function_call", kChat, Refused, "deprecated by OpenAI: send tool_choice"},
    {"audio", kChat, Refused, "text only"},
    {"modalities", kChat, Refused, "[\"text\"] only"},
    {"prediction", kChat, Refused, "predicted outputs are not implemented"},
    {"reasoning_effort", kChat, Refused, "send enable_thinking (true or false) instead"},
    {"verbosity", kChat, Refused, "not implemented; ask for brevity in the prompt"},
    {"web_search_options", kChat, Refused, "no web search"},
    {"store", kBoth, Refused, "false only: wgrt stores no completions"},
    {"user", kBoth, Ignored, "an end-user id for the provider's abuse monitoring; wgrt logs no requests"},
    {"safety_identifier", kBoth, Ignored, "as user"},
    {"metadata", kBoth, Ignored, "tags for stored completions; none are stored"},
    {"service_tier", kBoth, Ignored, "one queue serves every request"},
    {"prompt_cache_key", kBoth, Ignored, "a routing hint for the provider's cache; one server, same output"},
    {"cache_prompt", kBoth, Implemented,
     "true (the default): the longest start of the prompt that a free slot's KV cache holds is reused, only the rest is prefilled (usage.prompt_tokens_details.cached_tokens); false prefills it whole"},
};

// Fields often sent under another name (by llama-server's own clients), for the hint.
constexpr std::pair<std::string_view, std::string_view> kOtherNames[] = {
    {"n_predict", "max_tokens"},
    {"repetition_penalty", "repeat_penalty"},
    {"stop_sequences", "stop"},
    {"input", "prompt (or messages on /v1/chat/completions)"},
};

const char* endpoint_path(bool chat) { return chat ? "/v1/chat/completions" : "/v1/completions"; }

// Every key of the body is a field this endpoint knows (400 unknown_parameter naming it).
void check_known_fields(const ordered_json& body, bool chat) {
  const uint8_t mine = chat ? kChat : kText;
  for (const auto& [key, value] : body.items()) {
    const FieldRule* rule = nullptr;
    for (const FieldRule& f : kFieldTable)
      if (f.name == key) rule = &f;
    if (rule && (rule->endpoints & mine)) continue;
    std::string hint;
    if (rule)
      hint = fmt::format("it is a field of {}", endpoint_path(!chat));
    for (const auto& [other, ours] : kOtherNames)
      if (other == key) hint = fmt::format("did you mean '{}'?", ours);
    if (hint.empty()) hint = "leave it out; docs/SERVER.md lists the fields wgrt reads";
    throw ApiError(400, "invalid_request_error", "unknown_parameter",
                   fmt::format("'{}' is not a field of {} (hint: {})", key.substr(0, 64), endpoint_path(chat), hint),
                   key.substr(0, 64));
  }
}

ApiError unsupported(const char* name, const std::string& what, std::string_view note) {
  return ApiError(400, "invalid_request_error", "unsupported_parameter",
                  fmt::format("'{}' {}: wgrt does not support it (hint: {})", name, what, note), name);
}

std::string_view note_of(std::string_view name) {
  for (const FieldRule& f : kFieldTable)
    if (f.name == name) return f.note;
  return {};
}

// A refused field is accepted when absent, null, or equal to its default (`is_default`).
template <class F>
void refuse_unless(const ordered_json& body, const char* name, F&& is_default) {
  const ordered_json* v = field(body, name);
  if (v && !is_default(*v)) throw unsupported(name, fmt::format("is {}", v->dump().substr(0, 80)), note_of(name));
}

// logit_bias: {"token id": bias}, ids as decimal strings (JSON keys), biases in [-100, 100].
std::vector<std::pair<int32_t, float>> parse_logit_bias(const ordered_json& body) {
  const ordered_json* v = field(body, "logit_bias");
  if (!v) return {};
  if (!v->is_object()) throw wrong_type("logit_bias", "an object of token ids to numbers", *v);
  if (v->size() > kMaxLogitBias)
    throw invalid_request(fmt::format("'logit_bias' has {} entries, at most {} are allowed", v->size(), kMaxLogitBias),
                          "logit_bias");
  std::vector<std::pair<int32_t, float>> out;
  for (const auto& [key, value] : v->items()) {
    int64_t id = -1;
    const bool digits = !key.empty() && key.size() <= 10 && key.find_first_not_of("0123456789") == std::string::npos;
    if (digits) id = std::stoll(key);
    if (!digits || id > std::numeric_limits<int32_t>::max())
      throw invalid_request(fmt::format("'logit_bias' key \"{}\" is not a token id (hint: keys are token ids as "
                                        "strings, e.g. {{\"1234\": -100}}; /tokenize gives a text's ids)",
                                        key.substr(0, 32)), "logit_bias");
    if (!value.is_number())
      throw ApiError(400, "invalid_request_error", "invalid_type",
                     fmt::format("'logit_bias' of token {} must be a number, not {}", id, value.type_name()),
                     "logit_bias");
    const double b = value.get<double>();
    if (!std::isfinite(b) || b < -100 || b > 100)
      throw invalid_request(fmt::format("'logit_bias' of token {} is {}, outside [-100, 100]", id, value.dump()),
                            "logit_bias");
    out.emplace_back(int32_t(id), float(b));
  }
  // The same id may come twice as "7" and "07": one bias per token.
  std::sort(out.begin(), out.end());
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i].first == out[i - 1].first)
      throw invalid_request(fmt::format("'logit_bias' names token {} twice", out[i].first), "logit_bias");
  return out;
}

bool is_false(const ordered_json& v) { return v.is_boolean() && !v.get<bool>(); }

// tool_choice "auto" is what the template does with tools; "none" keeps them out of the
// prompt, so the model is not offered any (and its reply is not searched for calls). Forcing a
// call ("required", or a named function) is marked here; the grammar that holds the reply to
// it is made once the model's call format is known (server/tool_grammar.h).
void parse_tool_choice(const ordered_json& body, CompletionRequest& r) {
  if (const ordered_json* v = field(body, "tool_choice")) {
    if (!v->is_string() && !v->is_object()) throw wrong_type("tool_choice", "a string or an object", *v);
    if (v->is_string() && *v != "none" && *v != "auto" && *v != "required")
      throw invalid_request(fmt::format("'tool_choice' is {}; it must be \"none\", \"auto\", \"required\" or "
                                        "{{\"type\": \"function\", \"function\": {{\"name\": ...}}}}",
                                        v->dump().substr(0, 80)), "tool_choice");
    if (*v == "none") {
      r.tools = nullptr;
    } else if (*v != "auto") {
      if (r.tools.is_null() || r.tools.empty())
        throw invalid_request("'tool_choice' forces a call but no tools are given (hint: send tools)", "tool_choice");
      r.force_tool_call = true;
      if (v->is_object()) {
        const ordered_json* f = field(*v, "function");
        const ordered_json* name = f && f->is_object() ? field(*f, "name") : nullptr;
        const ordered_json* type = field(*v, "type");
        if (!type || *type != "function" || !name || !name->is_string())
          throw invalid_request("'tool_choice' as an object must be {\"type\": \"function\", \"function\": "
                                "{\"name\": ...}}", "tool_choice");
        r.forced_tool = name->get<std::string>();
        bool found = false;
        for (const ordered_json& t : r.tools)
          found |= t.is_object() && t.contains("function") && t["function"].is_object() &&
                   t["function"].contains("name") && t["function"]["name"] == r.forced_tool;
        if (!found)
          throw invalid_request(fmt::format("'tool_choice' names '{}', which is not among the tools",
                                            r.forced_tool.substr(0, 64)), "tool_choice");
      }
    }
  }
  if (auto x = boolean(body, "parallel_tool_calls"); x && !*x && !r.tools.is_null())
    throw unsupported("parallel_tool_calls", "is false", "leave it out: wgrt cannot hold the model to one call");
}

// response_format, grammar and json_schema: at most one, compiled here so a bad one is a 400.
void parse_structured(const ordered_json& body, CompletionRequest& r) {
  std::string gbnf, from;
  const auto schema = [&](const ordered_json& s, const std::string& where) {
    if (!s.is_object() && !s.is_boolean()) throw wrong_type(where.c_str(), "a JSON schema (an object)", s);
    try {
      gbnf = grammar::json_schema_to_gbnf(s);
    } catch (const grammar::GrammarError& e) {
      throw invalid_request(fmt::format("'{}': {}", where, e.what()), where);
    }
  };
  if (const ordered_json* v = field(body, "response_format")) {
    if (!v->is_object() || !v->contains("type") || !(*v)["type"].is_string())
      throw wrong_type("response_format", "an object with a type (text, json_object or json_schema)", *v);
    const std::string type = (*v)["type"];
    if (type == "json_object") {
      from = "response_format";
      if (const ordered_json* s = field(*v, "schema")) schema(*s, "response_format.schema");
      else gbnf = grammar::json_object_gbnf();
    } else if (type == "json_schema") {
      from = "response_format";
      const ordered_json* js = field(*v, "json_schema");
      if (!js || !js->is_object() || !js->contains("schema"))
        throw invalid_request("'response_format' json_schema needs json_schema.schema (hint: {\"type\": "
                              "\"json_schema\", \"json_schema\": {\"name\": ..., \"schema\": {...}}})",
                              "response_format");
      if (const ordered_json* st = field(*js, "strict"); st && !st->is_boolean())
        throw wrong_type("response_format.json_schema.strict", "true or false", *st);
      schema((*js)["schema"], "response_format.json_schema.schema");
    } else if (type != "text") {
      throw invalid_request(fmt::format("'response_format' type '{}' is not text, json_object or json_schema",
                                        type.substr(0, 64)), "response_format");
    }
  }
  if (const ordered_json* v = field(body, "json_schema")) {
    if (!from.empty()) throw invalid_request("send one of response_format, json_schema and grammar", "json_schema");
    from = "json_schema";
    schema(*v, "json_schema");
  }
  if (const ordered_json* v = field(body, "grammar")) {
    if (!v->is_string()) throw wrong_type("grammar", "a GBNF grammar (a string)", *v);
    if (!from.empty()) throw invalid_request("send one of response_format, json_schema and grammar", "grammar");
    from = "grammar";
    gbnf = v->get<std::string>();
  }
  if (from.empty() || gbnf.empty()) return;
  if (r.force_tool_call)
    throw invalid_request(fmt::format("'{}' and a forced tool_choice both constrain the reply; send one", from), from);
  try {
    r.sampling.grammar = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(gbnf));
  } catch (const grammar::GrammarError& e) {
    throw invalid_request(fmt::format("'{}': {}", from, e.what()), from);
  }
}

}  // namespace

const std::span<const FieldRule> kCompletionFields{kFieldTable};

CompletionRequest parse_completion(ordered_json body, bool chat) {
  check_known_fields(body, chat);
  CompletionRequest r;
  r.chat = chat;
  if (const ordered_json* v = field(body, "model")) {
    if (!v->is_string()) throw wrong_type("model", "a string", *v);
    r.model = v->get<std::string>();
  }
  if (chat) {
    r.messages = parse_messages(body);
    if (ordered_json* v = field(body, "tools")) {
      if (!v->is_array()) throw wrong_type("tools", "a list", *v);
      r.tools = std::move(*v);
    }
    r.enable_thinking = boolean(body, "enable_thinking");
    if (const ordered_json* v = field(body, "chat_template_kwargs")) {
      if (!v->is_object()) throw wrong_type("chat_template_kwargs", "an object", *v);
      for (const auto& [key, value] : v->items())
        if (key != "enable_thinking")
          throw unsupported("chat_template_kwargs", fmt::format("has '{}'", key.substr(0, 64)),
                            "only enable_thinking is passed to the template");
      if (const ordered_json* t = field(*v, "enable_thinking")) {
        if (!t->is_boolean()) throw wrong_type("chat_template_kwargs.enable_thinking", "true or false", *t);
        r.enable_thinking = t->get<bool>();
      }
    }
    parse_tool_choice(body, r);
  } else {
    r.prompt = parse_prompt(body);
    r.echo = boolean(body, "echo").value_or(false);
  }

  if (auto x = number_in(body, "temperature", 0, 2)) r.sampling.temperature = float(*x);
  if (auto x = number_in(body, "top_p", 0, 1, /*lo_open=*/true)) r.sampling.top_p = float(*x);
  if (auto x = integer_in(body, "top_k", 0, 1 << 20)) r.sampling.top_k = uint32_t(*x);
  if (auto x = number_in(body, "min_p", 0, 1)) r.sampling.min_p = float(*x);
  if (auto x = integer_in(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max())) {
    r.sampling.seed = uint64_t(*x);
    r.has_seed = true;
  }
  if (auto x = number_in(body, "presence_penalty", -2, 2)) r.sampling.presence_penalty = float(*x);
  if (auto x = number_in(body, "frequency_penalty", -2, 2)) r.sampling.frequency_penalty = float(*x);
  if (auto x = number_in(body, "repeat_penalty", 0, 10, /*lo_open=*/true)) r.sampling.repeat_penalty = float(*x);
  if (auto x = integer_in(body, "repeat_last_n", -1, 1 << 20))
    r.sampling.repeat_last_n = *x < 0 ? std::numeric_limits<uint32_t>::max() : uint32_t(*x);
  r.sampling.logit_bias = parse_logit_bias(body);
  if (auto x = integer_in(body, "n", 1, kMaxChoices)) r.n = uint32_t(*x);
  if (!chat)
    if (auto x = integer_in(body, "best_of", 1, 128); x && *x != 1)
      throw unsupported("best_of", fmt::format("is {}", *x), "send several requests and compare them yourself");
  // Chat's logprobs is a boolean with top_logprobs beside it, the completions' an integer (how
  // many alternatives; false is read as null there).
  if (chat) {
    const bool on = boolean(body, "logprobs").value_or(false);
    const std::optional<int64_t> top = integer_in(body, "top_logprobs", 0, kMaxTopLogprobs);
    if (top && *top > 0 && !on)
      throw invalid_request("'top_logprobs' needs 'logprobs': true (hint: send both, or leave top_logprobs out)",
                            "top_logprobs");
    if (on) r.logprobs = int32_t(top.value_or(0));
  } else if (const ordered_json* v = field(body, "logprobs"); v && !is_false(*v)) {
    if (!v->is_number_integer()) throw wrong_type("logprobs", "an integer", *v);
    r.logprobs = int32_t(*integer_in(body, "logprobs", 0, kMaxTopLogprobs));
  }
  parse_structured(body, r);
  const auto never = [](const ordered_json&) { return false; };
  refuse_unless(body, "store", is_false);
  if (chat) {
    for (const char* name : {"functions", "function_call", "audio", "prediction", "reasoning_effort", "verbosity",
                             "web_search_options"})
      refuse_unless(body, name, never);
    refuse_unless(body, "modalities", [](const ordered_json& v) { return v == ordered_json::array({"text"}); });
  } else {
    refuse_unless(body, "suffix", [](const ordered_json& v) { return v == ""; });
  }
  // max_completion_tokens replaced max_tokens in the chat API; either is read, the newer first.
  for (const char* name : {"max_tokens", "max_completion_tokens"})
    if (auto x = integer_in(body, name, 1, std::numeric_limits<int32_t>::max())) r.max_tokens = int32_t(*x);
  r.stop = parse_stop(body);
  r.cache_prompt = boolean(body, "cache_prompt").value_or(true);
  r.stream = boolean(body, "stream").value_or(false);
  if (const ordered_json* v = field(body, "stream_options")) {
    if (!v->is_object()) throw wrong_type("stream_options", "an object", *v);
    for (const auto& [key, value] : v->items())
      if (key != "include_usage" && key != "include_obfuscation")
        throw ApiError(400, "invalid_request_error", "unknown_parameter",
                       fmt::format("'stream_options.{}' is not an option wgrt knows (hint: include_usage)",
                                   key.substr(0, 64)), "stream_options");
    if (const ordered_json* u = field(*v, "include_usage")) {
      if (!u->is_boolean()) throw wrong_type("stream_options.include_usage", "true or false", *u);
      r.include_usage = u->get<bool>();
    }
  }
  return r;
}

TokenizeRequest parse_tokenize(const ordered_json& body) {
  TokenizeRequest r;
  const ordered_json* v = field(body, "content");
  if (!v) throw invalid_request("'content' is required (the text to tokenize)", "content");
  if (!v->is_string()) throw wrong_type("content", "a string", *v);
  r.content = v->get<std::string>();
  r.add_special = boolean(body, "add_special").value_or(true);
  return r;
}

DetokenizeRequest parse_detokenize(const ordered_json& body) {
  DetokenizeRequest r;
  const ordered_json* v = field(body, "tokens");
  if (!v) throw invalid_request("'tokens' is required (a list of token ids)", "tokens");
  if (!v->is_array()) throw wrong_type("tokens", "a list of integers", *v);
  for (const ordered_json& t : *v) {
    if (!t.is_number_integer()) throw wrong_type("tokens", "a list of integers", t);
    if (t.is_number_unsigned() ? t.get<uint64_t>() > uint64_t(std::numeric_limits<int32_t>::max())
                               : (t.get<int64_t>() < std::numeric_limits<int32_t>::min() ||
                                  t.get<int64_t>() > std::numeric_limits<int32_t>::max()))
      throw invalid_request(fmt::format("token id {} is out of range", t.dump()), "tokens");
    r.tokens.push_back(t.get<int32_t>());
  }
  return r;
}

void check_prompt_fits(size_t n_prompt, uint32_t n_ctx, const std::string& param) {
  if (n_prompt == 0) throw invalid_request("the prompt is empty after tokenization", param);
  if (n_prompt >= n_ctx)
    throw ApiError(400, "invalid_request_error", "context_length_exceeded",
                   fmt::format("the prompt has {} tokens, but the context holds {} (with room for at least one "
                               "generated token); hint: a shorter prompt, or start the server with a larger --ctx-size",
                               n_prompt, n_ctx), param);
}

void check_logit_bias(const CompletionRequest& r, int32_t n_vocab) {
  for (const auto& [id, bias] : r.sampling.logit_bias)
    if (id >= n_vocab)
      throw invalid_request(fmt::format("'logit_bias' names token {}, outside the vocabulary [0, {})", id, n_vocab),
                            "logit_bias");
}

void check_token_ids(const std::vector<int32_t>& ids, int32_t n_vocab) {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= n_vocab)
      throw invalid_request(fmt::format("tokens[{}] = {} is outside the vocabulary [0, {})", i, ids[i], n_vocab),
                            "tokens");
}

}  // namespace wgrt::server
