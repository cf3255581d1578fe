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
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

namespace {

ordered_json head_json(const ResponseHead& h, const char* object) {
  return {{"id", h.id}, {"object", object}, {"created", h.created}, {"model", h.model}};
}

ordered_json finish_json(std::string_view finish) {
  return finish.empty() ? ordered_json(nullptr) : ordered_json(std::string(finish));
}

}  // namespace

ordered_json completion_json(const ResponseHead& h, const std::string& text, std::string_view finish, const Usage& u) {
  ordered_json j = head_json(h, h.chat ? "chat.completion" : "text_completion");
  ordered_json choice = {{"index", 0}};
  if (h.chat)
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

ordered_json model_json(const std::string& model, int64_t created, uint32_t n_ctx) {
  return {{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "wgrt"}, {"meta", {{"n_ctx", n_ctx}}}};
}

ordered_json models_json(const std::string& model, int64_t created, uint32_t n_ctx) {
  return {{"object", "list"}, {"data", ordered_json::array({model_json(model, created, n_ctx)})}};
}

}  // namespace wgrt::server
