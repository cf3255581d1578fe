#include "reference/llamacpp_ref.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <stdexcept>

namespace wgrt::ref::llamacpp {
namespace {

// ---- the ABI of the release's llama.h (llama.cpp 80fb11ac7, node-llama-cpp 3.21.1) ----
// Only what the calls below pass. C enums are int-sized; pointers we never set are void*.
// The defaults returned by the library fill every field; load() checks a few known defaults
// so that a layout that drifted from the library fails loudly instead of corrupting memory.

struct ModelParams {
  void* devices;
  const void* tensor_buft_overrides;
  int32_t n_gpu_layers, split_mode, load_mode, lazy_mode, main_gpu;
  const float* tensor_split;
  void* progress_callback;
  void* progress_callback_user_data;
  const void* kv_overrides;
  bool vocab_only, check_tensors, use_extra_bufts, no_host, no_alloc, load_mtp;
};

struct ContextParams {
  uint32_t n_ctx, n_batch, n_ubatch, n_seq_max, n_rs_seq, n_outputs_max, n_outputs_max_per_seq;
  int32_t n_threads, n_threads_batch;
  int32_t ctx_type, rope_scaling_type, pooling_type, attention_type, flash_attn_type;
  float rope_freq_base, rope_freq_scale, yarn_ext_factor, yarn_attn_factor, yarn_beta_fast, yarn_beta_slow;
  uint32_t yarn_orig_ctx;
  float defrag_thold;
  void* cb_eval;
  void* cb_eval_user_data;
  int32_t type_k, type_v;
  void* abort_callback;
  void* abort_callback_data;
  bool embeddings, offload_kqv, no_perf, op_offload, swa_full, kv_unified;
  void* samplers;
  size_t n_samplers;
  void* ctx_other;
};
static_assert(sizeof(ContextParams) == 160);

struct QuantizeParams {
  int32_t nthread, ftype, output_tensor_type, token_embedding_type;
  bool allow_requantize, quantize_output_tensor, only_copy, pure, keep_split, dry_run;
  const void* imatrix;
  const void* kv_overrides;
  const void* tt_overrides;
  const int32_t* prune_layers;
  size_t max_buf_size;
};

struct Batch {
  int32_t n_tokens;
  int32_t* token;
  float* embd;
  int32_t* pos;
  int32_t* n_seq_id;
  int32_t** seq_id;
  int8_t* logits;
};

using LogCallback = void (*)(int level, const char* text, void* user);
constexpr int kLogWarn = 3;  // GGML_LOG_LEVEL_WARN
constexpr int kLogCont = 5;  // GGML_LOG_LEVEL_CONT: continues the previous message

struct Api {
  void (*backend_init)();
  void (*log_set)(LogCallback, void*);
  void (*load_all_from_path)(const char* dir);
  ModelParams (*model_default_params)();
  ContextParams (*context_default_params)();
  QuantizeParams (*quantize_default_params)();
  uint32_t (*model_quantize)(const char* in, const char* out, const QuantizeParams* params);
  void* (*model_load_from_file)(const char* path, ModelParams params);
  void (*model_free)(void* model);
  void* (*init_from_model)(void* model, ContextParams params);
  void (*free)(void* ctx);
  const void* (*model_get_vocab)(const void* model);
  int32_t (*vocab_n_tokens)(const void* vocab);
  int32_t (*decode)(void* ctx, Batch batch);
  float* (*get_logits_ith)(void* ctx, int32_t i);
  void* base;  // libggml-base: the dequantize_row_* functions
};

// Keeps warnings and errors; llama.cpp's loader prints pages of information per model.
void quiet_log(int level, const char* text, void*) {
  static int last = 0;
  if (level != kLogCont) last = level;
  if (last >= kLogWarn) std::fputs(text, stderr);
}

template <typename F>
void bind(void* lib, const char* name, F& f, std::string& missing) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (!f) missing += std::string(missing.empty() ? "" : ", ") + name;
}

struct Loaded {
  Api api{};
  std::string why;  // "" when usable
};

Loaded load() {
  Loaded l;
  const std::string dir = library_dir();
  if (!std::filesystem::exists(dir + "/.ready"))
    return {{}, fmt::format("llama.cpp's CPU libraries are absent from {} (hint: run tools/setup-test-data.sh)", dir)};
  // Their own RUNPATH ($ORIGIN) finds libggml and libggml-base beside them.
  void* llama = dlopen((dir + "/libllama.v0.4.0.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  void* ggml = llama ? dlopen((dir + "/libggml.v0.4.0.so").c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
  void* base = ggml ? dlopen((dir + "/libggml-base.so").c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
  if (!base) return {{}, fmt::format("dlopen of llama.cpp's libraries in {} failed: {}", dir, dlerror())};
  Api& a = l.api;
  std::string missing;
  bind(llama, "llama_backend_init", a.backend_init, missing);
  bind(llama, "llama_log_set", a.log_set, missing);
  bind(ggml, "ggml_backend_load_all_from_path", a.load_all_from_path, missing);
  bind(llama, "llama_model_default_params", a.model_default_params, missing);
  bind(llama, "llama_context_default_params", a.context_default_params, missing);
  bind(llama, "llama_model_quantize_default_params", a.quantize_default_params, missing);
  bind(llama, "llama_model_quantize", a.model_quantize, missing);
  bind(llama, "llama_model_load_from_file", a.model_load_from_file, missing);
  bind(llama, "llama_model_free", a.model_free, missing);
  bind(llama, "llama_init_from_model", a.init_from_model, missing);
  bind(llama, "llama_free", a.free, missing);
  bind(llama, "llama_model_get_vocab", a.model_get_vocab, missing);
  bind(llama, "llama_vocab_n_tokens", a.vocab_n_tokens, missing);
  bind(llama, "llama_decode", a.decode, missing);
  bind(llama, "llama_get_logits_ith", a.get_logits_ith, missing);
  a.base = base;
  if (!missing.empty()) return {{}, fmt::format("llama.cpp's libraries in {} lack {}", dir, missing)};

  // The release's documented defaults: a drifted struct layout would read other fields here.
  ContextParams c = a.context_default_params();
  ModelParams m = a.model_default_params();
  QuantizeParams q = a.quantize_default_params();
  if (c.n_ctx != 512 || c.n_batch != 2048 || c.n_ubatch != 512 || !c.offload_kqv || c.ctx_other ||
      m.vocab_only || !m.use_extra_bufts || q.ftype != 7 || !q.quantize_output_tensor || q.pure)
    return {{}, fmt::format("llama.cpp's libraries in {} are not the release whose structs this helper declares "
                            "(hint: tools/setup-test-data.sh pins @node-llama-cpp/linux-x64@3.21.1)", dir)};
  a.log_set(quiet_log, nullptr);
  a.load_all_from_path(dir.c_str());  // the CPU backend variant that fits this machine
  a.backend_init();
  return l;
}

const Api& api() {
  static std::once_flag once;
  static Loaded l;
  std::call_once(once, [] { l = load(); });
  if (!l.why.empty()) throw std::runtime_error(l.why);
  return l.api;
}

struct Model {
  const Api& a;
  void* model = nullptr;
  void* ctx = nullptr;
  int32_t n_vocab = 0;
  Model(const Api& api, const std::string& path, uint32_t n_ctx, uint32_t n_batch, int threads) : a(api) {
    ModelParams mp = a.model_default_params();
    mp.n_gpu_layers = 0;
    // No repacking into the CPU's interleaved layouts: the plain per-block kernels, whichever
    // CPU variant the machine loads.
    mp.use_extra_bufts = false;
    model = a.model_load_from_file(path.c_str(), mp);
    if (!model) throw std::runtime_error(fmt::format("llama.cpp could not load {}", path));
    ContextParams cp = a.context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = cp.n_ubatch = n_batch;
    cp.n_outputs_max_per_seq = 0;  // as many outputs as the batch has
    // An f32 KV cache without flash attention: a comparison against wgrt with an f32 cache then
    // measures the weights' and activations' arithmetic, not two roundings of K and V to f16.
    cp.type_k = cp.type_v = 0;  // GGML_TYPE_F32
    cp.flash_attn_type = 0;     // LLAMA_FLASH_ATTN_TYPE_DISABLED
    cp.n_threads = cp.n_threads_batch = threads;
    ctx = a.init_from_model(model, cp);
    if (!ctx) {
      a.model_free(model);
      throw std::runtime_error(fmt::format("llama.cpp could not make a context for {}", path));
    }
    n_vocab = a.vocab_n_tokens(a.model_get_vocab(model));
  }
  ~Model() {
    a.free(ctx);
    a.model_free(model);
  }
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // Decodes tokens at positions from `pos`, with logits for every one (all) or the last.
  void decode(std::span<const int32_t> tokens, int32_t pos, bool all) {
    const size_t n = tokens.size();
    if (n == 0) throw std::invalid_argument("llamacpp: a batch needs at least one token");
    std::vector<int32_t> tok(tokens.begin(), tokens.end()), position(n), n_seq(n, 1), seq0(1, 0);
    std::vector<int32_t*> seq(n, seq0.data());
    std::vector<int8_t> out(n, all ? 1 : 0);
    out.back() = 1;
    for (size_t i = 0; i < n; ++i) position[i] = pos + int32_t(i);
    Batch b{int32_t(n), tok.data(), nullptr, position.data(), n_seq.data(), seq.data(), out.data()};
    if (int32_t rc = a.decode(ctx, b); rc != 0)
      throw std::runtime_error(fmt::format("llama_decode of {} tokens at {} failed with {}", n, pos, rc));
  }
  const float* logits(int32_t i) const {
    const float* l = a.get_logits_ith(ctx, i);
    if (!l) throw std::runtime_error(fmt::format("llama.cpp has no logits for output {}", i));
    return l;
  }
};

}  // namespace

std::string library_dir() { return WGRT_SOURCE_DIR "/.deps/llamacpp-cpu"; }

std::string unavailable_reason() {
  try {
    api();
    return "";
  } catch (const std::runtime_error& e) {
    return e.what();
  }
}

const char* ftype_name(Ftype f) {
  switch (f) {
    case Ftype::Q4_0: return "Q4_0";
    case Ftype::Q4_1: return "Q4_1";
    case Ftype::Q8_0: return "Q8_0";
    case Ftype::Q5_0: return "Q5_0";
    case Ftype::Q5_1: return "Q5_1";
    case Ftype::Q4_K_M: return "Q4_K_M";
    case Ftype::Q5_K_M: return "Q5_K_M";
    case Ftype::Q6_K: return "Q6_K";
    case Ftype::IQ4_NL: return "IQ4_NL";
    case Ftype::IQ4_XS: return "IQ4_XS";
    case Ftype::Q2_K: return "Q2_K";
    case Ftype::Q3_K_M: return "Q3_K_M";
  }
  return "?";
}

void quantize(const std::string& in, const std::string& out, Ftype ftype, int threads) {
  const Api& a = api();
  QuantizeParams q = a.quantize_default_params();
  q.ftype = int32_t(ftype);
  q.nthread = threads;
  if (uint32_t rc = a.model_quantize(in.c_str(), out.c_str(), &q); rc != 0)
    throw std::runtime_error(fmt::format("llama_model_quantize({} -> {}, {}) failed with {}", in, out,
                                         ftype_name(ftype), rc));
}

std::vector<float> dequantize(model::GgmlType type, std::span<const uint8_t> blocks, size_t count) {
  const Api& a = api();
  const model::GgmlTypeInfo* info = model::ggml_type_info(uint32_t(type));
  if (!info || info->block_elems < 32)
    throw std::invalid_argument(fmt::format("llamacpp::dequantize: type {} is not a block format", uint32_t(type)));
  if (count % info->block_elems || blocks.size() != count / info->block_elems * info->block_bytes)
    throw std::invalid_argument(fmt::format("llamacpp::dequantize: {} bytes are not {} {} elements", blocks.size(),
                                            count, info->name));
  // ggml's names: dequantize_row_q4_0, ..., dequantize_row_q6_K.
  std::string name = std::string("dequantize_row_") + info->name;
  for (size_t i = 15; i < name.size(); ++i)
    if (name[i] != 'K') name[i] = char(std::tolower(static_cast<unsigned char>(name[i])));
  auto row = reinterpret_cast<void (*)(const void*, float*, int64_t)>(dlsym(a.base, name.c_str()));
  if (!row) throw std::invalid_argument(fmt::format("llamacpp::dequantize: libggml-base has no {}", name));
  std::vector<float> out(count);
  row(blocks.data(), out.data(), int64_t(count));
  return out;
}

Logits cpu_logits(const std::string& model_path, std::span<const int32_t> tokens, int threads) {
  Model m(api(), model_path, 256, uint32_t(tokens.size()), threads);
  m.decode(tokens, 0, true);
  Logits l;
  l.n_vocab = size_t(m.n_vocab);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const float* r = m.logits(int32_t(i));
    l.rows.insert(l.rows.end(), r, r + l.n_vocab);
  }
  return l;
}

std::vector<int32_t> cpu_greedy(const std::string& model_path, std::span<const int32_t> prompt, int n, int threads) {
  Model m(api(), model_path, 256, uint32_t(prompt.size()), threads);
  std::vector<int32_t> out;
  m.decode(prompt, 0, false);
  for (int step = 0; step < n; ++step) {
    const float* l = m.logits(-1);
    int32_t best = 0;
    for (int32_t i = 1; i < m.n_vocab; ++i)
      if (l[i] > l[best]) best = i;
    out.push_back(best);
    if (step + 1 < n) m.decode(std::span<const int32_t>(&out.back(), 1), int32_t(prompt.size()) + step, false);
  }
  return out;
}

}  // namespace wgrt::ref::llamacpp
