// The OpenAI-compatible API's requests and errors, as pure functions of the request body (no
// network, no model): what `wgrt serve` accepts, checked field by field before any work is
// queued. The HTTP glue (http.h) and the fuzz target `server_request` call these.
//
// Accepted fields (others are ignored, as OpenAI clients send extras):
//   /v1/chat/completions  messages (list of {role, content: string | [{type: "text", text}]}),
//                         tools, enable_thinking (wgrt extension)
//   /v1/completions       prompt (a string, or a list of one string)
//   both                  model, temperature [0, 2], top_p (0, 1], top_k >= 0, min_p [0, 1],
//                         max_tokens / max_completion_tokens >= 1, stop (string or list of up
//                         to 4), seed, stream, stream_options.include_usage,
//                         presence_penalty / frequency_penalty (0 only: 400 otherwise),
//                         n (1 only), logprobs (false only)
//   /tokenize             content (string), add_special (bool, default true)
//   /detokenize           tokens (list of integers)
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "llm/sampler.h"

namespace wgrt::server {

// An error the client gets as {"error": {"code", "message", "param", "type"}} with `status`.
struct ApiError : std::runtime_error {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string code;   // "" → null
  std::string param;  // the offending field, "" → null
  ApiError(int status_, std::string type_, std::string code_, const std::string& message, std::string param_ = {})
      : std::runtime_error(message), status(status_), type(std::move(type_)), code(std::move(code_)),
        param(std::move(param_)) {}
};

ApiError invalid_request(const std::string& message, const std::string& param = {});
nlohmann::ordered_json error_json(const ApiError& e);

enum class Endpoint : uint8_t { Completions, ChatCompletions, Tokenize, Detokenize };
// "/v1/completions" → Completions, ...; nullopt for other paths.
std::optional<Endpoint> endpoint_from_path(std::string_view path);

struct CompletionRequest {
  bool chat = false;
  std::string model;                                                  // "" when not given
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // chat: normalized, text content
  nlohmann::ordered_json tools;                                       // null: none
  std::optional<bool> enable_thinking;
  std::string prompt;  // completions
  llm::SamplerParams sampling{.temperature = 1.0f, .top_k = 40, .top_p = 1.0f, .min_p = 0.0f};
  bool has_seed = false;  // else the server draws one
  int32_t max_tokens = -1;  // < 0: until EOS or the context is full
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
};

struct TokenizeRequest {
  std::string content;
  bool add_special = true;
};

struct DetokenizeRequest {
  std::vector<int32_t> tokens;
};

// Limits on a body's JSON, checked while it parses (before any value past them is built).
inline constexpr size_t kMaxJsonDepth = 64;     // nested objects and lists (400 json_too_deep)
inline constexpr size_t kJsonCostPerByte = 12;  // parsed values' memory per body byte (413 json_too_complex)

// The body as JSON: ApiError (400) naming the line and column when it does not parse, or when
// it is not an object; 400 when it nests deeper than kMaxJsonDepth, 413 when its values would
// take more than kJsonCostPerByte times its size in memory.
nlohmann::ordered_json parse_body(std::string_view body);

// Throws ApiError (400) naming the field for a wrong type, a value out of range or an
// unsupported option.
// The body is taken by value so that a caller's temporary is moved, never copied.
CompletionRequest parse_completion(nlohmann::ordered_json body, bool chat);
TokenizeRequest parse_tokenize(const nlohmann::ordered_json& body);
DetokenizeRequest parse_detokenize(const nlohmann::ordered_json& body);

// The model a request names must be the one served (404 model_not_found otherwise); "" is fine.
void check_model(const CompletionRequest& r, const std::string& served_id);
// A prompt of n_prompt tokens leaves room for at least one generated token in n_ctx (400
// naming both sizes otherwise, and `param`, the field that holds the prompt).
void check_prompt_fits(size_t n_prompt, uint32_t n_ctx, const std::string& param = "prompt");
// Every id in [0, n_vocab) (400 naming the first that is not).
void check_token_ids(const std::vector<int32_t>& ids, int32_t n_vocab);

}  // namespace wgrt::server
