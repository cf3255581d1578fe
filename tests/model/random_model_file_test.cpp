// Model files written straight to disk (wgrt_make_model's path for 16 GB files): the streamed
// writer gives the same bytes as the in-memory one; write_random_model gives the tensors and
// metadata make_random_model gives, with values of the intended scale, the same bytes on any
// thread count, and a vocabulary copied from another GGUF that tokenizes as the original.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "model/file_type.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "model/model_file.h"
#include "model/random_model.h"
#include "support/hf_fixture.h"
#include "tokenizer/tokenizer.h"

namespace wgrt::model {
namespace {

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(RandomModelFile, StreamedWriterMatchesInMemoryWriter) {
  GgufWriter full = make_random_model(RandomModelSpec{});  // tensors with data
  GgufWriter declared;  // the same metadata; every second tensor only declared
  declared.kv = full.kv;
  for (size_t i = 0; i < full.tensors.size(); ++i) {
    const auto& t = full.tensors[i];
    if (i % 2) gguf_declare_tensor(declared, t.name, t.type, t.dims);
    else gguf_add_tensor(declared, t.name, t.type, t.dims, t.data);
  }
  EXPECT_THROW(gguf_serialize(declared), std::logic_error);  // declared tensors have no bytes yet
  const std::string path = test::temp_dir("streamed") + "/m.gguf";
  size_t filled = 0;
  gguf_write_file_streamed(declared, path, [&](size_t i, std::span<uint8_t> out) {
    ASSERT_EQ(i % 2, 1u);
    ASSERT_EQ(out.size(), full.tensors[i].data.size());
    std::memcpy(out.data(), full.tensors[i].data.data(), out.size());
    ++filled;
  });
  EXPECT_EQ(filled, full.tensors.size() / 2);
  EXPECT_EQ(file_bytes(path), gguf_serialize(full));
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
  EXPECT_EQ(gguf_tensor_bytes(GgmlType::Q4_K, {512, 3}), 2u * 144 * 3);
  EXPECT_THROW(gguf_tensor_bytes(GgmlType::Q4_K, {100, 3}), std::invalid_argument);  // rows of whole blocks
}

RandomModelSpec small_spec(GgmlType matrix, GgmlType embd) {
  RandomModelSpec s;
  s.dim = 256, s.n_heads = 4, s.n_kv_heads = 2, s.head_dim = 64, s.ff = 512;  // K-quant friendly
  s.matrix_type = matrix;
  s.embd_type = embd;
  s.seed = 5;
  return s;
}

TEST(RandomModelFile, SameLayoutAsInMemoryModelAndTheIntendedScales) {
  const RandomModelSpec spec = small_spec(GgmlType::F16, GgmlType::F16);
  const std::string dir = test::temp_dir("randfile");
  write_random_model(spec, dir + "/a.gguf", 3);
  GgufFile f = open_gguf(dir + "/a.gguf");
  GgufWriter ref = make_random_model(spec);
  ASSERT_EQ(f.tensors.size(), ref.tensors.size());
  for (size_t i = 0; i < ref.tensors.size(); ++i) {
    EXPECT_EQ(f.tensors[i].name, ref.tensors[i].name);
    EXPECT_EQ(f.tensors[i].type, ref.tensors[i].type);
    EXPECT_EQ(f.tensors[i].dims, ref.tensors[i].dims);
  }
  EXPECT_EQ(f.kv.size(), ref.kv.size());
  EXPECT_EQ(f.get_uint("general.file_type"), 1u);  // MOSTLY_F16
  EXPECT_EQ(file_type_name(uint32_t(f.get_uint("general.file_type"))), "F16");

  ModelFile m = open_model(dir + "/a.gguf");
  auto moments = [&](const std::string& name) {
    std::vector<float> v = weight_to_f32(*find_weight(m, name));
    double mean = 0, var = 0;
    for (float x : v) mean += x / double(v.size());
    for (float x : v) var += (x - mean) * (x - mean) / double(v.size());
    return std::pair{mean, std::sqrt(var)};
  };
  auto [qm, qs] = moments("blk.1.attn_q.weight");  // [256, 256]: std 1/sqrt(256)
  EXPECT_NEAR(qm, 0.0, 0.002);
  EXPECT_NEAR(qs, 1.0 / 16, 0.002);
  auto [dm, ds] = moments("blk.0.ffn_down.weight");  // K = ff = 512
  EXPECT_NEAR(dm, 0.0, 0.002);
  EXPECT_NEAR(ds, 1.0 / std::sqrt(512.0), 0.002);
  auto [nm, ns] = moments("blk.0.attn_norm.weight");  // 1 + 0.1 noise
  EXPECT_NEAR(nm, 1.0, 0.03);
  EXPECT_NEAR(ns, 0.1, 0.02);
  // tensors and rows get distinct streams: no two rows of a matrix alike, no two matrices alike
  std::vector<float> q = weight_to_f32(*find_weight(m, "blk.0.attn_q.weight"));
  std::vector<float> k = weight_to_f32(*find_weight(m, "blk.0.attn_k.weight"));
  EXPECT_FALSE(std::equal(q.begin(), q.begin() + 256, q.begin() + 256));
  EXPECT_FALSE(std::equal(k.begin(), k.begin() + 256, q.begin()));
  std::filesystem::remove_all(dir);
}

TEST(RandomModelFile, SameBytesOnAnyThreadCountAndSeedMatters) {
  const RandomModelSpec spec = small_spec(GgmlType::Q4_K, GgmlType::Q8_0);
  const std::string dir = test::temp_dir("randthreads");
  write_random_model(spec, dir + "/one.gguf", 1);
  write_random_model(spec, dir + "/four.gguf", 4);
  EXPECT_EQ(file_bytes(dir + "/one.gguf"), file_bytes(dir + "/four.gguf"));
  RandomModelSpec other = spec;
  other.seed = 6;
  write_random_model(other, dir + "/other.gguf", 2);
  EXPECT_NE(file_bytes(dir + "/one.gguf"), file_bytes(dir + "/other.gguf"));
  // and it loads: every tensor the llama builder wants, in the K-quant layout
  ModelFile m = open_model(dir + "/one.gguf");
  EXPECT_EQ(get_weight(m, "blk.1.ffn_down.weight", {512, 256}).type, GgmlType::Q4_K);
  EXPECT_EQ(get_weight(m, "token_embd.weight", {256, 258}).type, GgmlType::Q8_0);
  EXPECT_EQ(get_weight(m, "output.weight", {256, 258}).type, GgmlType::Q8_0);
  std::filesystem::remove_all(dir);
}

// The benchmark files take the llama3 vocabulary from llama.cpp's vocab-only GGUF.
TEST(RandomModelFile, VocabularyFromAnotherGguf) {
  const std::string vocab_path = WGRT_SOURCE_DIR "/.deps/llama-vocab/models/ggml-vocab-llama-bpe.gguf";
  if (!std::filesystem::exists(vocab_path)) GTEST_SKIP() << vocab_path << " is missing (hint: tools/setup-test-data.sh)";
  GgufFile vocab = open_gguf(vocab_path);
  RandomModelSpec spec = small_spec(GgmlType::Q4_0, GgmlType::Q8_0);
  spec.dim = 64, spec.n_heads = 2, spec.n_kv_heads = 1, spec.ff = 128;
  spec.vocab_from = &vocab;
  spec.n_vocab = 128256;  // Llama 3's embedding rows: the file's tokens padded with unused ones
  const std::string path = test::temp_dir("randvocab") + "/v.gguf";
  write_random_model(spec, path, 2);
  ModelFile m = open_model(path);
  EXPECT_EQ(m.config.n_vocab, 128256u);
  tokenizer::Tokenizer made = tokenizer::build_tokenizer(tokenizer::vocab_from_gguf(*m.gguf));
  tokenizer::Tokenizer original = tokenizer::build_tokenizer(tokenizer::vocab_from_gguf(vocab));
  for (const char* text : {"Hello world", " The quick brown fox, 1234!", "Привет <|begin_of_text|>"})
    EXPECT_EQ(tokenizer::tokenize(made, text, true, true), tokenizer::tokenize(original, text, true, true)) << text;
  EXPECT_EQ(m.gguf->get_string("tokenizer.ggml.pre"), vocab.get_string("tokenizer.ggml.pre"));
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

}  // namespace
}  // namespace wgrt::model
