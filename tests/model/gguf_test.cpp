// GGUF reader and writer: round trips, and malformed files give clear errors, never crashes.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>

#include "model/ggml_quantize.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "reference/quant_ref.h"
#include "support/random.h"

namespace wgrt::model {
namespace {

GgufWriter sample_writer() {
  GgufWriter w;
  gguf_set_string(w, "general.architecture", "llama");
  gguf_set_u32(w, "llama.block_count", 2);
  gguf_set_f32(w, "llama.rope.freq_base", 500000.f);
  gguf_set_bool(w, "tokenizer.ggml.add_bos_token", true);
  gguf_set_strings(w, "tokenizer.ggml.tokens", {"<s>", "</s>", "hello", "▁world"});
  gguf_set_f32s(w, "tokenizer.ggml.scores", {0.0, -1.0, -2.5, 3.25});
  gguf_set_i32s(w, "tokenizer.ggml.token_type", {3, 3, 1, 1});
  auto a = test::random_floats(64 * 3, 1);
  std::vector<uint8_t> f32(a.size() * 4);
  std::memcpy(f32.data(), a.data(), f32.size());
  gguf_add_tensor(w, "a.weight", GgmlType::F32, {64, 3}, f32);
  gguf_add_tensor(w, "b.weight", GgmlType::Q4_0, {64, 3}, quantize(GgmlType::Q4_0, a));
  gguf_add_tensor(w, "c.weight", GgmlType::Q6_K, {256}, quantize(GgmlType::Q6_K, test::random_floats(256, 2)));
  return w;
}

std::string parse_error(const std::vector<uint8_t>& bytes) {
  try {
    parse_gguf(bytes, "bad.gguf");
  } catch (const GgufError& e) {
    return e.what();
  }
  return "";
}

TEST(Gguf, WriterReaderRoundTrip) {
  GgufWriter w = sample_writer();
  auto bytes = gguf_serialize(w);
  GgufFile f = parse_gguf(bytes);
  EXPECT_EQ(f.version, 3u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_uint("llama.block_count"), 2u);
  EXPECT_FLOAT_EQ(float(f.get_float("llama.rope.freq_base")), 500000.f);
  EXPECT_TRUE(f.get_bool("tokenizer.ggml.add_bos_token"));
  EXPECT_EQ(f.get_array("tokenizer.ggml.tokens").strings[3], "▁world");
  EXPECT_EQ(f.get_array("tokenizer.ggml.scores").floats[3], 3.25);
  EXPECT_EQ(f.get_array("tokenizer.ggml.token_type").ints[0], 3);
  ASSERT_EQ(f.tensors.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const auto& t = f.tensors[i];
    EXPECT_EQ(t.name, w.tensors[i].name);
    EXPECT_EQ(t.dims, w.tensors[i].dims);
    EXPECT_EQ(t.type, w.tensors[i].type);
    EXPECT_EQ(t.data - bytes.data() - f.data_offset, int64_t(t.offset));
    EXPECT_EQ(t.offset % 32, 0u);
    EXPECT_EQ(std::vector<uint8_t>(t.data, t.data + t.n_bytes), w.tensors[i].data);
  }
  EXPECT_THROW(f.get_string("llama.block_count"), GgufError);  // wrong type
  EXPECT_THROW(f.get_uint("llama.missing"), GgufError);
}

TEST(Gguf, TruncatedAnywhereIsAClearError) {
  auto bytes = gguf_serialize(sample_writer());
  // 16 cut points spread over header, metadata, tensor infos and data, plus the edges.
  std::vector<size_t> cuts = {0, 1, 4, 7, 8, 16, 23};
  for (int i = 1; cuts.size() < 16; ++i) cuts.push_back(bytes.size() * size_t(i) / 10 - 1);
  for (size_t cut : cuts) {
    std::vector<uint8_t> part(bytes.begin(), bytes.begin() + long(cut));
    std::string e = parse_error(part);
    EXPECT_NE(e, "") << "cut at " << cut << " parsed";
    EXPECT_NE(e.find("bad.gguf"), std::string::npos) << e;
    EXPECT_NE(e.find("hint"), std::string::npos) << e;
  }
}

TEST(Gguf, WrongMagicAndVersion) {
  auto bytes = gguf_serialize(sample_writer());
  auto bad = bytes;
  bad[0] = 'X';
  std::string e = parse_error(bad);
  EXPECT_NE(e.find("magic"), std::string::npos) << e;
  EXPECT_NE(e.find("offset 0"), std::string::npos) << e;
  bad = bytes;
  bad[4] = 7;
  e = parse_error(bad);
  EXPECT_NE(e.find("version 7"), std::string::npos) << e;
}

TEST(Gguf, UnknownValueAndTensorTypes) {
  GgufWriter w;
  gguf_set_u32(w, "x", 1);
  auto bytes = gguf_serialize(w);
  // Header 24 bytes, then key (8 + 1) -> the value type at offset 33.
  bytes[33] = 99;
  std::string e = parse_error(bytes);
  EXPECT_NE(e.find("unknown value type 99"), std::string::npos) << e;
  EXPECT_NE(e.find("'x'"), std::string::npos) << e;

  GgufWriter t;
  gguf_add_tensor(t, "w", GgmlType::F32, {4}, std::vector<uint8_t>(16));
  bytes = gguf_serialize(t);
  // Tensor info: name (8 + 1), n_dims (4), dim (8), type (4) at 24 + 9 + 4 + 8 = 45.
  bytes[45] = 77;
  e = parse_error(bytes);
  EXPECT_NE(e.find("unknown ggml type 77"), std::string::npos) << e;
  EXPECT_NE(e.find("'w'"), std::string::npos) << e;
}

TEST(Gguf, TensorDataPastTheEnd) {
  GgufWriter t;
  gguf_add_tensor(t, "w", GgmlType::F32, {8}, std::vector<uint8_t>(32));
  auto bytes = gguf_serialize(t);
  // Make the offset (at 24 + 9 + 4 + 8 + 4 = 49) point past the file.
  bytes[49] = 0;
  bytes[50] = 1;  // offset 256
  std::string e = parse_error(bytes);
  EXPECT_NE(e.find("'w'"), std::string::npos) << e;
  EXPECT_NE(e.find("past the end"), std::string::npos) << e;
}

TEST(Gguf, HugeCountsDoNotAllocate) {
  GgufWriter w;
  gguf_set_strings(w, "list", {"a", "b"});
  auto bytes = gguf_serialize(w);
  // Array length field: header 24, key 8 + 4, type 4, element type 4 -> length at 44.
  for (int i = 0; i < 8; ++i) bytes[44 + size_t(i)] = 0xff;
  std::string e = parse_error(bytes);
  EXPECT_NE(e.find("cannot fit"), std::string::npos) << e;
  bytes = gguf_serialize(w);
  for (int i = 0; i < 8; ++i) bytes[16 + size_t(i)] = 0xff;  // metadata count
  e = parse_error(bytes);
  EXPECT_NE(e.find("metadata count"), std::string::npos) << e;
}

// 200,000 tensor names, the last a repeat of the first: the duplicate check looks each name up
// in an index, so the whole table parses in about a second under ASan (it took minutes when each
// name was compared with every earlier one).
TEST(Gguf, TwoHundredThousandTensorNamesCheckedQuickly) {
  constexpr int kTensors = 200000;
  GgufWriter w;
  for (int i = 0; i < kTensors; ++i)
    gguf_add_tensor(w, fmt::format("t.{}", i), GgmlType::F32, {8}, std::vector<uint8_t>(32));
  gguf_add_tensor(w, "t.0", GgmlType::F32, {8}, std::vector<uint8_t>(32));
  const auto bytes = gguf_serialize(w);
  const auto start = std::chrono::steady_clock::now();
  std::string e = parse_error(bytes);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(e.find("tensor #200000 't.0'"), std::string::npos) << e;
  EXPECT_NE(e.find("appears twice"), std::string::npos) << e;
  EXPECT_NE(e.find("tensor #0"), std::string::npos) << e;
  EXPECT_LT(seconds, 10.0) << "the tensor table of " << kTensors << " names took " << seconds << " s";
}

// Every dim is read before the shape is checked, so the error shows the whole shape.
TEST(Gguf, ShapeProductPastTheLimitNamesTheShape) {
  GgufWriter t;
  gguf_add_tensor(t, "w", GgmlType::F32, {4, 4, 4, 4}, std::vector<uint8_t>(4 * 256));
  auto bytes = gguf_serialize(t);
  // Tensor info at 24: name (8 + 1), n_dims (4), dims at 37, 45, 53, 61: each 2^20 (2^80 elements).
  for (size_t at : {37, 45, 53, 61}) {
    const uint64_t d = uint64_t(1) << 20;
    std::memcpy(bytes.data() + at, &d, 8);
  }
  std::string e = parse_error(bytes);
  EXPECT_NE(e.find("tensor 'w'"), std::string::npos) << e;
  EXPECT_NE(e.find("[1048576, 1048576, 1048576, 1048576]"), std::string::npos) << e;
  EXPECT_NE(e.find("hint"), std::string::npos) << e;
}

TEST(Gguf, RandomCorruptionNeverCrashes) {
  auto bytes = gguf_serialize(sample_writer());
  std::mt19937 rng(7);
  int errors = 0;
  for (int i = 0; i < 300; ++i) {
    auto bad = bytes;
    for (int k = 0; k < 4; ++k) bad[rng() % bad.size()] = uint8_t(rng());
    try {
      parse_gguf(bad, "fuzz.gguf");
    } catch (const GgufError&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 0);
}

TEST(GgmlTypes, F16Conversions) {
  for (float v : {0.f, -0.f, 1.f, -2.5f, 65504.f, 6.1035156e-05f, 5.9604645e-08f, 0.33325195f})
    EXPECT_EQ(f16_to_f32(f32_to_f16(v)), v) << v;
  EXPECT_TRUE(std::isinf(f16_to_f32(f32_to_f16(1e6f))));
  EXPECT_EQ(f32_to_f16(1.0f + 1.0f / 2048), f32_to_f16(1.0f));  // ties to even
  for (uint32_t h = 0; h < 0x7c00; ++h) ASSERT_EQ(f32_to_f16(f16_to_f32(uint16_t(h))), h);
}

TEST(GgmlTypes, QuantizeDequantizeWithinStepSize) {
  auto x = test::random_floats(512, 3, -4.f, 4.f);
  struct Case {
    GgmlType type;
    float tol;  // values in [-4, 4]: Q4_0 may clamp the side opposite the extreme by a step
  } cases[] = {{GgmlType::Q8_0, 0.02f}, {GgmlType::Q4_0, 0.51f}, {GgmlType::Q4_K, 0.35f},
               {GgmlType::Q4_1, 0.3f},  {GgmlType::Q5_0, 0.26f}, {GgmlType::Q5_1, 0.15f},
               // IQ4_XS, IQ4_NL: the grid's widest gap (89..113) and its shorter positive end (113 vs -127)
               {GgmlType::IQ4_XS, 0.6f}, {GgmlType::IQ4_NL, 0.6f},
               {GgmlType::Q6_K, 0.08f}, {GgmlType::F16, 0.002f}, {GgmlType::BF16, 0.02f}};
  for (auto [type, tol] : cases) {
    auto q = quantize(type, x);
    std::vector<float> y(x.size());
    dequantize(type, q.data(), y.data(), y.size());
    float worst = 0;
    for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(x[i] - y[i]));
    EXPECT_LT(worst, tol) << ggml_type_name(uint32_t(type));
    EXPECT_GT(worst, 0.f) << ggml_type_name(uint32_t(type)) << " lost nothing: suspicious";
  }
}

// The loader's CPU reading of Q4_1 / Q5_0 / Q5_1 / IQ4_NL / IQ4_XS / Q2_K / Q3_K blocks, bit for bit as the
// reference's.
TEST(GgmlTypes, LegacyBlocksDequantizeAsTheReference) {
  struct Case {
    GgmlType type;
    size_t bytes;
    std::vector<float> (*ref)(const std::vector<uint8_t>&, size_t);
  } cases[] = {{GgmlType::Q4_1, 20, ref::dequant_gguf_q4_1}, {GgmlType::Q5_0, 22, ref::dequant_gguf_q5_0},
               {GgmlType::Q5_1, 24, ref::dequant_gguf_q5_1}, {GgmlType::IQ4_NL, 18, ref::dequant_gguf_iq4_nl}};
  for (const Case& c : cases) {
    auto blocks = test::random_legacy_blocks(12, 5, c.bytes);
    std::vector<float> y(12 * 32);
    dequantize(c.type, blocks.data(), y.data(), y.size());
    const std::vector<float> want = c.ref(blocks, y.size());
    EXPECT_EQ(std::memcmp(y.data(), want.data(), y.size() * 4), 0) << ggml_type_name(uint32_t(c.type));
  }
  auto blocks = test::random_iq4_xs_blocks(3, 6);
  std::vector<float> y(3 * 256);
  dequantize(GgmlType::IQ4_XS, blocks.data(), y.data(), y.size());
  const std::vector<float> want = ref::dequant_gguf_iq4_xs(blocks, y.size());
  EXPECT_EQ(std::memcmp(y.data(), want.data(), y.size() * 4), 0) << "IQ4_XS";
  for (bool q3 : {false, true}) {
    auto kb = test::random_q23_k_blocks(3, 7, q3);
    std::vector<float> ky(3 * 256);
    dequantize(q3 ? GgmlType::Q3_K : GgmlType::Q2_K, kb.data(), ky.data(), ky.size());
    const std::vector<float> kw = q3 ? ref::dequant_gguf_q3_k(kb, ky.size()) : ref::dequant_gguf_q2_k(kb, ky.size());
    EXPECT_EQ(std::memcmp(ky.data(), kw.data(), ky.size() * 4), 0) << (q3 ? "Q3_K" : "Q2_K");
  }
}

TEST(Gguf, RealVocabFilesParse) {
  std::string dir = WGRT_SOURCE_DIR "/.deps/llama-vocab/models/";
  for (const char* name : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-qwen2.gguf", "ggml-vocab-aquila.gguf"}) {
    std::FILE* probe = std::fopen((dir + name).c_str(), "rb");
    if (!probe) GTEST_SKIP() << "test vectors absent: run tools/setup-test-data.sh";
    std::fclose(probe);
    GgufFile f = open_gguf(dir + name);
    EXPECT_GT(f.get_array("tokenizer.ggml.tokens").size(), 1000u) << name;
  }
}

}  // namespace
}  // namespace wgrt::model
