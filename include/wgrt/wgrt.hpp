// A thin C++ layer over wgrt's C API (wgrt.h): RAII for the model, exceptions from statuses
// (thrown here, on the caller's side of the API), std::function callbacks.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wgrt/wgrt.h"

namespace wgrt::api {

struct Error : std::runtime_error {
  wgrt_status status;
  Error(wgrt_status s, const std::string& message) : std::runtime_error(message), status(s) {}
};

inline void check(int32_t status) {
  if (status < 0) throw Error(wgrt_status(status), std::string(wgrt_status_name(wgrt_status(status))) + ": " +
                                                       wgrt_last_error());
}

struct ChatMessage {
  std::string role, content;
};

// Called per token (text, id); return false to stop.
using TokenFn = std::function<bool(std::string_view text, int32_t token)>;

class Model {
 public:
  explicit Model(const wgrt_model_params& p = wgrt_model_default_params()) : m_(wgrt_model_load(&p)) {
    if (!m_) check(wgrt_last_status());
  }
  explicit Model(const std::string& path) : Model(params_for(path)) {}
  Model(Model&& o) noexcept : m_(std::exchange(o.m_, nullptr)) {}
  Model& operator=(Model&& o) noexcept {
    std::swap(m_, o.m_);
    return *this;
  }
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  ~Model() { wgrt_model_free(m_); }
  wgrt_model* get() const { return m_; }

  std::vector<int32_t> tokenize(std::string_view text, bool add_special = true, bool parse_special = true) const {
    std::vector<int32_t> ids(text.size() + 2);
    int32_t n = wgrt_tokenize(m_, text.data(), text.size(), add_special, parse_special, ids.data(), int32_t(ids.size()));
    check(n);
    if (size_t(n) > ids.size()) {
      ids.resize(size_t(n));
      check(n = wgrt_tokenize(m_, text.data(), text.size(), add_special, parse_special, ids.data(), n));
    }
    ids.resize(size_t(n));
    return ids;
  }
  int32_t n_embd() const {
    const int32_t n = wgrt_model_n_embd(m_);
    check(n);
    return n;
  }
  // The text's embedding (wgrt_embed): n_embd values, L2-normalized.
  std::vector<float> embed(std::string_view text) {
    std::vector<float> v(static_cast<size_t>(n_embd()));
    check(wgrt_embed(m_, text.data(), text.size(), v.data(), v.size()));
    return v;
  }

  std::string detokenize(const std::vector<int32_t>& ids, bool render_special = false) const {
    int32_t n = wgrt_detokenize(m_, ids.data(), int32_t(ids.size()), render_special, nullptr, 0);
    check(n);
    std::string text(size_t(n), '\0');
    check(wgrt_detokenize(m_, ids.data(), int32_t(ids.size()), render_special, text.data(), text.size() + 1));
    return text;
  }
  // True when it ran to its end, false when cancelled.
  bool generate(const std::string& prompt, const wgrt_sampling_params& sp, const TokenFn& on_token) {
    Callback cb{&on_token, nullptr};
    return finish(wgrt_generate(m_, prompt.c_str(), &sp, &call, &cb), cb);
  }
  bool chat(const std::vector<ChatMessage>& messages, const wgrt_sampling_params& sp, const TokenFn& on_token) {
    std::vector<wgrt_chat_message> list;
    for (const ChatMessage& m : messages) list.push_back({m.role.c_str(), m.content.c_str()});
    Callback cb{&on_token, nullptr};
    return finish(wgrt_chat(m_, list.data(), list.size(), &sp, &call, &cb), cb);
  }
  void cancel() { wgrt_cancel(m_); }
  // The latest finished generation's figures (wgrt_last_generate_stats).
  wgrt_generate_stats last_stats() const {
    wgrt_generate_stats st{};
    st.struct_size = sizeof st;
    check(wgrt_last_generate_stats(m_, &st));
    return st;
  }

 private:
  static wgrt_model_params params_for(const std::string& path) {
    wgrt_model_params p = wgrt_model_default_params();
    p.model_path = path.c_str();
    return p;
  }
  struct Callback {
    const TokenFn* fn;
    std::exception_ptr error;  // thrown by fn: stops the generation, rethrown after it
  };
  static int call(const char* text, size_t len, int32_t token, void* user) {
    auto* cb = static_cast<Callback*>(user);
    try {
      return (*cb->fn)(std::string_view(text, len), token) ? 0 : 1;
    } catch (...) {
      cb->error = std::current_exception();  // no exception crosses the C API
      return 1;
    }
  }
  static bool finish(wgrt_status s, const Callback& cb) {
    if (cb.error) std::rethrow_exception(cb.error);
    check(s);
    return s == WGRT_OK;
  }
  wgrt_model* m_ = nullptr;
};

}  // namespace wgrt::api
