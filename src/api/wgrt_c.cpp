// wgrt's C API (include/wgrt/wgrt.h) over the library: a model handle owns its device and
// session; every entry point turns exceptions into a status and this thread's last error.
#include "wgrt/wgrt.h"

#include "api/handle.h"

#include <fmt/format.h>

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <vector>

#include "chat/chat_template.h"
#include "chat/jinja.h"
#include "gpu/device.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "llm/chat.h"
#include "llm/embed.h"
#include "llm/generate.h"
#include "llm/sampler.h"
#include "llm/session.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/safetensors.h"
#include "tokenizer/tokenizer.h"

using namespace wgrt;

struct wgrt_model {
  std::string path;  // as given ("" for the demo model)
  std::optional<std::string> chat_template;
  std::unique_ptr<gpu::Device> dev;  // the session points at it
  std::optional<llm::Session> session;
  std::mutex running;  // one generation at a time
  std::atomic<bool> cancel{false};
  wgrt_generate_stats last{.struct_size = sizeof(wgrt_generate_stats), .stop_reason = WGRT_STOP_NONE};
};

namespace {

thread_local std::string t_last_error;
thread_local wgrt_status t_last_status = WGRT_OK;

wgrt_status fail(wgrt_status s, std::string msg) {
  t_last_error = std::move(msg);
  t_last_status = s;
  return s;
}

// The status of the exception in flight, its message kept for wgrt_last_error.
wgrt_status from_exception() {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return fail(WGRT_ERR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::invalid_argument& e) {
    return fail(WGRT_ERR_INVALID_ARGUMENT, e.what());
  } catch (const std::out_of_range& e) {
    return fail(WGRT_ERR_INVALID_ARGUMENT, e.what());
  } catch (const std::system_error& e) {
    return fail(WGRT_ERR_IO, e.what());
  } catch (const gpu::GpuError& e) {
    return fail(WGRT_ERR_GPU, e.what());
  } catch (const model::GgufError& e) {
    return fail(WGRT_ERR_MODEL, e.what());
  } catch (const model::SafetensorsError& e) {
    return fail(WGRT_ERR_MODEL, e.what());
  } catch (const model::ModelError& e) {
    return fail(WGRT_ERR_MODEL, e.what());
  } catch (const tokenizer::TokenizerError& e) {
    return fail(WGRT_ERR_MODEL, e.what());
  } catch (const chat::TemplateError& e) {
    return fail(WGRT_ERR_INVALID_ARGUMENT, e.what());
  } catch (const std::exception& e) {
    return fail(WGRT_ERR_INTERNAL, e.what());
  } catch (...) {
    return fail(WGRT_ERR_INTERNAL, "an unknown exception");
  }
}

template <class F>
auto guarded(F&& f) noexcept -> decltype(f()) {
  t_last_error.clear();
  t_last_status = WGRT_OK;
  try {
    return f();
  } catch (...) {
    return static_cast<decltype(f())>(from_exception());
  }
}

// The caller's params over the defaults, as far as its struct_size reaches. 0.2's layout, the
// first versioned one, ends at json_schema: a caller's struct is at least that.
constexpr size_t kSamplingSizeV02 = offsetof(wgrt_sampling_params, json_schema) + sizeof(const char*);
constexpr size_t kStatsSizeV02 = offsetof(wgrt_generate_stats, generate_seconds) + sizeof(double);
wgrt_sampling_params versioned(const wgrt_sampling_params& p) {
  if (p.struct_size < kSamplingSizeV02 || p.struct_size > sizeof(wgrt_sampling_params))
    throw std::invalid_argument(fmt::format("wgrt_sampling_params.struct_size is {}, this wgrt reads {} to {} bytes "
                                            "(hint: start from wgrt_sampling_default_params(); a struct_size past "
                                            "{} means a header newer than the library)", p.struct_size,
                                            kSamplingSizeV02, sizeof(wgrt_sampling_params), sizeof(wgrt_sampling_params)));
  wgrt_sampling_params out = wgrt_sampling_default_params();
  std::memcpy(&out, &p, p.struct_size);
  return out;
}

// The GBNF grammar or JSON schema compiled (null for neither).
std::shared_ptr<const grammar::Grammar> compile_grammar(const wgrt_sampling_params& p) {
  if (p.grammar && p.json_schema)
    throw std::invalid_argument("wgrt_sampling_params: grammar and json_schema are both set (hint: one of them; a "
                                "schema becomes a grammar)");
  const char* field = p.grammar ? "grammar" : "json_schema";
  try {
    if (p.grammar) return std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(p.grammar));
    if (!p.json_schema) return nullptr;
    const auto schema = nlohmann::ordered_json::parse(p.json_schema, nullptr, false);
    if (schema.is_discarded()) throw std::invalid_argument("not valid JSON");
    return std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(grammar::json_schema_to_gbnf(schema)));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("wgrt_sampling_params.{}: {}", field, e.what()));
  }
}

// Checked against the model's vocabulary; the stop texts into `stop`.
llm::SamplerParams sampler_params(const wgrt_sampling_params& given, int32_t n_vocab, std::vector<std::string>& stop) {
  const wgrt_sampling_params p = versioned(given);
  if (!(p.temperature >= 0) || !(p.top_p > 0 && p.top_p <= 1) || !(p.min_p >= 0 && p.min_p <= 1) ||
      !(p.repeat_penalty > 0) || !std::isfinite(p.presence_penalty) || !std::isfinite(p.frequency_penalty))
    throw std::invalid_argument(fmt::format("wgrt_sampling_params: temperature {} (>= 0), top_p {} (0, 1], min_p {} "
                                            "[0, 1], repeat_penalty {} (> 0), presence_penalty {} and "
                                            "frequency_penalty {} (finite): one is out of range (hint: start from "
                                            "wgrt_sampling_default_params())",
                                            p.temperature, p.top_p, p.min_p, p.repeat_penalty, p.presence_penalty,
                                            p.frequency_penalty));
  llm::SamplerParams s;
  s.temperature = p.temperature;
  s.top_k = p.top_k;
  s.top_p = p.top_p;
  s.min_p = p.min_p;
  s.repeat_penalty = p.repeat_penalty;
  s.presence_penalty = p.presence_penalty;
  s.frequency_penalty = p.frequency_penalty;
  s.repeat_last_n = p.repeat_last_n;
  s.seed = p.seed;
  if (p.n_logit_bias && !p.logit_bias) throw std::invalid_argument("wgrt_sampling_params.logit_bias is NULL with "
                                                                   "n_logit_bias > 0");
  for (size_t i = 0; i < p.n_logit_bias; ++i) {
    const auto [token, bias] = p.logit_bias[i];
    if (token < 0 || token >= n_vocab || !std::isfinite(bias))
      throw std::invalid_argument(fmt::format("wgrt_sampling_params.logit_bias[{}]: token {} with bias {} (hint: a "
                                              "token of the vocabulary of {}, a finite bias; -100 keeps it out in practice)", i, token,
                                              bias, n_vocab));
    for (const auto& [seen, _] : s.logit_bias)
      if (seen == token)
        throw std::invalid_argument(fmt::format("wgrt_sampling_params.logit_bias[{}]: token {} appears twice (hint: "
                                                "add its biases into one entry)", i, token));
    s.logit_bias.emplace_back(token, bias);
  }
  if (p.n_stop && !p.stop) throw std::invalid_argument("wgrt_sampling_params.stop is NULL with n_stop > 0");
  for (size_t i = 0; i < p.n_stop; ++i) {
    if (!p.stop[i] || !*p.stop[i])
      throw std::invalid_argument(fmt::format("wgrt_sampling_params.stop[{}] is {} (hint: each stop is a non-empty "
                                              "text)", i, p.stop[i] ? "empty" : "NULL"));
    stop.emplace_back(p.stop[i]);
  }
  s.grammar = compile_grammar(p);
  return s;
}

wgrt_stop_reason stop_reason(const std::string& r) {
  if (r == "eos") return WGRT_STOP_EOS;
  if (r == "length") return WGRT_STOP_LENGTH;
  if (r == "stop string") return WGRT_STOP_STRING;
  if (r == "context") return WGRT_STOP_CONTEXT;
  if (r == "callback") return WGRT_STOP_CALLBACK;
  if (r == "interrupted") return WGRT_STOP_CANCELLED;
  throw std::logic_error("llm::generate ended for '" + r + "', which wgrt_stop_reason does not name");
}

struct Stream {
  wgrt_token_callback cb;
  void* user;
};

// Runs `prompt` from an empty cache and streams the tokens the sampler picks: llm::generate's
// loop (its emit step, llm/emit.h), the callback and a cancel acting between tokens.
wgrt_status decode(wgrt_model& m, const std::vector<int32_t>& prompt, const wgrt_sampling_params& sp, Stream out) {
  llm::Session& s = *m.session;
  if (prompt.empty())
    throw std::invalid_argument("the prompt is empty after tokenization (hint: give some text)");
  if (prompt.size() >= s.mg.n_ctx)
    throw std::invalid_argument(fmt::format("the prompt has {} tokens, past the context of {} (hint: a larger "
                                            "context, wgrt_model_params.n_ctx or wgrt run's --ctx-size, or a "
                                            "shorter prompt)", prompt.size(), s.mg.n_ctx));
  llm::GenerateOptions o;
  o.sampling = sampler_params(sp, int32_t(std::min<size_t>(s.tok.vocab.n_vocab(), s.mg.n_vocab)), o.stop);
  o.n_predict = sp.max_tokens;
  o.interrupt = &m.cancel;
  llm::reset(s);
  const llm::GenerateStats st = llm::generate_tokens(s, prompt, o, [&](std::string_view text, int32_t id) {
    return out.cb(std::string(text).c_str(), text.size(), id, out.user) == 0;
  });
  m.last = wgrt_generate_stats{.struct_size = sizeof(wgrt_generate_stats), .stop_reason = stop_reason(st.stop_reason),
                               .n_prompt = int32_t(st.n_prompt), .n_generated = int32_t(st.n_generated),
                               .prompt_seconds = st.prompt_seconds, .generate_seconds = st.generate_seconds};
  return st.stop_reason == "interrupted" ? WGRT_CANCELLED : WGRT_OK;
}

// Holds the model's generation slot; a cancel is consumed when the generation ends.
template <class F>
wgrt_status exclusive(wgrt_model& m, F&& f) {
  std::unique_lock lock(m.running, std::try_to_lock);
  if (!lock.owns_lock())
    return fail(WGRT_ERR_BUSY, "the model is running another generation (hint: one generation per model at a time; "
                               "load the model twice to run two)");
  struct Clear {
    std::atomic<bool>& c;
    ~Clear() { c.store(false); }
  } clear{m.cancel};
  return f();
}

wgrt_status null_arg(const char* fn, const char* arg) {
  return fail(WGRT_ERR_INVALID_ARGUMENT, fmt::format("{}: {} is NULL", fn, arg));
}

}  // namespace

namespace wgrt::api {

wgrt_model* adopt(std::unique_ptr<gpu::Device> dev, llm::Session session, std::string path) {
  auto m = std::make_unique<wgrt_model>();
  m->path = std::move(path);
  m->dev = std::move(dev);
  m->session.emplace(std::move(session));
  return m.release();
}

llm::Session& session_of(wgrt_model* model) { return *model->session; }

}  // namespace wgrt::api

extern "C" {

const char* wgrt_version(void) { return WGRT_VERSION; }

const char* wgrt_last_error(void) { return t_last_error.c_str(); }

wgrt_status wgrt_last_status(void) { return t_last_status; }

const char* wgrt_status_name(wgrt_status s) {
  switch (s) {
    case WGRT_OK: return "WGRT_OK";
    case WGRT_CANCELLED: return "WGRT_CANCELLED";
    case WGRT_ERR_INVALID_ARGUMENT: return "WGRT_ERR_INVALID_ARGUMENT";
    case WGRT_ERR_IO: return "WGRT_ERR_IO";
    case WGRT_ERR_MODEL: return "WGRT_ERR_MODEL";
    case WGRT_ERR_GPU: return "WGRT_ERR_GPU";
    case WGRT_ERR_BUSY: return "WGRT_ERR_BUSY";
    case WGRT_ERR_OUT_OF_MEMORY: return "WGRT_ERR_OUT_OF_MEMORY";
    case WGRT_ERR_INTERNAL: return "WGRT_ERR_INTERNAL";
  }
  return "unknown wgrt_status";
}

wgrt_model_params wgrt_model_default_params(void) {
  return wgrt_model_params{.model_path = nullptr, .n_ctx = 2048, .adapter_index = -1, .chat_template = nullptr,
                           .cache_type_k = nullptr, .cache_type_v = nullptr};
}

wgrt_sampling_params wgrt_sampling_default_params(void) {
  const llm::SamplerParams d;
  return wgrt_sampling_params{.struct_size = sizeof(wgrt_sampling_params), .temperature = d.temperature,
                              .top_k = d.top_k, .top_p = d.top_p, .min_p = d.min_p,
                              .repeat_penalty = d.repeat_penalty, .repeat_last_n = d.repeat_last_n, .seed = d.seed,
                              .max_tokens = 128, .presence_penalty = d.presence_penalty,
                              .frequency_penalty = d.frequency_penalty, .logit_bias = nullptr, .n_logit_bias = 0,
                              .stop = nullptr, .n_stop = 0, .grammar = nullptr, .json_schema = nullptr};
}

wgrt_model* wgrt_model_load(const wgrt_model_params* params) {
  wgrt_model* out = nullptr;
  guarded([&]() -> wgrt_status {
    if (!params) return null_arg("wgrt_model_load", "params");
    auto m = std::make_unique<wgrt_model>();
    m->path = params->model_path ? params->model_path : "";
    if (params->chat_template) m->chat_template = params->chat_template;
    if (!m->path.empty() && m->path != llm::kRandomModel && !std::filesystem::exists(m->path))
      return fail(WGRT_ERR_IO, fmt::format("wgrt_model_load: {}: no such file or folder (hint: "
                                           "wgrt_model_params.model_path names a .gguf file or a Hugging Face "
                                           "model folder; NULL runs the demo model)", m->path));
    gpu::DeviceOptions dev_opts;
    dev_opts.adapter_index = params->adapter_index;
    m->dev = std::make_unique<gpu::Device>(gpu::create_device(dev_opts));
    model::BuildOptions o;
    o.n_ctx = params->n_ctx;
    for (const auto& [name, value, field] : {std::tuple{"cache_type_k", params->cache_type_k, &o.cache_type_k},
                                             std::tuple{"cache_type_v", params->cache_type_v, &o.cache_type_v}}) {
      if (!value) continue;
      const std::string_view v = value;
      if (v == "f32") *field = graph::DType::F32;
      else if (v == "f16") *field = graph::DType::F16;
      else if (v == "q8_0") *field = graph::DType::Q8_0;
      else
        return fail(WGRT_ERR_INVALID_ARGUMENT, fmt::format("wgrt_model_load: wgrt_model_params.{} '{}' is not a KV "
                                                           "cache type (choices: f32, f16, q8_0)", name, v));
    }
    m->session.emplace(llm::open_session(*m->dev, m->path, o));
    out = m.release();
    return WGRT_OK;
  });
  return out;
}

void wgrt_model_free(wgrt_model* model) {
  guarded([&] {
    delete model;
    return WGRT_OK;
  });
}

int32_t wgrt_tokenize(const wgrt_model* model, const char* text, size_t text_len, int add_special, int parse_special,
                      int32_t* tokens, int32_t capacity) {
  return guarded([&]() -> int32_t {
    if (!model) return null_arg("wgrt_tokenize", "model");
    if (!text && text_len) return null_arg("wgrt_tokenize", "text");
    if (capacity < 0 || (!tokens && capacity > 0))
      return fail(WGRT_ERR_INVALID_ARGUMENT, fmt::format("wgrt_tokenize: capacity {} with tokens {} (hint: a "
                                                         "NULL buffer takes capacity 0)", capacity,
                                                         tokens ? "set" : "NULL"));
    const std::vector<int32_t> ids = tokenizer::tokenize(model->session->tok, std::string_view(text ? text : "", text_len),
                                                         add_special != 0, parse_special != 0);
    if (ids.size() > size_t(INT32_MAX))
      return fail(WGRT_ERR_INVALID_ARGUMENT, "wgrt_tokenize: more than 2^31 tokens");
    if (ids.size() <= size_t(capacity)) std::copy(ids.begin(), ids.end(), tokens);
    return int32_t(ids.size());
  });
}

int32_t wgrt_detokenize(const wgrt_model* model, const int32_t* tokens, int32_t n_tokens, int render_special, char* buf,
                        size_t capacity) {
  return guarded([&]() -> int32_t {
    if (!model) return null_arg("wgrt_detokenize", "model");
    if (n_tokens < 0 || (!tokens && n_tokens > 0))
      return fail(WGRT_ERR_INVALID_ARGUMENT, fmt::format("wgrt_detokenize: {} tokens at {}", n_tokens,
                                                         tokens ? "a buffer" : "NULL"));
    if (!buf && capacity) return null_arg("wgrt_detokenize", "buf");
    const int32_t n_vocab = model->session->tok.vocab.n_vocab();
    for (int32_t i = 0; i < n_tokens; ++i)
      if (tokens[i] < 0 || tokens[i] >= n_vocab)
        return fail(WGRT_ERR_INVALID_ARGUMENT, fmt::format("wgrt_detokenize: tokens[{}] = {} is outside the "
                                                           "vocabulary of {} tokens", i, tokens[i], n_vocab));
    const std::string text = tokenizer::detokenize(model->session->tok, std::vector<int32_t>(tokens, tokens + n_tokens),
                                                   render_special != 0);
    if (text.size() > size_t(INT32_MAX))
      return fail(WGRT_ERR_INVALID_ARGUMENT, "wgrt_detokenize: more than 2^31 bytes of text");
    if (text.size() < capacity) std::memcpy(buf, text.c_str(), text.size() + 1);
    return int32_t(text.size());
  });
}

wgrt_status wgrt_generate(wgrt_model* model, const char* prompt, const wgrt_sampling_params* sampling,
                          wgrt_token_callback callback, void* user) {
  return guarded([&]() -> wgrt_status {
    if (!model) return null_arg("wgrt_generate", "model");
    if (!prompt) return null_arg("wgrt_generate", "prompt");
    if (!sampling) return null_arg("wgrt_generate", "sampling");
    if (!callback) return null_arg("wgrt_generate", "callback");
    return exclusive(*model, [&] {
      const std::vector<int32_t> ids = tokenizer::tokenize(model->session->tok, prompt, true, true);
      return decode(*model, ids, *sampling, Stream{callback, user});
    });
  });
}

wgrt_status wgrt_last_generate_stats(const wgrt_model* model, wgrt_generate_stats* stats) {
  return guarded([&]() -> wgrt_status {
    if (!model) return null_arg("wgrt_last_generate_stats", "model");
    if (!stats) return null_arg("wgrt_last_generate_stats", "stats");
    if (stats->struct_size < kStatsSizeV02 || stats->struct_size > sizeof(wgrt_generate_stats))
      return fail(WGRT_ERR_INVALID_ARGUMENT, fmt::format("wgrt_last_generate_stats: stats->struct_size is {}, this "
                                                         "wgrt writes {} bytes (hint: set it to "
                                                         "sizeof(wgrt_generate_stats))", stats->struct_size,
                                                         sizeof(wgrt_generate_stats)));
    const uint32_t size = stats->struct_size;
    std::memcpy(stats, &model->last, size);
    stats->struct_size = size;
    return WGRT_OK;
  });
}

void wgrt_cancel(wgrt_model* model) {
  if (model) model->cancel.store(true);
}

wgrt_status wgrt_chat(wgrt_model* model, const wgrt_chat_message* messages, size_t n_messages,
                      const wgrt_sampling_params* sampling, wgrt_token_callback callback, void* user) {
  return guarded([&]() -> wgrt_status {
    if (!model) return null_arg("wgrt_chat", "model");
    if (!messages && n_messages) return null_arg("wgrt_chat", "messages");
    if (!sampling) return null_arg("wgrt_chat", "sampling");
    if (!callback) return null_arg("wgrt_chat", "callback");
    if (!n_messages) return fail(WGRT_ERR_INVALID_ARGUMENT, "wgrt_chat: no messages (hint: at least a user message)");
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (size_t i = 0; i < n_messages; ++i) {
      if (!messages[i].role || !messages[i].content)
        return fail(WGRT_ERR_INVALID_ARGUMENT, fmt::format("wgrt_chat: messages[{}].{} is NULL", i,
                                                           messages[i].role ? "content" : "role"));
      list.push_back({{"role", messages[i].role}, {"content", messages[i].content}});
    }
    return exclusive(*model, [&] {
      const std::string path = model->path.empty() ? llm::demo_model_path() : model->path;
      chat::ChatTemplateSource src;
      if (model->chat_template) {
        src.text = *model->chat_template;
        src.origin = "wgrt_model_params.chat_template";
        if (!llm::is_default_model(*model->session)) chat::model_special_texts(path, src);
      } else if (!llm::is_default_model(*model->session)) {
        try {
          src = chat::find_chat_template(path);
        } catch (const std::runtime_error& e) {
          return fail(WGRT_ERR_MODEL, fmt::format("wgrt_chat: {} (hint: wgrt_model_params.chat_template gives one)",
                                                  e.what()));
        }
      } else {
        return fail(WGRT_ERR_MODEL, "wgrt_chat: the built-in default model has no chat template (hint: set "
                                    "wgrt_model_params.chat_template)");
      }
      llm::Chat c = llm::start_chat(*model->session, src, llm::ChatOptions{});
      c.messages = std::move(list);
      return decode(*model, llm::chat_prompt_tokens(c), *sampling, Stream{callback, user});
    });
  });
}

int32_t wgrt_model_n_embd(const wgrt_model* model) {
  return guarded([&]() -> int32_t {
    if (!model) return null_arg("wgrt_model_n_embd", "model");
    return int32_t(model->session->mg.n_embd);
  });
}

int32_t wgrt_embed(wgrt_model* model, const char* text, size_t text_len, float* out, size_t capacity) {
  return guarded([&]() -> int32_t {
    if (!model) return null_arg("wgrt_embed", "model");
    if (!text && text_len) return null_arg("wgrt_embed", "text");
    if (!out && capacity) return null_arg("wgrt_embed", "out");
    const uint32_t n_embd = model->session->mg.n_embd;
    if (capacity < n_embd) return int32_t(n_embd);
    std::unique_lock lock(model->running, std::try_to_lock);
    if (!lock.owns_lock())
      return fail(WGRT_ERR_BUSY, "wgrt_embed: the model is running a generation (hint: one call per model at a time)");
    llm::Session& s = *model->session;
    const std::vector<int32_t> ids = llm::embedding_tokens(s.tok, std::string_view(text ? text : "", text_len));
    if (ids.empty()) return fail(WGRT_ERR_INVALID_ARGUMENT, "wgrt_embed: the text has no tokens (hint: give some text)");
    // The conversation's cache (sequence 0) is overwritten; generations start from a fresh one.
    const std::vector<float> v = llm::embed(s, 0, ids);
    std::copy(v.begin(), v.end(), out);
    return int32_t(n_embd);
  });
}

}  // extern "C"
