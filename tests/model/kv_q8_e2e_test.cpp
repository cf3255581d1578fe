// End to end with q8_0 KV caches (-ctk/-ctv q8_0): a tiny random-weight model (wgrt's GGUF
// writer, a real 32000-token vocabulary) prefills a prompt and decodes, and its logits stay close
// to the same model's with f16 caches (which e2e_test holds to the CPU reference forward pass).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <optional>
#include <span>

#include "llm/session.h"
#include "model/gguf_writer.h"
#include "model/random_model.h"
#include "support/device.h"

namespace wgrt::model {
namespace {

const std::string kVocab = WGRT_SOURCE_DIR "/.deps/llama-vocab/models/ggml-vocab-llama-spm.gguf";

// Each row's largest error against that row's largest |logit|. q8_0 keeps each K and V value
// within amax / 254 of its block (0.4%); through two layers that moves the logits about as much
// as Q8_0 weights do, which the end-to-end suite holds to 3e-2 of the row's largest (e2e_test).
constexpr double kTol = 3e-2;

double worst_row_error(const std::vector<float>& got, const std::vector<float>& want, size_t n_vocab) {
  double worst = 0;
  for (size_t r = 0; r < got.size() / n_vocab; ++r) {
    double max_ref = 0, max_err = 0;
    for (size_t i = 0; i < n_vocab; ++i) {
      max_ref = std::max(max_ref, std::fabs(double(want[r * n_vocab + i])));
      max_err = std::max(max_err, std::fabs(double(got[r * n_vocab + i]) - want[r * n_vocab + i]));
    }
    worst = std::max(worst, max_err / max_ref);
  }
  return worst;
}

// The prompt's logits in one pass, then 6 decode steps' (the decode and prefill routes).
std::vector<float> run(const GgufFile& vocab, std::optional<graph::DType> k, std::optional<graph::DType> v,
                       size_t* kv_bytes) {
  RandomModelSpec spec;
  spec.arch = Arch::Llama;
  spec.dim = 256;
  spec.n_layers = 2;
  spec.n_heads = 4;
  spec.n_kv_heads = 2;
  spec.head_dim = 64;
  spec.ff = 512;
  spec.matrix_type = GgmlType::F16;
  spec.embd_type = GgmlType::F16;
  spec.seed = 11;
  spec.vocab_from = &vocab;
  llm::Session s;
  s.dev = &test::device();
  s.model = open_gguf_bytes(gguf_serialize(make_random_model(spec)), "fixture.gguf");
  s.tok = tokenizer::build_tokenizer(tokenizer::vocab_from_gguf(*s.model.gguf));
  BuildOptions o;
  o.n_ctx = 64;
  o.all_logits = true;
  o.cache_type_k = k;
  o.cache_type_v = v;
  s.mg = build_model(*s.dev, s.model, o);
  *kv_bytes = 0;
  for (uint32_t i = 0; i < graph::tensor_count(*s.mg.graph); ++i) {
    const graph::Tensor& t = graph::tensor_info(*s.mg.graph, graph::TensorId{i});
    if (t.name.starts_with("k_cache.") || t.name.starts_with("v_cache.")) *kv_bytes += t.bytes;
  }
  const std::vector<int32_t> prompt = {1, 450, 4996, 17354, 1701, 432, 17204, 975, 278, 17366, 11203};
  std::vector<float> rows;
  llm::eval(s, prompt, [&](size_t, size_t) { rows = llm::read_logits(s); });
  for (int32_t t : {278, 4996, 1701, 975, 432, 11203}) {
    llm::eval(s, std::span<const int32_t>(&t, 1));
    const std::vector<float> r = llm::read_logits(s);
    rows.insert(rows.end(), r.begin(), r.end());
  }
  return rows;
}

TEST(KvQ8EndToEnd, LogitsCloseToF16Caches) {
  if (!std::filesystem::exists(kVocab)) GTEST_SKIP() << "vocab test data absent: run tools/setup-test-data.sh";
  const GgufFile vocab = open_gguf(kVocab);
  size_t f16_bytes = 0, q8_bytes = 0, mixed_bytes = 0;
  const std::vector<float> f16 = run(vocab, graph::DType::F16, graph::DType::F16, &f16_bytes);
  const std::vector<float> q8 = run(vocab, graph::DType::Q8_0, graph::DType::Q8_0, &q8_bytes);
  const std::vector<float> mixed = run(vocab, graph::DType::F16, graph::DType::Q8_0, &mixed_bytes);
  ASSERT_EQ(f16.size(), size_t(17) * 32000);
  const double q8_err = worst_row_error(q8, f16, 32000), mixed_err = worst_row_error(mixed, f16, 32000);
  EXPECT_LE(q8_err, kTol);
  EXPECT_LE(mixed_err, kTol);
  EXPECT_GT(q8_err, 0.0) << "the q8_0 caches made no difference: are they used?";
  // 34 bytes a block of 32 against f16's 64.
  EXPECT_EQ(q8_bytes * 64, f16_bytes * 34);
  EXPECT_EQ(mixed_bytes * 128, f16_bytes * (64 + 34));
}

TEST(KvQ8EndToEnd, RefusesAnF32CacheBesideQ8) {
  if (!std::filesystem::exists(kVocab)) GTEST_SKIP() << "vocab test data absent: run tools/setup-test-data.sh";
  const GgufFile vocab = open_gguf(kVocab);
  size_t bytes = 0;
  EXPECT_THROW(run(vocab, graph::DType::F32, graph::DType::Q8_0, &bytes), std::invalid_argument);
}

}  // namespace
}  // namespace wgrt::model
