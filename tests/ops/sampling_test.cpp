// argmax and top-k over logits rows against the CPU reference: odd and prime vocabularies,
// ties (lowest index wins), -inf and NaN logits, chunk boundaries, a 32000+ vocabulary, and
// a dynamic row count on one graph.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <random>

#include "llm/sampler.h"
#include "ops/sampling/sampling.h"
#include "reference/sampling_ref.h"
#include "support/device.h"
#include "support/op_harness.h"
#include "support/random.h"

namespace wgrt::test {
namespace {

using namespace graph;
constexpr float kInf = std::numeric_limits<float>::infinity();

enum class Fill { Uniform, Ties, NegInf, AllNegInf, WithNaN, Huge };

// rows x vocab logits; Ties: few distinct values (many equal maxima); NegInf: mostly -inf
// (a row entirely -inf when vocab is small); WithNaN: NaNs among the values; Huge: ±3e38.
std::vector<float> make_logits(uint32_t rows, uint32_t vocab, Fill fill, uint32_t seed) {
  auto v = random_floats(size_t(rows) * vocab, seed, -20.f, 20.f);
  for (size_t i = 0; i < v.size(); ++i) {
    switch (fill) {
      case Fill::Uniform: break;
      case Fill::Ties: v[i] = std::floor(v[i] / 8.f); break;  // 5 distinct values
      case Fill::NegInf: if (v[i] < 15.f) v[i] = -kInf; break;
      case Fill::AllNegInf: v[i] = -kInf; break;
      case Fill::WithNaN: if (i % 7 == 3) v[i] = std::numeric_limits<float>::quiet_NaN(); break;
      case Fill::Huge: v[i] = v[i] * 1.5e37f; if (i % 11 == 0) v[i] = -0.f; break;
    }
  }
  return v;
}

const char* fill_name(Fill f) {
  switch (f) {
    case Fill::Uniform: return "uniform";
    case Fill::Ties: return "ties";
    case Fill::NegInf: return "neginf";
    case Fill::AllNegInf: return "all_neginf";
    case Fill::WithNaN: return "nan";
    case Fill::Huge: return "huge";
  }
  return "?";
}

void expect_argmax(uint32_t max_rows, uint32_t vocab, Fill fill, std::vector<uint32_t> row_steps) {
  Graph g(device());
  TensorId l = add_input(g, {.name = "logits", .max_shape = {max_rows, vocab}, .dynamic_dims = 1});
  TensorId idx = ops::add_argmax(g, {.name = "argmax", .logits = l});
  mark_output(g, idx);
  build(g);
  uint32_t step = 0;
  for (uint32_t rows : row_steps) {
    auto lv = make_logits(rows, vocab, fill, rows * 13 + vocab + step++);
    ShapeInput s{l, {rows, vocab}};
    update(g, {&s, 1});
    write_tensor<float>(g, l, lv);
    execute(g);
    EXPECT_EQ(read_output<uint32_t>(g, idx), ref::argmax_rows(lv, vocab))
        << "step " << step << ", rows " << rows;
  }
}

void expect_top_k(uint32_t max_rows, uint32_t vocab, uint32_t k, Fill fill, std::vector<uint32_t> row_steps) {
  Graph g(device());
  TensorId l = add_input(g, {.name = "logits", .max_shape = {max_rows, vocab}, .dynamic_dims = 1});
  ops::TopKOutputs t = ops::add_top_k(g, {.name = "topk", .logits = l, .k = k});
  mark_output(g, t.indices);
  mark_output(g, t.values);
  build(g);
  uint32_t step = 0;
  for (uint32_t rows : row_steps) {
    auto lv = make_logits(rows, vocab, fill, rows * 17 + vocab + k + step++);
    ShapeInput s{l, {rows, vocab}};
    update(g, {&s, 1});
    write_tensor<float>(g, l, lv);
    execute(g);
    ref::TopKRef want = ref::top_k_rows(lv, vocab, k);
    EXPECT_EQ(read_output<uint32_t>(g, t.indices), want.indices) << "step " << step << ", rows " << rows;
    EXPECT_TRUE(all_close(read_output<float>(g, t.values), want.values, 0, 0)) << "step " << step;
  }
}

std::vector<OpCase> argmax_cases() {
  std::vector<OpCase> cases;
  auto add = [&](uint32_t rows, uint32_t vocab, Fill fill) {
    cases.push_back({fmt::format("{}x{}_{}", rows, vocab, fill_name(fill)),
                     [=] { expect_argmax(rows, vocab, fill, {rows}); }});
  };
  for (auto [r, v] : {std::pair{1u, 1u}, {3u, 7u}, {7u, 97u}, {37u, 131u}, {3u, 4099u}, {2u, 2049u}})
    add(r, v, Fill::Uniform);
  for (Fill f : {Fill::Ties, Fill::NegInf, Fill::WithNaN, Fill::Huge}) {
    add(5, 37, f);
    add(3, 4099, f);
  }
  add(1, 32000, Fill::Uniform);
  add(2, 32000, Fill::Ties);
  add(1, 128256, Fill::Uniform);
  add(4, 97, Fill::AllNegInf);
  add(2, 4099, Fill::AllNegInf);
  cases.push_back({"max_at_chunk_edges", [] {
                     // The maximum at the last index of chunk 0 and first of chunk 1, tied.
                     Graph g(device());
                     uint32_t vocab = 3 * ops::kArgmaxChunk + 5;
                     TensorId l = add_input(g, {.name = "logits", .max_shape = {2, vocab}});
                     TensorId idx = ops::add_argmax(g, {.name = "argmax", .logits = l});
                     mark_output(g, idx);
                     build(g);
                     auto lv = make_logits(2, vocab, Fill::Uniform, 5);
                     lv[ops::kArgmaxChunk - 1] = 100.f;
                     lv[ops::kArgmaxChunk] = 100.f;
                     lv[vocab + vocab - 1] = 100.f;  // row 1: the very last logit
                     write_tensor<float>(g, l, lv);
                     execute(g);
                     EXPECT_EQ(read_output<uint32_t>(g, idx),
                               (std::vector<uint32_t>{ops::kArgmaxChunk - 1, vocab - 1}));
                   }});
  cases.push_back({"dynamic_rows", [] { expect_argmax(64, 4099, Fill::Ties, {37, 1, 1, 64, 1}); }});
  return cases;
}

std::vector<OpCase> top_k_cases() {
  std::vector<OpCase> cases;
  auto add = [&](uint32_t rows, uint32_t vocab, uint32_t k, Fill fill) {
    cases.push_back({fmt::format("{}x{}_k{}_{}", rows, vocab, k, fill_name(fill)),
                     [=] { expect_top_k(rows, vocab, k, fill, {rows}); }});
  };
  add(1, 1, 1, Fill::Uniform);
  add(3, 7, 7, Fill::Uniform);
  add(7, 97, 5, Fill::Uniform);
  add(3, 131, 64, Fill::Uniform);
  add(2, 4099, 40, Fill::Uniform);
  add(2, 4099, 128, Fill::Uniform);
  add(1, 9000, 1, Fill::Uniform);
  for (Fill f : {Fill::Ties, Fill::NegInf, Fill::WithNaN, Fill::Huge}) {
    add(3, 37, 20, f);
    add(2, 4099, 64, f);
  }
  add(3, 97, 10, Fill::AllNegInf);
  add(1, 32000, 64, Fill::Uniform);
  add(1, 32000, 128, Fill::Ties);
  cases.push_back({"dynamic_rows", [] { expect_top_k(64, 1031, 16, Fill::Ties, {37, 1, 1, 64, 1}); }});
  cases.push_back({"rejects_bad_k", [] {
                     Graph g(device());
                     TensorId l = add_input(g, {.name = "logits", .max_shape = {2, 50}});
                     EXPECT_THROW(ops::add_top_k(g, {.name = "t0", .logits = l, .k = 0}), std::invalid_argument);
                     EXPECT_THROW(ops::add_top_k(g, {.name = "t1", .logits = l, .k = 51}), std::invalid_argument);
                   }});
  return cases;
}

// The log-softmax normalizer against the double reference: relative 1e-5 (f32 sums over up to
// 128k terms), -inf rows exactly; with the enable symbol off the node runs nothing.
void expect_logsumexp(uint32_t max_rows, uint32_t vocab, Fill fill, std::vector<uint32_t> row_steps) {
  Graph g(device());
  TensorId l = add_input(g, {.name = "logits", .max_shape = {max_rows, vocab}, .dynamic_dims = 1});
  SymbolId on = add_symbol(g, {.name = "on", .lo = 0, .hi = 1});
  TensorId lse = ops::add_logsumexp(g, {.name = "lse", .logits = l, .enable = on});
  mark_output(g, lse);
  build(g);
  uint32_t step = 0;
  for (uint32_t rows : row_steps) {
    auto lv = make_logits(rows, vocab, fill, rows * 19 + vocab + step++);
    ShapeInput s{l, {rows, vocab}};
    SymbolInput sym{on, 1};
    update(g, {&s, 1}, {&sym, 1});
    write_tensor<float>(g, l, lv);
    execute(g);
    const std::vector<float> got = read_output<float>(g, lse), want = ref::logsumexp_rows(lv, vocab);
    ASSERT_EQ(got.size(), want.size());
    for (size_t r = 0; r < want.size(); ++r) {
      if (std::isinf(want[r])) {
        EXPECT_EQ(got[r], want[r]) << "row " << r;
        continue;
      }
      EXPECT_NEAR(got[r], want[r], 1e-5 * std::max(1.0f, std::fabs(want[r]))) << "row " << r << ", step " << step;
    }
  }
}

std::vector<OpCase> logsumexp_cases() {
  std::vector<OpCase> cases;
  auto add = [&](uint32_t rows, uint32_t vocab, Fill fill) {
    cases.push_back({fmt::format("{}x{}_{}", rows, vocab, fill_name(fill)),
                     [=] { expect_logsumexp(rows, vocab, fill, {rows}); }});
  };
  for (auto [r, v] : {std::pair{1u, 1u}, {3u, 7u}, {7u, 97u}, {37u, 131u}, {3u, 4099u}, {2u, 2049u}})
    add(r, v, Fill::Uniform);
  for (Fill f : {Fill::Ties, Fill::NegInf, Fill::WithNaN, Fill::Huge}) {
    add(5, 37, f);
    add(3, 4099, f);
  }
  add(1, 128256, Fill::Uniform);
  add(4, 97, Fill::AllNegInf);
  cases.push_back({"dynamic_rows", [] { expect_logsumexp(64, 4099, Fill::Uniform, {37, 1, 1, 64, 1}); }});
  cases.push_back({"off_runs_nothing", [] {
                     Graph g(device());
                     TensorId l = add_input(g, {.name = "logits", .max_shape = {2, 131}});
                     SymbolId on = add_symbol(g, {.name = "on", .lo = 0, .hi = 1});
                     ops::add_logsumexp(g, {.name = "lse", .logits = l, .enable = on});
                     build(g);
                     SymbolInput off{on, 0};
                     update(g, {}, {&off, 1});
                     EXPECT_EQ(active_dispatches(g), 0u);
                     SymbolInput yes{on, 1};
                     update(g, {}, {&yes, 1});
                     EXPECT_EQ(active_dispatches(g), 2u);
                   }});
  return cases;
}

WGRT_OP_CASES(Argmax, argmax_cases);
WGRT_OP_CASES(TopK, top_k_cases);
WGRT_OP_CASES(LogSumExp, logsumexp_cases);

// sample_pick after top_k: the GPU's pick against ref::sample_pick on the GPU's own sorted
// candidates, over many draws and parameter sets; a draw within 1e-5 of a boundary may go
// either way (f32 vs double).
TEST(SamplePick, MatchesTheReferenceDraw) {
  const uint32_t vocab = 3001, k = 40;
  Graph g(device());
  TensorId logits = add_input(g, {.name = "logits", .max_shape = {1, vocab}});
  SymbolId on = add_symbol(g, {.name = "on", .lo = 0, .hi = 1});
  ops::TopKOutputs top = ops::add_top_k(g, {.name = "top_k", .logits = logits, .k = k, .enable = on});
  TensorId pick = add_input(g, {.name = "pick", .dtype = DType::U32, .max_shape = {8}});
  TensorId out = add_weight(g, {.name = "next", .dtype = DType::U32, .shape = {1}, .role = TensorRole::State});
  ops::add_sample_pick(g, {.name = "pick", .candidates = top, .pick = pick, .out = out, .enable = on});
  for (TensorId t : {top.indices, top.values, out}) mark_output(g, t);
  build(g);
  std::mt19937 rng(5);
  int checked = 0;
  struct P {
    float t, top_p, min_p;
    uint32_t k;
  };
  for (P par : {P{0.8f, 0.95f, 0.05f, 40}, P{1.5f, 1.0f, 0.0f, 40}, P{0.3f, 0.5f, 0.0f, 7}, P{1.0f, 0.9f, 0.2f, 1}}) {
    auto lv = random_floats(vocab, 17 + par.k, -4.f, 4.f);
    SymbolInput sym{on, 1};
    update(g, {}, {&sym, 1});
    write_tensor<float>(g, logits, lv);
    for (int i = 0; i < 25; ++i) {
      const ops::PickParams pp{uint32_t(rng()), par.t, par.top_p, par.min_p, par.k, 0, 0, 0};
      write_tensor(g, pick, &pp, sizeof pp);
      execute(g);
      std::vector<uint32_t> ids = read_output<uint32_t>(g, top.indices);
      std::vector<float> vals = read_output<float>(g, top.values);
      const uint32_t got = read_output<uint32_t>(g, out)[0];
      double margin = 0;
      const uint32_t want = ref::sample_pick(vals, par.k, par.t, par.top_p, par.min_p, pp.draw, &margin);
      if (margin < 1e-5) continue;
      ++checked;
      EXPECT_EQ(got, ids[want]) << "draw " << pp.draw << " T " << par.t;
    }
  }
  EXPECT_GE(checked, 90);
  // Off: the node runs no kernel and leaves `next` alone.
  const uint32_t sentinel = 0xABCDu;
  write_tensor(g, out, &sentinel, 4);
  SymbolInput off{on, 0};
  update(g, {}, {&off, 1});
  execute(g);
  EXPECT_EQ(read_output<uint32_t>(g, out)[0], sentinel);
}

// Per-row picks on one step (batched sampled decode): each row with its own parameters and
// draw, against llm::sample on the GPU's own top-k of that row given the same draw (a sampler
// copy yields it), skipping draws within f32 rounding of a boundary.
TEST(SamplePick, RowsMatchTheCpuSampler) {
  const uint32_t vocab = 2003, k = 48, rows = 4;
  Graph g(device());
  TensorId logits = add_input(g, {.name = "logits", .max_shape = {rows, vocab}, .dynamic_dims = 1});
  SymbolId on = add_symbol(g, {.name = "on", .lo = 0, .hi = 1});
  ops::TopKOutputs top = ops::add_top_k(g, {.name = "top_k", .logits = logits, .k = k, .enable = on});
  TensorId pick = add_input(g, {.name = "pick", .dtype = DType::U32, .max_shape = {rows, 8}});
  TensorId out = add_weight(g, {.name = "next", .dtype = DType::U32, .shape = {rows}, .role = TensorRole::State});
  ops::add_sample_pick(g, {.name = "pick", .candidates = top, .pick = pick, .out = out, .enable = on});
  for (TensorId t : {top.indices, top.values, out}) mark_output(g, t);
  build(g);
  struct P {
    float t, top_p, min_p;
    uint32_t k;
  };
  const P par[rows] = {{0.8f, 0.95f, 0.05f, 40}, {1.5f, 1.0f, 0.0f, 48}, {0.3f, 0.5f, 0.0f, 7}, {1.0f, 0.9f, 0.2f, 1}};
  int checked = 0;
  for (uint32_t live : {4u, 3u}) {
    auto lv = random_floats(size_t(live) * vocab, 29 + live, -4.f, 4.f);
    ShapeInput sh{logits, {live, vocab}};
    SymbolInput sym{on, 1};
    update(g, {&sh, 1}, {&sym, 1});
    write_tensor<float>(g, logits, lv);
    for (uint64_t trial = 0; trial < 20; ++trial) {
      std::vector<llm::Sampler> samplers;
      std::vector<ops::PickParams> pp(rows);
      for (uint32_t r = 0; r < live; ++r) {
        llm::SamplerParams sp{.temperature = par[r].t, .top_k = par[r].k, .top_p = par[r].top_p,
                              .min_p = par[r].min_p, .seed = trial * 7 + r};
        samplers.push_back(llm::make_sampler(sp));
        llm::Sampler copy = samplers.back();
        pp[r] = {llm::next_draw(copy), par[r].t, par[r].top_p, par[r].min_p, par[r].k, 0, 0, 0};
      }
      write_tensor<ops::PickParams>(g, pick, pp);
      execute(g);
      const std::vector<uint32_t> ids = read_output<uint32_t>(g, top.indices);
      const std::vector<float> vals = read_output<float>(g, top.values);
      const std::vector<uint32_t> got = read_output<uint32_t>(g, out);
      for (uint32_t r = 0; r < live; ++r) {
        std::vector<float> row(vals.begin() + r * k, vals.begin() + (r + 1) * k);
        double margin = 0;
        ref::sample_pick(row, par[r].k, par[r].t, par[r].top_p, par[r].min_p, pp[r].draw, &margin);
        if (margin < 1e-5) continue;
        std::vector<llm::Candidate> cands(k);
        for (uint32_t i = 0; i < k; ++i) cands[i] = {int32_t(ids[r * k + i]), row[i]};
        EXPECT_EQ(int32_t(got[r]), llm::sample(samplers[r], cands)) << "row " << r << " trial " << trial;
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 100);
}

}  // namespace
}  // namespace wgrt::test
