#include "model/random_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <thread>

#include "model/file_type.h"
#include "model/ggml_quantize.h"

namespace wgrt::model {
namespace {

// The GPT-2 byte-to-unicode mapping: printable bytes map to themselves, the rest to 256+.
std::string byte_token(int b) {
  auto printable = [](int c) { return (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255); };
  int cp = b;
  if (!printable(b)) {
    int n = 0;
    for (int c = 0; c < b; ++c) n += printable(c) ? 0 : 1;
    cp = 256 + n;
  }
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else {
    s += char(0xc0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3f));
  }
  return s;
}

void add_byte_vocab(GgufWriter& w) {
  std::vector<std::string> tokens;
  std::vector<int64_t> types;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(byte_token(b));
    types.push_back(1);  // normal
  }
  tokens.push_back("<|begin_of_text|>");
  types.push_back(3);  // control
  tokens.push_back("<|end_of_text|>");
  types.push_back(3);
  gguf_set_string(w, "tokenizer.ggml.model", "gpt2");
  gguf_set_string(w, "tokenizer.ggml.pre", "gpt-2");
  gguf_set_strings(w, "tokenizer.ggml.tokens", tokens);
  gguf_set_i32s(w, "tokenizer.ggml.token_type", types);
  gguf_set_strings(w, "tokenizer.ggml.merges", {});
  gguf_set_u32(w, "tokenizer.ggml.bos_token_id", 256);
  gguf_set_u32(w, "tokenizer.ggml.eos_token_id", 257);
  gguf_set_bool(w, "tokenizer.ggml.add_bos_token", true);
}

// Appends unused tokens so the vocabulary has `n` entries.
void pad_vocab(GgufWriter& w, uint32_t n) {
  for (auto& [key, value] : w.kv) {
    auto* a = std::get_if<GgufArray>(&value.v);
    if (!a) continue;
    if (key == "tokenizer.ggml.tokens")
      for (size_t i = a->strings.size(); i < n; ++i) a->strings.push_back(fmt::format("<|reserved_{}|>", i));
    if (key == "tokenizer.ggml.token_type") a->ints.resize(std::max<size_t>(a->ints.size(), n), 5);  // unused
    if (key == "tokenizer.ggml.scores") a->floats.resize(std::max<size_t>(a->floats.size(), n), -1e9);
  }
}

uint32_t copy_vocab(GgufWriter& w, const GgufFile& from) {
  uint32_t n = 0;
  for (const auto& [key, value] : from.kv)
    if (key.starts_with("tokenizer.")) gguf_set(w, key, value);
  n = uint32_t(from.get_array("tokenizer.ggml.tokens").size());
  return n;
}

struct Rng {
  std::mt19937 gen;
  std::normal_distribution<float> normal{0.f, 1.f};
  std::vector<float> matrix(size_t rows, size_t cols) {
    std::vector<float> v(rows * cols);
    float scale = 1.f / std::sqrt(float(cols));
    for (auto& x : v) x = normal(gen) * scale;
    return v;
  }
  std::vector<float> norm(size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = 1.f + 0.1f * normal(gen);
    return v;
  }
  std::vector<float> bias(size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = 0.1f * normal(gen);
    return v;
  }
};

// How a tensor's values are drawn: a matrix N(0, 1/cols), a norm weight 1 + N(0, 0.01), a bias
// N(0, 0.01), or the spec's own values (rope frequency factors).
enum class Init { Matrix, Norm, Bias, Given };

struct PlannedTensor {
  std::string name;
  GgmlType type;
  std::vector<uint64_t> dims;  // GGUF order
  Init init;
  std::vector<float> given = {};  // Init::Given's values
  float scale = 1;                  // the drawn values times this
};

// The metadata of the model `s` describes; returns the vocabulary size.
uint32_t add_metadata(GgufWriter& w, const RandomModelSpec& s) {
  const std::string a = arch_name(s.arch);
  gguf_set_string(w, "general.architecture", a);
  gguf_set_string(w, "general.name", s.name);
  if (auto ft = file_type_of(s.matrix_type)) gguf_set_u32(w, "general.file_type", *ft);
  uint32_t n_vocab = 258;
  if (s.vocab_from) n_vocab = copy_vocab(w, *s.vocab_from);
  else add_byte_vocab(w);
  if (s.n_vocab > n_vocab) {
    pad_vocab(w, s.n_vocab);
    n_vocab = s.n_vocab;
  }
  gguf_set_u32(w, a + ".vocab_size", n_vocab);
  gguf_set_u32(w, a + ".context_length", s.n_ctx_train);
  gguf_set_u32(w, a + ".embedding_length", s.dim);
  gguf_set_u32(w, a + ".block_count", s.n_layers);
  gguf_set_u32(w, a + ".feed_forward_length", s.ff);
  gguf_set_u32(w, a + ".attention.head_count", s.n_heads);
  gguf_set_u32(w, a + ".attention.head_count_kv", s.n_kv_heads);
  gguf_set_u32(w, a + ".attention.key_length", s.head_dim);
  gguf_set_u32(w, a + ".attention.value_length", s.head_dim);
  gguf_set_f32(w, a + ".attention.layer_norm_rms_epsilon", 1e-5f);
  gguf_set_f32(w, a + ".rope.freq_base", s.rope_theta);
  if (s.sliding_window) gguf_set_u32(w, a + ".attention.sliding_window", s.sliding_window);
  if (s.swa_pattern) gguf_set_u32(w, a + ".attention.sliding_window_pattern", s.swa_pattern);
  if (s.rope_theta_local > 0) gguf_set_f32(w, a + ".rope.freq_base_swa", s.rope_theta_local);
  if (s.attn_softcap > 0) gguf_set_f32(w, a + ".attn_logit_softcapping", s.attn_softcap);
  if (s.final_softcap > 0) gguf_set_f32(w, a + ".final_logit_softcapping", s.final_softcap);
  if (s.rope_linear_factor > 0) {
    gguf_set_string(w, a + ".rope.scaling.type", "linear");
    gguf_set_f32(w, a + ".rope.scaling.factor", s.rope_linear_factor);
  }
  if (s.n_experts) {
    gguf_set_u32(w, a + ".expert_count", s.n_experts);
    gguf_set_u32(w, a + ".expert_used_count", s.n_experts_used);
    if (s.arch == Arch::Qwen3Moe || s.arch == Arch::Qwen2Moe)
      gguf_set_u32(w, a + ".expert_feed_forward_length", s.expert_ff);
    if (s.arch == Arch::Qwen2Moe) gguf_set_u32(w, a + ".expert_shared_feed_forward_length", s.shared_expert_ff);
  }
  if (!s.rope_factors_long.empty()) {
    gguf_set_u32(w, a + ".rope.dimension_count", s.head_dim);
    gguf_set_u32(w, a + ".rope.scaling.original_context_length", s.n_ctx_orig);
    gguf_set_f32(w, a + ".rope.scaling.attn_factor", s.rope_attn_factor);
  }
  return n_vocab;
}

// The tensors in file order, which is the order make_random_model draws them in.
std::vector<PlannedTensor> plan_tensors(const RandomModelSpec& s, uint64_t n_vocab) {
  const uint64_t D = s.dim, Q = uint64_t(s.n_heads) * s.head_dim, KV = uint64_t(s.n_kv_heads) * s.head_dim;
  std::vector<PlannedTensor> t;
  t.push_back({"token_embd.weight", s.embd_type, {D, n_vocab}, Init::Matrix});
  if (!s.rope_freq_factors.empty())
    t.push_back({"rope_freqs.weight", GgmlType::F32, {s.rope_freq_factors.size()}, Init::Given, s.rope_freq_factors});
  if (!s.rope_factors_long.empty()) {
    t.push_back({"rope_factors_long.weight", GgmlType::F32, {s.rope_factors_long.size()}, Init::Given,
                 s.rope_factors_long});
    t.push_back({"rope_factors_short.weight", GgmlType::F32, {s.rope_factors_short.size()}, Init::Given,
                 s.rope_factors_short});
  }
  // phi3 stores q|k|v as one matrix and gate|up as one of 2 ff rows.
  const bool fused = s.arch == Arch::Phi3;
  for (uint32_t l = 0; l < s.n_layers; ++l) {
    std::string p = fmt::format("blk.{}.", l);
    t.push_back({p + "attn_norm.weight", GgmlType::F32, {D}, Init::Norm});
    if (fused) {
      t.push_back({p + "attn_qkv.weight", s.matrix_type, {D, Q + 2 * KV}, Init::Matrix});
    } else {
      t.push_back({p + "attn_q.weight", s.matrix_type, {D, Q}, Init::Matrix});
      t.push_back({p + "attn_k.weight", s.matrix_type, {D, KV}, Init::Matrix});
      t.push_back({p + "attn_v.weight", s.matrix_type, {D, KV}, Init::Matrix});
    }
    if (s.arch == Arch::Qwen2 || s.arch == Arch::Qwen2Moe || s.qkv_bias) {
      t.push_back({p + "attn_q.bias", GgmlType::F32, {Q}, Init::Bias});
      t.push_back({p + "attn_k.bias", GgmlType::F32, {KV}, Init::Bias});
      t.push_back({p + "attn_v.bias", GgmlType::F32, {KV}, Init::Bias});
    }
    const bool gemma = s.arch == Arch::Gemma2 || s.arch == Arch::Gemma3;
    if (s.arch == Arch::Qwen3 || s.arch == Arch::Qwen3Moe || s.arch == Arch::Gemma3 || s.qk_norm) {
      t.push_back({p + "attn_q_norm.weight", GgmlType::F32, {s.head_dim}, Init::Norm});
      t.push_back({p + "attn_k_norm.weight", GgmlType::F32, {s.head_dim}, Init::Norm});
    }
    t.push_back({p + "attn_output.weight", s.matrix_type, {Q, D}, Init::Matrix});
    if (gemma) t.push_back({p + "post_attention_norm.weight", GgmlType::F32, {D}, Init::Norm});
    t.push_back({p + "ffn_norm.weight", GgmlType::F32, {D}, Init::Norm});
    if (s.n_experts) {  // the router stays F32, as llama.cpp's quantizer leaves it
      const uint64_t E = s.n_experts, F = s.expert_ff;
      t.push_back({p + "ffn_gate_inp.weight", GgmlType::F32, {D, E}, Init::Matrix, {}, s.router_scale});
      t.push_back({p + "ffn_gate_exps.weight", s.matrix_type, {D, F, E}, Init::Matrix});
      t.push_back({p + "ffn_up_exps.weight", s.matrix_type, {D, F, E}, Init::Matrix});
      t.push_back({p + "ffn_down_exps.weight", s.matrix_type, {F, D, E}, Init::Matrix});
      if (s.arch == Arch::Qwen2Moe) {  // the shared expert and its gate (llama.cpp's shapes)
        const uint64_t S = s.shared_expert_ff;
        t.push_back({p + "ffn_gate_inp_shexp.weight", GgmlType::F32, {D}, Init::Matrix, {}, 2});
        t.push_back({p + "ffn_gate_shexp.weight", s.matrix_type, {D, S}, Init::Matrix});
        t.push_back({p + "ffn_up_shexp.weight", s.matrix_type, {D, S}, Init::Matrix});
        t.push_back({p + "ffn_down_shexp.weight", s.matrix_type, {S, D}, Init::Matrix});
      }
      continue;
    }
    if (fused) {
      t.push_back({p + "ffn_up.weight", s.matrix_type, {D, 2 * uint64_t(s.ff)}, Init::Matrix});
    } else {
      t.push_back({p + "ffn_gate.weight", s.matrix_type, {D, s.ff}, Init::Matrix});
      t.push_back({p + "ffn_up.weight", s.matrix_type, {D, s.ff}, Init::Matrix});
    }
    t.push_back({p + "ffn_down.weight", s.matrix_type, {s.ff, D}, Init::Matrix});
    if (gemma) t.push_back({p + "post_ffw_norm.weight", GgmlType::F32, {D}, Init::Norm});
  }
  t.push_back({"output_norm.weight", GgmlType::F32, {D}, Init::Norm});
  for (const std::string& name : s.extra_tensors) t.push_back({name, GgmlType::F32, {D}, Init::Norm});
  // llama.cpp's gemma2 reads its output from token_embd whatever the file holds: always tied.
  if (!s.tied_embeddings && s.arch != Arch::Gemma2)
    t.push_back({"output.weight", s.embd_type, {D, n_vocab}, Init::Matrix});
  return t;
}

// Rows of dims[0] values: a 3-D tensor (experts) is its matrices' rows one after another.
uint64_t tensor_rows(const PlannedTensor& t) {
  uint64_t rows = 1;
  for (size_t i = 1; i < t.dims.size(); ++i) rows *= t.dims[i];
  return rows;
}

// A counter-based generator (splitmix64): each row of each tensor has its own stream, so rows
// can be drawn on any thread in any order. Uniform values with the mean and variance of the
// normal ones above: enough for speed measurements, and far cheaper.
struct RowRng {
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t state;
  RowRng(uint32_t seed, size_t tensor, uint64_t row) : state(mix(seed ^ mix(tensor ^ mix(row + 1)))) {}
  uint64_t next() { return mix(state += 0x9e3779b97f4a7c15ull); }
};

void fill_row(float* v, uint64_t cols, Init init, RowRng& rng) {
  // uniform on [-sqrt(3), sqrt(3)): mean 0, variance 1; two 24-bit values per draw
  const float unit = 2.f * 1.7320508f / 16777216.f, scale = init == Init::Matrix ? 1.f / std::sqrt(float(cols)) : 0.1f;
  const float offset = init == Init::Norm ? 1.f : 0.f;
  for (uint64_t c = 0; c < cols; c += 2) {
    const uint64_t b = rng.next();
    v[c] = offset + (float(b >> 40) * unit - 1.7320508f) * scale;
    if (c + 1 < cols) v[c + 1] = offset + (float((b >> 8) & 0xffffff) * unit - 1.7320508f) * scale;
  }
}

// Draws and quantizes tensor `index` of the plan into `out`, its rows split over `threads` threads.
void fill_tensor(const PlannedTensor& t, size_t index, const RandomModelSpec& s, std::span<uint8_t> out,
                 unsigned threads) {
  if (t.init == Init::Given) {
    std::vector<uint8_t> q = quantize(t.type, t.given);
    std::memcpy(out.data(), q.data(), q.size());
    return;
  }
  const uint64_t cols = t.dims[0], rows = tensor_rows(t), row_bytes = out.size() / rows;
  const uint64_t chunk = std::max<uint64_t>(1, (uint64_t(1) << 20) / cols);  // rows per work item: ~1M values
  std::atomic<uint64_t> next{0};
  auto work = [&] {
    std::vector<float> v;
    for (uint64_t r0; (r0 = next.fetch_add(chunk)) < rows;) {
      const uint64_t n = std::min(chunk, rows - r0);
      v.resize(n * cols);
      for (uint64_t r = 0; r < n; ++r) {
        RowRng rng(s.seed, index, r0 + r);
        fill_row(v.data() + r * cols, cols, t.init, rng);
        for (uint64_t c = 0; c < cols; ++c) v[r * cols + c] *= t.scale;
      }
      std::vector<uint8_t> q = quantize(t.type, v);
      std::memcpy(out.data() + r0 * row_bytes, q.data(), q.size());
    }
  };
  const uint64_t items = (rows + chunk - 1) / chunk;
  const unsigned n_threads = unsigned(std::min<uint64_t>(items, std::max(1u, threads)));
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < n_threads; ++i) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
}

}  // namespace

RandomModelSpec default_model_spec() {
  RandomModelSpec s;
  s.arch = Arch::Llama;
  s.dim = 256;
  s.n_layers = 4;
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.head_dim = 64;
  s.ff = 768;
  s.matrix_type = GgmlType::Q4_0;
  s.embd_type = GgmlType::Q8_0;
  s.seed = 20261130;
  s.name = "wgrt default (random weights)";
  return s;
}

RandomModelSpec preset_model_spec(const std::string& name) {
  RandomModelSpec s = default_model_spec();
  s.name = name + " (random weights)";
  if (name == "tiny") return s;
  if (name == "llama-3.2-1b") {
    s.dim = 2048, s.n_layers = 16, s.n_heads = 32, s.n_kv_heads = 8, s.head_dim = 64, s.ff = 8192;
    s.n_vocab = 128256, s.rope_theta = 500000.f, s.tied_embeddings = true, s.n_ctx_train = 131072;
    return s;
  }
  if (name == "llama-3.1-8b") {
    s.dim = 4096, s.n_layers = 32, s.n_heads = 32, s.n_kv_heads = 8, s.head_dim = 128, s.ff = 14336;
    s.n_vocab = 128256, s.rope_theta = 500000.f, s.n_ctx_train = 131072;
    return s;
  }
  if (name == "phi-3-mini-128k") {
    // Phi-3-mini-128k-instruct's shape (its vocabulary padded from the one given) and LongRoPE
    // with divisors 1 (short) and 1 .. 8 (long) in place of its trained ones.
    s.arch = Arch::Phi3;
    s.dim = 3072, s.n_layers = 32, s.n_heads = 32, s.n_kv_heads = 32, s.head_dim = 96, s.ff = 8192;
    s.n_vocab = 32064, s.n_ctx_train = 131072, s.n_ctx_orig = 4096;
    s.rope_factors_short.assign(s.head_dim / 2, 1.f);
    for (uint32_t i = 0; i < s.head_dim / 2; ++i) s.rope_factors_long.push_back(1.f + 7.f * float(i) / (s.head_dim / 2 - 1));
    s.rope_attn_factor = 1.1902381f;  // sqrt(1 + ln(32) / ln(4096))
    return s;
  }
  if (name == "qwen2.5-0.5b") {
    s.arch = Arch::Qwen2;
    s.dim = 896, s.n_layers = 24, s.n_heads = 14, s.n_kv_heads = 2, s.head_dim = 64, s.ff = 4864;
    s.n_vocab = 151936, s.rope_theta = 1000000.f, s.tied_embeddings = true, s.n_ctx_train = 32768;
    return s;
  }
  if (name == "gemma-3-1b") {
    // Gemma 3 1B's shape: five local layers (window 512, base 10000) to a global one (base 1e6).
    s.arch = Arch::Gemma3;
    s.dim = 1152, s.n_layers = 26, s.n_heads = 4, s.n_kv_heads = 1, s.head_dim = 256, s.ff = 6912;
    s.n_vocab = 262144, s.rope_theta = 1000000.f, s.tied_embeddings = true, s.n_ctx_train = 32768;
    s.sliding_window = 512, s.swa_pattern = 6, s.rope_theta_local = 10000.f;
    return s;
  }
  if (name == "gemma-2-2b") {
    // Gemma 2 2B's shape: even layers local (window 4096), soft-capping 50 and 30.
    s.arch = Arch::Gemma2;
    s.dim = 2304, s.n_layers = 26, s.n_heads = 8, s.n_kv_heads = 4, s.head_dim = 256, s.ff = 9216;
    s.n_vocab = 256000, s.tied_embeddings = true, s.n_ctx_train = 8192;
    s.sliding_window = 4096, s.attn_softcap = 50.f, s.final_softcap = 30.f;
    return s;
  }
  if (name == "qwen3-30b-a3b") {
    // Qwen3-30B-A3B's shape: 128 experts of 768 rows, 8 a token, in each of 48 layers.
    s.arch = Arch::Qwen3Moe;
    s.dim = 2048, s.n_layers = 48, s.n_heads = 32, s.n_kv_heads = 4, s.head_dim = 128, s.ff = 6144;
    s.n_experts = 128, s.n_experts_used = 8, s.expert_ff = 768;
    s.n_vocab = 151936, s.rope_theta = 1000000.f, s.n_ctx_train = 40960;
    return s;
  }
  if (name == "qwen1.5-moe-a2.7b") {
    // Qwen1.5-MoE-A2.7B's shape: 60 experts of 1408 rows, 4 a token, and a shared expert of 5632.
    s.arch = Arch::Qwen2Moe;
    s.dim = 2048, s.n_layers = 24, s.n_heads = 16, s.n_kv_heads = 16, s.head_dim = 128, s.ff = 5632;
    s.n_experts = 60, s.n_experts_used = 4, s.expert_ff = 1408, s.shared_expert_ff = 5632;
    s.n_vocab = 151936, s.rope_theta = 1000000.f, s.n_ctx_train = 8192;
    return s;
  }
  if (name == "qwen2moe-tiny") {
    // tiny's attention; 2 of 8 experts of 128 rows a token and a shared expert of 256.
    s.arch = Arch::Qwen2Moe;
    s.n_experts = 8, s.n_experts_used = 2, s.expert_ff = 128, s.shared_expert_ff = 256;
    return s;
  }
  throw std::invalid_argument(fmt::format("no model preset '{}' (hint: tiny, llama-3.2-1b, llama-3.1-8b, "
                                          "qwen2.5-0.5b, phi-3-mini-128k, gemma-3-1b, gemma-2-2b, qwen3-30b-a3b, "
                                          "qwen1.5-moe-a2.7b, qwen2moe-tiny)", name));
}

GgufWriter make_random_model(const RandomModelSpec& s) {
  GgufWriter w;
  const uint32_t n_vocab = add_metadata(w, s);
  Rng rng{std::mt19937(s.seed)};
  for (const PlannedTensor& t : plan_tensors(s, n_vocab)) {
    const uint64_t cols = t.dims[0], rows = tensor_rows(t);
    std::vector<float> v = t.init == Init::Matrix ? rng.matrix(rows, cols)
                           : t.init == Init::Norm ? rng.norm(cols)
                           : t.init == Init::Bias ? rng.bias(cols)
                                                  : t.given;
    if (t.scale != 1)
      for (float& x : v) x *= t.scale;
    gguf_add_tensor(w, t.name, t.type, t.dims, quantize(t.type, v));
  }
  return w;
}

void write_random_model(const RandomModelSpec& s, const std::string& path, unsigned threads) {
  GgufWriter w;
  const uint32_t n_vocab = add_metadata(w, s);
  const std::vector<PlannedTensor> plan = plan_tensors(s, n_vocab);
  for (const PlannedTensor& t : plan) gguf_declare_tensor(w, t.name, t.type, t.dims);
  gguf_write_file_streamed(w, path, [&](size_t i, std::span<uint8_t> out) {
    fill_tensor(plan[i], i, s, out, threads);
  });
}

}  // namespace wgrt::model
