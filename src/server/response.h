// Responses and server-sent events in OpenAI's schema, as pure functions:
//   non-streaming   {"id", "object": "chat.completion" | "text_completion", "created", "model",
//                    "choices": [{"index": 0, "message": {"role": "assistant", "content"} | "text",
//                                 "logprobs": null, "finish_reason": "stop" | "length"}],
//                    "usage": {"prompt_tokens", "completion_tokens", "total_tokens"}}
//   streaming       one `data: {json}\n\n` event per chunk ("chat.completion.chunk" with a
//                   "delta", or "text_completion" with "text"); the first chat chunk carries
//                   the role, the last one the finish_reason; with include_usage every chunk
//                   has "usage": null and a final chunk with no choices carries the usage;
//                   then `data: [DONE]\n\n`.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace wgrt::server {

struct Usage {
  size_t prompt_tokens = 0;
  size_t completion_tokens = 0;
};

// What every response of one request shares.
struct ResponseHead {
  std::string id;  // "chatcmpl-..." or "cmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
  bool chat = false;
};

ResponseHead make_head(bool chat, const std::string& model, uint64_t serial);

// "stop" for an end token or a stop string, "length" for the token budget or the context.
const char* finish_reason(std::string_view stop_reason);

nlohmann::ordered_json usage_json(const Usage& u);
nlohmann::ordered_json completion_json(const ResponseHead& h, const std::string& text, std::string_view finish,
                                       const Usage& u);

// A streamed chunk: `text` (the delta), and the finish reason when it is the last.
nlohmann::ordered_json chunk_json(const ResponseHead& h, std::string_view text, std::string_view finish,
                                  bool first, bool include_usage);
nlohmann::ordered_json usage_chunk_json(const ResponseHead& h, const Usage& u);

std::string sse_event(const nlohmann::ordered_json& j);  // "data: {...}\n\n"
std::string sse_done();                                  // "data: [DONE]\n\n"

// GET /v1/models/{id}: the model object; GET /v1/models: the list of the one served.
nlohmann::ordered_json model_json(const std::string& model, int64_t created, uint32_t n_ctx);
nlohmann::ordered_json models_json(const std::string& model, int64_t created, uint32_t n_ctx);

}  // namespace wgrt::server
