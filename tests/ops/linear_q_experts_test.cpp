// linear_q's mixture-of-experts node (linear_q.h add_linear_q_experts) against the CPU
// reference: each (token, slot) pair's row of x times its expert's block of the weight
// (ref::linear on the dequantized rows), plain (down: a row of x per pair) and with the SwiGLU
// epilogue over the expert's interleaved (gate, up) rows (gate|up: a row of x per token), f32
// and int8 activations, the live pairs changing step to step on one graph, through the gemv and
// (from gemm_from pairs) the grouped gemm over the pairs moe_sort groups by expert. Tolerances as
// linear_q_fused_test.cpp's gemv: 1e-5 * sum_k |x w|, plus the int8 activation rounding bound
// (groups of 32) where the kernel takes int8 x (the gemm always); SwiGLU carries them through
// silu(g) * u.
#include <fmt/format.h>

#include <cmath>

#include "ops/linear_q/linear_q.h"
#include "ops/linear_q/linear_q_build.h"
#include "ops/moe/moe.h"
#include "ops/quant/quant.h"
#include "reference/linear_q_ref.h"
#include "reference/moe_ref.h"
#include "reference/norm_ref.h"
#include "reference/reference.h"
#include "reference/silu_mul_ref.h"
#include "support/device.h"
#include "support/op_harness.h"
#include "support/quant_weights.h"
#include "support/random.h"

namespace wgrt::test {
namespace {

using namespace graph;
using ops::QuantFormat;

struct ExpertsCase {
  QuantFormat format;
  uint32_t gs, k;
  uint32_t n_experts, n_expert;  // experts, and rows per expert
  uint32_t slots;                // pairs per token
  bool swiglu;                   // gate|up (x a row per token) or down (x a row per pair)
  int gemv_int8;
  std::vector<uint32_t> tokens;  // live tokens per step
  bool norm = false;             // x RMS-normalized inside the node (the FFN's norm)
  // gate|up choosing each token's experts itself from router logits [tokens, n_experts]
  // (add_linear_q_experts_routed), weights normalized over the chosen (route_norm) or all.
  bool routed = false, route_norm = true;
  uint32_t gemm_from = 0;  // pairs from which the grouped gemm serves (0: the default)
};

// Rows [r0, r0 + n) of w [*, k].
std::vector<float> rows_of(const std::vector<float>& w, uint32_t k, uint32_t r0, uint32_t n) {
  return {w.begin() + ptrdiff_t(r0) * k, w.begin() + ptrdiff_t(r0 + n) * k};
}

// An expert's gate (or up) rows: gate j at (j / 16) * 32 + j % 16 of its block, up 16 rows on.
std::vector<float> expert_half(const std::vector<float>& block, uint32_t k, uint32_t n, bool up) {
  std::vector<float> out;
  for (uint32_t j = 0; j < n / 2; ++j) {
    const uint32_t row = (j / 16) * 32 + j % 16 + (up ? 16 : 0);
    out.insert(out.end(), block.begin() + ptrdiff_t(row) * k, block.begin() + ptrdiff_t(row + 1) * k);
  }
  return out;
}

// moe_sort's outputs for the pairs' experts ids: `order` lists every pair once, expert by
// expert; the tiles cover each expert's places in order with runs of at most 64 (the gemm's
// rows), in order, and the entries after the last have no rows.
void check_sort(Graph& g, const std::vector<uint32_t>& ids, uint32_t experts) {
  const std::vector<uint32_t> order = read_output<uint32_t>(g, find_tensor(g, "y.order"));
  const std::vector<uint32_t> tiles = read_output<uint32_t>(g, find_tensor(g, "y.tiles"));
  ASSERT_EQ(order.size(), ids.size());
  std::vector<uint32_t> seen(ids.size()), first(experts + 1);
  for (uint32_t id : ids) ++first[id + 1];
  for (uint32_t e = 0; e < experts; ++e) first[e + 1] += first[e];
  for (uint32_t i = 0; i < order.size(); ++i) {
    ASSERT_LT(order[i], ids.size());
    ++seen[order[i]];
    const uint32_t e = ids[order[i]];
    EXPECT_TRUE(i >= first[e] && i < first[e + 1]) << "place " << i << " holds pair " << order[i] << " of expert " << e;
  }
  EXPECT_EQ(seen, std::vector<uint32_t>(ids.size(), 1u));
  uint32_t covered = 0, t = 0;
  for (uint32_t e = 0; e < experts; ++e)
    for (uint32_t at = first[e]; at < first[e + 1]; at += ops::kLinearQGemmBM, ++t) {
      ASSERT_LT(4 * t + 3, tiles.size());
      const uint32_t rows = std::min(ops::kLinearQGemmBM, first[e + 1] - at);
      EXPECT_EQ((std::vector<uint32_t>{tiles[4 * t], tiles[4 * t + 1], tiles[4 * t + 2]}),
                (std::vector<uint32_t>{e, at, rows}));
      covered += rows;
    }
  EXPECT_EQ(covered, ids.size());
  for (; 4 * t + 2 < tiles.size(); ++t) EXPECT_EQ(tiles[4 * t + 2], 0u) << "entry " << t;
}

void run_experts(const ExpertsCase& c) {
  const uint32_t max_tokens = *std::max_element(c.tokens.begin(), c.tokens.end());
  const uint32_t max_pairs = max_tokens * c.slots;
  const uint32_t x_div = c.swiglu ? c.slots : 1;
  const uint32_t n_out = c.swiglu ? c.n_expert / 2 : c.n_expert;
  Graph g(device());
  TensorId x = add_input(g, {.name = "x", .max_shape = {max_pairs / x_div, c.k}, .dynamic_dims = 1});
  TensorId ids = add_input(g, {.name = "ids", .dtype = DType::U32, .max_shape = {max_pairs}, .dynamic_dims = 1});
  TensorId logits = add_input(g, {.name = "logits", .max_shape = {max_tokens, c.n_experts}, .dynamic_dims = 1});
  ops::QuantTensors wt = ops::add_quant_weight(g, "w", c.format, c.n_experts * c.n_expert, c.k, c.gs);
  std::optional<TensorId> nw;
  if (c.norm) nw = add_weight(g, {.name = "nw", .shape = {c.k}});
  constexpr float kEps = 1e-5f;
  const ops::LinearQExpertsDesc desc{.name = "y", .format = c.format, .gs = c.gs, .x = x, .ids = ids, .q = wt.q,
                                     .scales = wt.scales, .n_expert = c.n_expert, .x_div = x_div,
                                     .swiglu = c.swiglu, .gemv_int8 = c.gemv_int8, .norm = nw, .eps = kEps,
                                     .gemm_from = c.gemm_from};
  ops::ExpertsRouted r{};
  if (c.routed)
    r = ops::add_linear_q_experts_routed(g, desc, {.name = "route", .logits = logits, .n_used = c.slots,
                                                   .norm = c.route_norm});
  else
    r.y = ops::add_linear_q_experts(g, desc);
  const TensorId y = r.y;
  mark_output(g, y);
  if (c.routed) {
    mark_output(g, r.ids);
    mark_output(g, r.weights);
  }
  const bool gemm_runs = ops::linear_q_detail::experts_gemm_runs(device().caps);
  if (c.gemm_from && gemm_runs) {  // moe_sort's list, checked below
    mark_output(g, find_tensor(g, "y.order"));
    mark_output(g, find_tensor(g, "y.tiles"));
  }
  build(g);
  auto [w, wd] = random_quant_weight(c.format, c.n_experts * c.n_expert, c.k, c.gs, 17 + c.n_expert);
  ops::write_quant_weight(g, wt, w);
  std::vector<float> nwv;
  if (nw) {
    nwv = random_floats(c.k, 23, 0.5f, 1.5f);
    write_tensor<float>(g, *nw, nwv);
  }
  const bool gemv_int8 = ops::gemv_takes_int8(device().caps, c.gemv_int8);

  uint32_t step = 0;
  for (uint32_t tokens : c.tokens) {
    SCOPED_TRACE(fmt::format("step {}: {} tokens", step, tokens));
    const uint32_t pairs = tokens * c.slots, x_rows = pairs / x_div;
    auto xv = random_floats(size_t(x_rows) * c.k, 400 + step, -2.f, 2.f);
    std::vector<uint32_t> iv(pairs);
    for (uint32_t j = 0; j < pairs; ++j) iv[j] = (j * 7 + step * 3 + j / c.slots) % c.n_experts;
    // Past 64 pairs, most to expert 1: more than one gemm tile's rows for one expert.
    if (pairs > 64)
      for (uint32_t j = 0; j < pairs; ++j) iv[j] = j % 5 ? 1 : iv[j];
    const std::vector<float> lv = random_floats(size_t(tokens) * c.n_experts, 900 + step, -3.f, 3.f);
    const ref::MoeChoice choice = ref::moe_route(lv, tokens, c.n_experts, c.slots, c.route_norm);
    if (c.routed) iv = choice.ids;
    ++step;
    std::vector<ShapeInput> shapes = {{x, {x_rows, c.k}}, {ids, {pairs}}, {logits, {tokens, c.n_experts}}};
    std::vector<StepInput> inputs = {{x, xv.data(), xv.size() * 4}, {ids, iv.data(), iv.size() * 4},
                                     {logits, lv.data(), lv.size() * 4}};
    auto got = run_step(g, shapes, {}, inputs, y);
    ASSERT_EQ(live_shape(g, y), (Shape{pairs, n_out}));
    const bool gemm = gemm_runs && c.gemm_from && pairs >= c.gemm_from;
    const bool int8 = gemm || gemv_int8;
    if (!c.routed) {
      EXPECT_EQ(active_route(g, find_node(g, "y")), gemm ? ops::kLinearQExpertsGemm : ops::kLinearQExperts);
    }
    if (c.routed) {
      // Few tokens route in the gate|up kernel where the device's workgroup memory holds it.
      const uint32_t lanes = ops::linear_q_detail::gemv_lanes(device().caps, c.n_expert, 0, "y", 1);
      const bool in_kernel = tokens <= ops::kExpertsRoutedMaxTokens &&
                             ops::linear_q_detail::experts_routed_workgroup_bytes(lanes) <=
                                 device().caps.limits.maxComputeWorkgroupStorageSize;
      EXPECT_EQ(active_route(g, find_node(g, "y")), in_kernel ? ops::kLinearQExpertsRouted
                                                    : gemm      ? ops::kLinearQExpertsGemm
                                                                : ops::kLinearQExperts);
      EXPECT_EQ(read_output<uint32_t>(g, r.ids), choice.ids);
      std::vector<float> wb(choice.weights.size());
      for (size_t i = 0; i < wb.size(); ++i) wb[i] = 1e-6f + 4e-6f * c.n_experts * choice.weights[i];
      EXPECT_TRUE(within(read_output<float>(g, r.weights), choice.weights, wb));
    }
    if (c.norm) xv = ref::rms_norm(xv, nwv, c.k, kEps);  // what the node's rows of x become

    std::vector<float> want, bound;
    for (uint32_t j = 0; j < pairs; ++j) {
      const std::vector<float> xr = rows_of(xv, c.k, j / x_div, 1);
      const std::vector<float> block = rows_of(wd, c.k, iv[j] * c.n_expert, c.n_expert);
      auto bounds = [&](const std::vector<float>& wr, uint32_t n) {
        std::vector<float> b = ref::abs_dot(xr, wr, 1, n, c.k);
        std::vector<float> act = int8 ? ref::int8_act_error_bound(xr, wr, 1, n, c.k, 32) : std::vector<float>(n);
        for (size_t i = 0; i < b.size(); ++i) b[i] = 1e-5f * (b[i] + 1.f) + act[i] * 1.01f;
        return b;
      };
      if (!c.swiglu) {
        const std::vector<float> o = ref::linear(xr, block, {}, 1, c.n_expert, c.k), b = bounds(block, c.n_expert);
        want.insert(want.end(), o.begin(), o.end());
        bound.insert(bound.end(), b.begin(), b.end());
        continue;
      }
      const std::vector<float> wg = expert_half(block, c.k, c.n_expert, false),
                               wu = expert_half(block, c.k, c.n_expert, true);
      const std::vector<float> gate = ref::linear(xr, wg, {}, 1, n_out, c.k), up = ref::linear(xr, wu, {}, 1, n_out, c.k);
      const std::vector<float> eg = bounds(wg, n_out), eu = bounds(wu, n_out);
      const std::vector<float> o = ref::silu_mul(gate, up), ones(n_out, 1.f), act = ref::silu_mul(gate, ones);
      want.insert(want.end(), o.begin(), o.end());
      for (uint32_t i = 0; i < n_out; ++i)
        bound.push_back(float(ref::kSiluSlopeMax * eg[i] * (std::fabs(up[i]) + eu[i]) + std::fabs(act[i]) * eu[i]) +
                        1e-6f);
    }
    EXPECT_TRUE(within(got, want, bound));
    if (gemm) check_sort(g, iv, c.n_experts);
  }
}

std::vector<OpCase> experts_cases() {
  std::vector<OpCase> cases;
  for (QuantFormat f : {QuantFormat::Q4gsw, QuantFormat::Q8, QuantFormat::Q4K, QuantFormat::Q6K, QuantFormat::Q5K,
                        QuantFormat::Q50, QuantFormat::IQ4XS, QuantFormat::Q3K})
    for (bool swiglu : {false, true})
      for (int int8 : {0, 1}) {
        const uint32_t gs = ops::has_block_d(f) ? 256 : 32;
        // 96 rows an expert: a tile of 16 past the last whole 32 (swiglu: 48 outputs).
        ExpertsCase c{f, gs, 512, 5, swiglu ? 96u : 80u, 3, swiglu, int8, {1, 4, 2, 1}};
        cases.push_back({fmt::format("{}_{}{}", ops::quant_format_name(f), swiglu ? "gate_up" : "down",
                                     int8 ? "_xi8" : ""),
                         [c] { run_experts(c); }});
      }
  // The router's choice inside gate|up: few tokens in the kernel, more through moe_route first
  // (6 tokens past kExpertsRoutedMaxTokens); 12 experts (a last word of keys half padding).
  for (QuantFormat f : {QuantFormat::Q4K, QuantFormat::Q8})
    for (int int8 : {0, 1})
      for (bool route_norm : {true, false}) {
        const uint32_t gs = ops::has_block_d(f) ? 256 : 32;
        ExpertsCase c{f, gs, 512, 12, 64, 3, true, int8, {1, 4, 6, 2, 1}, f == QuantFormat::Q4K, true, route_norm};
        cases.push_back({fmt::format("{}_gate_up_routed{}{}", ops::quant_format_name(f), int8 ? "_xi8" : "",
                                     route_norm ? "" : "_softmax_all"),
                         [c] { run_experts(c); }});
      }
  // The FFN's norm inside the node: gate|up reads a row per token, down a row per pair.
  for (QuantFormat f : {QuantFormat::Q4K, QuantFormat::Q8})
    for (bool swiglu : {false, true})
      for (int int8 : {0, 1}) {
        const uint32_t gs = ops::has_block_d(f) ? 256 : 32;
        ExpertsCase c{f, gs, 512, 5, swiglu ? 96u : 80u, 3, swiglu, int8, {1, 4, 2, 1}, true};
        cases.push_back({fmt::format("{}_{}{}_norm", ops::quant_format_name(f), swiglu ? "gate_up" : "down",
                                     int8 ? "_xi8" : ""),
                         [c] { run_experts(c); }});
      }
  // The grouped gemm from 16 pairs: steps of 3 to 90 pairs over 5 or 12 experts (at 90, 72 of
  // them for one expert: two tiles), down and gate|up, routed with the norm inside; the steps
  // below 16 pairs take the gemv on the same graph.
  for (QuantFormat f : {QuantFormat::Q4gsw, QuantFormat::Q8, QuantFormat::Q4K, QuantFormat::Q6K, QuantFormat::Q5K,
                        QuantFormat::Q3K, QuantFormat::IQ4XS})
    for (bool swiglu : {false, true}) {
      const uint32_t gs = ops::has_block_d(f) ? 256 : 32;
      ExpertsCase c{f, gs, 512, 5, swiglu ? 96u : 80u, 3, swiglu, 1, {1, 12, 3, 30, 7}};
      c.gemm_from = 16;
      cases.push_back({fmt::format("{}_{}_gemm", ops::quant_format_name(f), swiglu ? "gate_up" : "down"),
                       [c] { run_experts(c); }});
    }
  for (QuantFormat f : {QuantFormat::Q4K, QuantFormat::Q8}) {
    const uint32_t gs = ops::has_block_d(f) ? 256 : 32;
    ExpertsCase c{f, gs, 512, 12, 64, 3, true, 1, {2, 12, 5, 30, 6}, true, true, f == QuantFormat::Q8};
    c.gemm_from = 16;
    cases.push_back({fmt::format("{}_gate_up_routed_gemm", ops::quant_format_name(f)), [c] { run_experts(c); }});
  }
  return cases;
}

WGRT_OP_SWEEP(LinearQExperts, experts_cases, 4);

// Shapes the node cannot run are refused when it is added, naming what is wrong.
TEST(LinearQExpertsBuild, RefusesWhatItCannotRun) {
  Graph g(device());
  TensorId x = add_input(g, {.name = "x", .max_shape = {4, 64}, .dynamic_dims = 1});
  TensorId ids = add_input(g, {.name = "ids", .dtype = DType::U32, .max_shape = {8}, .dynamic_dims = 1});
  ops::QuantTensors wt = ops::add_quant_weight(g, "w", QuantFormat::Q8, 3 * 48, 64, 32);
  auto add = [&](uint32_t n_expert, uint32_t x_div, bool swiglu) {
    return ops::add_linear_q_experts(g, {.name = fmt::format("y{}_{}_{}", n_expert, x_div, swiglu),
                                         .format = QuantFormat::Q8, .x = x, .ids = ids, .q = wt.q,
                                         .scales = wt.scales, .n_expert = n_expert, .x_div = x_div, .swiglu = swiglu});
  };
  EXPECT_THROW(add(40, 2, false), std::invalid_argument);  // 144 rows are not whole experts of 40
  EXPECT_THROW(add(48, 1, false), std::invalid_argument);  // 8 pairs need 8 rows of x
  EXPECT_THROW(add(48, 2, true), std::invalid_argument);   // 48 is not a multiple of 32
  EXPECT_NO_THROW(add(48, 2, false));
}

}  // namespace
}  // namespace wgrt::test
