#include "model/config.h"

#include <fmt/format.h>

#include <cmath>
#include <numbers>

namespace wgrt::model {

const char* arch_name(Arch a) {
  switch (a) {
    case Arch::Llama: return "llama";
    case Arch::Mistral: return "mistral";
    case Arch::Qwen2: return "qwen2";
    case Arch::Qwen3: return "qwen3";
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
  if (c.head_dim % 2) bad(fmt::format("head_dim {} is odd", c.head_dim));
  if (c.head_dim > kMaxHeadDim) bad(fmt::format("head_dim {} is past {}", c.head_dim, kMaxHeadDim));
  if (!c.rope_freq_factors.empty() && c.rope_freq_factors.size() != c.head_dim / 2)
    bad(fmt::format("{} rope frequency factors for head_dim {}", c.rope_freq_factors.size(), c.head_dim));
  if (!(c.norm_eps > 0) || !(c.rope_theta > 0)) bad("norm epsilon and rope theta must be positive");
}

ModelConfig config_from_gguf(const GgufFile& f) {
  std::string a = f.get_string("general.architecture");
  ModelConfig c;
  if (a == "llama") c.arch = Arch::Llama;
  else if (a == "mistral") c.arch = Arch::Mistral;
  else if (a == "qwen2") c.arch = Arch::Qwen2;
  else if (a == "qwen3") c.arch = Arch::Qwen3;
  else
    throw ModelError(fmt::format("{}: general.architecture '{}' is not supported (hint: wgrt runs llama, "
                                 "mistral, qwen2 and qwen3 models)", f.path, a));
  auto key = [&](const char* k) { return a + "." + k; };
  c.dim = uint32_t(f.get_uint(key("embedding_length")));
  c.n_layers = uint32_t(f.get_uint(key("block_count")));
  c.ff = uint32_t(f.get_uint(key("feed_forward_length")));
  c.n_heads = uint32_t(f.get_uint(key("attention.head_count")));
  c.n_kv_heads = uint32_t(f.opt_uint(key("attention.head_count_kv")).value_or(c.n_heads));
  c.n_ctx_train = uint32_t(f.opt_uint(key("context_length")).value_or(4096));
  c.norm_eps = float(f.get_float(key("attention.layer_norm_rms_epsilon")));
  c.rope_theta = float(f.opt_float(key("rope.freq_base")).value_or(10000.0));
  c.head_dim = uint32_t(f.opt_uint(key("attention.key_length")).value_or(c.n_heads ? c.dim / c.n_heads : 0));
  if (auto n = f.opt_uint(key("vocab_size"))) c.n_vocab = uint32_t(*n);
  else if (const auto* t = f.find_tensor("token_embd.weight"); t && t->dims.size() == 2) c.n_vocab = uint32_t(t->dims[1]);
  else if (f.find("tokenizer.ggml.tokens")) c.n_vocab = uint32_t(f.get_array("tokenizer.ggml.tokens").size());
  c.sliding_window = uint32_t(f.opt_uint(key("attention.sliding_window")).value_or(0));
  // GGUF stores llama/mistral q and k permuted for interleaved pairs; qwen keeps HF's halves.
  c.rope_neox = c.arch == Arch::Qwen2 || c.arch == Arch::Qwen3;
  c.tied_embeddings = f.find_tensor("output.weight") == nullptr;
  c.qkv_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;
  c.qk_norm = f.find_tensor("blk.0.attn_q_norm.weight") != nullptr;
  if (const auto* t = f.find_tensor("rope_freqs.weight")) {
    if (t->type != GgmlType::F32 || t->n_elements != c.head_dim / 2)
      throw ModelError(fmt::format("{}: rope_freqs.weight must be F32 [{}], is {} of {} elements", f.path,
                                   c.head_dim / 2, ggml_type_name(uint32_t(t->type)), t->n_elements));
    c.rope_freq_factors.assign(reinterpret_cast<const float*>(t->data),
                               reinterpret_cast<const float*>(t->data) + t->n_elements);
  }
  validate_config(c, f.path);
  return c;
}

namespace {

uint32_t hf_uint(const nlohmann::json& j, const char* k, const std::string& path) {
  if (!j.contains(k) || !j[k].is_number_unsigned())
    throw ModelError(fmt::format("{}: \"{}\" is missing or not a non-negative integer (hint: a Hugging "
                                 "Face config.json of a supported model has it)", path, k));
  return j[k].get<uint32_t>();
}

float hf_float(const nlohmann::json& j, const char* k, float fallback, const std::string& path) {
  if (!j.contains(k) || j[k].is_null()) return fallback;
  if (!j[k].is_number()) throw ModelError(fmt::format("{}: \"{}\" is not a number", path, k));
  return j[k].get<float>();
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
  else
    throw ModelError(fmt::format("{}: architectures '{}' is not supported (hint: wgrt runs LlamaForCausalLM, "
                                 "MistralForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM)", path,
                                 a.empty() ? "(none)" : a));
  c.n_vocab = hf_uint(j, "vocab_size", path);
  c.dim = hf_uint(j, "hidden_size", path);
  c.n_layers = hf_uint(j, "num_hidden_layers", path);
  c.n_heads = hf_uint(j, "num_attention_heads", path);
  c.n_kv_heads = j.contains("num_key_value_heads") ? hf_uint(j, "num_key_value_heads", path) : c.n_heads;
  c.ff = hf_uint(j, "intermediate_size", path);
  c.head_dim = j.contains("head_dim") && !j["head_dim"].is_null() ? hf_uint(j, "head_dim", path)
                                                                   : (c.n_heads ? c.dim / c.n_heads : 0);
  c.n_ctx_train = j.contains("max_position_embeddings") ? hf_uint(j, "max_position_embeddings", path) : 4096;
  c.norm_eps = hf_float(j, "rms_norm_eps", 1e-6f, path);
  c.rope_theta = hf_float(j, "rope_theta", 10000.f, path);
  // Qwen2 configs carry a sliding_window that use_sliding_window (false) turns off.
  if (auto it = j.find("sliding_window");
      it != j.end() && it->is_number_unsigned() && hf_bool(j, "use_sliding_window", c.arch == Arch::Mistral, path))
    c.sliding_window = it->get<uint32_t>();
  c.rope_neox = true;  // HF rotates halves
  c.tied_embeddings = hf_bool(j, "tie_word_embeddings", false, path);
  c.qkv_bias = c.arch == Arch::Qwen2 || hf_bool(j, "attention_bias", false, path);
  c.qk_norm = c.arch == Arch::Qwen3;
  if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) {
    const auto& s = j["rope_scaling"];
    std::string type = hf_string(s, "rope_type", path);
    if (type.empty()) type = hf_string(s, "type", path);
    if (type == "llama3") {
      validate_config(c, path);  // head_dim sizes the factors: checked first
      c.rope_freq_factors = llama3_freq_factors(
          c.head_dim, c.rope_theta, hf_float(s, "factor", 8.f, path), hf_float(s, "low_freq_factor", 1.f, path),
          hf_float(s, "high_freq_factor", 4.f, path),
          s.contains("original_max_position_embeddings") ? hf_uint(s, "original_max_position_embeddings", path) : 8192);
    } else if (!type.empty() && type != "default") {
      throw ModelError(fmt::format("{}: rope_scaling type '{}' is not supported (hint: wgrt supports llama3 "
                                   "scaling)", path, type));
    }
  }
  validate_config(c, path);
  return c;
}

}  // namespace wgrt::model
