// POST /v1/embeddings, as OpenAI's API: the request's fields checked one by one (pure
// functions of the body, no model), and the response. The worker computes the vectors
// (llm/embed.h) for a job that holds a slot, its inputs one after another through the graph.
//
//   input            a string, a list of strings, a list of token ids, or a list of lists of
//                    token ids; none empty, at most kMaxEmbeddingInputs
//   model            any string (one model is served; the response names it by its id)
//   encoding_format  "float" (default) or "base64" (each vector's little-endian f32 bytes)
//   dimensions       the model's width, or fewer for a model trained Matryoshka-style
//   user             accepted and ignored (metadata)
// Every other field is refused with 400 unknown_parameter, as for the completion endpoints.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "server/request.h"

namespace wgrt::server {

inline constexpr size_t kMaxEmbeddingInputs = 2048;  // OpenAI's limit on a request's inputs

struct EmbeddingRequest {
  std::string model;
  std::vector<std::string> texts;               // input as text, or
  std::vector<std::vector<int32_t>> token_ids;  // input as token ids (exactly one of the two is filled)
  bool base64 = false;
  std::optional<int64_t> dimensions;
};

// The fields of /v1/embeddings with their status (docs/SERVER.md's table).
extern const std::span<const FieldRule> kEmbeddingFields;

// Throws ApiError (400) naming the field: a wrong type, an empty input, an unknown field or
// encoding, a dimensions below 1.
EmbeddingRequest parse_embeddings(const nlohmann::ordered_json& body);

// `dimensions` against the model: its width n_embd always; fewer only when it was trained
// Matryoshka-style (400 naming dimensions otherwise).
void check_dimensions(const EmbeddingRequest& r, uint32_t n_embd, bool matryoshka);

// A vector's little-endian f32 bytes in base64 (RFC 4648, padded).
std::string base64_f32(std::span<const float> v);

// {"object": "list", "data": [{"object": "embedding", "index", "embedding"}...], "model",
//  "usage": {"prompt_tokens", "total_tokens"}}.
nlohmann::ordered_json embeddings_json(const std::vector<std::vector<float>>& vectors, bool base64,
                                       const std::string& model, size_t prompt_tokens);

}  // namespace wgrt::server
