#include "model/config.h"

#include "model/ggml_types.h"
#include "ops/moe/moe.h"

#include <fmt/format.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>
#include <optional>

namespace wgrt::model {

const char* arch_name(Arch a) {
  switch (a) {
    case Arch::Llama: return "llama";
    case Arch::Mistral: return "mistral";
    case Arch::Qwen2: return "qwen2";
    case Arch::Qwen3: return "qwen3";
    case Arch::Qwen3Moe: return "qwen3moe";
    case Arch::Qwen2Moe: return "qwen2moe";
    case Arch::Phi3: return "phi3";
    case Arch::Gemma2: return "gemma2";
    case Arch::Gemma3: return "gemma3";
  }
  return "?";
}

const char* pooling_name(Pooling p) {
  switch (p) {
    case Pooling::None: return "none";
    case Pooling::Mean: return "mean";
    case Pooling::Cls: return "cls";
    case Pooling::Last: return "last";
    case Pooling::Rank: return "rank";
  }
  return "?";
}

std::vector<float> llama3_freq_factors(uint32_t head_dim, float theta, float factor,
                                       float low_freq_factor, float high_freq_factor,
                                       uint32_t original_max_positions) {
  std::vector<float> out;
  const double low_wavelen = original_max_positions / double(low_freq_factor);
  const double high_wavelen = original_max_positions / double(high_freq_factor);
  for (uint32_t j = 0; j < head_dim / 2; ++j) {
    double freq = std::pow(double(theta), -2.0 * j / head_dim);
    double wavelen = 2 * std::numbers::pi / freq;
    double scaled = freq;
    if (wavelen > low_wavelen) {
      scaled = freq / factor;
    } else if (wavelen >= high_wavelen) {
      double smooth = (original_max_positions / wavelen - low_freq_factor) /
                      (double(high_freq_factor) - low_freq_factor);
      scaled = (1 - smooth) * freq / factor + smooth * freq;
    }
    out.push_back(float(freq / scaled));
  }
  return out;
}

// Far past any real model (64 to 256), low enough that the sizes derived from it stay small.
constexpr uint32_t kMaxHeadDim = 1024;

void validate_config(const ModelConfig& c, const std::string& where) {
  auto bad = [&](const std::string& what) {
    throw ModelError(fmt::format("{}: {} (hint: the model's configuration is inconsistent)", where, what));
  };
  if (!c.n_vocab || !c.dim || !c.n_layers || !c.n_heads || !c.n_kv_heads || !c.head_dim || !c.ff)
    bad(fmt::format("a size is zero (vocab {}, dim {}, layers {}, heads {}, kv heads {}, head_dim {}, ff {})",
                    c.n_vocab, c.dim, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.ff));
  if (c.n_heads % c.n_kv_heads) bad(fmt::format("{} heads is not a multiple of {} kv heads", c.n_heads, c.n_kv_heads));
  if (c.n_experts > 0 && (c.n_experts > ops::kMoeMaxExperts || c.n_experts_used == 0 ||
                          c.n_experts_used > std::min(c.n_experts, ops::kMoeMaxUsed) || c.expert_ff == 0 ||
                          c.expert_ff % 16 != 0))
    bad(fmt::format("{} of {} experts per token, each {} wide (wgrt runs 1 to {} of at most {} experts, each a "
                    "multiple of 16 wide)", c.n_experts_used, c.n_experts, c.expert_ff,
                    std::min(c.n_experts, ops::kMoeMaxUsed), ops::kMoeMaxExperts));
  if (c.shared_expert_ff > 0 && c.n_experts == 0)
    bad(fmt::format("a shared expert {} wide without experts", c.shared_expert_ff));
  if (c.head_dim % 2) bad(fmt::format("head_dim {} is odd", c.head_dim));
  if (c.head_dim > kMaxHeadDim) bad(fmt::format("head_dim {} is past {}", c.head_dim, kMaxHeadDim));
  if (!c.rope_freq_factors.empty() && c.rope_freq_factors.size() != c.head_dim / 2)
    bad(fmt::format("{} rope frequency factors for head_dim {}", c.rope_freq_factors.size(), c.head_dim));
  if (!(c.norm_eps > 0) || !(c.rope_theta > 0) || !std::isfinite(c.norm_eps) || !std::isfinite(c.rope_theta))
    bad(fmt::format("norm epsilon {} and rope theta {} must be finite and positive", c.norm_eps, c.rope_theta));
  for (const auto* set : {&c.rope_freq_factors, &c.rope_factors_short, &c.rope_factors_long}) {
    if (set != &c.rope_freq_factors && !set->empty() && set->size() != c.head_dim / 2)
      bad(fmt::format("{} LongRoPE factors for head_dim {}", set->size(), c.head_dim));
    for (size_t i = 0; i < set->size(); ++i)
      if (!((*set)[i] > 0) || !std::isfinite((*set)[i]))
        bad(fmt::format("rope frequency factor {} is {}, not a finite positive number", i, (*set)[i]));
  }
  if (c.rope_factors_short.empty() != c.rope_factors_long.empty())
    bad("LongRoPE needs both its short and its long factors");
  if (!c.local_layers.empty() && c.local_layers.size() != c.n_layers)
    bad(fmt::format("{} local-layer flags for {} layers", c.local_layers.size(), c.n_layers));
  for (float v : {c.rope_theta_local, c.embd_scale, c.norm_offset, c.attn_scale, c.attn_softcap, c.final_softcap})
    if (!(v >= 0) || !std::isfinite(v))
      bad(fmt::format("a Gemma hyperparameter is {}, not a finite number >= 0", v));
  if (!(c.rope_attn_factor > 0) || !std::isfinite(c.rope_attn_factor))
    bad(fmt::format("rope attention factor {} is not a finite positive number", c.rope_attn_factor));
  // The q|k|v rows and the gate|up rows are fused into one weight: their counts must fit 32 bits.
  const uint64_t qkv_rows = (uint64_t(c.n_heads) + 2 * uint64_t(c.n_kv_heads)) * c.head_dim;
  if (qkv_rows > std::numeric_limits<uint32_t>::max() ||
      2 * uint64_t(std::max(c.ff, c.shared_expert_ff)) > std::numeric_limits<uint32_t>::max())
    bad(fmt::format("{} heads and {} kv heads of {} and a feed-forward width of {} are past 32-bit sizes", c.n_heads,
                    c.n_kv_heads, c.head_dim, c.ff));
}

const std::vector<float>& rope_factors_for(const ModelConfig& c, uint32_t n_ctx) {
  if (!c.rope_freq_factors.empty()) return c.rope_freq_factors;
  return n_ctx > c.n_ctx_orig ? c.rope_factors_long : c.rope_factors_short;
}

float attention_scale(const ModelConfig& c) {
  const double base = c.attn_scale > 0 ? double(c.attn_scale) : 1 / std::sqrt(double(c.head_dim));
  return float(double(c.rope_attn_factor) * c.rope_attn_factor * base);
}

uint32_t layer_window(const ModelConfig& c, uint32_t layer) {
  if (c.local_layers.empty()) return c.sliding_window;
  return layer < c.local_layers.size() && c.local_layers[layer] ? c.sliding_window : 0;
}

bool layer_rope_local(const ModelConfig& c, uint32_t layer) {
  return c.rope_theta_local > 0 && layer < c.local_layers.size() && c.local_layers[layer];
}

namespace {

// A float hyperparameter (`what` names its key): finite, positive and inside float's range,
// else ModelError. Returns it as a float.
float positive_float(double v, const std::string& what, const std::string& path) {
  if (!(v > 0) || !(v <= FLT_MAX) || float(v) == 0)
    throw ModelError(fmt::format("{}: {} = {} is not a finite positive number within float's range (hint: the "
                                 "model's configuration is corrupt)", path, what, v));
  return float(v);
}

// A GGUF integer key as a uint32_t: a value past 32 bits is refused, never truncated.
uint32_t gguf_u32(const GgufFile& f, const std::string& key, std::optional<uint32_t> fallback = std::nullopt) {
  const std::optional<uint64_t> v = fallback ? f.opt_uint(key) : std::optional<uint64_t>(f.get_uint(key));
  if (!v) return *fallback;
  if (*v > std::numeric_limits<uint32_t>::max())
    throw ModelError(fmt::format("{}: metadata key '{}' = {} is past 32 bits (at most {}) (hint: the file is "
                                 "corrupt)", f.path, key, *v, std::numeric_limits<uint32_t>::max()));
  return uint32_t(*v);
}

// A size wgrt derived from the file (a tensor's dim, an array's length) as a uint32_t.
uint32_t derived_u32(const GgufFile& f, uint64_t v, const std::string& what) {
  if (v > std::numeric_limits<uint32_t>::max())
    throw ModelError(fmt::format("{}: {} = {} is past 32 bits (hint: the file is corrupt)", f.path, what, v));
  return uint32_t(v);
}

// A non-negative float key (`fallback` where absent): 0 turns the feature off.
float gguf_nonneg(const GgufFile& f, const std::string& key, double fallback) {
  const double v = f.opt_float(key).value_or(fallback);
  if (v == 0) return 0;
  return positive_float(v, fmt::format("metadata key '{}'", key), f.path);
}

// Gemma 2 and 3 as llama.cpp reads them (src/models/gemma2.cpp, gemma3.cpp): the embeddings
// times sqrt(n_embd) in f32; the norm weights' 1 added by the converter; layer l local where
// l % pattern < pattern - 1 (Gemma 2: pattern 2, window 4096 by default, even layers local;
// Gemma 3: pattern 6 where the file has a window, every 6th layer global); local layers' RoPE
// base `rope.freq_base_swa` (Gemma 3: 10000 by default; Gemma 2: the global one); soft-capping
// (Gemma 2: attention 50 and final 30 by default; Gemma 3: final only where the file says);
// the score scale 1 / sqrt(head_dim) except for the 27B shapes (46 and 62 layers), whose
// query_pre_attn_scalar is n_embd / n_head. Linear RoPE scaling applies to global layers.
void gemma_from_gguf(const GgufFile& f, ModelConfig& c) {
  const std::string a = c.arch == Arch::Gemma2 ? "gemma2" : "gemma3";
  auto key = [&](const char* k) { return a + "." + k; };
  const bool g2 = c.arch == Arch::Gemma2;
  c.embd_scale = std::sqrt(float(c.dim));
  c.gelu_gate = true;
  c.tied_embeddings = true;  // llama.cpp's gemma2 reads token_embd for the output whatever the file holds
  if (!g2) c.tied_embeddings = f.find_tensor("output.weight") == nullptr;
  c.sliding_window = gguf_u32(f, key("attention.sliding_window"), g2 ? 4096 : 0);
  if (c.sliding_window > 0) {
    const uint32_t pattern = gguf_u32(f, key("attention.sliding_window_pattern"), g2 ? 2 : 6);
    c.local_layers.resize(c.n_layers);
    for (uint32_t l = 0; l < c.n_layers; ++l) c.local_layers[l] = pattern == 0 || l % pattern < pattern - 1;
    c.rope_theta_local = float(f.opt_float(key("rope.freq_base_swa")).value_or(g2 ? c.rope_theta : 10000.0));
    c.rope_theta_local = positive_float(c.rope_theta_local, fmt::format("metadata key '{}'", key("rope.freq_base_swa")),
                                        f.path);
  }
  c.attn_softcap = g2 ? gguf_nonneg(f, key("attn_logit_softcapping"), 50) : 0;
  c.final_softcap = gguf_nonneg(f, key("final_logit_softcapping"), g2 ? 30 : 0);
  const bool big = c.n_layers == (g2 ? 46u : 62u);
  c.attn_scale = float(1 / std::sqrt(double(big ? c.dim / c.n_heads : c.head_dim)));
  const std::string type = f.find(key("rope.scaling.type")) ? f.get_string(key("rope.scaling.type")) : "";
  const double factor = f.opt_float(key("rope.scaling.factor")).value_or(0);
  if (factor != 0 && factor != 1 && (type.empty() || type == "linear"))
    c.rope_freq_factors.assign(c.head_dim / 2, positive_float(factor, "metadata key 'rope.scaling.factor'", f.path));
}

// Mixture of experts as llama.cpp reads it: `<arch>.expert_count` experts (Mixtral's files: a
// llama with experts), `expert_used_count` chosen per token, each `expert_feed_forward_length`
// wide (qwen3moe; qwen2moe, where absent feed_forward_length / expert_used_count; llama's
// experts are feed_forward_length wide), their softmax weights renormalized over the chosen ones
// unless `expert_weights_norm` says false (qwen2moe never renormalizes). qwen2moe's shared expert
// is `expert_shared_feed_forward_length` wide (feed_forward_length where absent).
void experts_from_gguf(const GgufFile& f, const std::string& a, ModelConfig& c) {
  auto key = [&](const char* k) { return a + "." + k; };
  c.n_experts = gguf_u32(f, key("expert_count"), 0);
  const bool moe_arch = c.arch == Arch::Qwen3Moe || c.arch == Arch::Qwen2Moe;
  if (c.n_experts == 0) {
    if (moe_arch)
      throw ModelError(fmt::format("{}: a {} file without '{}' (hint: the file is corrupt)", f.path, a,
                                   key("expert_count")));
    return;
  }
  if (c.arch != Arch::Llama && !moe_arch)
    throw ModelError(fmt::format("{}: metadata key '{}' is {}: wgrt runs experts in llama (Mixtral), qwen3moe and "
                                 "qwen2moe files, not {} (hint: a dense {} model)", f.path, key("expert_count"),
                                 c.n_experts, a, a));
  c.n_experts_used = gguf_u32(f, key("expert_used_count"));
  if (c.arch == Arch::Qwen3Moe) c.expert_ff = gguf_u32(f, key("expert_feed_forward_length"));
  else if (c.arch == Arch::Qwen2Moe)
    c.expert_ff = gguf_u32(f, key("expert_feed_forward_length"), c.n_experts_used ? c.ff / c.n_experts_used : 0);
  else c.expert_ff = c.ff;
  if (c.arch == Arch::Qwen2Moe) {
    c.expert_norm = false;
    c.shared_expert_ff = gguf_u32(f, key("expert_shared_feed_forward_length"), c.ff);
    return;
  }
  if (f.find(key("expert_weights_norm"))) c.expert_norm = f.get_bool(key("expert_weights_norm"));
}

}  // namespace

ModelConfig config_from_gguf(const GgufFile& f) {
  std::string a = f.get_string("general.architecture");
  ModelConfig c;
  if (a == "llama") c.arch = Arch::Llama;
  else if (a == "mistral") c.arch = Arch::Mistral;
  else if (a == "qwen2") c.arch = Arch::Qwen2;
  else if (a == "qwen3") c.arch = Arch::Qwen3;
  else if (a == "qwen3moe") c.arch = Arch::Qwen3Moe;
  else if (a == "qwen2moe") c.arch = Arch::Qwen2Moe;
  else if (a == "phi3") c.arch = Arch::Phi3;
  else if (a == "gemma2") c.arch = Arch::Gemma2;
  else if (a == "gemma3") c.arch = Arch::Gemma3;
  else
    throw ModelError(fmt::format("{}: general.architecture '{}' is not supported (hint: wgrt runs llama, "
                                 "mistral, qwen2, qwen3, qwen3moe, qwen2moe, phi3, gemma2 and gemma3 models)", f.path,
                                 a));
  auto key = [&](const char* k) { return a + "." + k; };
  c.dim = gguf_u32(f, key("embedding_length"));
  c.n_layers = gguf_u32(f, key("block_count"));
  c.ff = gguf_u32(f, key("feed_forward_length"));
  experts_from_gguf(f, a, c);
  c.n_heads = gguf_u32(f, key("attention.head_count"));
  c.n_kv_heads = gguf_u32(f, key("attention.head_count_kv"), c.n_heads);
  c.n_ctx_train = gguf_u32(f, key("context_length"), 4096);
  const std::string eps = key("attention.layer_norm_rms_epsilon"), theta = key("rope.freq_base");
  c.norm_eps = positive_float(f.get_float(eps), fmt::format("metadata key '{}'", eps), f.path);
  c.rope_theta = positive_float(f.opt_float(theta).value_or(10000.0), fmt::format("metadata key '{}'", theta), f.path);
  c.head_dim = gguf_u32(f, key("attention.key_length"), c.n_heads ? c.dim / c.n_heads : 0);
  if (f.find(key("vocab_size"))) c.n_vocab = gguf_u32(f, key("vocab_size"));
  else if (const auto* t = f.find_tensor("token_embd.weight"); t && t->dims.size() == 2)
    c.n_vocab = derived_u32(f, t->dims[1], "tensor 'token_embd.weight' dim 1 (the vocabulary)");
  else if (f.find("tokenizer.ggml.tokens"))
    c.n_vocab = derived_u32(f, f.get_array("tokenizer.ggml.tokens").size(), "the length of 'tokenizer.ggml.tokens'");
  c.sliding_window = gguf_u32(f, key("attention.sliding_window"), 0);
  // GGUF stores llama/mistral q and k permuted for interleaved pairs; qwen and phi3 keep HF's halves.
  c.rope_neox = c.arch == Arch::Qwen2 || c.arch == Arch::Qwen3 || c.arch == Arch::Qwen3Moe ||
                c.arch == Arch::Qwen2Moe || c.arch == Arch::Phi3 || c.arch == Arch::Gemma2 || c.arch == Arch::Gemma3;
  if (const uint32_t n_rot = gguf_u32(f, key("rope.dimension_count"), c.head_dim); n_rot != c.head_dim)
    throw ModelError(fmt::format("{}: metadata key '{}' = {} turns part of each head of {} (hint: wgrt turns whole "
                                 "heads; partial rotary models such as Phi-4-mini are not supported)", f.path,
                                 key("rope.dimension_count"), n_rot, c.head_dim));
  c.tied_embeddings = f.find_tensor("output.weight") == nullptr;
  c.qkv_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;
  c.qk_norm = f.find_tensor("blk.0.attn_q_norm.weight") != nullptr;
  if (f.find(key("pooling_type"))) {
    const uint32_t p = gguf_u32(f, key("pooling_type"));
    if (p > uint32_t(Pooling::Rank))
      throw ModelError(fmt::format("{}: metadata key '{}' = {} is not a pooling type (0 none, 1 mean, 2 cls, 3 last, "
                                   "4 rank) (hint: the file is corrupt)", f.path, key("pooling_type"), p));
    c.pooling = Pooling(p);
    c.pooling_declared = true;
  }
  if (f.find("wgrt.embedding.matryoshka")) c.matryoshka = f.get_bool("wgrt.embedding.matryoshka");
  if (const auto* t = f.find_tensor("rope_freqs.weight")) {
    if (t->type != GgmlType::F32 || t->n_elements != c.head_dim / 2)
      throw ModelError(fmt::format("{}: rope_freqs.weight must be F32 [{}], is {} of {} elements", f.path,
                                   c.head_dim / 2, ggml_type_name(uint32_t(t->type)), t->n_elements));
    c.rope_freq_factors.assign(reinterpret_cast<const float*>(t->data),
                               reinterpret_cast<const float*>(t->data) + t->n_elements);
  }
  for (auto [name, set] : {std::pair{"rope_factors_short.weight", &c.rope_factors_short},
                           std::pair{"rope_factors_long.weight", &c.rope_factors_long}}) {
    const auto* t = f.find_tensor(name);
    if (!t) continue;
    if (t->type != GgmlType::F32 || t->n_elements != c.head_dim / 2)
      throw ModelError(fmt::format("{}: {} must be F32 [{}], is {} of {} elements", f.path, name, c.head_dim / 2,
                                   ggml_type_name(uint32_t(t->type)), t->n_elements));
    set->assign(reinterpret_cast<const float*>(t->data), reinterpret_cast<const float*>(t->data) + t->n_elements);
  }
  c.n_ctx_orig = gguf_u32(f, key("rope.scaling.original_context_length"), c.n_ctx_train);
  const std::string attn_factor = key("rope.scaling.attn_factor");
  c.rope_attn_factor = positive_float(f.opt_float(attn_factor).value_or(1.0), fmt::format("metadata key '{}'",
                                                                                          attn_factor), f.path);
  if (c.arch == Arch::Gemma2 || c.arch == Arch::Gemma3) gemma_from_gguf(f, c);
  validate_config(c, f.path);
  return c;
}

namespace {

// A config.json integer as a uint32_t (`fallback` where the key is absent or null): past 32 bits
// is refused, never truncated.
uint32_t hf_uint(const nlohmann::json& j, const char* k, const std::string& path,
                 std::optional<uint32_t> fallback = std::nullopt) {
  if (fallback && (!j.contains(k) || j[k].is_null())) return *fallback;
  if (!j.contains(k) || !j[k].is_number_unsigned())
    throw ModelError(fmt::format("{}: \"{}\" is missing or not a non-negative integer (hint: a Hugging "
                                 "Face config.json of a supported model has it)", path, k));
  const uint64_t v = j[k].get<uint64_t>();
  if (v > std::numeric_limits<uint32_t>::max())
    throw ModelError(fmt::format("{}: \"{}\" = {} is past 32 bits (at most {}) (hint: the config is corrupt)", path,
                                 k, v, std::numeric_limits<uint32_t>::max()));
  return uint32_t(v);
}

// A config.json float hyperparameter: finite and positive (`fallback` where absent or null).
float hf_float(const nlohmann::json& j, const char* k, float fallback, const std::string& path) {
  if (!j.contains(k) || j[k].is_null()) return fallback;
  if (!j[k].is_number()) throw ModelError(fmt::format("{}: \"{}\" is not a number", path, k));
  return positive_float(j[k].get<double>(), fmt::format("\"{}\"", k), path);
}

bool hf_bool(const nlohmann::json& j, const char* k, bool fallback, const std::string& path) {
  if (!j.contains(k) || j[k].is_null()) return fallback;
  if (!j[k].is_boolean()) throw ModelError(fmt::format("{}: \"{}\" is not true or false", path, k));
  return j[k].get<bool>();
}

std::string hf_string(const nlohmann::json& j, const char* k, const std::string& path) {
  if (!j.contains(k) || j[k].is_null()) return "";
  if (!j[k].is_string()) throw ModelError(fmt::format("{}: \"{}\" is not a string", path, k));
  return j[k].get<std::string>();
}

// A LongRoPE rope_scaling object (Phi-3's "longrope", once "su"): its short and long divisors,
// the context they switch at, and the attention factor (given, or sqrt(1 + ln(s) / ln(orig))
// for s = max positions / orig, the published rule; 1 where s <= 1).
void longrope_from_hf(const nlohmann::json& j, const nlohmann::json& s, ModelConfig& c, const std::string& path) {
  auto factors = [&](const char* k) {
    if (!s.contains(k) || !s[k].is_array())
      throw ModelError(fmt::format("{}: rope_scaling \"{}\" is missing or not an array (hint: longrope scaling "
                                   "names a short_factor and a long_factor of head_dim / 2 numbers)", path, k));
    std::vector<float> v;
    for (const auto& e : s[k]) {
      if (!e.is_number()) throw ModelError(fmt::format("{}: rope_scaling \"{}\" holds a non-number", path, k));
      v.push_back(e.get<float>());
    }
    return v;
  };
  c.rope_factors_short = factors("short_factor");
  c.rope_factors_long = factors("long_factor");
  c.n_ctx_orig = s.contains("original_max_position_embeddings")
                     ? hf_uint(s, "original_max_position_embeddings", path)
                     : hf_uint(j, "original_max_position_embeddings", path, c.n_ctx_train);
  if (s.contains("attention_factor") && !s["attention_factor"].is_null()) {
    c.rope_attn_factor = hf_float(s, "attention_factor", 1.f, path);
  } else if (c.n_ctx_orig > 1 && c.n_ctx_train > c.n_ctx_orig) {
    const double scale = double(c.n_ctx_train) / c.n_ctx_orig;
    c.rope_attn_factor = float(std::sqrt(1 + std::log(scale) / std::log(double(c.n_ctx_orig))));
  }
}

// x rounded to the nearest bfloat16 (ties to even).
float round_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&x, &u, 4);
  return x;
}

// Gemma 2 and 3 from a config.json (transformers' Gemma2Config, Gemma3TextConfig): tied output
// by default; the norms' weights w of x * (1 + w) get their 1 at load (norm_offset); the score
// scale query_pre_attn_scalar^-0.5; the embeddings times sqrt(hidden_size) as the checkpoint's
// dtype rounds it (transformers makes the normalizer a tensor of the hidden states' dtype:
// sqrt(1152) = 33.94 is 34 in bfloat16); layer l local per "layer_types" where given, else Gemma
// 2's even layers and Gemma 3's all but every sliding_window_pattern-th (6); Gemma 3's local
// layers turn RoPE at rope_local_base_freq (10000), its global ones at rope_theta with linear
// scaling where rope_scaling says so (or rope_parameters' full_attention and sliding_attention
// in newer configs); soft-capping where set (Gemma 2's configs: attention 50, final 30).
void gemma_from_hf(const nlohmann::json& j, ModelConfig& c, const std::string& path) {
  const bool g2 = c.arch == Arch::Gemma2;
  const std::string act = hf_string(j, "hidden_activation", path).empty() ? hf_string(j, "hidden_act", path)
                                                                        : hf_string(j, "hidden_activation", path);
  if (!act.empty() && act != "gelu_pytorch_tanh" && act != "gelu_tanh")
    throw ModelError(fmt::format("{}: hidden_activation '{}' is not supported (hint: Gemma's feed-forward gate is "
                                 "gelu_pytorch_tanh)", path, act));
  c.gelu_gate = true;
  c.head_dim = hf_uint(j, "head_dim", path, 256);
  c.tied_embeddings = hf_bool(j, "tie_word_embeddings", true, path);
  c.norm_offset = 1;
  c.attn_scale = float(1 / std::sqrt(double(hf_float(j, "query_pre_attn_scalar", float(c.head_dim), path))));
  std::string dtype = hf_string(j, "torch_dtype", path);
  if (dtype.empty()) dtype = hf_string(j, "dtype", path);
  const float root = float(std::sqrt(double(c.dim)));
  c.embd_scale = dtype == "bfloat16" ? round_bf16(root) : dtype == "float16" ? f16_to_f32(f32_to_f16(root)) : root;
  auto softcap = [&](const char* k, float fallback) {
    if (!j.contains(k)) return fallback;
    return j[k].is_null() ? 0.f : hf_float(j, k, fallback, path);
  };
  c.attn_softcap = softcap("attn_logit_softcapping", g2 ? 50.f : 0.f);
  c.final_softcap = softcap("final_logit_softcapping", g2 ? 30.f : 0.f);
  c.sliding_window = hf_uint(j, "sliding_window", path, 4096);
  c.local_layers.assign(c.n_layers, false);
  if (j.contains("layer_types") && j["layer_types"].is_array()) {
    const auto& t = j["layer_types"];
    if (t.size() != c.n_layers)
      throw ModelError(fmt::format("{}: \"layer_types\" names {} layers of {} (hint: the config is corrupt)", path,
                                   t.size(), c.n_layers));
    for (uint32_t l = 0; l < c.n_layers; ++l) {
      const std::string s = t[l].is_string() ? t[l].get<std::string>() : "";
      if (s != "sliding_attention" && s != "full_attention")
        throw ModelError(fmt::format("{}: layer_types[{}] is '{}' (hint: sliding_attention or full_attention)", path,
                                     l, s));
      c.local_layers[l] = s == "sliding_attention";
    }
  } else {
    const uint32_t pattern = hf_uint(j, "sliding_window_pattern", path, g2 ? 2 : 6);
    for (uint32_t l = 0; l < c.n_layers; ++l) c.local_layers[l] = pattern > 0 && (l + 1) % pattern != 0;
  }
  // RoPE: Gemma 2 one base for all; Gemma 3 a global and a local one.
  const nlohmann::json* global = nullptr;
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    const auto& rp = j["rope_parameters"];
    global = rp.contains("full_attention") ? &rp["full_attention"] : &rp;
    if (rp.contains("sliding_attention") && rp["sliding_attention"].is_object())
      c.rope_theta_local = hf_float(rp["sliding_attention"], "rope_theta", 10000.f, path);
    c.rope_theta = hf_float(*global, "rope_theta", c.rope_theta, path);
  } else if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) {
    global = &j["rope_scaling"];
  }
  if (!g2 && c.rope_theta_local == 0) c.rope_theta_local = hf_float(j, "rope_local_base_freq", 10000.f, path);
  if (global) {
    std::string type = hf_string(*global, "rope_type", path);
    if (type.empty()) type = hf_string(*global, "type", path);
    if (type == "linear") {
      validate_config(c, path);
      c.rope_freq_factors.assign(c.head_dim / 2, hf_float(*global, "factor", 1.f, path));
    } else if (!type.empty() && type != "default") {
      throw ModelError(fmt::format("{}: rope scaling type '{}' is not supported for Gemma (hint: wgrt supports linear "
                                   "scaling there)", path, type));
    }
  }
}

// Mixture of experts from a config.json (transformers' MixtralConfig, Qwen3MoeConfig,
// Qwen2MoeConfig). Mixtral: num_local_experts experts intermediate_size wide, the top
// num_experts_per_tok renormalized (its router's softmax over the chosen logits). Qwen3-MoE and
// Qwen2-MoE: num_experts experts moe_intermediate_size wide, renormalized where norm_topk_prob
// (false by default, as transformers has it); Qwen2-MoE's shared expert
// shared_expert_intermediate_size wide. wgrt runs experts on every layer: a config with dense
// layers among them (decoder_sparse_step past 1, mlp_only_layers) is refused.
void experts_from_hf(const nlohmann::json& j, ModelConfig& c, const std::string& path) {
  const bool mixtral = c.arch == Arch::Llama;
  // The experts' count: transformers 5 writes Qwen3-MoE's as num_local_experts too.
  const char* key = mixtral ? "num_local_experts" : "num_experts";
  const char* alt = mixtral ? "num_experts" : "num_local_experts";
  c.n_experts = hf_uint(j, j.contains(key) || !j.contains(alt) ? key : alt, path);
  c.n_experts_used = hf_uint(j, "num_experts_per_tok", path);
  c.expert_ff = mixtral ? c.ff : hf_uint(j, "moe_intermediate_size", path);
  c.expert_norm = mixtral || hf_bool(j, "norm_topk_prob", false, path);
  if (c.arch == Arch::Qwen2Moe) c.shared_expert_ff = hf_uint(j, "shared_expert_intermediate_size", path);
  if (mixtral) return;
  if (const uint32_t step = hf_uint(j, "decoder_sparse_step", path, 1); step != 1)
    throw ModelError(fmt::format("{}: \"decoder_sparse_step\" is {}: dense layers lie between those with experts "
                                 "(hint: wgrt runs models whose every layer has experts, decoder_sparse_step 1)", path,
                                 step));
  if (j.contains("mlp_only_layers") && !j["mlp_only_layers"].is_null()) {
    const auto& dense = j["mlp_only_layers"];
    if (!dense.is_array())
      throw ModelError(fmt::format("{}: \"mlp_only_layers\" is not a list of layers (hint: the config is corrupt)",
                                   path));
    if (!dense.empty())
      throw ModelError(fmt::format("{}: \"mlp_only_layers\" names {} dense layers, first {} (hint: wgrt runs models "
                                   "whose every layer has experts; mlp_only_layers must be empty)", path,
                                   dense.size(), dense[0].dump()));
  }
}

}  // namespace

ModelConfig config_from_hf(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object()) throw ModelError(fmt::format("{}: not a JSON object", path));
  std::string a;
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string())
    a = j["architectures"][0].get<std::string>();
  ModelConfig c;
  if (a == "LlamaForCausalLM") c.arch = Arch::Llama;
  else if (a == "MistralForCausalLM") c.arch = Arch::Mistral;
  else if (a == "Qwen2ForCausalLM") c.arch = Arch::Qwen2;
  else if (a == "Qwen3ForCausalLM") c.arch = Arch::Qwen3;
  else if (a == "MixtralForCausalLM") c.arch = Arch::Llama;  // a llama (Mistral) whose FFNs are experts
  else if (a == "Qwen3MoeForCausalLM") c.arch = Arch::Qwen3Moe;
  else if (a == "Qwen2MoeForCausalLM") c.arch = Arch::Qwen2Moe;
  else if (a == "Phi3ForCausalLM") c.arch = Arch::Phi3;
  else if (a == "Gemma2ForCausalLM") c.arch = Arch::Gemma2;
  else if (a == "Gemma3ForCausalLM") c.arch = Arch::Gemma3;
  else if (a == "Gemma3ForConditionalGeneration")
    throw ModelError(fmt::format("{}: Gemma3ForConditionalGeneration (text and vision) is not supported (hint: wgrt "
                                 "runs Gemma 3's text model from a Gemma3ForCausalLM checkpoint such as gemma-3-1b, or "
                                 "a GGUF file of the model)", path));
  else
    throw ModelError(fmt::format("{}: architectures '{}' is not supported (hint: wgrt runs LlamaForCausalLM, "
                                 "MistralForCausalLM, MixtralForCausalLM, Qwen2ForCausalLM, Qwen2MoeForCausalLM, "
                                 "Qwen3ForCausalLM, Qwen3MoeForCausalLM, Phi3ForCausalLM, Gemma2ForCausalLM and "
                                 "Gemma3ForCausalLM)", path, a.empty() ? "(none)" : a));
  c.n_vocab = hf_uint(j, "vocab_size", path);
  c.dim = hf_uint(j, "hidden_size", path);
  c.n_layers = hf_uint(j, "num_hidden_layers", path);
  c.n_heads = hf_uint(j, "num_attention_heads", path);
  c.n_kv_heads = hf_uint(j, "num_key_value_heads", path, c.n_heads);
  c.ff = hf_uint(j, "intermediate_size", path);
  c.head_dim = hf_uint(j, "head_dim", path, c.n_heads ? c.dim / c.n_heads : 0);
  c.n_ctx_train = hf_uint(j, "max_position_embeddings", path, 4096);
  c.norm_eps = hf_float(j, "rms_norm_eps", 1e-6f, path);
  c.rope_theta = hf_float(j, "rope_theta", 10000.f, path);
  // Qwen2 configs carry a sliding_window that use_sliding_window (false) turns off; Mistral's,
  // Mixtral's and Phi-3's apply.
  const bool mixtral = a == "MixtralForCausalLM";
  const bool window_default = c.arch == Arch::Mistral || c.arch == Arch::Phi3 || mixtral;
  if (auto it = j.find("sliding_window");
      it != j.end() && it->is_number_unsigned() && hf_bool(j, "use_sliding_window", window_default, path))
    c.sliding_window = hf_uint(j, "sliding_window", path);
  if (const float rot = hf_float(j, "partial_rotary_factor", 1.f, path); rot != 1.f)
    throw ModelError(fmt::format("{}: \"partial_rotary_factor\" is {}: RoPE turns part of each head (hint: wgrt turns "
                                 "whole heads; partial rotary models such as Phi-4-mini are not supported)", path, rot));
  c.rope_neox = true;  // HF rotates halves
  c.tied_embeddings = hf_bool(j, "tie_word_embeddings", false, path);
  // Qwen2-MoE's q/k/v biases: its "qkv_bias" (true by default).
  c.qkv_bias = c.arch == Arch::Qwen2 || hf_bool(j, "attention_bias", false, path) ||
               (c.arch == Arch::Qwen2Moe && hf_bool(j, "qkv_bias", true, path));
  c.qk_norm = c.arch == Arch::Qwen3 || c.arch == Arch::Qwen3Moe || c.arch == Arch::Gemma3;
  if (mixtral || c.arch == Arch::Qwen3Moe || c.arch == Arch::Qwen2Moe) experts_from_hf(j, c, path);
  c.matryoshka = hf_bool(j, "matryoshka", false, path);
  if (c.arch == Arch::Gemma2 || c.arch == Arch::Gemma3) {
    gemma_from_hf(j, c, path);
    validate_config(c, path);
    return c;
  }
  // rope_scaling, or rope_parameters as newer transformers write it (rope_theta inside).
  const char* rope_key = j.contains("rope_scaling") && j["rope_scaling"].is_object() ? "rope_scaling"
                         : j.contains("rope_parameters") && j["rope_parameters"].is_object() ? "rope_parameters"
                                                                                               : nullptr;
  if (rope_key && !j.contains("rope_theta")) c.rope_theta = hf_float(j[rope_key], "rope_theta", c.rope_theta, path);
  if (rope_key) {
    const auto& s = j[rope_key];
    std::string type = hf_string(s, "rope_type", path);
    if (type.empty()) type = hf_string(s, "type", path);
    if (type == "llama3") {
      validate_config(c, path);  // head_dim sizes the factors: checked first
      const float low = hf_float(s, "low_freq_factor", 1.f, path), high = hf_float(s, "high_freq_factor", 4.f, path);
      if (!(high > low))
        throw ModelError(fmt::format("{}: rope_scaling's high_freq_factor {} is not above its low_freq_factor {} "
                                     "(hint: llama3 scaling blends between the two; the config is corrupt)",
                                     path, high, low));
      c.rope_freq_factors = llama3_freq_factors(c.head_dim, c.rope_theta, hf_float(s, "factor", 8.f, path), low, high,
                                                hf_uint(s, "original_max_position_embeddings", path, 8192));
    } else if (type == "longrope" || type == "su") {
      validate_config(c, path);
      longrope_from_hf(j, s, c, path);
    } else if (!type.empty() && type != "default") {
      throw ModelError(fmt::format("{}: rope_scaling type '{}' is not supported (hint: wgrt supports llama3 and "
                                   "longrope scaling)", path, type));
    }
  }
  validate_config(c, path);
  return c;
}

Pooling pooling_from_sentence_transformers(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object()) throw ModelError(fmt::format("{}: not a JSON object", path));
  struct Mode {
    const char* key;
    std::optional<Pooling> pooling;  // none: a mode wgrt does not pool
  };
  constexpr Mode kModes[] = {{"pooling_mode_cls_token", Pooling::Cls},
                             {"pooling_mode_mean_tokens", Pooling::Mean},
                             {"pooling_mode_lasttoken", Pooling::Last},
                             {"pooling_mode_max_tokens", std::nullopt},
                             {"pooling_mode_mean_sqrt_len_tokens", std::nullopt},
                             {"pooling_mode_weightedmean_tokens", std::nullopt}};
  std::optional<Pooling> found;
  for (const Mode& m : kModes) {
    if (!hf_bool(j, m.key, false, path)) continue;
    if (!m.pooling)
      throw ModelError(fmt::format("{}: \"{}\" is true, a pooling wgrt does not compute (hint: wgrt pools by mean, "
                                   "cls or last token)", path, m.key));
    if (found)
      throw ModelError(fmt::format("{}: more than one pooling mode is true (hint: wgrt pools by one of mean, cls or "
                                   "last token)", path));
    found = m.pooling;
  }
  if (!found)
    throw ModelError(fmt::format("{}: no pooling mode is true (hint: set one of pooling_mode_mean_tokens, "
                                 "pooling_mode_cls_token or pooling_mode_lasttoken)", path));
  return *found;
}

}  // namespace wgrt::model
