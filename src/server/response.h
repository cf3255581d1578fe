// Responses and server-sent events in OpenAI's schema, as pure functions:
//   non-streaming   {"id", "object": "chat.completion" | "text_completion", "created", "model",
//                    "choices": [{"index": i, "message": {"role": "assistant", "content"} | "text",
//                                 "logprobs": null | logprobs_json, "finish_reason": "stop" | "length" | "tool_calls"}],
//                    "usage": {"prompt_tokens", "completion_tokens", "total_tokens",
//                              "prompt_tokens_details": {"cached_tokens"},
//                              "context_shift": {"dropped_messages", "dropped_tokens",
//                              "discarded_tokens"} (only when older turns were left out, or the
//                              reply filled the context and was shifted)}}
//   streaming       one `data: {json}\n\n` event per chunk ("chat.completion.chunk" with a
//                   "delta", or "text_completion" with "text"); the first chat chunk carries
//                   the role, the last one the finish_reason; with include_usage every chunk
//                   has "usage": null and a final chunk with no choices carries the usage;
//                   then `data: [DONE]\n\n`.
//   tool calls      message.tool_calls [{"id", "type": "function", "function": {"name",
//                   "arguments"}}] with content null when no text is left; streamed, one chunk a
//                   call whose delta.tool_calls holds it whole with its index.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "server/tool_calls.h"

namespace wgrt::server {

struct Usage {
  size_t prompt_tokens = 0;
  size_t completion_tokens = 0;
  size_t cached_tokens = 0;  // of the prompt's, reused from the slot's KV cache (scheduler.h's prompt cache)
  // Context shift (worker.h). Chat: the oldest turns left out so that the conversation fits.
  size_t dropped_messages = 0, dropped_tokens = 0;
  size_t discarded_tokens = 0;  // left the KV cache when the reply filled the context
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

// One generated token's log-probability and its alternatives' (llm::PickLogprobs with the
// tokens' text), best first.
struct TokenLogprobs {
  std::string token;  // its bytes (possibly part of a UTF-8 character)
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;
};
// The choice's "logprobs": chat {"content": [{"token", "logprob", "bytes", "top_logprobs":
// [{"token", "logprob", "bytes"}]}], "refusal": null}; completions {"tokens", "token_logprobs",
// "top_logprobs": [{token: logprob}], "text_offset"}, offsets counted from `text_offset`.
nlohmann::ordered_json logprobs_json(bool chat, const std::vector<TokenLogprobs>& lp, size_t text_offset = 0);

// One choice of a response (n > 1 gives several, by index).
struct Choice {
  std::string text;            // chat: the content (with calls, what is left of it)
  std::string finish;          // "stop", "length", "tool_calls"
  std::vector<ToolCall> calls;
  nlohmann::ordered_json logprobs;  // null, or logprobs_json's
};
nlohmann::ordered_json completion_json(const ResponseHead& h, const std::vector<Choice>& choices, const Usage& u);
// `calls` (chat): the reply's tool calls; then `text` is the content left, null when empty.
nlohmann::ordered_json completion_json(const ResponseHead& h, const std::string& text, std::string_view finish,
                                       const Usage& u, const std::vector<ToolCall>& calls = {});

// A streamed chunk: `text` (the delta), and the finish reason when it is the last.
// `choice`: its index (n > 1); `logprobs`: the chunk's tokens' (null: none).
nlohmann::ordered_json chunk_json(const ResponseHead& h, std::string_view text, std::string_view finish,
                                  bool first, bool include_usage, size_t choice = 0,
                                  const nlohmann::ordered_json& logprobs = nullptr);
// A streamed chat chunk carrying tool call `index`, whole.
nlohmann::ordered_json tool_call_chunk_json(const ResponseHead& h, size_t index, const ToolCall& call,
                                            bool include_usage, size_t choice = 0);
nlohmann::ordered_json usage_chunk_json(const ResponseHead& h, const Usage& u);

// A stream's events after its first: text as it is generated (held back from where a tool
// call may start, tool_calls.h), then at the end the held content, one chunk a tool call, the
// finish reason ("tool_calls" when there are calls), the usage when asked, and [DONE].
// With n > 1 a StreamState per choice; the usage chunk and [DONE] go out once, after the last
// choice ends (stream_end_events' `last`).
struct StreamState {
  ResponseHead head;
  bool include_usage = false;
  ToolStream tools;  // format None: text goes out as it comes
  size_t choice = 0;
  size_t text_offset = 0;  // completions' logprobs: the text sent so far
};
// `lp`: the log-probabilities of the tokens that made `text`, sent with it.
std::string stream_text_events(StreamState& s, std::string_view text, const std::vector<TokenLogprobs>& lp = {},
                               bool logprobs = false);
std::string stream_end_events(StreamState& s, std::string_view stop_reason, const Usage& u, bool last = true);

// The ids of a response's tool calls: "call_" and the response id's unique part, then "_k".
std::string call_id_base(const ResponseHead& h);

std::string sse_event(const nlohmann::ordered_json& j);  // "data: {...}\n\n"
std::string sse_done();                                  // "data: [DONE]\n\n"

// GET /v1/models/{id}: the model object; GET /v1/models: the list of the one served.
nlohmann::ordered_json model_json(const std::string& model, int64_t created, uint32_t n_ctx);
nlohmann::ordered_json models_json(const std::string& model, int64_t created, uint32_t n_ctx);

}  // namespace wgrt::server
