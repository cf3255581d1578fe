// Mixture-of-experts configurations: qwen2moe GGUF files (llama.cpp's keys and its defaults,
// the shared expert's gate as a vector or a row) and the Hugging Face configs of Mixtral,
// Qwen3-MoE and Qwen2-MoE, with what wgrt refuses named.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>

#include "model/model_file.h"
#include "model/random_model.h"
#include "support/throws.h"

namespace wgrt::model {
namespace {

using test::error_of;

RandomModelSpec qwen2moe_spec() {
  RandomModelSpec s;
  s.arch = Arch::Qwen2Moe, s.n_experts = 8, s.n_experts_used = 2, s.expert_ff = 32, s.shared_expert_ff = 96;
  return s;
}

TEST(MoeConfig, Qwen2MoeGguf) {
  const RandomModelSpec s = qwen2moe_spec();
  GgufWriter w = make_random_model(s);
  const ModelFile m = open_gguf_bytes(gguf_serialize(w), "qwen2moe.gguf");
  const ModelConfig& c = m.config;
  EXPECT_EQ(c.arch, Arch::Qwen2Moe);
  EXPECT_EQ(c.n_experts, 8u);
  EXPECT_EQ(c.n_experts_used, 2u);
  EXPECT_EQ(c.expert_ff, 32u);
  EXPECT_EQ(c.shared_expert_ff, 96u);
  EXPECT_FALSE(c.expert_norm);  // qwen2moe never renormalizes its top-k
  EXPECT_TRUE(c.qkv_bias && c.rope_neox && !c.qk_norm);
  EXPECT_NO_THROW(get_weight(m, "blk.1.ffn_gate_inp_shexp.weight", {s.dim}));

  // Without the experts' widths: llama.cpp's defaults, ff / used and ff.
  std::erase_if(w.kv, [](auto& kv) {
    return kv.first == "qwen2moe.expert_feed_forward_length" || kv.first == "qwen2moe.expert_shared_feed_forward_length";
  });
  const ModelConfig d = open_gguf_bytes(gguf_serialize(w), "defaults.gguf").config;
  EXPECT_EQ(d.expert_ff, s.ff / 2);
  EXPECT_EQ(d.shared_expert_ff, s.ff);

  // Without experts at all: refused, naming the key.
  std::erase_if(w.kv, [](auto& kv) { return kv.first == "qwen2moe.expert_count"; });
  const std::string e = error_of([&] { open_gguf_bytes(gguf_serialize(w), "noexperts.gguf"); });
  EXPECT_NE(e.find("'qwen2moe.expert_count'"), std::string::npos) << e;
}

// The shared expert's gate written as a [1, dim] row (as the checkpoint has it) opens as [dim].
TEST(MoeConfig, SharedExpertGateRowIsAVector) {
  const RandomModelSpec s = qwen2moe_spec();
  GgufWriter w = make_random_model(s);
  for (auto& t : w.tensors)
    if (t.name.ends_with("ffn_gate_inp_shexp.weight")) t.dims = {s.dim, 1};
  const ModelFile m = open_gguf_bytes(gguf_serialize(w), "row.gguf");
  EXPECT_NO_THROW(get_weight(m, "blk.0.ffn_gate_inp_shexp.weight", {s.dim}));
}

// wgrt_make_model's qwen2moe-tiny preset, written streamed as the tool writes it, opens as one.
TEST(MoeConfig, Qwen2MoeTinyPreset) {
  const RandomModelSpec s = preset_model_spec("qwen2moe-tiny");
  const std::string path = ::testing::TempDir() + "wgrt-moe-config-qwen2moe-tiny.gguf";
  write_random_model(s, path, 1);
  const ModelFile m = open_model(path);
  EXPECT_EQ(m.config.arch, Arch::Qwen2Moe);
  EXPECT_EQ(m.config.n_experts, 8u);
  EXPECT_EQ(m.config.n_experts_used, 2u);
  EXPECT_EQ(m.config.expert_ff, 128u);
  EXPECT_EQ(m.config.shared_expert_ff, 256u);
  EXPECT_NO_THROW(get_weight(m, "blk.3.ffn_down_shexp.weight", {256, s.dim}));
  std::remove(path.c_str());
}

nlohmann::json hf_config(const char* arch) {
  return {{"architectures", {arch}}, {"vocab_size", 300}, {"hidden_size", 64}, {"num_hidden_layers", 2},
          {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"intermediate_size", 256},
          {"rms_norm_eps", 1e-6}, {"rope_theta", 1000000.0}, {"num_experts_per_tok", 2}};
}

ModelConfig from(const nlohmann::json& j) { return config_from_hf(nlohmann::json::parse(j.dump()), "config.json"); }

TEST(MoeConfig, MixtralFromHuggingFace) {
  nlohmann::json j = hf_config("MixtralForCausalLM");
  j["num_local_experts"] = 8;
  j["sliding_window"] = nullptr;
  ModelConfig c = from(j);
  EXPECT_EQ(c.arch, Arch::Llama);  // a llama whose FFNs are experts, as its GGUF files say
  EXPECT_EQ(c.n_experts, 8u);
  EXPECT_EQ(c.n_experts_used, 2u);
  EXPECT_EQ(c.expert_ff, 256u);  // intermediate_size: each expert's width
  EXPECT_TRUE(c.expert_norm);    // the router's softmax over the chosen logits
  EXPECT_EQ(c.shared_expert_ff, 0u);
  EXPECT_EQ(c.sliding_window, 0u);
  EXPECT_TRUE(c.rope_neox && !c.qkv_bias && !c.qk_norm);
  j["sliding_window"] = 4096;  // Mixtral's window applies, as Mistral's
  EXPECT_EQ(from(j).sliding_window, 4096u);
  j.erase("num_local_experts");
  const std::string e = error_of([&] { from(j); });
  EXPECT_NE(e.find("\"num_local_experts\""), std::string::npos) << e;
}

TEST(MoeConfig, Qwen3MoeFromHuggingFace) {
  nlohmann::json j = hf_config("Qwen3MoeForCausalLM");
  j.update({{"num_experts", 16}, {"moe_intermediate_size", 48}, {"head_dim", 32}});
  ModelConfig c = from(j);
  EXPECT_EQ(c.arch, Arch::Qwen3Moe);
  EXPECT_EQ(c.n_experts, 16u);
  EXPECT_EQ(c.expert_ff, 48u);
  EXPECT_FALSE(c.expert_norm);  // norm_topk_prob is false unless the config says so
  EXPECT_TRUE(c.qk_norm && c.rope_neox && !c.qkv_bias);
  j["norm_topk_prob"] = true;
  EXPECT_TRUE(from(j).expert_norm);
  // transformers 5 (5.17 on the GPU machine) saves the count as num_local_experts.
  j.erase("num_experts");
  j["num_local_experts"] = 12;
  EXPECT_EQ(from(j).n_experts, 12u);
  j.erase("num_local_experts");
  const std::string e = error_of([&] { from(j); });
  EXPECT_NE(e.find("\"num_experts\""), std::string::npos) << e;
}

TEST(MoeConfig, Qwen2MoeFromHuggingFace) {
  nlohmann::json j = hf_config("Qwen2MoeForCausalLM");
  j.update({{"num_experts", 60}, {"moe_intermediate_size", 16}, {"shared_expert_intermediate_size", 256},
            {"norm_topk_prob", false}, {"sliding_window", 4096}, {"use_sliding_window", false}});
  ModelConfig c = from(j);
  EXPECT_EQ(c.arch, Arch::Qwen2Moe);
  EXPECT_EQ(c.n_experts, 60u);
  EXPECT_EQ(c.expert_ff, 16u);
  EXPECT_EQ(c.shared_expert_ff, 256u);
  EXPECT_FALSE(c.expert_norm);
  EXPECT_EQ(c.sliding_window, 0u);
  EXPECT_TRUE(c.qkv_bias && c.rope_neox && !c.qk_norm);  // "qkv_bias" true by default
  j["qkv_bias"] = false;
  EXPECT_FALSE(from(j).qkv_bias);
  j.erase("shared_expert_intermediate_size");
  const std::string e = error_of([&] { from(j); });
  EXPECT_NE(e.find("\"shared_expert_intermediate_size\""), std::string::npos) << e;
}

// Dense layers among the experts' (every decoder_sparse_step-th layer sparse, mlp_only_layers)
// are refused by name.
TEST(MoeConfig, DenseLayersAmongExpertsRefused) {
  for (const char* arch : {"Qwen3MoeForCausalLM", "Qwen2MoeForCausalLM"}) {
    nlohmann::json j = hf_config(arch);
    j.update({{"num_experts", 8}, {"moe_intermediate_size", 32}, {"shared_expert_intermediate_size", 64}});
    j["decoder_sparse_step"] = 2;
    std::string e = error_of([&] { from(j); });
    EXPECT_NE(e.find("\"decoder_sparse_step\" is 2"), std::string::npos) << arch << ": " << e;
    EXPECT_NE(e.find("hint"), std::string::npos) << e;
    j["decoder_sparse_step"] = 1;
    j["mlp_only_layers"] = {1};
    e = error_of([&] { from(j); });
    EXPECT_NE(e.find("\"mlp_only_layers\" names 1 dense layers, first 1"), std::string::npos) << arch << ": " << e;
    j["mlp_only_layers"] = nlohmann::json::array();
    EXPECT_EQ(error_of([&] { from(j); }), "") << arch;
  }
}

}  // namespace
}  // namespace wgrt::model
