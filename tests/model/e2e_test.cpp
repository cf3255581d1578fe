// End to end: tiny random-weight models written by wgrt's own GGUF writer (F32, F16, Q8_0,
// Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q6_K, IQ4_NL, IQ4_XS; GQA; a real 32000-token vocabulary) run through the GPU graph and
// compared with the independent CPU forward pass in tests/reference/transformer_ref.
#include <gmock/gmock.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <optional>

#include "llm/session.h"
#include "model/gguf_writer.h"
#include "model/random_model.h"
#include "reference/transformer_ref.h"
#include "support/device.h"
#include "support/op_harness.h"

namespace wgrt::model {
namespace {

const std::string kVocab = WGRT_SOURCE_DIR "/.deps/llama-vocab/models/ggml-vocab-llama-spm.gguf";

struct Fixture {
  ModelFile file;
  ref::TransformerConfig ref_config;
  ref::Weights ref_weights;
};

constexpr uint32_t kCtx = 64;  // the sessions' context
// The least lead of a chosen expert's router logit over the others' that the MoE fixtures have:
// past the router's rounding on either side (f32 activations: about 1e-5 of a logit).
constexpr float kRouterMargin = 1e-3f;

ref::TransformerConfig reference_config(const ModelConfig& c) {
  ref::TransformerConfig r;
  r.n_vocab = c.n_vocab;
  r.dim = c.dim;
  r.n_layers = c.n_layers;
  r.n_heads = c.n_heads;
  r.n_kv_heads = c.n_kv_heads;
  r.head_dim = c.head_dim;
  r.ff = c.ff;
  r.norm_eps = c.norm_eps;
  r.rope_theta = c.rope_theta;
  r.rope_neox = c.rope_neox;
  r.rope_freq_factors = rope_factors_for(c, kCtx);
  r.rope_attn_factor = c.rope_attn_factor;
  r.qkv_bias = c.qkv_bias;
  r.qk_norm = c.qk_norm;
  r.gemma = c.arch == Arch::Gemma2 || c.arch == Arch::Gemma3;
  r.embd_scale = c.embd_scale;
  r.attn_scale = c.attn_scale;
  r.attn_softcap = c.attn_softcap;
  r.final_softcap = c.final_softcap;
  r.rope_theta_local = c.rope_theta_local;
  r.sliding_window = c.sliding_window;
  r.local_layers = c.local_layers;
  r.n_experts = c.n_experts;
  r.n_experts_used = c.n_experts_used;
  r.expert_ff = c.expert_ff;
  r.expert_norm = c.expert_norm;
  r.shared_expert_ff = c.shared_expert_ff;
  return r;
}

struct E2eCase {
  Arch arch;
  GgmlType type;
  float tol;  // logits, relative to the row's largest
  bool tied = false;
  std::optional<GgmlType> embd;  // token_embd / output type when not the default
  uint32_t head_dim = 64;
  bool f16_kv = false;
  bool qkv_bias = false;
  bool qk_norm = false;
  uint32_t n_heads = 4, n_kv_heads = 2;  // GQA 2; e.g. 7 over 1, as Qwen2.5-0.5B/7B's groups
  uint64_t max_tensor_bytes = 0;  // LoadOptions: weights past it split by rows (0: the device's limit)
  uint64_t max_cache_bytes = 0;   // BuildOptions: KV caches past it split by heads (0: the device's limit)
  bool gpu_routes = false;  // the gemvs' int8 x and x quantized ahead forced, as a GPU takes them
  uint32_t window = 0;      // every layer's sliding window (mistral, phi3)
  // A mixture of experts (qwen3moe: 256 wide; qwen2moe: 128 wide and a shared expert of 384;
  // llama: ff wide). Its cases take f32 x in every gemv
  // (LinearQDesc::gemv_int8 0; the prompt's 11 rows stay on the gemv routes): rounding then moves
  // a router logit by far less than kRouterMargin, so the GPU chooses the reference's experts.
  uint32_t n_experts = 0, n_experts_used = 0;
};

Fixture make_fixture(const E2eCase& c, const GgufFile& vocab) {
  RandomModelSpec spec;
  spec.arch = c.arch;
  spec.dim = 256;  // K-quant rows are multiples of 256
  spec.n_layers = 2;
  spec.n_heads = c.n_heads;
  spec.n_kv_heads = c.n_kv_heads;
  spec.head_dim = c.head_dim;  // 64, or another size: q is then n_heads * head_dim wide, not dim
  spec.ff = 512;
  spec.matrix_type = c.type;
  // Float models keep a float output projection: its int8-activation GEMM would set the tolerance.
  spec.embd_type = c.type == GgmlType::F32 || c.type == GgmlType::F16 ? c.type : GgmlType::Q8_0;
  if (c.embd) spec.embd_type = *c.embd;  // e.g. Q6_K, as llama.cpp's quantizer writes
  spec.seed = 7 + uint32_t(c.type);
  spec.vocab_from = &vocab;
  spec.tied_embeddings = c.tied;  // the output projection reuses token_embd
  spec.qkv_bias = c.qkv_bias;     // q/k/v biases (HF attention_bias) on any architecture
  spec.qk_norm = c.qk_norm;       // q/k norms likewise
  spec.sliding_window = c.window;  // on every layer: no layer pattern
  spec.n_experts = c.n_experts, spec.n_experts_used = c.n_experts_used;
  spec.expert_ff = c.arch == Arch::Qwen3Moe ? 256 : c.arch == Arch::Qwen2Moe ? 128 : spec.ff;  // llama's: ff (Mixtral)
  if (c.arch == Arch::Qwen2Moe) spec.shared_expert_ff = 384;
  if (c.arch == Arch::Llama) spec.rope_freq_factors.assign(c.head_dim / 2, 1.f), spec.rope_freq_factors.back() = 8.f;
  if (c.arch == Arch::Phi3) {
    // LongRoPE: the long set (1 .. 4 across the pairs) is chosen past 32 positions of context
    // (the sessions have 64), with its attention factor; the short set would turn like 1s.
    spec.n_ctx_orig = 32;
    for (uint32_t i = 0; i < c.head_dim / 2; ++i) {
      spec.rope_factors_long.push_back(1.f + 3.f * float(i) / float(c.head_dim / 2 - 1));
      spec.rope_factors_short.push_back(1.f + 0.5f * float(i % 2));
    }
    spec.rope_attn_factor = 1.19f;
  }
  if (c.arch == Arch::Gemma2 || c.arch == Arch::Gemma3) {
    // A window of 4 keys on the local layers (layer 0 of 2) against prompts of 11 tokens and
    // 32 more; Gemma 2's soft-capping (small caps, so that they bend these random scores),
    // Gemma 3's local RoPE base and linear scaling on its global layer.
    spec.sliding_window = 4;
    spec.swa_pattern = 2;
    if (c.arch == Arch::Gemma2) {
      spec.attn_softcap = 2.f;
      spec.final_softcap = 5.f;
    } else {
      spec.rope_theta = 1000000.f;
      spec.rope_theta_local = 10000.f;
      spec.rope_linear_factor = 8.f;
    }
  }
  // Routers 4x wider: the chosen experts lead the rest by more than rounding (checked against the
  // reference's margins, kRouterMargin).
  spec.router_scale = 4;
  GgufWriter file = make_random_model(spec);
  Fixture f{open_gguf_bytes(gguf_serialize(file), "fixture.gguf"), {}, {}};
  f.ref_config = reference_config(f.file.config);
  for (const auto& [name, w] : f.file.weights) f.ref_weights[name] = weight_to_f32(w);
  return f;
}

llm::Session session(Fixture& f, uint32_t max_batch, bool all_logits, const E2eCase& c) {
  llm::Session s;
  s.dev = &test::device();
  s.model = std::move(f.file);
  s.tok = tokenizer::build_tokenizer(tokenizer::vocab_from_gguf(*s.model.gguf));
  BuildOptions o;
  o.n_ctx = kCtx;
  o.max_batch = max_batch;
  o.all_logits = all_logits;
  o.f16_kv = c.f16_kv;
  o.load.max_tensor_bytes = c.max_tensor_bytes;
  o.max_cache_bytes = c.max_cache_bytes;
  if (c.gpu_routes) o.gemv_int8 = 1, o.quantize_ahead = 1;
  if (c.n_experts) o.gemv_int8 = 0;
  s.mg = build_model(*s.dev, s.model, o);
  return s;
}

// Logits agree when each row's error is small against that row's spread.
void expect_logits_close(const std::vector<float>& got, const std::vector<float>& want, size_t n_vocab, float tol,
                         const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t r = 0; r < got.size() / n_vocab; ++r) {
    double max_ref = 0, max_err = 0;
    for (size_t i = 0; i < n_vocab; ++i) {
      max_ref = std::max(max_ref, std::fabs(double(want[r * n_vocab + i])));
      max_err = std::max(max_err, std::fabs(double(got[r * n_vocab + i]) - want[r * n_vocab + i]));
    }
    ASSERT_LE(max_err, tol * max_ref) << what << ": row " << r << " max |err| " << max_err << " of max |logit| " << max_ref;
  }
}

size_t argmax_row(const std::vector<float>& l, size_t row, size_t v, float* gap = nullptr) {
  size_t best = 0, second = 1;
  for (size_t i = 0; i < v; ++i) {
    float x = l[row * v + i];
    if (x > l[row * v + best]) second = best, best = i;
    else if (i != best && x > l[row * v + second]) second = i;
  }
  if (gap) *gap = l[row * v + best] - l[row * v + second];
  return best;
}


class ModelEndToEnd : public ::testing::TestWithParam<E2eCase> {};

TEST_P(ModelEndToEnd, MatchesReference) {
  if (!std::filesystem::exists(kVocab)) GTEST_SKIP() << "vocab test data absent: run tools/setup-test-data.sh";
  GgufFile vocab = open_gguf(kVocab);
  const E2eCase c = GetParam();
  const std::vector<int32_t> prompt = {1, 450, 4996, 17354, 1701, 432, 17204, 975, 278, 17366, 11203};

  // 1. All logits of the prompt in one pass, and in chunks of 3 (small-M, then GEMV route).
  Fixture f = make_fixture(c, vocab);
  const size_t V = f.ref_config.n_vocab;
  ASSERT_EQ(V, 32000u);
  std::vector<float> margins;
  std::vector<float> want = ref::transformer_forward(f.ref_config, f.ref_weights, prompt, nullptr, &margins);
  // Experts: where the reference's router nearly ties, rounding may choose another expert and
  // the logits part by far more than the tolerance; the fixture has none (else pick another seed).
  ASSERT_GT(*std::min_element(margins.begin(), margins.end()), kRouterMargin) << "a near tie in the fixture's router";
  ref::TransformerConfig rc = f.ref_config;
  ref::Weights rw = f.ref_weights;
  llm::Session one = session(f, 64, true, c);
  if (c.max_tensor_bytes) {  // split: no weight tensor past the limit, the vocabulary in several
    uint32_t parts = 0;
    for (uint32_t i = 0; i < graph::tensor_count(*one.mg.graph); ++i) {
      const graph::Tensor& t = graph::tensor_info(*one.mg.graph, graph::TensorId{i});
      if (t.role == graph::TensorRole::Weight) {
        EXPECT_LE(t.bytes, c.max_tensor_bytes) << t.name;
      }
      parts += t.name.starts_with("token_embd.weight.rows") && !t.name.ends_with(".scales");
    }
    EXPECT_GE(parts, 3u);
  }
  if (c.max_cache_bytes) {  // the caches in parts of whole KV heads, none past the limit
    uint32_t parts = 0;
    for (uint32_t i = 0; i < graph::tensor_count(*one.mg.graph); ++i) {
      const graph::Tensor& t = graph::tensor_info(*one.mg.graph, graph::TensorId{i});
      if (!t.name.starts_with("k_cache.0")) continue;
      EXPECT_LE(t.bytes, c.max_cache_bytes) << t.name;
      ++parts;
    }
    EXPECT_EQ(parts, c.f16_kv ? 2u : 4u);
  }
  if (c.gpu_routes) {  // the gemvs hand x on quantized ahead where the next gemv reads it so
    uint32_t ahead = 0;
    for (uint32_t i = 0; i < graph::tensor_count(*one.mg.graph); ++i)
      ahead += graph::tensor_info(*one.mg.graph, graph::TensorId{i}).name.ends_with(".xq_ahead");
    EXPECT_GE(ahead, 2u * 2);  // the layers' q|k|v and gate|up inputs, at least
  }
  std::vector<float> got;
  llm::eval(one, prompt, [&](size_t, size_t) { got = llm::read_logits(one); });
  expect_logits_close(got, want, V, c.tol, "one-pass prefill");

  Fixture f2 = make_fixture(c, vocab);
  llm::Session chunked = session(f2, 3, true, c);
  std::vector<float> rows;
  llm::eval(chunked, prompt, [&](size_t, size_t) {
    auto part = llm::read_logits(chunked);
    rows.insert(rows.end(), part.begin(), part.end());
  });
  expect_logits_close(rows, got, V, c.tol, "chunked prefill vs one pass");

  // 2. Prefill 5 tokens, then decode one at a time: the same logits as all at once.
  Fixture f3 = make_fixture(c, vocab);
  llm::Session inc = session(f3, 64, true, c);
  std::vector<float> inc_rows;
  llm::eval(inc, std::span(prompt).first(5), [&](size_t, size_t) { inc_rows = llm::read_logits(inc); });
  for (size_t i = 5; i < prompt.size(); ++i) {
    llm::eval(inc, std::span(prompt).subspan(i, 1));
    auto r = llm::read_logits(inc);
    inc_rows.insert(inc_rows.end(), r.begin(), r.end());
  }
  expect_logits_close(inc_rows, got, V, c.tol, "prefill then decode vs all at once");
  float decode_err = 0;  // the one-token steps' largest logit error against the reference
  for (size_t i = 5 * V; i < inc_rows.size() && i < want.size(); ++i)
    decode_err = std::max(decode_err, std::fabs(inc_rows[i] - want[i]));

  // 3. 32 greedy steps on the GPU (argmax kernel, last-row graph), checked by one reference
  // pass over prompt + generated tokens: each GPU token is the reference's best there.
  Fixture f4 = make_fixture(c, vocab);
  llm::Session gen = session(f4, 64, false, c);
  std::vector<int32_t> seq = prompt;
  llm::eval(gen, prompt);
  for (int step = 0; step < 32; ++step) {
    int32_t next = llm::read_argmax(gen);
    seq.push_back(next);
    llm::eval(gen, std::span<const int32_t>(&seq.back(), 1));
  }
  std::vector<float> ref_all = ref::transformer_forward(rc, rw, seq, nullptr, &margins);
  ASSERT_GT(*std::min_element(margins.begin(), margins.end()), kRouterMargin) << "a near tie in the router, greedy run";
  int checked = 0;
  for (size_t p = prompt.size() - 1; p + 1 < seq.size(); ++p) {
    float gap = 0;
    const size_t best = argmax_row(ref_all, p, V, &gap);
    const size_t took = size_t(seq[p + 1]);
    const std::string step = fmt::format("greedy step {}: took {}, the reference's best {} (gap {})",
                                         p + 1 - prompt.size(), took, best, gap);
    if (c.gpu_routes) {
      // int8 activations move each logit by up to decode_err: the token taken is the best
      // within twice that, at every step.
      EXPECT_LE(ref_all[p * V + best] - ref_all[p * V + took], std::max(0.02f, 2 * decode_err)) << step;
      ++checked;
      continue;
    }
    if (gap < 0.02f) continue;  // a near tie: either token is right within rounding
    ++checked;
    EXPECT_EQ(took, best) << step;
  }
  EXPECT_GE(checked, 24) << "too many near ties to judge the greedy tokens";

  // 4. The same greedy steps pipelined: each step embeds the previous argmax on the GPU and is
  // submitted before that token is read back. Same kernels and values: the same tokens.
  Fixture f5 = make_fixture(c, vocab);
  llm::Session pipe = session(f5, 64, false, c);
  llm::eval(pipe, prompt, {}, llm::Readout::Argmax);
  graph::Snapshot step = pipe.last;
  std::vector<int32_t> piped = prompt;
  for (int i = 0; i < 32; ++i) {
    graph::Snapshot ahead = llm::submit_fed_step(pipe);
    piped.push_back(llm::read_argmax(pipe, step));
    step = ahead;
  }
  EXPECT_EQ(piped, seq);
  EXPECT_EQ(pipe.n_past, seq.size());
}

// A decode step's values live in the graph's symbol block: a step that moves pos alone writes
// that block and no node's uniform block, except an attention node's when its chunk count
// changes (every key block).
TEST(ModelDecode, StepWritesTheSymbolBlockNotEveryNode) {
  if (!std::filesystem::exists(kVocab)) GTEST_SKIP() << "vocab test data absent: run tools/setup-test-data.sh";
  GgufFile vocab = open_gguf(kVocab);
  const E2eCase c{Arch::Llama, GgmlType::Q8_0, 3e-2f};
  Fixture f = make_fixture(c, vocab);
  llm::Session s = session(f, 8, false, c);
  graph::Graph& g = *s.mg.graph;
  const std::vector<int32_t> prompt = {1, 450, 4996, 17354};
  llm::eval(s, prompt, {}, llm::Readout::Argmax);
  llm::read_argmax(s);
  ASSERT_TRUE(llm::can_feed(s));
  llm::read_argmax(s, llm::submit_fed_step(s));  // the first decode step switches the routes
  auto plans = [&] {
    std::vector<graph::Plan> p;
    for (uint32_t n = 0; n < graph::node_count(g); ++n) p.push_back(graph::active_plan(g, graph::NodeId{n}));
    return p;
  };
  int steps_with_one_write = 0;
  const int kSteps = 24;
  for (int i = 0; i < kSteps; ++i) {
    const std::vector<graph::Plan> before = plans();
    const int64_t uploads = graph::stats(g).uniform_uploads;
    llm::read_argmax(s, llm::submit_fed_step(s));
    const std::vector<graph::Plan> after = plans();
    int64_t changed_blocks = 0;
    for (uint32_t n = 0; n < graph::node_count(g); ++n) {
      for (size_t j = 0; j < before[n].params.size(); ++j) changed_blocks += before[n].params[j] != after[n].params[j];
      if (before[n] != after[n]) {
        EXPECT_EQ(graph::node_info(g, graph::NodeId{n}).op, "attention")
            << graph::pass_label(g, graph::NodeId{n}) << " re-planned for a step that moved pos alone";
      }
    }
    EXPECT_EQ(graph::stats(g).uniform_uploads - uploads, 1 + changed_blocks) << "step " << i;
    steps_with_one_write += changed_blocks == 0;
  }
  EXPECT_EQ(s.n_past, prompt.size() + 1 + kSteps);
  EXPECT_GE(steps_with_one_write, kSteps / 2) << "attention re-planned on most steps";
}

// A neox-RoPE model (qwen2) loads its q and k rows with each pair adjacent, so the q|k|v gemv
// turns RoPE and writes the caches in its epilogue at decode, as llama's does (no rope_qkv
// dispatch); ModelEndToEnd's qwen2 cases check the logits against the CPU reference.
TEST(ModelDecode, NeoxModelsTurnRopeInTheGemv) {
  if (!std::filesystem::exists(kVocab)) GTEST_SKIP() << "vocab test data absent: run tools/setup-test-data.sh";
  if (test::device().caps.limits.maxStorageBuffersPerShaderStage < 9)
    GTEST_SKIP() << "gemv_rope binds 9 storage buffers (rope_qkv follows the gemv here)";
  GgufFile vocab = open_gguf(kVocab);
  const E2eCase c{.arch = Arch::Qwen2, .type = GgmlType::Q8_0, .tol = 3e-2f, .qkv_bias = true};
  Fixture f = make_fixture(c, vocab);
  ASSERT_TRUE(f.file.config.rope_neox);
  llm::Session s = session(f, 8, false, c);
  graph::Graph& g = *s.mg.graph;
  llm::eval(s, std::vector<int32_t>{1, 450, 4996}, {}, llm::Readout::Argmax);
  llm::read_argmax(s, llm::submit_fed_step(s));
  for (uint32_t l = 0; l < 2; ++l) {
    const graph::NodeId n = graph::find_node(g, "attn_qkv_rope." + std::to_string(l));
    std::vector<std::string> entries;
    for (const graph::KernelSpec& k : graph::active_route_info(g, n).kernels) entries.push_back(k.pipeline.entry);
    EXPECT_THAT(entries, ::testing::Contains("gemv_rope")) << graph::pass_label(g, n);
    EXPECT_THAT(entries, ::testing::Not(::testing::Contains("rope_qkv"))) << graph::pass_label(g, n);
  }
}

// q/k norms (qwen3, gemma3) no longer split the q|k|v projection: one node projects q|k|v and
// rope_qkv normalizes each head, turns it and writes the caches (ModelEndToEnd's qwen3 and gemma3
// cases check the logits); heads whose quarter does not divide rope_qkv's workgroup stay unfused.
TEST(ModelDecode, QkNormModelsFuseTheirProjection) {
  if (!std::filesystem::exists(kVocab)) GTEST_SKIP() << "vocab test data absent: run tools/setup-test-data.sh";
  GgufFile vocab = open_gguf(kVocab);
  for (uint32_t hd : {64u, 96u}) {
    const E2eCase c{.arch = Arch::Qwen3, .type = GgmlType::Q8_0, .tol = 3e-2f, .head_dim = hd};
    Fixture f = make_fixture(c, vocab);
    llm::Session s = session(f, 8, false, c);
    graph::Graph& g = *s.mg.graph;
    bool fused = false, normed = false;
    for (uint32_t n = 0; n < graph::node_count(g); ++n) {
      const std::string& name = graph::node_info(g, graph::NodeId{n}).name;
      fused = fused || name == "attn_qkv_rope.0";
      normed = normed || name == "attn_q_norm.0";
    }
    EXPECT_EQ(fused, hd == 64) << "head_dim " << hd;
    EXPECT_EQ(normed, hd == 96) << "head_dim " << hd;
  }
}

// A tensor no builder reads is an error naming it (the run would silently lack it), and a
// warning with allow_unused.
TEST(ModelTensors, UnreadTensorIsAnErrorNamingIt) {
  RandomModelSpec spec;
  spec.extra_tensors = {"blk.0.attn_sinks.weight"};
  ModelFile m = open_gguf_bytes(gguf_serialize(make_random_model(spec)), "extra.gguf");
  BuildOptions o;
  o.n_ctx = 64;
  o.max_batch = 8;
  try {
    build_model(test::device(), m, o);
    ADD_FAILURE() << "a file with an unread tensor built";
  } catch (const ModelError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("blk.0.attn_sinks.weight"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("--allow-unused-tensors"));
  }
  o.load.allow_unused = true;
  EXPECT_NO_THROW(build_model(test::device(), m, o));
}

// Mistral's sliding window applies on every layer (ModelEndToEnd's mistral case checks the
// logits): it bounds neither the context a graph is built for nor the default one.
TEST(ModelTensors, ContextPastTheSlidingWindowBuilds) {
  RandomModelSpec spec;
  spec.arch = Arch::Mistral;
  GgufWriter w = make_random_model(spec);
  gguf_set_u32(w, "mistral.attention.sliding_window", 64);
  gguf_set_u32(w, "mistral.context_length", 256);
  ModelFile m = open_gguf_bytes(gguf_serialize(w), "mistral.gguf");
  ASSERT_EQ(m.config.sliding_window, 64u);
  EXPECT_EQ(layer_window(m.config, 0), 64u);
  EXPECT_EQ(default_ctx(m.config), 256u);
  BuildOptions o;
  o.n_ctx = 128;
  o.max_batch = 8;
  EXPECT_NO_THROW(build_model(test::device(), m, o));
}

std::string e2e_case_name(const ::testing::TestParamInfo<E2eCase>& i) {
  return std::string(arch_name(i.param.arch)) + "_" + ggml_type_name(uint32_t(i.param.type)) +
         (i.param.embd ? std::string("_embd_") + ggml_type_name(uint32_t(*i.param.embd)) : "") +
         (i.param.tied ? "_tied" : "") + (i.param.head_dim != 64 ? "_hd" + std::to_string(i.param.head_dim) : "") +
         (i.param.f16_kv ? "_f16kv" : "") + (i.param.qkv_bias ? "_qkv_bias" : "") +
         (i.param.qk_norm ? "_qk_norm" : "") +
         (i.param.n_heads != 4 ? "_gqa" + std::to_string(i.param.n_heads / i.param.n_kv_heads) : "") +
         (i.param.max_tensor_bytes ? "_split" : "") + (i.param.max_cache_bytes ? "_cache_split" : "") +
         (i.param.gpu_routes ? "_gpu_routes" : "") + (i.param.window ? "_window" + std::to_string(i.param.window) : "") +
         (i.param.n_experts ? fmt::format("_experts{}of{}", i.param.n_experts_used, i.param.n_experts) : "");
}

// Each case builds and compiles a whole model (seconds on lavapipe): CI's CPU driver runs one of
// each kind (architecture, a float file, the K blocks, the GPU's routes, head sizes, q/k norms
// and biases, odd groups, split tensors and caches, windows); Wide/ holds the rest (label
// "heavy", tests/CMakeLists.txt).
INSTANTIATE_TEST_SUITE_P(, ModelEndToEnd,
                         ::testing::Values(E2eCase{Arch::Llama, GgmlType::F32, 2e-3f},
                                           E2eCase{Arch::Llama, GgmlType::Q4_0, 3e-2f, true, GgmlType::Q6_K},
                                           E2eCase{Arch::Qwen2, GgmlType::Q4_K, 3e-2f},
                                           // The GPU's gemv routes (CPU drivers take others): Q4_0 with a
                                           // Q6_K head.
                                           E2eCase{.arch = Arch::Llama, .type = GgmlType::Q4_0, .tol = 3e-2f,
                                                   .embd = GgmlType::Q6_K, .gpu_routes = true},
                                           // Head sizes other than 64: the generic attention paths.
                                           E2eCase{Arch::Qwen3, GgmlType::F16, 4e-3f, false, {}, 96, true},
                                           // 7 query heads over one KV head (Qwen2.5-0.5B/7B's ratio) with
                                           // q/k/v biases.
                                           E2eCase{.arch = Arch::Qwen2, .type = GgmlType::Q8_0, .tol = 3e-2f,
                                                   .qkv_bias = true, .n_heads = 7, .n_kv_heads = 1},
                                           // Vocabulary matrices past a (lowered) storage binding limit, split
                                           // by rows: a Q6_K embedding and output head (6.6 MB each) in 2 MiB
                                           // tensors, the fused head's argmax over the parts.
                                           E2eCase{.arch = Arch::Llama, .type = GgmlType::Q8_0, .tol = 3e-2f,
                                                   .embd = GgmlType::Q6_K, .max_tensor_bytes = 2 << 20},
                                           // KV caches past a (lowered) binding limit, split by heads: 4 KV
                                           // heads of 64 positions in 16 KiB tensors of two heads (f16), the
                                           // unfused cache write and attention over the parts.
                                           E2eCase{.arch = Arch::Qwen2, .type = GgmlType::Q4_0, .tol = 3e-2f,
                                                   .f16_kv = true, .n_heads = 8, .n_kv_heads = 4,
                                                   .max_cache_bytes = 16 << 10},
                                           // phi3: q|k|v and gate|up fused in the file, LongRoPE's long set
                                           // and attention factor; exact in f32 with Phi-3's head size of
                                           // 96 and one KV head per head.
                                           E2eCase{.arch = Arch::Phi3, .type = GgmlType::F32, .tol = 2e-3f,
                                                   .head_dim = 96, .n_heads = 4, .n_kv_heads = 4},
                                           // gemma2 / gemma3: post-norms, GeGLU, the embedding scale, a window
                                           // of 4 on layer 0 (model/gemma.cpp); gemma2 soft-caps and is tied,
                                           // gemma3's q/k norms and two RoPE bases. Exact in f32 (head size
                                           // 256, as Gemma's), and quantized.
                                           E2eCase{.arch = Arch::Gemma3, .type = GgmlType::F32, .tol = 2e-3f,
                                                   .head_dim = 256},
                                           E2eCase{.arch = Arch::Gemma2, .type = GgmlType::Q4_0, .tol = 3e-2f,
                                                   .tied = true, .f16_kv = true},
                                           // mistral: a window of 4 keys on every layer.
                                           E2eCase{.arch = Arch::Mistral, .type = GgmlType::F32, .tol = 2e-3f,
                                                   .window = 4},
                                           // Mixtures of experts (model/blocks.h ffn_moe): qwen3moe's 3 of 8
                                           // experts renormalized, a llama with 2 of 4 (Mixtral's files),
                                           // qwen2moe's 2 of 4 not renormalized and its gated shared expert.
                                           E2eCase{.arch = Arch::Qwen3Moe, .type = GgmlType::Q8_0, .tol = 3e-2f,
                                                   .n_experts = 8, .n_experts_used = 3},
                                           E2eCase{.arch = Arch::Qwen2Moe, .type = GgmlType::Q8_0, .tol = 3e-2f,
                                                   .n_experts = 4, .n_experts_used = 2},
                                           E2eCase{.arch = Arch::Llama, .type = GgmlType::Q4_K, .tol = 3e-2f,
                                                   .n_experts = 4, .n_experts_used = 2}),
                         e2e_case_name);

INSTANTIATE_TEST_SUITE_P(Wide, ModelEndToEnd,
                         ::testing::Values(E2eCase{Arch::Llama, GgmlType::F16, 2e-3f},
                                           E2eCase{.arch = Arch::Qwen3Moe, .type = GgmlType::Q6_K, .tol = 3e-2f,
                                                   .n_experts = 16, .n_experts_used = 4},
                                           E2eCase{Arch::Qwen3, GgmlType::Q6_K, 3e-2f},
                                           // The 32-value blocks with a min or a fifth bit, read natively;
                                           // Q5_1 also as the (tied) embedding and output head.
                                           E2eCase{Arch::Llama, GgmlType::Q5_1, 3e-2f, true, GgmlType::Q5_1},
                                           // A qwen2 file with q/k/v biases and q/k norms: used, not skipped.
                                           E2eCase{Arch::Qwen2, GgmlType::Q4_0, 3e-2f, false, {}, 64, false, false, true},
                                           E2eCase{Arch::Llama, GgmlType::Q8_0, 3e-2f},
                                           E2eCase{Arch::Llama, GgmlType::Q4_0, 3e-2f},
                                           E2eCase{Arch::Llama, GgmlType::Q8_0, 3e-2f, /*tied=*/true},
                                           E2eCase{Arch::Llama, GgmlType::Q4_0, 3e-2f, false, GgmlType::Q6_K},
                                           E2eCase{Arch::Llama, GgmlType::Q4_1, 3e-2f},
                                           E2eCase{Arch::Qwen2, GgmlType::Q5_0, 3e-2f},
                                           E2eCase{Arch::Qwen3, GgmlType::IQ4_XS, 3e-2f, false, GgmlType::IQ4_XS},
                                           E2eCase{Arch::Qwen2, GgmlType::IQ4_NL, 3e-2f, true, GgmlType::IQ4_NL},
                                           // IQ4_NL's gemvs look the grid's int8 values up by byte pairs.
                                           E2eCase{.arch = Arch::Qwen2, .type = GgmlType::IQ4_NL, .tol = 3e-2f,
                                                   .tied = true, .embd = GgmlType::IQ4_NL, .gpu_routes = true},
                                           E2eCase{Arch::Llama, GgmlType::F32, 2e-3f, false, {}, 80},
                                           // A llama file with q/k/v biases, then one with q/k norms.
                                           E2eCase{Arch::Llama, GgmlType::Q4_K, 3e-2f, false, {}, 64, false, true},
                                           E2eCase{Arch::Llama, GgmlType::Q8_0, 3e-2f, false, {}, 64, false, false, true},
                                           // 6 query heads over one KV head with a head size of 80.
                                           E2eCase{.arch = Arch::Llama, .type = GgmlType::F16, .tol = 4e-3f,
                                                   .head_dim = 80, .f16_kv = true, .n_heads = 6, .n_kv_heads = 1},
                                           // A tied F16 table (16 MB) in 4 MiB tensors, the float linear's parts.
                                           E2eCase{.arch = Arch::Llama, .type = GgmlType::F16, .tol = 2e-3f,
                                                   .tied = true, .max_tensor_bytes = 4 << 20},
                                           // The cache split in tensors of one head (f32).
                                           E2eCase{.arch = Arch::Llama, .type = GgmlType::Q8_0, .tol = 3e-2f,
                                                   .n_heads = 8, .n_kv_heads = 4, .max_cache_bytes = 16 << 10},
                                           E2eCase{Arch::Phi3, GgmlType::Q4_0, 3e-2f},
                                           E2eCase{.arch = Arch::Phi3, .type = GgmlType::Q4_K, .tol = 3e-2f,
                                                   .embd = GgmlType::Q6_K, .gpu_routes = true},
                                           E2eCase{.arch = Arch::Gemma2, .type = GgmlType::F32, .tol = 2e-3f,
                                                   .tied = true},
                                           E2eCase{.arch = Arch::Gemma3, .type = GgmlType::Q4_K, .tol = 3e-2f,
                                                   .embd = GgmlType::Q6_K}),
                         e2e_case_name);

}  // namespace
}  // namespace wgrt::model
