#include "server/embeddings.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <limits>

namespace wgrt::server {

using nlohmann::ordered_json;

namespace {

constexpr FieldRule kFields[] = {
    {"input", kText, FieldUse::Implemented,
     "a string, a list of strings, a list of token ids or a list of lists of token ids; each at most the context"},
    {"model", kText, FieldUse::Implemented, "any name: the one served model answers"},
    {"encoding_format", kText, FieldUse::Implemented, "float or base64 (little-endian f32)"},
    {"dimensions", kText, FieldUse::Implemented,
     "the model's width; fewer only for a Matryoshka-trained model (truncated, renormalized)"},
    {"user", kText, FieldUse::Ignored, "metadata"},
};

ApiError wrong_input(const std::string& what) {
  return ApiError(400, "invalid_request_error", "invalid_type",
                  fmt::format("'input' must be a string, a list of strings, a list of token ids or a list of lists "
                              "of token ids; {}", what), "input");
}

int32_t token_id(const ordered_json& v, const std::string& where) {
  if (!v.is_number_integer()) throw wrong_input(fmt::format("{} is {}, not an integer", where, v.type_name()));
  if (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t(std::numeric_limits<int32_t>::max())
                             : v.get<int64_t>() < 0)
    throw invalid_request(fmt::format("{} = {} is not a token id", where, v.dump()), "input");
  return int32_t(v.get<int64_t>());
}

std::vector<int32_t> token_list(const ordered_json& list, const std::string& where) {
  if (list.empty()) throw invalid_request(fmt::format("{} is an empty list of token ids", where), "input");
  std::vector<int32_t> ids;
  ids.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) ids.push_back(token_id(list[i], fmt::format("{}[{}]", where, i)));
  return ids;
}

void parse_input(const ordered_json& in, EmbeddingRequest& r) {
  if (in.is_string()) {
    if (in.get_ref<const std::string&>().empty())
      throw invalid_request("'input' is an empty string (hint: a text to embed)", "input");
    r.texts.push_back(in.get<std::string>());
    return;
  }
  if (!in.is_array()) throw wrong_input(fmt::format("not {}", in.type_name()));
  if (in.empty()) throw invalid_request("'input' is an empty list (hint: at least one text)", "input");
  if (in.size() > kMaxEmbeddingInputs)
    throw invalid_request(fmt::format("'input' holds {} inputs, past the limit of {} (hint: several requests)",
                                      in.size(), kMaxEmbeddingInputs), "input");
  const ordered_json& first = in[0];
  if (first.is_number()) {  // one list of token ids
    r.token_ids.push_back(token_list(in, "input"));
    return;
  }
  for (size_t i = 0; i < in.size(); ++i) {
    const ordered_json& e = in[i];
    const std::string where = fmt::format("input[{}]", i);
    if (first.is_string()) {
      if (!e.is_string()) throw wrong_input(fmt::format("{} is {} in a list of strings", where, e.type_name()));
      if (e.get_ref<const std::string&>().empty())
        throw invalid_request(fmt::format("{} is an empty string (hint: a text to embed)", where), "input");
      r.texts.push_back(e.get<std::string>());
    } else if (first.is_array()) {
      if (!e.is_array()) throw wrong_input(fmt::format("{} is {} in a list of token lists", where, e.type_name()));
      r.token_ids.push_back(token_list(e, where));
    } else {
      throw wrong_input(fmt::format("{} is {}", where, e.type_name()));
    }
  }
}

}  // namespace

const std::span<const FieldRule> kEmbeddingFields{kFields};

EmbeddingRequest parse_embeddings(const ordered_json& body) {
  for (const auto& [key, value] : body.items()) {
    bool known = false;
    for (const FieldRule& f : kFields) known |= f.name == key;
    if (!known)
      throw ApiError(400, "invalid_request_error", "unknown_parameter",
                     fmt::format("'{}' is not a field of /v1/embeddings (hint: input, model, encoding_format, "
                                 "dimensions, user)", key.substr(0, 64)), key.substr(0, 64));
  }
  EmbeddingRequest r;
  auto given = [&](const char* k) -> const ordered_json* {
    auto it = body.find(k);
    return it == body.end() || it->is_null() ? nullptr : &*it;
  };
  const ordered_json* in = given("input");
  if (!in) throw invalid_request("'input' is required (hint: a string or a list of strings)", "input");
  parse_input(*in, r);
  if (const ordered_json* m = given("model")) {
    if (!m->is_string())
      throw ApiError(400, "invalid_request_error", "invalid_type",
                     fmt::format("'model' must be a string, not {}", m->type_name()), "model");
    r.model = m->get<std::string>();
  }
  if (const ordered_json* f = given("encoding_format")) {
    if (!f->is_string())
      throw ApiError(400, "invalid_request_error", "invalid_type",
                     fmt::format("'encoding_format' must be a string, not {}", f->type_name()), "encoding_format");
    const std::string& e = f->get_ref<const std::string&>();
    if (e != "float" && e != "base64")
      throw invalid_request(fmt::format("'encoding_format' is '{}' (hint: float or base64)", e.substr(0, 32)),
                            "encoding_format");
    r.base64 = e == "base64";
  }
  if (const ordered_json* d = given("dimensions")) {
    if (!d->is_number_integer())
      throw ApiError(400, "invalid_request_error", "invalid_type",
                     fmt::format("'dimensions' must be an integer, not {}", d->type_name()), "dimensions");
    if (d->is_number_unsigned() ? d->get<uint64_t>() > uint64_t(std::numeric_limits<int32_t>::max()) ||
                                      d->get<uint64_t>() < 1
                                : d->get<int64_t>() < 1)
      throw invalid_request(fmt::format("'dimensions' is {}, not a width of at least 1", d->dump()), "dimensions");
    r.dimensions = d->get<int64_t>();
  }
  if (const ordered_json* u = given("user"); u && !u->is_string())
    throw ApiError(400, "invalid_request_error", "invalid_type",
                   fmt::format("'user' must be a string, not {}", u->type_name()), "user");
  return r;
}

void check_dimensions(const EmbeddingRequest& r, uint32_t n_embd, bool matryoshka) {
  if (!r.dimensions || *r.dimensions == int64_t(n_embd)) return;
  if (*r.dimensions > int64_t(n_embd))
    throw invalid_request(fmt::format("'dimensions' is {}, past the model's width of {}", *r.dimensions, n_embd),
                          "dimensions");
  if (!matryoshka)
    throw invalid_request(fmt::format("'dimensions' is {}, but the model's embeddings have {} and it was not trained "
                                      "to be truncated (no Matryoshka metadata) (hint: leave dimensions out, or {})",
                                      *r.dimensions, n_embd, n_embd), "dimensions");
}

std::string base64_f32(std::span<const float> v) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<uint8_t> bytes(v.size() * 4);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint32_t u = std::bit_cast<uint32_t>(v[i]);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + b] = uint8_t(u >> (8 * b));  // little-endian whatever the host
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t w = uint32_t(bytes[i]) << 16;
    if (n > 1) w |= uint32_t(bytes[i + 1]) << 8;
    if (n > 2) w |= bytes[i + 2];
    out += kAlphabet[(w >> 18) & 63];
    out += kAlphabet[(w >> 12) & 63];
    out += n > 1 ? kAlphabet[(w >> 6) & 63] : '=';
    out += n > 2 ? kAlphabet[w & 63] : '=';
  }
  return out;
}

ordered_json embeddings_json(const std::vector<std::vector<float>>& vectors, bool base64, const std::string& model,
                             size_t prompt_tokens) {
  ordered_json data = ordered_json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    ordered_json e = base64 ? ordered_json(base64_f32(vectors[i])) : ordered_json(vectors[i]);
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", std::move(e)}});
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", model},
          {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
}

}  // namespace wgrt::server
