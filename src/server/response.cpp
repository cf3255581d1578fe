#include "server/response.h"

#include <fmt/format.h>

#include <chrono>

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

}  // namespace

ordered_json completion_json(const ResponseHead& h, const std::string& text, std::string_view finish, const Usage& u,
                             const std::vector<ToolCall>& calls) {
  ordered_json j = head_json(h, h.chat ? "chat.completion" : "text_completion");
  ordered_json choice = {{"index", 0}};
  if (h.chat && !calls.empty()) {
    ordered_json list = ordered_json::array();
    for (const ToolCall& c : calls) list.push_back(tool_call_json(c));
    choice["message"] = {{"role", "assistant"},
                         {"content", text.empty() ? ordered_json(nullptr) : ordered_json(text)},
                         {"tool_calls", std::move(list)}};
  } else if (h.chat)
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  else
    choice["text"] = text;
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_json(finish);
  j["choices"] = ordered_json::array({choice});
  j["usage"] = usage_json(u);
  return j;
}

ordered_json chunk_json(const ResponseHead& h, std::string_view text, std::string_view finish, bool first,
                        bool include_usage) {
  ordered_json j = head_json(h, h.chat ? "chat.completion.chunk" : "text_completion");
  ordered_json choice = {{"index", 0}};
  if (h.chat) {
    ordered_json delta = ordered_json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || first) delta["content"] = std::string(text);
    choice["delta"] = delta;
  } else {
    choice["text"] = std::string(text);
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_json(finish);
  j["choices"] = ordered_json::array({choice});
  if (include_usage) j["usage"] = nullptr;
  return j;
}

ordered_json tool_call_chunk_json(const ResponseHead& h, size_t index, const ToolCall& call, bool include_usage) {
  ordered_json j = head_json(h, "chat.completion.chunk");
  ordered_json c = tool_call_json(call);
  ordered_json indexed = {{"index", index}};
  indexed.update(c);
  ordered_json choice = {{"index", 0}};
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

std::string stream_text_events(StreamState& s, std::string_view text) {
  const std::string out = tool_stream_push(s.tools, text);
  return out.empty() ? std::string() : sse_event(chunk_json(s.head, out, "", false, s.include_usage));
}

std::string stream_end_events(StreamState& s, std::string_view stop_reason, const Usage& u) {
  const ParsedReply r = tool_stream_finish(s.tools, call_id_base(s.head));
  std::string out;
  if (!r.content.empty()) out += sse_event(chunk_json(s.head, r.content, "", false, s.include_usage));
  for (size_t k = 0; k < r.calls.size(); ++k)
    out += sse_event(tool_call_chunk_json(s.head, k, r.calls[k], s.include_usage));
  const std::string_view finish = r.calls.empty() ? std::string_view(finish_reason(stop_reason)) : "tool_calls";
  out += sse_event(chunk_json(s.head, "", finish, false, s.include_usage));
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
