// The fuzz targets' bodies, shared by the libFuzzer entry point (fuzz_main.cpp, built by
// tests/fuzz/CMakeLists.txt with clang under ASan/UBSan) and corpus_test.cpp, which replays
// every committed corpus file (seeds, and the inputs of crashes since fixed) in the normal and
// the sanitized test suites.
//
// A target returns when its input is accepted, or refused with the parser's own error
// (GgufError, ModelError, SafetensorsError, TokenizerError, server::ApiError, chat::TemplateError). Anything else escapes and is a
// bug: another exception type, a sanitizer report, or a broken property (FuzzFailure).
//
// Input layouts:
//   gguf            a GGUF file
//   safetensors     u32 n (little endian) | n bytes of config.json | a .safetensors file
//   tokenizer_json  tokenizer.json [ NUL tokenizer_config.json ]
//   tokenize        u8 selector (bits 0-3: which tokenizer, bit 4: parse_special) | text
//   server_request  u8 selector (bits 0-1: the endpoint, server/request.h; bit 2: /v1/embeddings
//                   instead, bit 3: its model trained Matryoshka-style) | the JSON body
//   http_request    u8 read size (1 + the byte: how the bytes arrive) | a connection's bytes (one or
//                   more requests: head, body of any transfer coding), parsed, checked and routed
//                   as `wgrt serve` does; the bodies of API routes go on to server_request's body
//   chat_template   u8 flags (bit 0: add_generation_prompt, bit 1: enable_thinking set, bit 2: its
//                   value) | template source [ NUL messages JSON ]
//   grammar         u8 selector (bit 0: a JSON schema, else GBNF text) | text [ NUL bytes ]: the
//                   grammar compiled (a schema's GBNF must always parse), the bytes matched, and
//                   the allowed-token mask over pieces of them checked token by token
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "chat/jinja.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/token_index.h"
#include "llm/sampler.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/model_file.h"
#include "model/safetensors.h"
#include "server/embeddings.h"
#include "server/http_wire.h"
#include "server/request.h"
#include "server/response.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace wgrt::fuzz {

struct FuzzFailure : std::logic_error {
  using std::logic_error::logic_error;
};

inline void check(bool ok, const std::string& what) {
  if (!ok) throw FuzzFailure(what);
}

// Weights up to this many elements are dequantized (bigger ones only bounds-checked), so one
// input stays fast and small in memory.
constexpr uint64_t kMaxDequantElements = 1 << 16;

// ---- tokenizers the targets use --------------------------------------------------------------

// A byte-level BPE tokenizer.json whose vocabulary holds every byte (so any text round-trips),
// two merges and three added tokens: "<|end|>" special, "<tool>" not, "<hi>" matched after the
// normalizer.
inline nlohmann::json tiny_byte_level_json(const nlohmann::json& normalizer) {
  using nlohmann::json;
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) {
    std::string s;
    tokenizer::append_utf8(s, tokenizer::byte_to_codepoint(static_cast<uint8_t>(b)));
    vocab[s] = b;
  }
  vocab["he"] = 256;
  vocab["\xC4\xA0t"] = 257;  // "Ġt"
  return json{{"normalizer", normalizer},
              {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
              {"decoder", {{"type", "ByteLevel"}}},
              {"post_processor", nullptr},
              {"added_tokens",
               {{{"id", 258}, {"content", "<|end|>"}, {"special", true}, {"normalized", false}},
                {{"id", 259}, {"content", "<tool>"}, {"special", false}, {"normalized", false}},
                {{"id", 260}, {"content", "<hi>"}, {"special", false}, {"normalized", true}}}},
              {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"h e", "\xC4\xA0 t"}}}}};
}

// A SentencePiece-style tokenizer.json (Prepend/Replace normalizer, byte fallback for every byte).
inline nlohmann::json tiny_spm_json() {
  using nlohmann::json;
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  for (int b = 0; b < 256; ++b) vocab[fmt::format("<0x{:02X}>", b)] = 3 + b;
  int id = 259;
  for (const char* t : {"\xE2\x96\x81", "a", "b", "\xE2\x96\x81" "a", "ab", "\xC3\xA9"}) vocab[t] = id++;
  return json{{"normalizer",
               {{"type", "Sequence"},
                {"normalizers",
                 {{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}},
                  {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}}}}}},
              {"pre_tokenizer", nullptr},
              {"added_tokens",
               {{{"id", 0}, {"content", "<unk>"}, {"special", true}},
                {{"id", 1}, {"content", "<s>"}, {"special", true}},
                {{"id", 2}, {"content", "</s>"}, {"special", true}}}},
              {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"\xE2\x96\x81 a", "a b"}},
                         {"byte_fallback", true}, {"unk_token", "<unk>"}}}};
}

struct FuzzTokenizer {
  std::string name;
  tokenizer::Tokenizer tok;
  bool byte_level = false;  // detokenize(tokenize(s)) == normalize(s) when s has no '<'
  bool spm = false;         // the same, when s also has no U+2581
};

inline std::vector<std::unique_ptr<FuzzTokenizer>> load_fuzz_tokenizers() {
  using nlohmann::json;
  std::vector<std::unique_ptr<FuzzTokenizer>> list;
  auto add = [&](const std::string& name, tokenizer::Vocab v, bool byte_level) {
    auto t = std::make_unique<FuzzTokenizer>();
    t->name = name;
    t->tok = tokenizer::build_tokenizer(std::move(v));
    t->byte_level = byte_level;
    t->spm = !byte_level;
    list.push_back(std::move(t));
  };
  auto from_json = [](const json& j, const std::string& name) {
    return tokenizer::vocab_from_tokenizer_json_text(j.dump(), "", name);
  };
  add("tiny byte-level", from_json(tiny_byte_level_json(nullptr), "tiny"), true);
  const json nfkc_lower = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFKC"}}, {{"type", "Lowercase"}}}}};
  add("tiny byte-level NFKC+Lowercase", from_json(tiny_byte_level_json(nfkc_lower), "tiny-norm"), true);
  const json nfd_strip = {{"type", "Sequence"},
                          {"normalizers", {{{"type", "NFD"}}, {{"type", "StripAccents"}},
                                           {{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", " "}},
                                           {{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}}}}};
  add("tiny byte-level NFD+StripAccents+Replace+Strip", from_json(tiny_byte_level_json(nfd_strip), "tiny-strip"),
      true);
  add("tiny spm", from_json(tiny_spm_json(), "tiny-spm"), false);
  // Real vocabularies, when tools/setup-test-data.sh has fetched them.
  const std::string deps = WGRT_SOURCE_DIR "/.deps";
  if (std::filesystem::exists(deps + "/tokenizer-json/qwen3/tokenizer.json"))
    add("qwen3 tokenizer.json", tokenizer::vocab_from_tokenizer_json(deps + "/tokenizer-json/qwen3/tokenizer.json"),
        true);
  if (std::filesystem::exists(deps + "/llama-vocab/models/ggml-vocab-llama-spm.gguf"))
    add("llama-spm gguf",
        tokenizer::vocab_from_gguf(model::open_gguf(deps + "/llama-vocab/models/ggml-vocab-llama-spm.gguf")), false);
  return list;
}

inline const std::vector<std::unique_ptr<FuzzTokenizer>>& fuzz_tokenizers() {
  static const auto list = load_fuzz_tokenizers();
  return list;
}

// Properties every tokenizer keeps on any text: ids in range, the stream decoder's output is
// valid UTF-8, and (where `exact`) the text comes back as the normalizer left it.
inline void check_round_trip(const tokenizer::Tokenizer& tok, std::string_view text, bool parse_special,
                             bool exact, const std::string& name) {
  const std::vector<int32_t> ids = tokenizer::tokenize(tok, text, false, parse_special);
  for (int32_t id : ids) check(id >= 0 && id < tok.vocab.n_vocab(), name + ": an id out of range");
  tokenizer::StreamDecoder d = tokenizer::make_stream_decoder(tok, true, true);
  std::string streamed;
  for (int32_t id : ids) streamed += tokenizer::decode_next(d, id);
  streamed += tokenizer::decode_flush(d);
  check(tokenizer::is_valid_utf8(streamed), name + ": the stream decoder gave invalid UTF-8");
  const std::string whole = tokenizer::detokenize(tok, ids, /*render_special=*/true);
  if (exact) {
    const std::string expected = tokenizer::normalize_text(tok, text);
    check(whole == expected, name + ": detokenize(tokenize(text)) is not the normalized text");
    if (tokenizer::is_valid_utf8(expected)) check(streamed == expected, name + ": the stream decoder changed valid text");
  }
}

// ---- targets -----------------------------------------------------------------------------------

// What an accepted config promises the graph builders: finite positive float hyperparameters.
inline void check_config(const model::ModelConfig& c) {
  check(std::isfinite(c.norm_eps) && c.norm_eps > 0, "norm epsilon is not finite and positive");
  check(std::isfinite(c.rope_theta) && c.rope_theta > 0, "rope theta is not finite and positive");
  for (float f : c.rope_freq_factors) check(std::isfinite(f) && f > 0, "a rope frequency factor is not finite and positive");
}

inline void fuzz_gguf(std::span<const uint8_t> data) {
  model::GgufFile f;
  try {
    f = model::parse_gguf(data, "fuzz.gguf");
  } catch (const model::GgufError&) {
    return;
  }
  for (const model::GgufTensorInfo& t : f.tensors)
    check(t.data >= data.data() && t.n_bytes <= size_t(data.data() + data.size() - t.data),
          "tensor '" + t.name + "' lies outside the file");
  try {
    const model::ModelConfig c = model::config_from_gguf(f);
    model::validate_config(c, f.path);
    check_config(c);
    const std::string arch = f.get_string("general.architecture");
    check(c.n_layers == f.get_uint(arch + ".block_count"), "the block count was truncated");
    check(c.dim == f.get_uint(arch + ".embedding_length"), "the embedding length was truncated");
  } catch (const model::GgufError&) {
  } catch (const model::ModelError&) {
  }
  try {
    const tokenizer::Tokenizer tok = tokenizer::build_tokenizer(tokenizer::vocab_from_gguf(f));
    check_round_trip(tok, "Hello w\xC3\xB6rld <s> 123 \xF0\x9F\x98\x80", true, false, "gguf vocab");
  } catch (const model::GgufError&) {
  } catch (const tokenizer::TokenizerError&) {
  }
  try {
    const model::ModelFile m = model::open_gguf_bytes(std::vector<uint8_t>(data.begin(), data.end()), "fuzz.gguf");
    for (const auto& [name, w] : m.weights) {
      const model::GgmlTypeInfo* info = model::ggml_type_info(uint32_t(w.type));
      if (info && info->supported && w.n_elements() <= kMaxDequantElements) model::weight_to_f32(w);
    }
  } catch (const model::GgufError&) {
  } catch (const model::ModelError&) {
  }
}

// A directory of this process for the files of one input, removed at exit.
struct ScratchDir {
  std::string path;
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

inline const std::string& fuzz_dir() {
  static const ScratchDir dir{[] {
    auto d = std::filesystem::temp_directory_path() / ("wgrt-fuzz-" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    return d.string();
  }()};
  return dir.path;
}

inline void write_bytes(const std::string& path, std::span<const uint8_t> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline void fuzz_safetensors(std::span<const uint8_t> data) {
  if (data.size() < 4) return;
  uint32_t n = 0;
  std::memcpy(&n, data.data(), 4);
  data = data.subspan(4);
  if (n > data.size()) return;
  const std::string dir = fuzz_dir();
  write_bytes(dir + "/config.json", data.first(n));
  write_bytes(dir + "/model.safetensors", data.subspan(n));
  try {
    const model::ModelFile m = model::open_model(dir);
    model::validate_config(m.config, dir);
    check_config(m.config);
    for (const model::StTensor& t : m.checkpoint->tensors) {
      uint64_t elems = 1, bytes = 0;
      for (uint64_t d : t.shape) check(!__builtin_mul_overflow(elems, d, &elems), "tensor '" + t.name + "': shape overflows");
      check(!__builtin_mul_overflow(elems, uint64_t(t.dtype == model::StDtype::F32 ? 4 : 2), &bytes),
            "tensor '" + t.name + "': its byte size overflows");
      check(bytes == t.n_bytes, "tensor '" + t.name + "': bytes and shape disagree");
    }
    for (const auto& [name, w] : m.weights)
      if (w.n_elements() <= kMaxDequantElements) model::weight_to_f32(w);
  } catch (const model::ModelError&) {
  } catch (const model::SafetensorsError&) {
  }
}

inline void fuzz_tokenizer_json(std::span<const uint8_t> data) {
  const std::string all(data.begin(), data.end());
  const size_t nul = all.find('\0');
  const std::string json_text = all.substr(0, nul);
  const std::string config_text = nul == std::string::npos ? "" : all.substr(nul + 1);
  try {
    const tokenizer::Tokenizer tok =
        tokenizer::build_tokenizer(tokenizer::vocab_from_tokenizer_json_text(json_text, config_text, "fuzz.json"));
    for (bool parse_special : {false, true})
      check_round_trip(tok, "Hello w\xC3\xB6rld cafe\xCC\x81 <|end|> <s> 123\n\xFF", parse_special, false,
                       "tokenizer.json");
  } catch (const tokenizer::TokenizerError&) {
  }
}

inline void fuzz_tokenize(std::span<const uint8_t> data) {
  if (data.empty()) return;
  const auto& list = fuzz_tokenizers();
  const FuzzTokenizer& t = *list[(data[0] & 0x0F) % list.size()];
  const bool parse_special = data[0] & 0x10;
  const std::string_view text(reinterpret_cast<const char*>(data.data() + 1), data.size() - 1);
  const bool plain = text.find('<') == std::string_view::npos;
  const bool exact = plain && (t.byte_level || (t.spm && text.find("\xE2\x96\x81") == std::string_view::npos));
  check_round_trip(t.tok, text, parse_special, exact, t.name);
}

// What the server refuses, it refuses as OpenAI's error JSON with a 4xx status; what it accepts
// makes a sampler and responses whose events stay one line each.
inline void check_api_error(const server::ApiError& e) {
  check(e.status >= 400 && e.status < 500, fmt::format("a client error with status {}", e.status));
  check(std::string(e.what()).size() > 0, "an error without a message");
  const std::string body = server::error_json(e).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  check(nlohmann::json::parse(body)["error"]["type"] == e.type, "the error JSON does not round-trip");
}

inline void check_accepted(const server::CompletionRequest& r) {
  llm::make_sampler(r.sampling);  // throws std::invalid_argument for values the parser let through
  check(r.max_tokens == -1 || r.max_tokens >= 1, "max_tokens out of range");
  check(r.stop.size() <= 4, "more than 4 stop strings");
  if (r.chat) {
    check(r.messages.is_array() && !r.messages.empty(), "chat without messages");
    for (const auto& m : r.messages) check(m.is_object() && m["role"].is_string(), "a message without a role");
    for (const auto& m : r.messages)
      check(!m.contains("content") || m["content"].is_null() || m["content"].is_string(), "content not flattened");
  }
  const server::ResponseHead head{"id", 0, r.model, r.chat};
  for (const std::string& text : r.stop.empty() ? std::vector<std::string>{r.prompt} : r.stop) {
    const std::string ev = server::sse_event(server::chunk_json(head, text, "", true, r.include_usage));
    check(ev.find('\n') == ev.size() - 2, "an SSE event spans lines");
  }
}

// A byte-level tokenizer for the prompts the server would build.
inline const tokenizer::Tokenizer& fuzz_server_tokenizer() { return fuzz_tokenizers().front()->tok; }

inline const chat::Template& fuzz_server_template() {
  static const chat::Template t = chat::parse_template(
      "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% if m.tool_calls %}"
      "{{ m.tool_calls | tojson }}{% endif %}<|end|>{% endfor %}{% if tools %}{{ tools | tojson }}{% endif %}"
      "{% if add_generation_prompt %}<|assistant|>{% endif %}", "fuzz template");
  return t;
}

inline void fuzz_server_request(std::span<const uint8_t> data) {
  if (data.empty()) return;
  const auto endpoint = server::Endpoint(data[0] & 3);
  const std::string_view body(reinterpret_cast<const char*>(data.data() + 1), data.size() - 1);
  try {
    const nlohmann::ordered_json j = server::parse_body(body);
    if (data[0] & 4) {  // as the server: the fields, the width, the inputs' tokens
      const server::EmbeddingRequest r = server::parse_embeddings(j);
      check(r.texts.empty() != r.token_ids.empty(), "an embedding request with both or neither input forms");
      check(r.texts.size() + r.token_ids.size() <= server::kMaxEmbeddingInputs, "more embedding inputs than allowed");
      server::check_dimensions(r, 64, (data[0] & 8) != 0);
      for (const std::vector<int32_t>& ids : r.token_ids)
        server::check_token_ids(ids, fuzz_server_tokenizer().vocab.n_vocab());
      for (const std::string& text : r.texts) tokenizer::tokenize(fuzz_server_tokenizer(), text, true, true);
      return;
    }
    switch (endpoint) {
      case server::Endpoint::Completions:
      case server::Endpoint::ChatCompletions: {
        const server::CompletionRequest r = server::parse_completion(j, endpoint == server::Endpoint::ChatCompletions);
        check_accepted(r);
        std::string prompt = r.prompt;
        if (r.chat) {
          chat::ChatInputs in;
          in.messages = r.messages;
          in.tools = r.tools;
          in.bos_token = "<s>";
          try {
            prompt = chat::render_chat(fuzz_server_template(), in, {.now = 1, .max_iterations = 100000});
          } catch (const chat::TemplateError&) {
            return;  // the server answers 400 naming the template
          }
        }
        // As the server: the messages' text is plain text, the template's markers special.
        std::vector<std::string_view> untrusted;
        for (const auto& m : r.messages)
          if (m.contains("content") && m["content"].is_string())
            untrusted.push_back(m["content"].get_ref<const std::string&>());
        const std::vector<tokenizer::TextSpan> spans =
            tokenizer::untrusted_spans(fuzz_server_tokenizer(), prompt, untrusted);
        for (size_t k = 0; k < spans.size(); ++k)
          check(spans[k].begin < spans[k].end && spans[k].end <= prompt.size() &&
                    (k == 0 || spans[k - 1].end < spans[k].begin),
                "untrusted spans not sorted, disjoint and inside the prompt");
        const auto ids = tokenizer::tokenize_with_plain_spans(fuzz_server_tokenizer(), prompt, true, spans);
        server::check_prompt_fits(ids.size(), 4096);
        break;
      }
      case server::Endpoint::Tokenize: {
        const server::TokenizeRequest r = server::parse_tokenize(j);
        tokenizer::tokenize(fuzz_server_tokenizer(), r.content, r.add_special, true);
        break;
      }
      case server::Endpoint::Detokenize: {
        const server::DetokenizeRequest r = server::parse_detokenize(j);
        server::check_token_ids(r.tokens, fuzz_server_tokenizer().vocab.n_vocab());
        tokenizer::detokenize(fuzz_server_tokenizer(), r.tokens);
        break;
      }
    }
  } catch (const server::ApiError& e) {
    check_api_error(e);
  }
}

// The template engine on any source and messages, bounded in loop steps; what it renders is
// a string, what it refuses is a TemplateError (or, for the messages, std::invalid_argument).
inline void fuzz_chat_template(std::span<const uint8_t> data) {
  if (data.empty()) return;
  const uint8_t flags = data[0];
  const std::string all(data.begin() + 1, data.end());
  const size_t nul = all.find('\0');
  const std::string source = all.substr(0, nul);
  chat::ChatInputs in;
  in.add_generation_prompt = flags & 1;
  if (flags & 2) in.enable_thinking = bool(flags & 4);
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  in.messages = nlohmann::ordered_json::parse(R"([{"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}])");
  if (nul != std::string::npos) {
    nlohmann::ordered_json m = nlohmann::ordered_json::parse(all.substr(nul + 1), nullptr, false);
    if (m.is_discarded()) return;
    try {
      in.messages = chat::normalize_messages(m);
    } catch (const std::invalid_argument&) {
      return;
    }
  }
  chat::Template t;
  try {
    t = chat::parse_template(source, "fuzz.jinja");
  } catch (const chat::TemplateError&) {
    return;
  }
  try {
    chat::render_chat(t, in, {.now = 1, .max_iterations = 20000});
  } catch (const chat::TemplateError&) {
  }
}

}  // namespace wgrt::fuzz

namespace wgrt::fuzz {

// A connection's bytes as `wgrt serve` reads them (server/http_wire.h), then its router.
inline void fuzz_http_request(std::span<const uint8_t> data) {
  if (data.empty()) return;
  struct Source : server::ByteSource {
    std::span<const uint8_t> bytes;
    size_t at = 0, step = 1;
    size_t read(char* dst, size_t n, std::error_code&) override {
      const size_t k = std::min({n, step, bytes.size() - at});
      std::memcpy(dst, bytes.data() + at, k);
      at += k;
      return k;
    }
  } src;
  src.step = size_t(data[0]) + 1;
  src.bytes = data.subspan(1);
  server::HttpLimits lim;
  lim.max_body = 1u << 16;
  lim.max_header_bytes = 4096;
  lim.max_field_bytes = 1024;
  lim.max_fields = 32;
  lim.max_target = 1024;
  const server::AccessPolicy policy{"k", {"https://ok.example"}, server::default_allowed_hosts("127.0.0.1")};
  auto check_error = [](const server::HttpError& e) {
    check(e.status >= 400 && e.status < 600, fmt::format("HTTP error status {}", e.status));
    check(!e.code.empty() && !e.message.empty(), "an HTTP error without code or message");
  };
  server::RequestReader reader(lim);
  for (int i = 0; i < 32; ++i) {  // pipelined requests
    server::HttpRequest req;
    server::HttpError err;
    const server::ReadStatus st = reader.read_head(src, req, err);
    if (st == server::ReadStatus::Closed) return;
    if (st == server::ReadStatus::Error) return check_error(err);
    check(req.fields.size() <= lim.max_fields && req.target.size() <= lim.max_target, "a head past the limits");
    server::cors_allow_origin(req, policy);
    if (auto e = server::check_access(req, policy)) {
      check(e->status == 401 || e->status == 403, fmt::format("access refused with {}", e->status));
      return;  // the server answers and closes: the body is never read as a request
    }
    if (!reader.read_body(src, req, err)) return check_error(err);
    check(req.body.size() <= lim.max_body, "a body past the limit");
    std::vector<uint8_t> api;
    switch (server::find_route(req.method, req.path)) {
      case server::Route::Completions: api.push_back(uint8_t(server::Endpoint::Completions)); break;
      case server::Route::ChatCompletions: api.push_back(uint8_t(server::Endpoint::ChatCompletions)); break;
      case server::Route::Tokenize: api.push_back(uint8_t(server::Endpoint::Tokenize)); break;
      case server::Route::Detokenize: api.push_back(uint8_t(server::Endpoint::Detokenize)); break;
      default: continue;
    }
    api.insert(api.end(), req.body.begin(), req.body.end());
    fuzz_server_request(api);
    if (!req.keep_alive) return;
  }
}

}  // namespace wgrt::fuzz

namespace wgrt::fuzz {

inline void fuzz_grammar(std::span<const uint8_t> data) {
  if (data.empty()) return;
  const std::string_view rest(reinterpret_cast<const char*>(data.data()) + 1, data.size() - 1);
  const size_t nul = rest.find('\0');
  const std::string_view text = rest.substr(0, nul);
  const std::string_view input = nul == std::string_view::npos ? std::string_view() : rest.substr(nul + 1);
  std::shared_ptr<const grammar::Grammar> g;
  if (data[0] & 1) {
    const auto schema = nlohmann::ordered_json::parse(text, nullptr, false);
    if (schema.is_discarded()) return;
    std::string gbnf;
    try {
      gbnf = grammar::json_schema_to_gbnf(schema);
    } catch (const grammar::GrammarError&) {
      return;
    }
    try {
      g = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(gbnf));
    } catch (const grammar::GrammarError& e) {
      throw FuzzFailure(fmt::format("a schema's grammar does not parse: {}\n{}", e.what(), gbnf));
    }
  } else {
    try {
      g = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(text));
    } catch (const grammar::GrammarError&) {
      return;
    }
  }
  // Pieces of the input (1 to 3 bytes) as a vocabulary, plus an end token.
  std::vector<std::string> pieces;
  for (size_t i = 0; i < input.size() && pieces.size() < 48; ++i)
    pieces.emplace_back(input.substr(i, 1 + i % 3));
  pieces.emplace_back();
  const int32_t end = int32_t(pieces.size() - 1);
  auto index = std::make_shared<const grammar::TokenIndex>(grammar::build_token_index(pieces, {end}));
  grammar::Constraint c{grammar::make_matcher(g), index};
  std::vector<uint32_t> words(grammar::mask_words(index->n_vocab()));
  for (int step = 0; step < 4; ++step) {
    grammar::allowed_mask(c, words);
    int32_t next = -1;
    for (size_t i = 0; i < index->n_vocab(); ++i) {
      grammar::Constraint copy{c.m, c.index, {}};
      const bool ok = grammar::accept_token(copy, int32_t(i));
      check(ok == grammar::mask_bit(words, i), fmt::format("mask bit {} is {}, the token alone says {}", i,
                                                           grammar::mask_bit(words, i), ok));
      if (ok && next < 0 && int32_t(i) != end) next = int32_t(i);
    }
    if (next < 0 || !grammar::accept_token(c, next)) return;
  }
}

}  // namespace wgrt::fuzz
