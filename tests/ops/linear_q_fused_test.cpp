// The fused linear_q variants (linear_q.h): RMS norm first, residual add, SwiGLU over
// interleaved gate|up rows, last-row projection with an argmax, on every route, against the
// plain CPU references composed in the same order (ref::rms_norm, ref::linear, ref::silu_mul,
// ref::argmax_rows).
//
// Tolerances, per output, from the unfused op's (linear_q_test.cpp):
//   gemv, small_m: 1e-5 * sum_k |xn w| (+ |residual|), xn the normalized activations;
//   gemm:          plus the int8 activation rounding bound of xn (ref::int8_act_error_bound);
//   swiglu:        the gate and up bounds carried through silu(g) * u (|silu'| <= 1.1).
#include <fmt/format.h>

#include <cmath>
#include <span>
#include <tuple>

#include "ops/linear_q/linear_q.h"
#include "ops/quant/quant.h"
#include "reference/linear_q_ref.h"
#include "reference/norm_ref.h"
#include "reference/quant_ref.h"
#include "reference/reference.h"
#include "reference/sampling_ref.h"
#include "reference/silu_mul_ref.h"
#include "support/device.h"
#include "support/op_harness.h"
#include "support/quant_weights.h"
#include "support/random.h"

namespace wgrt::test {
namespace {

using namespace graph;
using ops::QuantFormat;

struct FusedCase {
  QuantFormat format;
  uint32_t gs, k, n, max_m;
  std::vector<uint32_t> steps;
  bool norm = false, residual = false, swiglu = false, bias = false;
  bool gelu = false;  // swiglu's gate through GELU (tanh; GeGLU) instead of SiLU
  bool head = false;  // last_row + argmax
  int gemv_int8 = -1;  // LinearQDesc::gemv_int8 (-1: the device's choice)
  uint32_t gemv_x = 0, gemv_m_from = 0;  // LinearQDesc's (0: the device's choice)
};

graph::RouteId expected_route(const FusedCase& c, uint32_t m) {
  return c.head ? ops::kLinearQGemv : ops::linear_q_route(device().caps, c.n, m, c.gemv_int8, c.gemv_x, c.gemv_m_from);
}

// Whether the route takes int8 activations: the gemm, q6k's small_m route (its gemm too),
// gemv_m, and the gemv and gemv_multi (and gemv_m's fallback for the formats it does not take)
// where the device's choice or the case says so.
bool int8_route(const FusedCase& c, uint32_t m) {
  const graph::RouteId r = expected_route(c, m);
  if (r == ops::kLinearQGemvM && ops::gemv_m_takes(c.format)) return true;
  if (r == ops::kLinearQGemv || r == ops::kLinearQGemvMulti || r == ops::kLinearQGemvM)
    return ops::gemv_takes_int8(device().caps, c.gemv_int8);
  return r == ops::kLinearQGemm || (r == ops::kLinearQSmallM && c.format == QuantFormat::Q6K);
}

// The activations' int8 groups: 32 in the gemv and gemv_multi (and gemv_m's fallback) and for
// the K-quants, gs in gemv_m and the gemms.
uint32_t act_group(const FusedCase& c, uint32_t m) {
  const graph::RouteId r = expected_route(c, m);
  const bool gemv = r == ops::kLinearQGemv || r == ops::kLinearQGemvMulti ||
                    (r == ops::kLinearQGemvM && !ops::gemv_m_takes(c.format));
  return ops::is_k_quant(c.format) || gemv ? 32 : c.gs;
}

// Reference rows of the fused weight: gate row j at (j / 16) * 32 + j % 16, up 16 rows on.
std::vector<float> pick_rows(const std::vector<float>& w, uint32_t k, uint32_t n, bool up) {
  std::vector<float> out;
  for (uint32_t j = 0; j < n / 2; ++j) {
    const size_t row = size_t(j / 16) * 32 + j % 16 + (up ? 16 : 0);
    out.insert(out.end(), w.begin() + row * k, w.begin() + (row + 1) * k);
  }
  return out;
}

void run_fused(const FusedCase& c) {
  Graph g(device());
  TensorId x = add_input(g, {.name = "x", .max_shape = {c.max_m, c.k}, .dynamic_dims = 1});
  ops::QuantTensors wt = ops::add_quant_weight(g, "w", c.format, c.n, c.k, c.gs);
  std::optional<TensorId> norm, res, bias, am;
  if (c.norm) norm = add_weight(g, {.name = "norm", .shape = {c.k}});
  if (c.residual) res = add_input(g, {.name = "res", .max_shape = {c.max_m, c.n}, .dynamic_dims = 1});
  if (c.bias) bias = add_weight(g, {.name = "bias", .shape = {c.n}});
  if (c.head) am = add_weight(g, {.name = "next", .dtype = DType::U32, .shape = {1}, .role = TensorRole::State});
  TensorId y = ops::add_linear_q(g, {.name = "y", .format = c.format, .gs = c.gs, .x = x, .q = wt.q,
                                     .scales = wt.scales, .bias = bias, .norm = norm, .eps = 1e-5f,
                                     .residual = res, .swiglu = c.swiglu,
                                     .act = c.gelu ? ops::GateAct::GeluTanh : ops::GateAct::Silu, .last_row = c.head,
                                     .argmax_out = am, .gemv_int8 = c.gemv_int8, .gemv_x = c.gemv_x,
                                     .gemv_m_from = c.gemv_m_from});
  NodeId node = find_node(g, "y");
  mark_output(g, y);
  if (am) mark_output(g, *am);
  build(g);

  auto [w, wd] = random_quant_weight(c.format, c.n, c.k, c.gs, 11 + c.n);
  ops::write_quant_weight(g, wt, w);
  std::vector<float> nv, bv;
  if (norm) {
    nv = random_floats(c.k, 5, 0.5f, 1.5f);
    write_tensor<float>(g, *norm, nv);
  }
  if (bias) {
    bv = random_floats(c.n, 6, -1.f, 1.f);
    write_tensor<float>(g, *bias, bv);
  }

  uint32_t step = 0;
  for (uint32_t m : c.steps) {
    SCOPED_TRACE(fmt::format("step {}: M = {}", step, m));
    auto xv = random_floats(size_t(m) * c.k, 200 + step, -2.f, 2.f);
    auto rv = random_floats(size_t(m) * c.n, 300 + step++, -1.f, 1.f);
    std::vector<ShapeInput> shapes = {{x, {m, c.k}}};
    std::vector<StepInput> inputs = {{x, xv.data(), xv.size() * 4}};
    if (res) {
      shapes.push_back({*res, {m, c.n}});
      inputs.push_back({*res, rv.data(), rv.size() * 4});
    }
    auto got = run_step(g, shapes, {}, inputs, y);
    ASSERT_EQ(active_route(g, node), expected_route(c, m));

    // The reference: the rows the op projects, normalized, times the weight.
    const uint32_t rows = c.head ? 1 : m;
    std::vector<float> xr(xv.end() - ptrdiff_t(rows) * c.k, xv.end());
    std::vector<float> xn = c.norm ? ref::rms_norm(xr, nv, c.k, 1e-5) : xr;
    auto bounds = [&](const std::vector<float>& wrows, uint32_t n) {
      std::vector<float> b = ref::abs_dot(xn, wrows, rows, n, c.k);
      const bool gemm = int8_route(c, m);
      std::vector<float> act = gemm ? ref::int8_act_error_bound(xn, wrows, rows, n, c.k, act_group(c, m)) : std::vector<float>();
      for (size_t i = 0; i < b.size(); ++i) b[i] = 1e-5f * (b[i] + 1.f) + (gemm ? act[i] * 1.01f : 0.f);
      return b;
    };
    std::vector<float> want, bound;
    if (c.swiglu) {
      std::vector<float> wg = pick_rows(wd, c.k, c.n, false), wu = pick_rows(wd, c.k, c.n, true);
      std::vector<float> bg_, bu_;
      for (uint32_t j = 0; j < c.n / 2; ++j)
        if (!bv.empty()) {
          bg_.push_back(bv[(j / 16) * 32 + j % 16]);
          bu_.push_back(bv[(j / 16) * 32 + j % 16 + 16]);
        }
      std::vector<float> gate = ref::linear(xn, wg, bg_, rows, c.n / 2, c.k);
      std::vector<float> up = ref::linear(xn, wu, bu_, rows, c.n / 2, c.k);
      std::vector<float> eg = bounds(wg, c.n / 2), eu = bounds(wu, c.n / 2);
      want = c.gelu ? ref::gelu_mul(gate, up) : ref::silu_mul(gate, up);
      const std::vector<float> ones(gate.size(), 1.f);
      const std::vector<float> act = c.gelu ? ref::gelu_mul(gate, ones) : ref::silu_mul(gate, ones);
      const double slope = c.gelu ? ref::kGeluTanhSlopeMax : ref::kSiluSlopeMax;
      for (size_t i = 0; i < want.size(); ++i)
        bound.push_back(float(slope * eg[i] * (std::fabs(up[i]) + eu[i]) + std::fabs(act[i]) * eu[i]) + 1e-6f);
    } else {
      want = ref::linear(xn, wd, bv, rows, c.n, c.k);
      bound = bounds(wd, c.n);
      if (c.residual)
        for (size_t i = 0; i < want.size(); ++i) {
          want[i] += rv[i];
          bound[i] += 1e-6f * std::fabs(rv[i]);
        }
    }
    ASSERT_EQ(live_shape(g, y), (Shape{rows, c.swiglu ? c.n / 2 : c.n}));
    EXPECT_TRUE(within(got, want, bound));
    if (c.head) {
      // The id is the argmax of the logits the kernel wrote (ties to the lower index) ...
      std::vector<uint32_t> id = read_output<uint32_t>(g, *am);
      EXPECT_EQ(id[0], ref::argmax_rows(got, c.n)[0]);
      // ... and the reference's argmax where it leads by more than the tolerance.
      const uint32_t best = ref::argmax_rows(want, c.n)[0];
      bool clear = true;
      for (uint32_t j = 0; j < c.n; ++j)
        if (j != best && want[j] >= want[best] - 2 * (bound[j] + bound[best])) clear = false;
      if (clear) {
        EXPECT_EQ(id[0], best);
      }
    }
  }
}

std::vector<OpCase> fused_cases() {
  std::vector<OpCase> cases;
  struct V {
    const char* name;
    bool norm, residual, swiglu, bias, head;
  };
  const V variants[] = {
      {"norm", true, false, false, false, false},      {"residual", false, true, false, true, false},
      {"norm_residual", true, true, false, false, false}, {"swiglu", false, false, true, false, false},
      {"norm_swiglu", true, false, true, true, false},  {"head", true, false, false, false, true},
  };
  for (QuantFormat f : {QuantFormat::Q4gsw, QuantFormat::Q8})
    for (const V& v : variants)
      for (uint32_t gs : {32u, 128u}) {
        FusedCase c{f, gs, gs * 5, v.swiglu ? 96u : 131u, 37, {1, 5, 37, 1, 8, 1}};
        c.norm = v.norm, c.residual = v.residual, c.swiglu = v.swiglu, c.bias = v.bias, c.head = v.head;
        if (v.head) c.n = 4099;  // several gemv workgroups' partials
        for (int int8 : {0, 1}) {
          c.gemv_int8 = int8;
          cases.push_back({fmt::format("{}_{}_gs{}{}", f == QuantFormat::Q4gsw ? "q4" : "q8", v.name, gs,
                                       int8 ? "_xi8" : ""),
                           [c] { run_fused(c); }});
        }
      }
  // A head of 1,101 gemv workgroups: past the 1,024 partials argmax_final reads in its first turn.
  {
    FusedCase c{QuantFormat::Q4gsw, 32, 64, 16 * 1100 + 3, 8, {1, 3, 1}};
    c.norm = true, c.head = true;
    cases.push_back({"q4_head_1101_partials", [c] { run_fused(c); }});
  }
  // The K-quants from random GGUF blocks: every variant on every route (q6k: gemm from 2 rows).
  for (QuantFormat f : {QuantFormat::Q4K, QuantFormat::Q5K, QuantFormat::Q6K, QuantFormat::IQ4XS, QuantFormat::Q2K,
                        QuantFormat::Q3K})
    for (const V& v : variants) {
      const uint32_t gs = ops::has_block_d(f) ? 256 : 32;
      // q2k / q3k: K = 5 blocks, 20 of their 64-value gemv chunks: more than one turn of 16 lanes.
      const uint32_t k = f == QuantFormat::Q2K || f == QuantFormat::Q3K ? 1280 : 512;
      FusedCase c{f, gs, k, v.swiglu ? 96u : 131u, 37, {1, 5, 37, 1, 8, 2, 1}};
      c.norm = v.norm, c.residual = v.residual, c.swiglu = v.swiglu, c.bias = v.bias, c.head = v.head;
      if (v.head) c.n = 4099;
      for (int int8 : {0, 1}) {
        c.gemv_int8 = int8;
        cases.push_back({fmt::format("{}_{}{}", ops::quant_format_name(f), v.name, int8 ? "_xi8" : ""),
                         [c] { run_fused(c); }});
      }
    }
  // Q4_1, Q5_0, Q5_1, IQ4_NL from random GGUF blocks, K = 15 groups (the fifth-bit words padded).
  for (QuantFormat f : {QuantFormat::Q41, QuantFormat::Q50, QuantFormat::Q51, QuantFormat::IQ4NL})
    for (const V& v : variants) {
      FusedCase c{f, 32, 480, v.swiglu ? 96u : 131u, 37, {1, 5, 37, 1, 8, 2, 1}};
      c.norm = v.norm, c.residual = v.residual, c.swiglu = v.swiglu, c.bias = v.bias, c.head = v.head;
      if (v.head) c.n = 4099;
      for (int int8 : {0, 1}) {
        c.gemv_int8 = int8;
        cases.push_back({fmt::format("{}_{}{}", ops::quant_format_name(f), v.name, int8 ? "_xi8" : ""),
                         [c] { run_fused(c); }});
      }
    }
  // gemv_multi, forced (CPU drivers take gemv_m instead): 2..16 rows, 4 (and 2) rows of x per
  // workgroup; q3k's parts run the gemv per row of x inside the route.
  for (QuantFormat f : {QuantFormat::Q4gsw, QuantFormat::Q8, QuantFormat::Q4K, QuantFormat::Q5K, QuantFormat::Q6K,
                        QuantFormat::Q51, QuantFormat::Q3K})
    for (const V& v : variants) {
      if (v.head) continue;  // the head projects one row: the gemv
      const uint32_t gs = ops::has_block_d(f) ? 256 : f == QuantFormat::Q8 ? 128 : 32;
      const uint32_t k = f == QuantFormat::Q3K ? 1280 : 512;
      for (uint32_t x : {4u, 2u}) {
        if (x == 2 && f != QuantFormat::Q4gsw && f != QuantFormat::Q6K) continue;
        FusedCase c{f, gs, k, v.swiglu ? 96u : 131u, 37, {1, 5, 3, 16, 2, 37, 7}};
        c.norm = v.norm, c.residual = v.residual, c.swiglu = v.swiglu, c.bias = v.bias;
        c.gemv_int8 = 1, c.gemv_x = x, c.gemv_m_from = ops::kLinearQGemvMaxRows + 1;
        cases.push_back({fmt::format("{}_{}_gemv_multi{}", ops::quant_format_name(f), v.name, x),
                         [c] { run_fused(c); }});
      }
    }
  return cases;
}

WGRT_OP_SWEEP(LinearQFused, fused_cases, 5);

// GeGLU (Gemma's FFN) in the swiglu epilogues: the norm, gate|up and gelu_tanh(gate) * up in one
// node, on each route the steps take (the gemv, gemv_m or gemv_multi, the gemm and its silu_mul).
std::vector<OpCase> geglu_cases() {
  std::vector<OpCase> cases;
  for (auto [f, gs, int8] : {std::tuple{QuantFormat::Q4gsw, 32u, 0}, {QuantFormat::Q8, 128u, 1},
                             {QuantFormat::Q4K, 32u, 1}}) {
    FusedCase c{f, gs, f == QuantFormat::Q4K ? 512u : gs * 5, 96, 37, {1, 5, 37, 1, 8, 2, 1}};
    c.norm = true, c.swiglu = true, c.bias = true, c.gelu = true, c.gemv_int8 = int8;
    cases.push_back({fmt::format("{}_norm_geglu{}", ops::quant_format_name(f), int8 ? "_xi8" : ""),
                     [c] { run_fused(c); }});
  }
  return cases;
}

WGRT_OP_CASES(LinearQGeglu, geglu_cases);

// q6k (GGUF Q6_K blocks kept as blocks): the gemv, plain and as the output head (norm, last row,
// argmax), against f32 math on the reference's reading of the blocks. `split`: the weight's
// rows as several tensors (a matrix past the storage binding limit, as the loader splits it),
// each repacked on its own.
void run_q6k(uint32_t n, uint32_t k, bool head, int int8, std::vector<uint32_t> split = {}) {
  if (split.empty()) split = {n};
  Graph g(device());
  const uint32_t max_m = head ? 9 : 1;
  TensorId x = add_input(g, {.name = "x", .max_shape = {max_m, k}, .dynamic_dims = 1});
  std::vector<ops::QuantTensors> parts;
  for (uint32_t r : split) parts.push_back(ops::add_quant_weight(g, fmt::format("w{}", parts.size()), QuantFormat::Q6K,
                                                                 r, k, 256));
  std::optional<TensorId> norm, am;
  if (head) {
    norm = add_weight(g, {.name = "norm", .shape = {k}});
    am = add_weight(g, {.name = "next", .dtype = DType::U32, .shape = {1}, .role = TensorRole::State});
  }
  ops::LinearQDesc d{.name = "y", .format = QuantFormat::Q6K, .gs = 256, .x = x, .q = parts[0].q,
                     .scales = parts[0].scales, .norm = norm, .last_row = head, .argmax_out = am, .gemv_int8 = int8};
  for (size_t i = 1; i < parts.size(); ++i) d.more.push_back({QuantFormat::Q6K, 256, parts[i].q, parts[i].scales});
  TensorId y = ops::add_linear_q(g, d);
  mark_output(g, y);
  if (am) mark_output(g, *am);
  build(g);
  std::vector<uint8_t> blocks = test::random_q6_k_blocks(size_t(n) * k / 256, n + k);
  const size_t row_bytes = k / 256 * 210;
  for (size_t i = 0, r0 = 0; i < parts.size(); r0 += split[i++])
    ops::write_quant_weight(g, parts[i],
                            ops::repack_gguf_q6_k(std::span(blocks).subspan(r0 * row_bytes, split[i] * row_bytes),
                                                  split[i], k));
  const std::vector<float> wd = ref::dequant_gguf_q6_k(blocks, size_t(n) * k);
  std::vector<float> nv;
  if (norm) {
    nv = random_floats(k, 3, 0.5f, 1.5f);
    write_tensor<float>(g, *norm, nv);
  }
  for (uint32_t m : head ? std::vector<uint32_t>{1, 9, 4} : std::vector<uint32_t>{1, 1}) {
    SCOPED_TRACE(fmt::format("M = {}", m));
    auto xv = random_floats(size_t(m) * k, 50 + m, -2.f, 2.f);
    ShapeInput s{x, {m, k}};
    StepInput in{x, xv.data(), xv.size() * 4};
    auto got = run_step(g, {&s, 1}, {}, {&in, 1}, y);
    std::vector<float> xr(xv.end() - ptrdiff_t(k), xv.end());
    std::vector<float> xn = head ? ref::rms_norm(xr, nv, k, 1e-5) : xr;
    std::vector<float> want = ref::linear(xn, wd, {}, 1, n, k), bound = ref::abs_dot(xn, wd, 1, n, k);
    const bool xi8 = ops::gemv_takes_int8(device().caps, int8);
    std::vector<float> act = xi8 ? ref::int8_act_error_bound(xn, wd, 1, n, k, 32) : std::vector<float>(n, 0.f);
    for (uint32_t i = 0; i < n; ++i) bound[i] = 1e-5f * (bound[i] + 1.f) + 1.01f * act[i];
    EXPECT_TRUE(within(got, want, bound));
    if (am) {
      EXPECT_EQ(read_output<uint32_t>(g, *am)[0], ref::argmax_rows(got, n)[0]);
    }
  }
}

TEST(LinearQ6K, GemvMatchesTheBlocks) { run_q6k(131, 512, false, 0); }
TEST(LinearQ6K, GemvWithInt8ActivationsMatchesTheBlocks) { run_q6k(131, 512, false, 1); }
TEST(LinearQ6K, OutputHeadMatchesTheBlocks) { run_q6k(4099, 768, true, -1); }
// The output head of a vocabulary split by rows: each part's argmax partials follow the last's.
TEST(LinearQ6K, OutputHeadSplitByRowsMatchesTheBlocks) { run_q6k(4099, 768, true, -1, {2048, 1024, 1027}); }
TEST(LinearQ6K, GemvSplitByRowsMatchesTheBlocks) { run_q6k(131, 512, false, 1, {64, 67}); }
// Several weights of different formats sharing one output (q|k in Q4_K, v in Q6_K, as a Q4_K_M
// file stores them): with the norm, a bias and a residual, on every route, against f32 math on
// the weights' rows one after the other.
void run_parts(std::vector<QuantFormat> formats, bool residual) {
  const uint32_t k = 512, max_m = 37;
  const std::vector<uint32_t> rows = {48, 32, 16, 24};
  Graph g(device());
  TensorId x = add_input(g, {.name = "x", .max_shape = {max_m, k}, .dynamic_dims = 1});
  uint32_t n = 0;
  std::vector<ops::QuantTensors> wts;
  std::vector<float> wd;
  for (size_t i = 0; i < formats.size(); ++i) {
    const uint32_t gs = ops::has_block_d(formats[i]) ? 256 : 32;
    wts.push_back(ops::add_quant_weight(g, fmt::format("w{}", i), formats[i], rows[i], k, gs));
    n += rows[i];
  }
  TensorId norm = add_weight(g, {.name = "norm", .shape = {k}});
  TensorId bias = add_weight(g, {.name = "bias", .shape = {n}});
  std::optional<TensorId> res;
  if (residual) res = add_input(g, {.name = "res", .max_shape = {max_m, n}, .dynamic_dims = 1});
  ops::LinearQDesc d{.name = "y", .format = formats[0], .gs = ops::has_block_d(formats[0]) ? 256u : 32u, .x = x,
                     .q = wts[0].q, .scales = wts[0].scales, .bias = bias, .norm = norm, .residual = res};
  for (size_t i = 1; i < formats.size(); ++i)
    d.more.push_back({formats[i], ops::has_block_d(formats[i]) ? 256u : 32u, wts[i].q, wts[i].scales});
  TensorId y = ops::add_linear_q(g, d);
  mark_output(g, y);
  build(g);
  for (size_t i = 0; i < formats.size(); ++i) {
    auto [w, deq] = random_quant_weight(formats[i], rows[i], k, 32, 70 + uint32_t(i));
    ops::write_quant_weight(g, wts[i], w);
    wd.insert(wd.end(), deq.begin(), deq.end());
  }
  auto nv = random_floats(k, 5, 0.5f, 1.5f), bv = random_floats(n, 6, -1.f, 1.f);
  write_tensor<float>(g, norm, nv);
  write_tensor<float>(g, bias, bv);
  uint32_t step = 0;
  for (uint32_t m : {1u, 5u, 37u, 2u, 8u, 1u}) {
    SCOPED_TRACE(fmt::format("M = {}", m));
    auto xv = random_floats(size_t(m) * k, 400 + step, -2.f, 2.f);
    auto rv = random_floats(size_t(m) * n, 500 + step++, -1.f, 1.f);
    std::vector<ShapeInput> shapes = {{x, {m, k}}};
    std::vector<StepInput> inputs = {{x, xv.data(), xv.size() * 4}};
    if (res) {
      shapes.push_back({*res, {m, n}});
      inputs.push_back({*res, rv.data(), rv.size() * 4});
    }
    auto got = run_step(g, shapes, {}, inputs, y);
    std::vector<float> xn = ref::rms_norm(xv, nv, k, 1e-5);
    std::vector<float> want = ref::linear(xn, wd, bv, m, n, k), bound = ref::abs_dot(xn, wd, m, n, k);
    // Any kernel of m > 1 may take int8 activations (q6k's gemm serves 2..7 rows too), and the
    // gemv where the device's choice says so.
    const bool int8 = m > 1 || ops::gemv_takes_int8(device().caps);
    std::vector<float> act = ref::int8_act_error_bound(xn, wd, m, n, k, 32);
    for (size_t i = 0; i < want.size(); ++i) {
      bound[i] = 1e-5f * (bound[i] + 1.f) + (int8 ? act[i] * 1.01f : 0.f);
      if (res) want[i] += rv[i];
    }
    EXPECT_TRUE(within(got, want, bound));
  }
}

TEST(LinearQParts, Q4KWithQ6KMatchesTheConcatenatedWeights) { run_parts({QuantFormat::Q4K, QuantFormat::Q6K}, false); }
TEST(LinearQParts, ThreeFormatsWithResidual) {
  run_parts({QuantFormat::Q5K, QuantFormat::Q4K, QuantFormat::Q6K}, true);
}
TEST(LinearQParts, Q4_1Q5_0Q5_1WithIq4XsAndResidual) {
  run_parts({QuantFormat::Q51, QuantFormat::Q41, QuantFormat::Q50, QuantFormat::IQ4XS}, true);
}
// An IQ4_XS file's mix where rows are not whole 256-value blocks: IQ4_NL beside IQ4_XS and Q8.
TEST(LinearQParts, Iq4NlWithIq4XsAndQ8) {
  run_parts({QuantFormat::IQ4NL, QuantFormat::IQ4XS, QuantFormat::Q8}, false);
}
// A Q2_K / Q3_K file's mix (q|k in Q2_K or Q3_K, v in Q3_K or Q4_K).
TEST(LinearQParts, Q2KQ3KWithQ4KAndResidual) {
  run_parts({QuantFormat::Q2K, QuantFormat::Q3K, QuantFormat::Q4K}, true);
}
TEST(LinearQParts, RejectsSwigluAndUnalignedArgmax) {
  Graph g(device());
  TensorId x = add_input(g, {.name = "x", .max_shape = {4, 256}, .dynamic_dims = 1});
  ops::QuantTensors a = ops::add_quant_weight(g, "a", QuantFormat::Q4K, 32, 256, 32);
  ops::QuantTensors b = ops::add_quant_weight(g, "b", QuantFormat::Q6K, 32, 256, 256);
  ops::LinearQDesc d{.name = "y", .format = QuantFormat::Q4K, .gs = 32, .x = x, .q = a.q, .scales = a.scales,
                     .swiglu = true};
  d.more.push_back({QuantFormat::Q6K, 256, b.q, b.scales});
  EXPECT_THROW(ops::add_linear_q(g, d), std::invalid_argument);
  // The argmax epilogue needs every part but the last in whole 16-row workgroups.
  ops::QuantTensors c = ops::add_quant_weight(g, "c", QuantFormat::Q4K, 40, 256, 32);
  TensorId am = add_weight(g, {.name = "am", .dtype = DType::U32, .shape = {1}, .role = TensorRole::State});
  ops::LinearQDesc h{.name = "h", .format = QuantFormat::Q4K, .gs = 32, .x = x, .q = c.q, .scales = c.scales,
                     .last_row = true, .argmax_out = am};
  h.more.push_back({QuantFormat::Q4K, 32, a.q, a.scales});
  try {
    ops::add_linear_q(g, h);
    ADD_FAILURE() << "a 40-row first part took the argmax epilogue";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("multiple of 16"), std::string::npos) << e.what();
  }
}

TEST(LinearQFusedShapes, InterleavesGateUpRows) {
  // 32 gate rows and 32 up rows of 2 words: blocks of 16 gate rows, then 16 up rows.
  std::vector<uint32_t> gate(64), up(64);
  for (uint32_t i = 0; i < 64; ++i) gate[i] = i, up[i] = 1000 + i;
  std::vector<uint32_t> out = ops::interleave_swiglu_rows(gate, up, 32, 2);
  ASSERT_EQ(out.size(), 128u);
  EXPECT_EQ(out[0], 0u);             // gate row 0
  EXPECT_EQ(out[15 * 2 + 1], 31u);   // gate row 15, word 1
  EXPECT_EQ(out[16 * 2], 1000u);     // up row 0
  EXPECT_EQ(out[32 * 2], 32u);       // gate row 16
  EXPECT_EQ(out[48 * 2 + 1], 1033u); // up row 16, word 1
  EXPECT_THROW(ops::interleave_swiglu_rows(gate, up, 30, 2), std::invalid_argument);
}

TEST(LinearQFusedShapes, RejectsBadCombinations) {
  Graph g(device());
  TensorId x = add_input(g, {.name = "x", .max_shape = {4, 96}, .dynamic_dims = 1});
  ops::QuantTensors w = ops::add_quant_weight(g, "w", QuantFormat::Q4gsw, 40, 96, 32);
  TensorId am = add_weight(g, {.name = "am", .dtype = DType::U32, .shape = {1}, .role = TensorRole::State});
  // swiglu needs N a multiple of 32; argmax needs last_row.
  EXPECT_THROW(ops::add_linear_q(g, {.name = "a", .x = x, .q = w.q, .scales = w.scales, .swiglu = true}),
               std::invalid_argument);
  EXPECT_THROW(ops::add_linear_q(g, {.name = "b", .x = x, .q = w.q, .scales = w.scales, .argmax_out = am}),
               std::invalid_argument);
}

}  // namespace
}  // namespace wgrt::test
