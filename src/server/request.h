// The OpenAI-compatible API's requests and errors, as pure functions of the request body (no
// network, no model): what `wgrt serve` accepts, checked field by field before any work is
// queued. The HTTP glue (http.h) and the fuzz target `server_request` call these.
//
// One policy for the fields of /v1/chat/completions and /v1/completions (kCompletionFields,
// listed with the same words in docs/SERVER.md): every field is implemented, accepted and
// ignored because it cannot change the output (metadata), or refused with a 400 that names it
// and a hint; a value that only states the default (n: 1, logprobs: false, echo: false...) is
// accepted. A field outside the list is refused too (400 unknown_parameter), as OpenAI does:
// nothing a client sends is dropped without a word.
//   /tokenize             content (string), add_special (bool, default true)
//   /detokenize           tokens (list of integers)
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
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

// How the server treats a field of the completion endpoints.
enum class FieldUse : uint8_t {
  Implemented,  // read and honoured (some values may still be refused: `note` says which)
  Ignored,      // accepted and ignored: it cannot change what is generated (`note` says why)
  Refused,      // 400 unsupported_parameter unless it states the default (`note` says which)
};
inline constexpr uint8_t kChat = 1, kText = 2;  // FieldRule::endpoints bits
struct FieldRule {
  std::string_view name;
  uint8_t endpoints;  // kChat, kText or both
  FieldUse use;
  std::string_view note;
};
// Every field the two completion endpoints know, for the unknown-field check and the docs.
extern const std::span<const FieldRule> kCompletionFields;

struct CompletionRequest {
  bool chat = false;
  std::string model;                                                  // "" when not given
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // chat: normalized, text content
  nlohmann::ordered_json tools;                                       // null: none
  // tool_choice "required" (empty name) or a named function: the reply is held to a call by a
  // grammar made once the model's tool-call format is known (server/tool_grammar.h).
  bool force_tool_call = false;
  std::string forced_tool;
  std::optional<bool> enable_thinking;
  std::string prompt;  // completions
  bool echo = false;   // completions: the prompt comes back before the generated text
  llm::SamplerParams sampling{.temperature = 1.0f, .top_k = 40, .top_p = 1.0f, .min_p = 0.0f};
  bool has_seed = false;  // else the server draws one (choice i of n: seed + i)
  uint32_t n = 1;         // choices, each generated as its own sequence
  int32_t logprobs = -1;  // < 0: none; else log-probabilities with this many alternatives (0..20)
  int32_t max_tokens = -1;  // < 0: until EOS or the context is full
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  bool cache_prompt = true;  // reuse the longest prefix a free slot's KV cache holds (scheduler.h)
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

// A prompt of n_prompt tokens leaves room for at least one generated token in n_ctx (400
// naming both sizes otherwise, and `param`, the field that holds the prompt).
void check_prompt_fits(size_t n_prompt, uint32_t n_ctx, const std::string& param = "prompt");
// Every id in [0, n_vocab) (400 naming the first that is not).
void check_token_ids(const std::vector<int32_t>& ids, int32_t n_vocab);
// logit_bias's ids in [0, n_vocab) (400 naming the first that is not).
void check_logit_bias(const CompletionRequest& r, int32_t n_vocab);

// The most alternatives logprobs may ask for (OpenAI's top_logprobs limit), choices n may ask
// for, and logit_bias entries.
inline constexpr int32_t kMaxTopLogprobs = 20;
inline constexpr int64_t kMaxChoices = 16;
inline constexpr size_t kMaxLogitBias = 1024;

}  // namespace wgrt::server
