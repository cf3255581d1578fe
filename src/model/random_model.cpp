#include "model/random_model.h"

#include <fmt/format.h>

#include <cmath>
#include <random>
#include <stdexcept>

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

// A [rows, cols] row-major matrix as a GGUF tensor (dims {cols, rows}).
void add(GgufWriter& w, const std::string& name, GgmlType type, const std::vector<float>& v,
         std::vector<uint64_t> dims) {
  gguf_add_tensor(w, name, type, std::move(dims), quantize(type, v));
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
  if (name == "qwen2.5-0.5b") {
    s.arch = Arch::Qwen2;
    s.dim = 896, s.n_layers = 24, s.n_heads = 14, s.n_kv_heads = 2, s.head_dim = 64, s.ff = 4864;
    s.n_vocab = 151936, s.rope_theta = 1000000.f, s.tied_embeddings = true, s.n_ctx_train = 32768;
    return s;
  }
  throw std::invalid_argument(fmt::format("no model preset '{}' (hint: tiny, llama-3.2-1b, llama-3.1-8b, "
                                          "qwen2.5-0.5b)", name));
}

GgufWriter make_random_model(const RandomModelSpec& s) {
  GgufWriter w;
  const std::string a = arch_name(s.arch);
  gguf_set_string(w, "general.architecture", a);
  gguf_set_string(w, "general.name", s.name);
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

  Rng rng{std::mt19937(s.seed)};
  const uint64_t D = s.dim, Q = uint64_t(s.n_heads) * s.head_dim, KV = uint64_t(s.n_kv_heads) * s.head_dim;
  add(w, "token_embd.weight", s.embd_type, rng.matrix(n_vocab, D), {D, n_vocab});
  if (!s.rope_freq_factors.empty())
    add(w, "rope_freqs.weight", GgmlType::F32, s.rope_freq_factors, {s.rope_freq_factors.size()});
  for (uint32_t l = 0; l < s.n_layers; ++l) {
    std::string p = fmt::format("blk.{}.", l);
    add(w, p + "attn_norm.weight", GgmlType::F32, rng.norm(D), {D});
    add(w, p + "attn_q.weight", s.matrix_type, rng.matrix(Q, D), {D, Q});
    add(w, p + "attn_k.weight", s.matrix_type, rng.matrix(KV, D), {D, KV});
    add(w, p + "attn_v.weight", s.matrix_type, rng.matrix(KV, D), {D, KV});
    if (s.arch == Arch::Qwen2) {
      add(w, p + "attn_q.bias", GgmlType::F32, rng.bias(Q), {Q});
      add(w, p + "attn_k.bias", GgmlType::F32, rng.bias(KV), {KV});
      add(w, p + "attn_v.bias", GgmlType::F32, rng.bias(KV), {KV});
    }
    if (s.arch == Arch::Qwen3) {
      add(w, p + "attn_q_norm.weight", GgmlType::F32, rng.norm(s.head_dim), {s.head_dim});
      add(w, p + "attn_k_norm.weight", GgmlType::F32, rng.norm(s.head_dim), {s.head_dim});
    }
    add(w, p + "attn_output.weight", s.matrix_type, rng.matrix(D, Q), {Q, D});
    add(w, p + "ffn_norm.weight", GgmlType::F32, rng.norm(D), {D});
    add(w, p + "ffn_gate.weight", s.matrix_type, rng.matrix(s.ff, D), {D, s.ff});
    add(w, p + "ffn_up.weight", s.matrix_type, rng.matrix(s.ff, D), {D, s.ff});
    add(w, p + "ffn_down.weight", s.matrix_type, rng.matrix(D, s.ff), {s.ff, D});
  }
  add(w, "output_norm.weight", GgmlType::F32, rng.norm(D), {D});
  if (!s.tied_embeddings) add(w, "output.weight", s.embd_type, rng.matrix(n_vocab, D), {D, n_vocab});
  return w;
}

}  // namespace wgrt::model
