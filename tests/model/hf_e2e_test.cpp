// A Hugging Face directory (config.json + safetensors, HF tensor names, rotate-half RoPE)
// through the loader, the q8/none weight paths and the GPU graph, against the CPU reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "llm/session.h"
#include "model/ggml_types.h"
#include "reference/transformer_ref.h"
#include "support/device.h"
#include "support/hf_fixture.h"
#include "support/random.h"

namespace wgrt::model {
namespace {

constexpr uint32_t kVocab = 300, kDim = 128, kHeads = 2, kKv = 1, kHd = 64, kFf = 256, kLayers = 2;

std::vector<uint8_t> bf16_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &v[i], 4);
    uint16_t h = uint16_t(bits >> 16);  // truncation: exact for the values we write below
    std::memcpy(&b[2 * i], &h, 2);
  }
  return b;
}

// Random values already representable in bf16, so the reference sees what the file holds.
std::vector<float> bf16_values(size_t n, uint32_t seed, float scale) {
  auto v = test::random_floats(n, seed, -scale, scale);
  for (auto& x : v) x = bf16_to_f32(uint16_t([&] { uint32_t b; std::memcpy(&b, &x, 4); return b >> 16; }()));
  return v;
}

struct HfModel {
  std::string dir;
  ref::Weights weights;  // GGUF names
};

HfModel write_model() {
  HfModel m{test::temp_dir("hf-e2e"), {}};
  nlohmann::json cfg = {{"architectures", {"LlamaForCausalLM"}}, {"vocab_size", kVocab}, {"hidden_size", kDim},
                        {"num_hidden_layers", kLayers}, {"num_attention_heads", kHeads},
                        {"num_key_value_heads", kKv}, {"head_dim", kHd}, {"intermediate_size", kFf},
                        {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0}, {"tie_word_embeddings", false}};
  std::ofstream(m.dir + "/config.json") << cfg.dump();
  std::map<std::string, test::StEntry> st;
  uint32_t seed = 100;
  auto add = [&](const std::string& hf, const std::string& gguf, std::vector<uint64_t> shape, float scale, float base) {
    size_t n = 1;
    for (auto d : shape) n *= d;
    auto v = bf16_values(n, seed++, scale);
    for (auto& x : v) x = bf16_to_f32(uint16_t([&] { float y = x + base; uint32_t b; std::memcpy(&b, &y, 4); return b >> 16; }()));
    st[hf] = {"BF16", shape, bf16_bytes(v)};
    m.weights[gguf] = v;
  };
  const float w = 1.f / std::sqrt(float(kDim));
  add("model.embed_tokens.weight", "token_embd.weight", {kVocab, kDim}, 1.f, 0);
  add("model.norm.weight", "output_norm.weight", {kDim}, 0.1f, 1.f);
  add("lm_head.weight", "output.weight", {kVocab, kDim}, w, 0);
  for (uint32_t l = 0; l < kLayers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".", g = "blk." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", g + "attn_norm.weight", {kDim}, 0.1f, 1.f);
    add(p + "self_attn.q_proj.weight", g + "attn_q.weight", {kHeads * kHd, kDim}, w, 0);
    add(p + "self_attn.k_proj.weight", g + "attn_k.weight", {kKv * kHd, kDim}, w, 0);
    add(p + "self_attn.v_proj.weight", g + "attn_v.weight", {kKv * kHd, kDim}, w, 0);
    add(p + "self_attn.o_proj.weight", g + "attn_output.weight", {kDim, kHeads * kHd}, w, 0);
    add(p + "post_attention_layernorm.weight", g + "ffn_norm.weight", {kDim}, 0.1f, 1.f);
    add(p + "mlp.gate_proj.weight", g + "ffn_gate.weight", {kFf, kDim}, w, 0);
    add(p + "mlp.up_proj.weight", g + "ffn_up.weight", {kFf, kDim}, w, 0);
    add(p + "mlp.down_proj.weight", g + "ffn_down.weight", {kDim, kFf}, 1.f / std::sqrt(float(kFf)), 0);
  }
  test::write_safetensors(m.dir + "/model.safetensors", st);
  return m;
}

void check(WeightFormat format, float tol) {
  HfModel hf = write_model();
  ModelFile file = open_model(hf.dir);
  ref::TransformerConfig rc;
  rc.n_vocab = kVocab, rc.dim = kDim, rc.n_layers = kLayers, rc.n_heads = kHeads, rc.n_kv_heads = kKv;
  rc.head_dim = kHd, rc.ff = kFf, rc.norm_eps = 1e-5f, rc.rope_theta = 10000.f, rc.rope_neox = true;
  const std::vector<int32_t> tokens = {5, 17, 299, 0, 42, 42, 7, 120, 64};
  std::vector<float> want = ref::transformer_forward(rc, hf.weights, tokens);

  BuildOptions o;
  o.n_ctx = 32;
  o.max_batch = 16;
  o.all_logits = true;
  o.f16_kv = false;
  o.load.quantize = format;
  llm::Session s;
  s.dev = &test::device();
  s.model = std::move(file);
  s.mg = build_model(*s.dev, s.model, o);
  std::vector<float> got;
  llm::eval(s, tokens, [&](size_t, size_t) { got = llm::read_logits(s); });
  ASSERT_EQ(got.size(), want.size());
  for (size_t r = 0; r < tokens.size(); ++r) {
    double max_ref = 0, max_err = 0;
    for (size_t i = 0; i < kVocab; ++i) {
      max_ref = std::max(max_ref, std::fabs(double(want[r * kVocab + i])));
      max_err = std::max(max_err, std::fabs(double(got[r * kVocab + i]) - want[r * kVocab + i]));
    }
    EXPECT_LE(max_err, tol * max_ref) << "row " << r;
  }
  std::filesystem::remove_all(hf.dir);
}

TEST(HuggingFaceEndToEnd, Bf16KeptAsFloat) { check(WeightFormat::None, 2e-3f); }
TEST(HuggingFaceEndToEnd, QuantizedToQ8AtLoad) { check(WeightFormat::Q8, 3e-2f); }
TEST(HuggingFaceEndToEnd, QuantizedToQ4gswAtLoad) { check(WeightFormat::Q4gsw, 0.25f); }

}  // namespace
}  // namespace wgrt::model
