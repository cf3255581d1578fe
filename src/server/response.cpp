#include "server/response.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>

namespace wgrt::server {

using nlohmann::ordered_json;

ResponseHead make_head(bool chat, const std::string& model, uint64_t serial) {
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  // Unique within a server's life (serial) and across restarts (the time).
  return {fmt::format("{}-{:x}{:06x}", chat ? "chatcmpl" : "cmpl", now, serial), now, model, chat};
}

const char* finish_reason(std::string_view stop_reason) {
  return stop_reason == "length" || stop_reason == "context" ? "length" : "stop";
}

ordered_json usage_json(const Usage& u) {
  ordered_json j = {{"prompt_tokens", u.prompt_tokens},
                    {"completion_tokens", u.completion_tokens},
                    {"total_tokens", u.prompt_tokens + u.completion_tokens},
                    {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
  if (u.dropped_messages > 0 || u.discarded_tokens > 0)
    j["context_shift"] = {{"dropped_messages", u.dropped_messages}, {"dropped_tokens", u.dropped_tokens},
                          {"discarded_tokens", u.discarded_tokens}};
  return j;
}

namespace {

ordered_json head_json(const ResponseHead& h, const char* object) {
  return {{"id", h.id}, {"object", object}, {"created", h.created}, {"model", h.model}};
}

ordered_json finish_json(std::string_view finish) {
  return finish.empty() ? ordered_json(nullptr) : ordered_json(std::string(finish));
}

ordered_json tool_call_json(const ToolCall& c) {
  return {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
}

// A token's bytes as OpenAI lists them (the token text may hold part of a UTF-8 character).
ordered_json bytes_json(const std::string& t) {
  ordered_json b = ordered_json::array();
  for (unsigned char c : t) b.push_back(int(c));
  return b;
}

// A token's text for JSON: itself when it is valid UTF-8, else "bytes:" and its bytes as \xNN (as
// OpenAI writes partial characters), so two such tokens never collapse into one U+FFFD key.
std::string token_text(const std::string& t) {
  bool valid = true;
  for (size_t i = 0; i < t.size() && valid;) {
    const unsigned char c = static_cast<unsigned char>(t[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    valid = n != 0 && i + n <= t.size();
    for (size_t k = 1; valid && k < n; ++k) valid = (static_cast<unsigned char>(t[i + k]) & 0xC0) == 0x80;
    i += n;
  }
  if (valid) return t;
  std::string out = "bytes:";
  for (unsigned char c : t) out += fmt::format("\\x{:02x}", c);
  return out;
}

// -inf (a token the model gives no mass) has no JSON number: OpenAI's floor, -9999.
double logprob_value(float x) { return std::isfinite(x) ? double(x) : -9999.0; }

}  // namespace

ordered_json logprobs_json(bool chat, const std::vector<TokenLogprobs>& lp, size_t text_offset) {
  if (chat) {
    ordered_json content = ordered_json::array();
    for (const TokenLogprobs& t : lp) {
      ordered_json top = ordered_json::array();
      for (const auto& [token, logprob] : t.top)
        top.push_back({{"token", token_text(token)}, {"logprob", logprob_value(logprob)}, {"bytes", bytes_json(token)}});
      content.push_back({{"token", token_text(t.token)}, {"logprob", logprob_value(t.logprob)},
                         {"bytes", bytes_json(t.token)},
                         {"top_logprobs", std::move(top)}});
    }
    return {{"content", std::move(content)}, {"refusal", nullptr}};
  }
  ordered_json tokens = ordered_json::array(), values = ordered_json::array(), tops = ordered_json::array(),
               offsets = ordered_json::array();
  for (const TokenLogprobs& t : lp) {
    tokens.push_back(token_text(t.token));
    values.push_back(logprob_value(t.logprob));
    ordered_json top = ordered_json::object();
    for (const auto& [token, logprob] : t.top)
      if (!top.contains(token_text(token))) top[token_text(token)] = logprob_value(logprob);  // texts may repeat
    tops.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += t.token.size();
  }
  return {{"tokens", std::move(tokens)}, {"token_logprobs", std::move(values)}, {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

ordered_json completion_json(const ResponseHead& h, const std::vector<Choice>& choices, const Usage& u) {
  ordered_json j = head_json(h, h.chat ? "chat.completion" : "text_completion");
  ordered_json list = ordered_json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const Choice& c = choices[i];
    ordered_json choice = {{"index", i}};
    if (h.chat && !c.calls.empty()) {
      ordered_json calls = ordered_json::array();
      for (const ToolCall& call : c.calls) calls.push_back(tool_call_json(call));
      choice["message"] = {{"role", "assistant"},
                           {"content", c.text.empty() ? ordered_json(nullptr) : ordered_json(c.text)},
                           {"tool_calls", std::move(calls)}};
    } else if (h.chat)
      choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    else
      choice["text"] = c.text;
    choice["logprobs"] = c.logprobs;
    choice["finish_reason"] = finish_json(c.finish);
    list.push_back(std::move(choice));
  }
  j["choices"] = std::move(list);
  j["usage"] = usage_json(u);
  return j;
}

ordered_json completion_json(const ResponseHead& h, const std::string& text, std::string_view finish, const Usage& u,
                             const std::vector<ToolCall>& calls) {
  return completion_json(h, std::vector<Choice>{{text, std::string(finish), calls, nullptr}}, u);
}

ordered_json chunk_json(const ResponseHead& h, std::string_view text, std::string_view finish, bool first,
                        bool include_usage, size_t index, const ordered_json& logprobs) {
  ordered_json j = head_json(h, h.chat ? "chat.completion.chunk" : "text_completion");
  ordered_json choice = {{"index", index}};
  if (h.chat) {
    ordered_json delta = ordered_json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || first) delta["content"] = std::string(text);
    choice["delta"] = delta;
  } else {
    choice["text"] = std::string(text);
  }
  choice["logprobs"] = logprobs;
  choice["finish_reason"] = finish_json(finish);
  j["choices"] = ordered_json::array({choice});
  if (include_usage) j["usage"] = nullptr;
  return j;
}

ordered_json tool_call_chunk_json(const ResponseHead& h, size_t index, const ToolCall& call, bool include_usage,
                                  size_t choice_index) {
  ordered_json j = head_json(h, "chat.completion.chunk");
  ordered_json c = tool_call_json(call);
  ordered_json indexed = {{"index", index}};
  indexed.update(c);
  ordered_json choice = {{"index", choice_index}};
  choice["delta"] = {{"tool_calls", ordered_json::array({std::move(indexed)})}};
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = nullptr;
  j["choices"] = ordered_json::array({choice});
  if (include_usage) j["usage"] = nullptr;
  return j;
}

ordered_json usage_chunk_json(const ResponseHead& h, const Usage& u) {
  ordered_json j = head_json(h, h.chat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = ordered_json::array();
  j["usage"] = usage_json(u);
  return j;
}

// Invalid UTF-8 (never produced by the stream decoder, but text may come from elsewhere)
// becomes U+FFFD rather than an exception mid-stream.
std::string sse_event(const ordered_json& j) {
  return "data: " + j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

std::string sse_done() { return "data: [DONE]\n\n"; }

std::string call_id_base(const ResponseHead& h) {
  const size_t dash = h.id.find('-');
  return "call_" + (dash == std::string::npos ? h.id : h.id.substr(dash + 1));
}

std::string stream_text_events(StreamState& s, std::string_view text, const std::vector<TokenLogprobs>& lp,
                               bool logprobs) {
  const std::string out = tool_stream_push(s.tools, text);
  // Log-probabilities go out with their tokens even while a tool call holds the text back.
  if (out.empty() && (!logprobs || lp.empty())) return {};
  const ordered_json l = logprobs ? logprobs_json(s.head.chat, lp, s.text_offset) : ordered_json(nullptr);
  for (const TokenLogprobs& t : lp) s.text_offset += t.token.size();
  return sse_event(chunk_json(s.head, out, "", false, s.include_usage, s.choice, l));
}

std::string stream_end_events(StreamState& s, std::string_view stop_reason, const Usage& u, bool last) {
  const ParsedReply r = tool_stream_finish(s.tools, call_id_base(s.head));
  std::string out;
  if (!r.content.empty()) out += sse_event(chunk_json(s.head, r.content, "", false, s.include_usage, s.choice));
  for (size_t k = 0; k < r.calls.size(); ++k)
    out += sse_event(tool_call_chunk_json(s.head, k, r.calls[k], s.include_usage, s.choice));
  const std::string_view finish = r.calls.empty() ? std::string_view(finish_reason(stop_reason)) : "tool_calls";
  out += sse_event(chunk_json(s.head, "", finish, false, s.include_usage, s.choice));
  if (!last) return out;
  if (s.include_usage) out += sse_event(usage_chunk_json(s.head, u));
  return out + sse_done();
}

ordered_json model_json(const std::string& model, int64_t created, uint32_t n_ctx) {
  return {{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "wgrt"}, {"meta", {{"n_ctx", n_ctx}}}};
}

ordered_json models_json(const std::string& model, int64_t created, uint32_t n_ctx) {
  return {{"object", "list"}, {"data", ordered_json::array({model_json(model, created, n_ctx)})}};
}

}  // namespace wgrt::server
