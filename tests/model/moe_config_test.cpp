// Mixture-of-experts configurations: qwen2moe GGUF files (llama.cpp's keys and its defaults,
// the shared expert's gate as a vector or a row), with what wgrt refuses named.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>

#include "model/model_file.h"
#include "model/random_model.h"

namespace wgrt::model {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

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

// The shared expert's gate written as a [1, dim] row opens as [dim].
TEST(MoeConfig, SharedExpertGateRowIsAVector) {
  const RandomModelSpec s = qwen2moe_spec();
  GgufWriter w = make_random_model(s);
  for (auto& t : w.tensors)
    if (t.name.ends_with("ffn_gate_inp_shexp.weight")) t.dims = {s.dim, 1};
  const ModelFile m = open_gguf_bytes(gguf_serialize(w), "row.gguf");
  EXPECT_NO_THROW(get_weight(m, "blk.0.ffn_gate_inp_shexp.weight", {s.dim}));
}

}  // namespace
}  // namespace wgrt::model
