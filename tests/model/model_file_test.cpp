// Model files: GGUF and Hugging Face directories to one config and GGUF-named weights;
// malformed inputs give errors that name what, where and a hint.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "model/ggml_quantize.h"
#include "model/model_file.h"
#include "model/random_model.h"
#include "support/hf_fixture.h"
#include "support/random.h"
#include "support/throws.h"

namespace wgrt::model {
namespace {

using test::error_of;

TEST(ModelFile, RandomGgufOpens) {
  RandomModelSpec spec;
  spec.arch = Arch::Qwen3;
  spec.matrix_type = GgmlType::Q4_K;
  spec.dim = 256;  // K-quant rows are multiples of 256
  spec.n_heads = 8;
  spec.head_dim = 32;
  spec.ff = 512;
  ModelFile m = open_gguf_bytes(gguf_serialize(make_random_model(spec)), "mem.gguf");
  EXPECT_EQ(m.config.arch, Arch::Qwen3);
  EXPECT_EQ(m.config.n_vocab, 258u);
  EXPECT_TRUE(m.config.qk_norm);
  EXPECT_TRUE(m.config.rope_neox);
  EXPECT_FALSE(m.config.tied_embeddings);
  const WeightView& q = get_weight(m, "blk.1.attn_q.weight", {256, 256});
  EXPECT_EQ(q.type, GgmlType::Q4_K);
  EXPECT_EQ(weight_to_f32(q).size(), 256u * 256);
  std::string e = error_of([&] { get_weight(m, "blk.1.attn_q.weight", {256, 65}); });
  EXPECT_NE(e.find("shape [256, 256], expected [256, 65]"), std::string::npos) << e;
  e = error_of([&] { get_weight(m, "blk.9.attn_q.weight", {256, 256}); });
  EXPECT_NE(e.find("'blk.9.attn_q.weight' is missing"), std::string::npos) << e;
}

TEST(ModelFile, UnsupportedTensorTypeNamed) {
  GgufWriter w = make_random_model(RandomModelSpec{});
  auto t = std::find_if(w.tensors.begin(), w.tensors.end(), [](auto& x) { return x.name == "blk.0.attn_q.weight"; });
  ASSERT_NE(t, w.tensors.end());
  t->type = GgmlType::Q8_1;  // 36 bytes per block of 32
  t->data.assign(t->dims[0] / 32 * t->dims[1] * 36, 0);
  ModelFile m = open_gguf_bytes(gguf_serialize(w), "q5.gguf");
  std::string e = error_of([&] { get_weight(m, t->name, t->dims); });
  EXPECT_NE(e.find(t->name), std::string::npos) << e;
  EXPECT_NE(e.find("Q8_1"), std::string::npos) << e;
}

TEST(ModelFile, UnknownArchitectureAndMissingKeys) {
  GgufWriter w = make_random_model(RandomModelSpec{});
  gguf_set_string(w, "general.architecture", "gptj");
  std::string e = error_of([&] { open_gguf_bytes(gguf_serialize(w), "gptj.gguf"); });
  EXPECT_NE(e.find("'gptj' is not supported"), std::string::npos) << e;
  // Mixture-of-experts files: a llama with experts (Mixtral's files) needs its expert keys, and
  // bad counts are named (qwen2moe: tests/model/moe_config_test.cpp).
  w = make_random_model(RandomModelSpec{});
  gguf_set_u32(w, "llama.expert_count", 8);
  e = error_of([&] { open_gguf_bytes(gguf_serialize(w), "mixtral.gguf"); });
  EXPECT_NE(e.find("'llama.expert_used_count'"), std::string::npos) << e;
  EXPECT_NE(e.find("hint"), std::string::npos) << e;
  gguf_set_u32(w, "llama.expert_used_count", 9);
  e = error_of([&] { open_gguf_bytes(gguf_serialize(w), "mixtral.gguf"); });
  EXPECT_NE(e.find("9 of 8 experts per token"), std::string::npos) << e;
  RandomModelSpec moe;
  moe.arch = Arch::Qwen3Moe, moe.n_experts = 4, moe.n_experts_used = 2, moe.expert_ff = 64;
  const ModelFile m = open_gguf_bytes(gguf_serialize(make_random_model(moe)), "qwen3moe.gguf");
  EXPECT_EQ(m.config.n_experts, 4u);
  EXPECT_EQ(m.config.n_experts_used, 2u);
  EXPECT_EQ(m.config.expert_ff, 64u);
  EXPECT_TRUE(m.config.expert_norm && m.config.qk_norm && m.config.rope_neox);

  w = make_random_model(RandomModelSpec{});
  std::erase_if(w.kv, [](auto& kv) { return kv.first == "llama.block_count"; });
  e = error_of([&] { open_gguf_bytes(gguf_serialize(w), "nolayers.gguf"); });
  EXPECT_NE(e.find("'llama.block_count'"), std::string::npos) << e;
  EXPECT_NE(e.find("hint"), std::string::npos) << e;

  w = make_random_model(RandomModelSpec{});
  gguf_set_u32(w, "llama.attention.head_count_kv", 3);  // 4 heads, 3 kv heads
  e = error_of([&] { open_gguf_bytes(gguf_serialize(w), "gqa.gguf"); });
  EXPECT_NE(e.find("not a multiple"), std::string::npos) << e;
}

// Sizes past 32 bits are refused naming the key, never truncated (a block count of 2^32 + 6
// once loaded as 6 layers).
TEST(ModelFile, GgufSizesPastThirtyTwoBitsRefused) {
  for (const char* key : {"llama.block_count", "llama.embedding_length", "llama.attention.head_count_kv",
                          "llama.context_length", "llama.vocab_size", "llama.attention.sliding_window"}) {
    GgufWriter w = make_random_model(RandomModelSpec{});
    gguf_set(w, key, GgufValue{GgufType::U64, (uint64_t(1) << 32) + 6});
    std::string e = error_of([&] { open_gguf_bytes(gguf_serialize(w), "big.gguf"); });
    EXPECT_NE(e.find(fmt::format("'{}' = 4294967302 is past 32 bits", key)), std::string::npos) << key << ": " << e;
    EXPECT_NE(e.find("hint"), std::string::npos) << e;
  }
  // Each fits 32 bits, their products do not: 2^26 heads of 64 would make q 2^32 rows.
  GgufWriter w = make_random_model(RandomModelSpec{});
  gguf_set_u32(w, "llama.attention.head_count", 1u << 26);
  gguf_set_u32(w, "llama.attention.head_count_kv", 1u << 26);
  std::string e = error_of([&] { open_gguf_bytes(gguf_serialize(w), "heads.gguf"); });
  EXPECT_NE(e.find("past 32-bit sizes"), std::string::npos) << e;
}

// Every float hyperparameter is finite, positive and within float's range.
TEST(ModelFile, GgufFloatHyperparametersMustBeFinite) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (const char* key : {"llama.attention.layer_norm_rms_epsilon", "llama.rope.freq_base"})
    for (GgufValue v : {GgufValue{GgufType::F32, inf}, GgufValue{GgufType::F32, nan}, GgufValue{GgufType::F32, -1.0},
                        GgufValue{GgufType::F32, 0.0}, GgufValue{GgufType::F64, 1e300}, GgufValue{GgufType::F64, 1e-300}}) {
      GgufWriter w = make_random_model(RandomModelSpec{});
      gguf_set(w, key, v);
      std::string e = error_of([&] { open_gguf_bytes(gguf_serialize(w), "inf.gguf"); });
      EXPECT_NE(e.find(fmt::format("'{}'", key)), std::string::npos) << key << " = " << std::get<double>(v.v) << ": " << e;
      EXPECT_NE(e.find("finite positive"), std::string::npos) << e;
    }
  // rope_freqs.weight's divisors are read on the host: a NaN among them is refused too.
  RandomModelSpec spec;
  spec.rope_freq_factors.assign(spec.head_dim / 2, 1.f);
  spec.rope_freq_factors[5] = std::numeric_limits<float>::quiet_NaN();
  std::string e = error_of([&] { open_gguf_bytes(gguf_serialize(make_random_model(spec)), "freqs.gguf"); });
  EXPECT_NE(e.find("rope frequency factor 5"), std::string::npos) << e;
}

nlohmann::json llama_config() {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"vocab_size", 40},
          {"hidden_size", 32},
          {"num_hidden_layers", 1},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"intermediate_size", 64},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 500000.0},
          {"tie_word_embeddings", true},
          {"rope_scaling",
           {{"rope_type", "llama3"}, {"factor", 32.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
            {"original_max_position_embeddings", 8192}}}};
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

TEST(ModelFile, HuggingFaceDirectory) {
  std::string dir = test::temp_dir("hf");
  std::ofstream(dir + "/config.json") << llama_config().dump();
  auto emb = test::random_floats(40 * 32, 1);
  test::write_safetensors(dir + "/model.safetensors",
                          {{"model.embed_tokens.weight", {"F32", {40, 32}, f32_bytes(emb)}},
                           {"model.layers.0.self_attn.q_proj.weight", {"F32", {32, 32}, f32_bytes(test::random_floats(32 * 32, 2))}},
                           {"model.layers.0.rotary_emb.inv_freq", {"F32", {4}, f32_bytes({1, 2, 3, 4})}}});
  ModelFile m = open_model(dir);
  EXPECT_EQ(m.config.arch, Arch::Llama);
  EXPECT_TRUE(m.config.rope_neox);
  EXPECT_TRUE(m.config.tied_embeddings);
  ASSERT_EQ(m.config.rope_freq_factors.size(), 4u);
  EXPECT_FLOAT_EQ(m.config.rope_freq_factors[0], 1.f);    // high frequency: unscaled
  EXPECT_FLOAT_EQ(m.config.rope_freq_factors[3], 32.f);   // wavelength past 8192: divided by factor
  const WeightView& e = get_weight(m, "token_embd.weight", {32, 40});
  EXPECT_EQ(weight_to_f32(e), emb);
  EXPECT_NE(find_weight(m, "blk.0.attn_q.weight"), nullptr);
  EXPECT_EQ(m.weights.size(), 2u);  // inv_freq is not a weight wgrt uses
  std::filesystem::remove_all(dir);
}

nlohmann::json phi3_config() {
  return {{"architectures", {"Phi3ForCausalLM"}},
          {"vocab_size", 40},
          {"hidden_size", 32},
          {"num_hidden_layers", 1},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"intermediate_size", 24},
          {"rms_norm_eps", 1e-5},
          {"max_position_embeddings", 1024},
          {"original_max_position_embeddings", 64},
          {"sliding_window", 512},
          {"rope_scaling",
           {{"type", "longrope"}, {"short_factor", {1.0, 1.0, 1.5, 2.0}}, {"long_factor", {1.0, 2.0, 4.0, 8.0}}}}};
}

// Phi-3's checkpoints fuse q|k|v (qkv_proj) and gate|up (gate_up_proj): opened, each fused matrix
// is views of its row ranges under llama's names, holding exactly its rows; LongRoPE's factors,
// the context they switch at and the attention factor come from the config.
TEST(ModelFile, Phi3FusedWeightsSplitIntoViews) {
  std::string dir = test::temp_dir("phi3");
  std::ofstream(dir + "/config.json") << phi3_config().dump();
  // q 4 heads x 8, k and v 2 heads x 8 each; gate and up 24 rows each.
  const std::vector<float> qkv = test::random_floats(64 * 32, 4), gate_up = test::random_floats(48 * 32, 5);
  test::write_safetensors(dir + "/model.safetensors",
                          {{"model.layers.0.self_attn.qkv_proj.weight", {"F32", {64, 32}, f32_bytes(qkv)}},
                           {"model.layers.0.mlp.gate_up_proj.weight", {"F32", {48, 32}, f32_bytes(gate_up)}}});
  ModelFile m = open_model(dir);
  EXPECT_EQ(m.config.arch, Arch::Phi3);
  EXPECT_EQ(m.config.sliding_window, 512u);
  auto rows = [](const std::vector<float>& v, size_t first, size_t n) {
    return std::vector<float>(v.begin() + long(first * 32), v.begin() + long((first + n) * 32));
  };
  EXPECT_EQ(weight_to_f32(get_weight(m, "blk.0.attn_q.weight", {32, 32})), rows(qkv, 0, 32));
  EXPECT_EQ(weight_to_f32(get_weight(m, "blk.0.attn_k.weight", {32, 16})), rows(qkv, 32, 16));
  EXPECT_EQ(weight_to_f32(get_weight(m, "blk.0.attn_v.weight", {32, 16})), rows(qkv, 48, 16));
  EXPECT_EQ(weight_to_f32(get_weight(m, "blk.0.ffn_gate.weight", {32, 24})), rows(gate_up, 0, 24));
  EXPECT_EQ(weight_to_f32(get_weight(m, "blk.0.ffn_up.weight", {32, 24})), rows(gate_up, 24, 24));
  EXPECT_EQ(find_weight(m, "blk.0.attn_qkv.weight"), nullptr);
  EXPECT_EQ(m.config.n_ctx_orig, 64u);
  EXPECT_EQ(rope_factors_for(m.config, 64), std::vector<float>({1.f, 1.f, 1.5f, 2.f}));
  EXPECT_EQ(rope_factors_for(m.config, 65), std::vector<float>({1.f, 2.f, 4.f, 8.f}));
  // sqrt(1 + ln(1024 / 64) / ln(64)): the published rule where the config gives no factor.
  EXPECT_NEAR(m.config.rope_attn_factor, std::sqrt(1 + std::log(16.0) / std::log(64.0)), 1e-6);
  EXPECT_NEAR(attention_scale(m.config), m.config.rope_attn_factor * m.config.rope_attn_factor / std::sqrt(8.0), 1e-6);

  // A fused matrix of other rows than the config's, and partial rotary, are refused by name.
  test::write_safetensors(dir + "/model.safetensors",
                          {{"model.layers.0.self_attn.qkv_proj.weight", {"F32", {40, 32}, f32_bytes(rows(qkv, 0, 40))}}});
  std::string e = error_of([&] { open_model(dir); });
  EXPECT_NE(e.find("'blk.0.attn_qkv.weight'"), std::string::npos) << e;
  EXPECT_NE(e.find("expected 64 rows"), std::string::npos) << e;
  nlohmann::json cfg = phi3_config();
  cfg["partial_rotary_factor"] = 0.75;
  std::ofstream(dir + "/config.json", std::ios::trunc) << cfg.dump();
  e = error_of([&] { open_model(dir); });
  EXPECT_NE(e.find("partial_rotary_factor"), std::string::npos) << e;
  cfg = phi3_config();
  cfg["rope_scaling"]["long_factor"] = {1.0, 2.0};
  std::ofstream(dir + "/config.json", std::ios::trunc) << cfg.dump();
  e = error_of([&] { open_model(dir); });
  EXPECT_NE(e.find("2 LongRoPE factors for head_dim 8"), std::string::npos) << e;
  std::filesystem::remove_all(dir);
}

// The same from a GGUF file wgrt writes as llama.cpp's converter does (attn_qkv, ffn_up of 2 ff
// rows, rope_factors_long/short and their keys).
TEST(ModelFile, Phi3GgufOpens) {
  RandomModelSpec s;
  s.arch = Arch::Phi3;
  s.n_ctx_orig = 16;
  s.rope_factors_short.assign(s.head_dim / 2, 1.f);
  s.rope_factors_long.assign(s.head_dim / 2, 2.f);
  s.rope_attn_factor = 1.25f;
  ModelFile m = open_gguf_bytes(gguf_serialize(make_random_model(s)), "phi3.gguf");
  EXPECT_EQ(m.config.arch, Arch::Phi3);
  EXPECT_TRUE(m.config.rope_neox);
  EXPECT_EQ(m.config.n_ctx_orig, 16u);
  EXPECT_FLOAT_EQ(m.config.rope_attn_factor, 1.25f);
  EXPECT_EQ(rope_factors_for(m.config, 17), s.rope_factors_long);
  const uint64_t kv = uint64_t(s.n_kv_heads) * s.head_dim;
  EXPECT_NO_THROW(get_weight(m, "blk.1.attn_k.weight", {s.dim, kv}));
  EXPECT_NO_THROW(get_weight(m, "blk.1.ffn_gate.weight", {s.dim, s.ff}));
  EXPECT_NO_THROW(get_weight(m, "blk.1.ffn_up.weight", {s.dim, s.ff}));
}

// Embeddings' pooling: a sentence-transformers 1_Pooling/config.json beside config.json names
// it (else mean, undeclared); modes wgrt does not pool are refused by name; GGUF's
// <arch>.pooling_type and the Matryoshka flags are read.
TEST(ModelFile, EmbeddingPoolingFromMetadata) {
  std::string dir = test::temp_dir("hf-pool");
  nlohmann::json cfg = llama_config();
  std::ofstream(dir + "/config.json") << cfg.dump();
  test::write_safetensors(dir + "/model.safetensors",
                          {{"model.embed_tokens.weight", {"F32", {40, 32}, f32_bytes(test::random_floats(40 * 32, 1))}}});
  ModelFile plain = open_model(dir);
  EXPECT_EQ(plain.config.pooling, Pooling::Mean);
  EXPECT_FALSE(plain.config.pooling_declared);
  EXPECT_FALSE(plain.config.matryoshka);
  std::filesystem::create_directory(dir + "/1_Pooling");
  std::ofstream(dir + "/1_Pooling/config.json")
      << R"({"word_embedding_dimension": 32, "pooling_mode_cls_token": false, "pooling_mode_mean_tokens": false,
             "pooling_mode_max_tokens": false, "pooling_mode_lasttoken": true, "include_prompt": true})";
  cfg["matryoshka"] = true;
  std::ofstream(dir + "/config.json", std::ios::trunc) << cfg.dump();
  ModelFile last = open_model(dir);
  EXPECT_EQ(last.config.pooling, Pooling::Last);
  EXPECT_TRUE(last.config.pooling_declared);
  EXPECT_TRUE(last.config.matryoshka);
  std::ofstream(dir + "/1_Pooling/config.json", std::ios::trunc) << R"({"pooling_mode_max_tokens": true})";
  std::string e = error_of([&] { open_model(dir); });
  EXPECT_NE(e.find("pooling_mode_max_tokens"), std::string::npos) << e;
  EXPECT_NE(e.find("1_Pooling"), std::string::npos) << e;
  std::ofstream(dir + "/1_Pooling/config.json", std::ios::trunc)
      << R"({"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": true})";
  e = error_of([&] { open_model(dir); });
  EXPECT_NE(e.find("more than one"), std::string::npos) << e;
  std::ofstream(dir + "/1_Pooling/config.json", std::ios::trunc) << R"({"pooling_mode_cls_token": false})";
  e = error_of([&] { open_model(dir); });
  EXPECT_NE(e.find("no pooling mode"), std::string::npos) << e;
  std::filesystem::remove_all(dir);

  GgufWriter w = make_random_model(RandomModelSpec{});
  EXPECT_EQ(open_gguf_bytes(gguf_serialize(w), "p.gguf").config.pooling, Pooling::Mean);
  gguf_set_u32(w, "llama.pooling_type", 2);
  gguf_set_bool(w, "wgrt.embedding.matryoshka", true);
  const ModelFile cls = open_gguf_bytes(gguf_serialize(w), "p.gguf");
  EXPECT_EQ(cls.config.pooling, Pooling::Cls);
  EXPECT_TRUE(cls.config.pooling_declared);
  EXPECT_TRUE(cls.config.matryoshka);
  gguf_set_u32(w, "llama.pooling_type", 5);
  e = error_of([&] { open_gguf_bytes(gguf_serialize(w), "p.gguf"); });
  EXPECT_NE(e.find("llama.pooling_type"), std::string::npos) << e;
}

TEST(ModelFile, BadHuggingFaceInputs) {
  std::string dir = test::temp_dir("hfbad");
  std::string e = error_of([&] { open_model(dir); });
  EXPECT_NE(e.find("no config.json"), std::string::npos) << e;

  std::ofstream(dir + "/config.json") << "{\"architectures\": [\"LlamaForCausalLM\"], ";
  e = error_of([&] { open_model(dir); });
  EXPECT_NE(e.find("does not parse"), std::string::npos) << e;

  auto cfg = llama_config();
  cfg["architectures"] = {"GPT2LMHeadModel"};
  std::ofstream(dir + "/config.json", std::ios::trunc) << cfg.dump();
  e = error_of([&] { open_model(dir); });
  EXPECT_NE(e.find("GPT2LMHeadModel"), std::string::npos) << e;

  cfg = llama_config();
  cfg.erase("hidden_size");
  std::ofstream(dir + "/config.json", std::ios::trunc) << cfg.dump();
  e = error_of([&] { open_model(dir); });
  EXPECT_NE(e.find("\"hidden_size\""), std::string::npos) << e;

  std::ofstream(dir + "/config.json", std::ios::trunc) << llama_config().dump();
  e = error_of([&] { open_model(dir); });
  EXPECT_NE(e.find("model.safetensors"), std::string::npos) << e;

  // A truncated safetensors file.
  std::ofstream(dir + "/model.safetensors", std::ios::binary) << std::string("\x40\x00\x00\x00\x00\x00\x00\x00{\"a\":", 13);
  e = error_of([&] { open_model(dir); });
  EXPECT_NE(e.find("header size"), std::string::npos) << e;
  std::filesystem::remove_all(dir);
}

// config.json integers are range-checked into their 32-bit fields, floats must be finite and
// positive (1e300 is a finite double, an infinite float).
TEST(ModelFile, HuggingFaceConfigRangesChecked) {
  // Through text, as a file is read (parsed, a non-negative integer is unsigned).
  auto e_of = [](const nlohmann::json& cfg) {
    return error_of([&] { config_from_hf(nlohmann::json::parse(cfg.dump()), "config.json"); });
  };
  EXPECT_EQ(e_of(llama_config()), "");
  for (const char* key : {"vocab_size", "hidden_size", "num_hidden_layers", "num_key_value_heads", "head_dim",
                          "max_position_embeddings"}) {
    auto cfg = llama_config();
    cfg[key] = (uint64_t(1) << 32) + 40;
    std::string e = e_of(cfg);
    EXPECT_NE(e.find(fmt::format("\"{}\" = 4294967336 is past 32 bits", key)), std::string::npos) << key << ": " << e;
  }
  auto cfg = llama_config();
  cfg["architectures"] = {"Qwen3MoeForCausalLM"};  // its experts' keys missing
  EXPECT_NE(e_of(cfg).find("\"num_experts\" is missing"), std::string::npos) << e_of(cfg);
  cfg = llama_config();
  cfg["architectures"] = {"MistralForCausalLM"};
  cfg["sliding_window"] = (uint64_t(1) << 32) + 4096;
  EXPECT_NE(e_of(cfg).find("\"sliding_window\" = 4294971392 is past 32 bits"), std::string::npos) << e_of(cfg);
  cfg = llama_config();
  cfg["rope_scaling"]["original_max_position_embeddings"] = (uint64_t(1) << 32) + 8192;
  EXPECT_NE(e_of(cfg).find("\"original_max_position_embeddings\""), std::string::npos) << e_of(cfg);

  for (const char* key : {"rms_norm_eps", "rope_theta"})
    for (double v : {1e300, -1.0, 0.0, 1e-300}) {
      cfg = llama_config();
      cfg[key] = v;
      std::string e = e_of(cfg);
      EXPECT_NE(e.find(fmt::format("\"{}\"", key)), std::string::npos) << key << " = " << v << ": " << e;
      EXPECT_NE(e.find("finite positive"), std::string::npos) << e;
    }
  for (const char* key : {"factor", "low_freq_factor", "high_freq_factor"}) {
    cfg = llama_config();
    cfg["rope_scaling"][key] = 1e39;
    EXPECT_NE(e_of(cfg).find(fmt::format("\"{}\"", key)), std::string::npos) << e_of(cfg);
  }
  cfg = llama_config();
  cfg["rope_scaling"]["low_freq_factor"] = 4.0;  // high_freq_factor 4: the blend divides by their difference
  EXPECT_NE(e_of(cfg).find("high_freq_factor"), std::string::npos) << e_of(cfg);
}

// A shape whose byte size wraps 64 bits ([2^31, 2^31] F32 is 2^64 bytes, 0 mod 2^64) must not
// pass for an empty tensor.
TEST(ModelFile, SafetensorsShapeOverflowRefused) {
  std::string dir = test::temp_dir("stoverflow");
  const uint64_t big = uint64_t(1) << 31;
  test::write_safetensors(dir + "/model.safetensors", {{"model.norm.weight", {"F32", {big, big}, {}}}});
  std::string e = error_of([&] { open_safetensors(dir + "/model.safetensors"); });
  EXPECT_NE(e.find("tensor 'model.norm.weight' of shape [2147483648, 2147483648] (F32)"), std::string::npos) << e;
  EXPECT_NE(e.find("hint"), std::string::npos) << e;
  const uint64_t d = uint64_t(1) << 16;  // 2^64 elements: the element count itself wraps
  test::write_safetensors(dir + "/model.safetensors", {{"model.norm.weight", {"BF16", {d, d, d, d}, {}}}});
  e = error_of([&] { open_safetensors(dir + "/model.safetensors"); });
  EXPECT_NE(e.find("[65536, 65536, 65536, 65536]"), std::string::npos) << e;
  std::filesystem::remove_all(dir);
}

// A Hugging Face name and the GGUF name it maps to, both in one checkpoint: one would go unread.
TEST(ModelFile, TwoNamesForOneWeightRefused) {
  std::string dir = test::temp_dir("twonames");
  std::ofstream(dir + "/config.json") << llama_config().dump();
  test::write_safetensors(dir + "/model.safetensors", {{"model.norm.weight", {"F32", {32}, f32_bytes(std::vector<float>(32, 1.f))}},
                                                       {"output_norm.weight", {"F32", {32}, f32_bytes(std::vector<float>(32, 2.f))}}});
  std::string e = error_of([&] { open_model(dir); });
  EXPECT_NE(e.find("'output_norm.weight'"), std::string::npos) << e;
  EXPECT_NE(e.find("'model.norm.weight'"), std::string::npos) << e;
  std::filesystem::remove_all(dir);
}

TEST(ModelFile, ShardedCheckpoint) {
  std::string dir = test::temp_dir("shards");
  std::ofstream(dir + "/config.json") << llama_config().dump();
  test::write_safetensors(dir + "/a.safetensors", {{"model.embed_tokens.weight", {"F32", {40, 32}, f32_bytes(test::random_floats(1280, 3))}}});
  test::write_safetensors(dir + "/b.safetensors", {{"model.norm.weight", {"BF16", {32}, std::vector<uint8_t>(64, 0x3f)}}});
  nlohmann::json index = {{"weight_map", {{"model.embed_tokens.weight", "a.safetensors"}, {"model.norm.weight", "b.safetensors"}}}};
  std::ofstream(dir + "/model.safetensors.index.json") << index.dump();
  ModelFile m = open_model(dir);
  EXPECT_EQ(get_weight(m, "output_norm.weight", {32}).type, GgmlType::BF16);
  EXPECT_EQ(weight_to_f32(get_weight(m, "output_norm.weight", {32}))[0], bf16_to_f32(0x3f3f));
  // One tensor in two shards.
  test::write_safetensors(dir + "/b.safetensors", {{"model.norm.weight", {"BF16", {32}, std::vector<uint8_t>(64, 0x3f)}},
                                                   {"model.embed_tokens.weight", {"F32", {40, 32}, f32_bytes(test::random_floats(1280, 3))}}});
  std::string twice = error_of([&] { open_model(dir); });
  EXPECT_NE(twice.find("tensor 'model.embed_tokens.weight' appears twice"), std::string::npos) << twice;
  test::write_safetensors(dir + "/b.safetensors", {{"model.norm.weight", {"BF16", {32}, std::vector<uint8_t>(64, 0x3f)}}});
  index["weight_map"]["model.layers.0.mlp.up_proj.weight"] = "a.safetensors";
  std::ofstream(dir + "/model.safetensors.index.json", std::ios::trunc) << index.dump();
  std::string e = error_of([&] { open_model(dir); });
  EXPECT_NE(e.find("up_proj"), std::string::npos) << e;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace wgrt::model
