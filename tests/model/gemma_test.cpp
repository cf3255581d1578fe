// Gemma 2 and Gemma 3 files: the GGUF keys llama.cpp's converter writes and Hugging Face
// configs to one ModelConfig (local layers, RoPE bases, soft-capping, scales), the checkpoints'
// names of the four norms per layer, the refusals; and a Gemma 3 Hugging Face checkpoint (norm
// weights w of x * (1 + w), a sliding window shorter than the prompt, two RoPE bases) through the
// GPU graph against the CPU reference.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "llm/session.h"
#include "model/model_file.h"
#include "model/random_model.h"
#include "model/transformer.h"
#include "reference/transformer_ref.h"
#include "support/device.h"
#include "support/hf_fixture.h"
#include "support/random.h"
#include "support/throws.h"

namespace wgrt::model {
namespace {

using test::error_of;

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// llama.cpp's rules on files that carry only what its converter writes.
TEST(ModelFile, Gemma3GgufOpens) {
  RandomModelSpec s;
  s.arch = Arch::Gemma3;
  s.n_layers = 8;
  s.sliding_window = 16;  // the pattern (6) and the local base (10000) from llama.cpp's defaults
  s.rope_theta = 1000000.f;
  s.rope_linear_factor = 8.f;
  ModelFile m = open_gguf_bytes(gguf_serialize(make_random_model(s)), "gemma3.gguf");
  const ModelConfig& c = m.config;
  EXPECT_EQ(c.arch, Arch::Gemma3);
  EXPECT_TRUE(c.rope_neox);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_EQ(c.sliding_window, 16u);
  EXPECT_EQ(c.local_layers, std::vector<bool>({true, true, true, true, true, false, true, true}));
  EXPECT_EQ(layer_window(c, 0), 16u);
  EXPECT_EQ(layer_window(c, 5), 0u);
  EXPECT_TRUE(layer_rope_local(c, 4));
  EXPECT_FALSE(layer_rope_local(c, 5));
  EXPECT_FLOAT_EQ(c.rope_theta_local, 10000.f);
  EXPECT_FLOAT_EQ(c.rope_theta, 1000000.f);
  EXPECT_EQ(c.rope_freq_factors, std::vector<float>(s.head_dim / 2, 8.f));  // linear: global layers
  EXPECT_FLOAT_EQ(c.embd_scale, std::sqrt(float(s.dim)));
  EXPECT_FLOAT_EQ(c.norm_offset, 0.f);  // the converter added the 1
  EXPECT_FLOAT_EQ(c.attn_softcap, 0.f);
  EXPECT_FLOAT_EQ(c.final_softcap, 0.f);
  EXPECT_NEAR(attention_scale(c), 1 / std::sqrt(double(s.head_dim)), 1e-7);
  EXPECT_NO_THROW(get_weight(m, "blk.1.post_attention_norm.weight", {s.dim}));
  EXPECT_NO_THROW(get_weight(m, "blk.1.post_ffw_norm.weight", {s.dim}));
  // Without a window key: no local layers.
  s.sliding_window = 0;
  ModelFile g = open_gguf_bytes(gguf_serialize(make_random_model(s)), "gemma3-global.gguf");
  EXPECT_TRUE(g.config.local_layers.empty());
  EXPECT_EQ(layer_window(g.config, 0), 0u);
}

TEST(ModelFile, Gemma2GgufOpens) {
  RandomModelSpec s;
  s.arch = Arch::Gemma2;
  s.n_layers = 4;
  ModelFile m = open_gguf_bytes(gguf_serialize(make_random_model(s)), "gemma2.gguf");
  const ModelConfig& c = m.config;
  EXPECT_EQ(c.arch, Arch::Gemma2);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.sliding_window, 4096u);  // llama.cpp's default where the file says none
  EXPECT_EQ(c.local_layers, std::vector<bool>({true, false, true, false}));  // even layers local
  EXPECT_FLOAT_EQ(c.rope_theta_local, c.rope_theta);
  EXPECT_FLOAT_EQ(c.attn_softcap, 50.f);
  EXPECT_FLOAT_EQ(c.final_softcap, 30.f);
  // A context past the window is not refused: the window is applied (model/transformer.cpp).
  EXPECT_EQ(default_ctx(c), std::min(c.n_ctx_train, kDefaultMaxCtx));
  s.sliding_window = 8, s.attn_softcap = 20.f, s.final_softcap = 15.f;
  ModelFile k = open_gguf_bytes(gguf_serialize(make_random_model(s)), "gemma2-keys.gguf");
  EXPECT_EQ(k.config.sliding_window, 8u);
  EXPECT_FLOAT_EQ(k.config.attn_softcap, 20.f);
  EXPECT_FLOAT_EQ(k.config.final_softcap, 15.f);
}

nlohmann::json gemma3_config() {
  return {{"architectures", {"Gemma3ForCausalLM"}},
          {"vocab_size", 300},
          {"hidden_size", 128},
          {"num_hidden_layers", 3},
          {"num_attention_heads", 2},
          {"num_key_value_heads", 1},
          {"head_dim", 64},
          {"intermediate_size", 256},
          {"rms_norm_eps", 1e-6},
          {"max_position_embeddings", 1024},
          {"query_pre_attn_scalar", 32},
          {"sliding_window", 3},
          {"layer_types", {"sliding_attention", "full_attention", "sliding_attention"}},
          {"rope_theta", 1000000.0},
          {"rope_local_base_freq", 10000.0},
          {"rope_scaling", {{"rope_type", "linear"}, {"factor", 4.0}}},
          {"hidden_activation", "gelu_pytorch_tanh"},
          {"torch_dtype", "float32"}};
}

// config_from_hf as open_model calls it: on parsed text (whose integers are unsigned).
ModelConfig config_from_hf(const nlohmann::json& j, const std::string& path) {
  return model::config_from_hf(nlohmann::json::parse(j.dump()), path);
}

TEST(ModelFile, GemmaHuggingFaceConfig) {
  const std::string path = "config.json";
  ModelConfig c = config_from_hf(gemma3_config(), path);
  EXPECT_EQ(c.arch, Arch::Gemma3);
  EXPECT_TRUE(c.tied_embeddings);  // Gemma's default
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FLOAT_EQ(c.norm_offset, 1.f);
  EXPECT_EQ(c.local_layers, std::vector<bool>({true, false, true}));
  EXPECT_EQ(c.sliding_window, 3u);
  EXPECT_FLOAT_EQ(c.rope_theta_local, 10000.f);
  EXPECT_EQ(c.rope_freq_factors, std::vector<float>(32, 4.f));
  EXPECT_NEAR(attention_scale(c), 1 / std::sqrt(32.0), 1e-7);
  EXPECT_FLOAT_EQ(c.embd_scale, std::sqrt(128.f));
  // sqrt(1152) as bfloat16 rounds it (what transformers multiplies a bf16 model's embeddings by).
  nlohmann::json j = gemma3_config();
  j["hidden_size"] = 1152, j["torch_dtype"] = "bfloat16";
  EXPECT_FLOAT_EQ(config_from_hf(j, path).embd_scale, 34.f);
  // The pattern without layer_types: every sliding_window_pattern-th layer global.
  j = gemma3_config();
  j.erase("layer_types");
  j["num_hidden_layers"] = 7, j["sliding_window_pattern"] = 6;
  EXPECT_EQ(config_from_hf(j, path).local_layers, std::vector<bool>({true, true, true, true, true, false, true}));
  // Newer configs: rope_parameters per attention type.
  j = gemma3_config();
  j.erase("rope_theta"), j.erase("rope_local_base_freq"), j.erase("rope_scaling");
  j["rope_parameters"] = {{"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 500000.0}}},
                          {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 20000.0}}}};
  ModelConfig r = config_from_hf(j, path);
  EXPECT_FLOAT_EQ(r.rope_theta, 500000.f);
  EXPECT_FLOAT_EQ(r.rope_theta_local, 20000.f);
  EXPECT_EQ(r.rope_freq_factors, std::vector<float>(32, 8.f));
  // Gemma 2: even layers local, soft-capping from the config (null: none).
  j = gemma3_config();
  j["architectures"] = {"Gemma2ForCausalLM"};
  j.erase("layer_types"), j.erase("rope_local_base_freq"), j.erase("rope_scaling");
  j["attn_logit_softcapping"] = 50.0, j["final_logit_softcapping"] = nullptr;
  ModelConfig g2 = config_from_hf(j, path);
  EXPECT_EQ(g2.arch, Arch::Gemma2);
  EXPECT_FALSE(g2.qk_norm);
  EXPECT_EQ(g2.local_layers, std::vector<bool>({true, false, true}));
  EXPECT_FLOAT_EQ(g2.attn_softcap, 50.f);
  EXPECT_FLOAT_EQ(g2.final_softcap, 0.f);
  EXPECT_FLOAT_EQ(g2.rope_theta_local, 0.f);  // one base for all layers
  // Refused by name: the multimodal checkpoint, another activation, a bad layer type.
  j = gemma3_config();
  j["architectures"] = {"Gemma3ForConditionalGeneration"};
  std::string e = error_of([&] { config_from_hf(j, path); });
  EXPECT_NE(e.find("Gemma3ForCausalLM"), std::string::npos) << e;
  j = gemma3_config();
  j["hidden_activation"] = "silu";
  e = error_of([&] { config_from_hf(j, path); });
  EXPECT_NE(e.find("hidden_activation 'silu'"), std::string::npos) << e;
  j = gemma3_config();
  j["layer_types"] = {"sliding_attention", "chunked_attention", "full_attention"};
  e = error_of([&] { config_from_hf(j, path); });
  EXPECT_NE(e.find("layer_types[1]"), std::string::npos) << e;
  j = gemma3_config();
  j["layer_types"] = {"full_attention"};
  e = error_of([&] { config_from_hf(j, path); });
  EXPECT_NE(e.find("names 1 layers of 3"), std::string::npos) << e;
}

// ---- a Gemma 3 checkpoint end to end ----

constexpr uint32_t kVocab = 300, kDim = 128, kHeads = 2, kKv = 1, kHd = 64, kFf = 256, kLayers = 3;

struct GemmaCheckpoint {
  std::string dir;
  ref::Weights weights;  // GGUF names, norm weights with their 1 added (as the reference applies them)
};

// Random weights under transformers' Gemma 3 names; the norms' w of x * (1 + w) small, so a
// loader that forgot the 1 would scale every norm's output ~10-fold down.
GemmaCheckpoint write_gemma3() {
  GemmaCheckpoint m{test::temp_dir("gemma3-hf"), {}};
  std::ofstream(m.dir + "/config.json") << gemma3_config().dump();
  std::map<std::string, test::StEntry> st;
  uint32_t seed = 300;
  auto add = [&](const std::string& hf, const std::string& gguf, std::vector<uint64_t> shape, float scale, bool norm) {
    size_t n = 1;
    for (auto d : shape) n *= d;
    std::vector<float> v = test::random_floats(n, seed++, -scale, scale);
    st[hf] = {"F32", shape, f32_bytes(v)};
    if (norm)
      for (float& x : v) x += 1;
    m.weights[gguf] = v;
  };
  const float w = 1.f / std::sqrt(float(kDim));
  add("model.embed_tokens.weight", "token_embd.weight", {kVocab, kDim}, 0.1f, false);
  add("model.norm.weight", "output_norm.weight", {kDim}, 0.1f, true);
  for (uint32_t l = 0; l < kLayers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l), g = fmt::format("blk.{}.", l);
    add(p + "input_layernorm.weight", g + "attn_norm.weight", {kDim}, 0.1f, true);
    add(p + "self_attn.q_proj.weight", g + "attn_q.weight", {kHeads * kHd, kDim}, w, false);
    add(p + "self_attn.k_proj.weight", g + "attn_k.weight", {kKv * kHd, kDim}, w, false);
    add(p + "self_attn.v_proj.weight", g + "attn_v.weight", {kKv * kHd, kDim}, w, false);
    add(p + "self_attn.q_norm.weight", g + "attn_q_norm.weight", {kHd}, 0.1f, true);
    add(p + "self_attn.k_norm.weight", g + "attn_k_norm.weight", {kHd}, 0.1f, true);
    add(p + "self_attn.o_proj.weight", g + "attn_output.weight", {kDim, kHeads * kHd}, w, false);
    add(p + "post_attention_layernorm.weight", g + "post_attention_norm.weight", {kDim}, 0.1f, true);
    add(p + "pre_feedforward_layernorm.weight", g + "ffn_norm.weight", {kDim}, 0.1f, true);
    add(p + "mlp.gate_proj.weight", g + "ffn_gate.weight", {kFf, kDim}, w, false);
    add(p + "mlp.up_proj.weight", g + "ffn_up.weight", {kFf, kDim}, w, false);
    add(p + "mlp.down_proj.weight", g + "ffn_down.weight", {kDim, kFf}, 1.f / std::sqrt(float(kFf)), false);
    add(p + "post_feedforward_layernorm.weight", g + "post_ffw_norm.weight", {kDim}, 0.1f, true);
  }
  test::write_safetensors(m.dir + "/model.safetensors", st);
  return m;
}

TEST(HuggingFaceEndToEnd, Gemma3Checkpoint) {
  GemmaCheckpoint hf = write_gemma3();
  ModelFile file = open_model(hf.dir);
  ref::TransformerConfig rc;
  rc.n_vocab = kVocab, rc.dim = kDim, rc.n_layers = kLayers, rc.n_heads = kHeads, rc.n_kv_heads = kKv;
  rc.head_dim = kHd, rc.ff = kFf, rc.norm_eps = 1e-6f, rc.rope_theta = 1000000.f, rc.rope_neox = true;
  rc.rope_freq_factors.assign(kHd / 2, 4.f);
  rc.qk_norm = true, rc.gemma = true;
  rc.embd_scale = std::sqrt(float(kDim)), rc.attn_scale = 1 / std::sqrt(32.f);
  rc.sliding_window = 3, rc.local_layers = {true, false, true}, rc.rope_theta_local = 10000.f;
  const std::vector<int32_t> tokens = {5, 17, 299, 0, 42, 42, 7, 120, 64, 3, 250, 11};  // 12 > the window of 3
  const std::vector<float> want = ref::transformer_forward(rc, hf.weights, tokens);
  // The window matters here: the same reference without it differs.
  ref::TransformerConfig no_window = rc;
  no_window.sliding_window = 0;
  const std::vector<float> unwindowed = ref::transformer_forward(no_window, hf.weights, tokens);

  BuildOptions o;
  o.n_ctx = 32;
  o.max_batch = 16;
  o.all_logits = true;
  o.f16_kv = false;
  llm::Session s;
  s.dev = &test::device();
  s.model = std::move(file);
  s.mg = build_model(*s.dev, s.model, o);
  std::vector<float> got;
  llm::eval(s, tokens, [&](size_t, size_t) { got = llm::read_logits(s); });
  ASSERT_EQ(got.size(), want.size());
  double worst_windowless = 0;
  for (size_t r = 0; r < tokens.size(); ++r) {
    double max_ref = 0, max_err = 0, off = 0;
    for (size_t i = 0; i < kVocab; ++i) {
      max_ref = std::max(max_ref, std::fabs(double(want[r * kVocab + i])));
      max_err = std::max(max_err, std::fabs(double(got[r * kVocab + i]) - want[r * kVocab + i]));
      off = std::max(off, std::fabs(double(unwindowed[r * kVocab + i]) - want[r * kVocab + i]));
    }
    EXPECT_LE(max_err, 2e-3 * max_ref) << "row " << r;
    worst_windowless = std::max(worst_windowless, off / max_ref);
  }
  EXPECT_GT(worst_windowless, 2e-2) << "the window changes nothing on this prompt: the test would not see it";
  std::filesystem::remove_all(hf.dir);
}

}  // namespace
}  // namespace wgrt::model
