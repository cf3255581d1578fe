// linear_q4gsw / linear_q8 (and f16-weight linear) against CPU references, through the
// table-driven harness. Every step of every case checks the route it took.
//
// Tolerances:
//   gemv, small_m (f32 activations): |err| <= 1e-5 * sum_k |x w| (f32 accumulation order).
//   gemm, and the gemv where it takes int8 activations (ops::gemv_takes_int8; groups of 32
//   there), two checks:
//     tight: against the same activation rounding done on the CPU (ref::quantize_activations):
//            1e-5 * sum_k |x w| + one activation step on the largest term, because the GPU's
//            127 / absmax may round a value sitting on a .5 tie the other way;
//     f32:   against f32 math on the dequantized weights: the exact worst case of rounding each
//            activation to its group's int8 grid (ref::int8_act_error_bound: |dx| <= absmax/254).
//   gemm on matrix cores (ops::gemm_takes_mma and gemm_mma_bm for the weight's rows: x and the
//   decoded weights rounded to f16, f32 sums): against f32 math, |err| <= (1.5 * 2^-10 + 1e-5) * sum_k |x w| (two f16 roundings of
//   2^-11 each per product), and within the int8 bound above, which that never exceeds.
#include <fmt/format.h>

#include <cstdlib>
#include <cstring>

#include <cmath>

#include "ops/linear/linear.h"
#include "ops/linear_q/linear_q.h"
#include "ops/quant/quant.h"
#include "reference/linear_q_ref.h"
#include "reference/norm_ref.h"
#include "reference/quant_ref.h"
#include "reference/reference.h"
#include "support/device.h"
#include "support/op_harness.h"
#include "support/random.h"

namespace wgrt::test {
namespace {

using namespace graph;
using ops::QuantFormat;

std::vector<float> ref_dequant(const ops::QuantWeight& w) {
  return w.format == QuantFormat::Q4gsw ? ref::dequant_q4gsw(w.q, w.scales, w.n, w.k, w.gs)
                                        : ref::dequant_q8(w.q, w.scales, w.n, w.k, w.gs);
}

struct QCase {
  QuantFormat format;
  uint32_t gs, k, n, max_m;
  std::vector<uint32_t> steps;  // live M per step, all on one graph
  bool bias = false;
  float magnitude = 1.f;        // x and w drawn from [-magnitude, magnitude]
  uint32_t gemv_lanes = 0;      // LinearQDesc::gemv_lanes (0: the device's choice)
  int gemv_int8 = -1;           // LinearQDesc::gemv_int8 (-1: the device's choice)
  uint32_t gemv_x = 0;          // LinearQDesc::gemv_x (0: the device's choice)
  uint32_t gemv_m_from = 0;     // LinearQDesc::gemv_m_from (0: the device's choice)
};

graph::RouteId expected_route(const QCase& c, uint32_t m) {
  return ops::linear_q_route(device().caps, c.n, m, c.gemv_int8, c.gemv_x, c.gemv_m_from);
}

void run_q_case(const QCase& c) {
  if (c.gemv_lanes && c.gemv_lanes < gpu::subgroup_lanes(device().caps))
    GTEST_SKIP() << c.gemv_lanes << " gemv lanes: fewer than this device's subgroup";
  Graph g(device());
  TensorId x = add_input(g, {.name = "x", .max_shape = {c.max_m, c.k}, .dynamic_dims = 1});
  ops::QuantTensors wt = ops::add_quant_weight(g, "w", c.format, c.n, c.k, c.gs);
  std::optional<TensorId> bias;
  if (c.bias) bias = add_weight(g, {.name = "bias", .shape = {c.n}});
  TensorId y = ops::add_linear_q(g, {.name = "y", .format = c.format, .gs = c.gs, .x = x,
                                     .q = wt.q, .scales = wt.scales, .bias = bias, .gemv_lanes = c.gemv_lanes,
                                     .gemv_int8 = c.gemv_int8, .gemv_x = c.gemv_x, .gemv_m_from = c.gemv_m_from});
  NodeId node = find_node(g, "y");
  mark_output(g, y);
  build(g);

  auto wf = random_floats(size_t(c.n) * c.k, 7 + c.n, -c.magnitude, c.magnitude);
  ops::QuantWeight w = ops::quantize(c.format, wf, c.n, c.k, c.gs);
  ops::write_quant_weight(g, wt, w);
  std::vector<float> wdeq = ref_dequant(w);
  std::vector<float> bv;
  if (c.bias) {
    bv = random_floats(c.n, 3, -c.magnitude, c.magnitude);
    write_tensor<float>(g, *bias, bv);
  }

  uint32_t step = 0;
  for (uint32_t m : c.steps) {
    SCOPED_TRACE(fmt::format("step {}: M = {}", step, m));
    auto xv = random_floats(size_t(m) * c.k, 100 + step++, -c.magnitude, c.magnitude);
    ShapeInput s{x, {m, c.k}};
    StepInput in{x, xv.data(), xv.size() * 4};
    auto got = run_step(g, {&s, 1}, {}, {&in, 1}, y);
    ASSERT_EQ(active_route(g, node), expected_route(c, m));
    ASSERT_EQ(live_shape(g, y), (Shape{m, c.n}));

    std::vector<float> mass = ref::abs_dot(xv, wdeq, m, c.n, c.k);
    for (size_t i = 0; i < mass.size(); ++i) mass[i] += bv.empty() ? 0.f : std::fabs(bv[i % c.n]);
    std::vector<float> f32_want = ref::linear(xv, wdeq, bv, m, c.n, c.k);
    const bool gemv = expected_route(c, m) == ops::kLinearQGemv || expected_route(c, m) == ops::kLinearQGemvMulti;
    const bool int8 = expected_route(c, m) == ops::kLinearQGemm || expected_route(c, m) == ops::kLinearQGemvM ||
                      (gemv && ops::gemv_takes_int8(device().caps, c.gemv_int8));
    const uint32_t act_gs = gemv ? 32 : c.gs;  // the gemv quantizes x per 32 values, gemv_m and the gemm per gs
    if (!int8) {
      std::vector<float> bound(mass.size());
      for (size_t i = 0; i < mass.size(); ++i) bound[i] = 1e-5f * mass[i] + 1e-30f;
      EXPECT_TRUE(within(got, f32_want, bound)) << "f32-activation route vs f32 reference";
      continue;
    }
    // int8 activations: tight against the same rounding, bounded against f32 math.
    ref::QuantizedActivations qa = ref::quantize_activations(xv, m, c.k, act_gs);
    std::vector<float> want = ref::linear_int8_act(qa, wdeq, bv, m, c.n, c.k, act_gs);
    std::vector<float> tight(mass.size()), loose = ref::int8_act_error_bound(xv, wdeq, m, c.n, c.k, act_gs);
    for (uint32_t r = 0; r < m; ++r)
      for (uint32_t j = 0; j < c.n; ++j) {
        float step_term = 0;  // one activation step on the largest weight of the row
        for (uint32_t i = 0; i < c.k; ++i)
          step_term = std::max(step_term, qa.scales[r * (c.k / act_gs) + i / act_gs] *
                                              std::fabs(wdeq[size_t(j) * c.k + i]));
        size_t o = size_t(r) * c.n + j;
        tight[o] = 1e-5f * mass[o] + 1.01f * step_term + 1e-30f;
        loose[o] += 1e-5f * mass[o] + 1e-30f;
      }
    if (expected_route(c, m) == ops::kLinearQGemm && ops::gemm_takes_mma(device().caps) && ops::gemm_mma_bm(c.n)) {
      std::vector<float> f16_bound(mass.size());
      for (size_t i = 0; i < mass.size(); ++i) f16_bound[i] = (1.5f / 1024.f + 1e-5f) * mass[i] + 1e-30f;
      EXPECT_TRUE(within(got, f32_want, f16_bound)) << "matrix-core gemm vs f32 reference (f16 rounding bound)";
    } else {
      EXPECT_TRUE(within(got, want, tight)) << "int8-activation route vs CPU int8-activation reference";
    }
    EXPECT_TRUE(within(got, f32_want, loose)) << "int8-activation route vs f32 reference (activation rounding bound)";
  }
}

std::string fmt_name(QuantFormat f) { return f == QuantFormat::Q4gsw ? "q4" : "q8"; }

std::vector<OpCase> linear_q_cases() {
  std::vector<OpCase> cases;
  struct Shape4 {
    uint32_t m, k, gs, n;
    bool bias;
  };
  // Primes and odd counts of groups: K = 32*3, 64*7, 128*5.
  const Shape4 shapes[] = {
      {1, 96, 32, 4099, false}, {3, 96, 32, 131, true},  {7, 448, 64, 97, false},
      {37, 640, 128, 37, true}, {37, 96, 32, 1, false},  {1, 640, 128, 7, true},
      {8, 448, 64, 131, false}, {37, 448, 64, 4099, true},
      // Split K (N <= 1024): 4 slices of 288 (the last 224), 5 of 256 at gs 128, 8 of 256.
      {37, 1088, 32, 100, true}, {64, 1280, 128, 36, false}, {20, 2048, 64, 1024, true},
  };
  for (QuantFormat f : {QuantFormat::Q4gsw, QuantFormat::Q8})
    for (const Shape4& s : shapes) {
      QCase c{f, s.gs, s.k, s.n, s.m, {s.m}, s.bias};
      if (s.m > 1) c.steps.push_back(1);  // the same graph shrunk to one token
      cases.push_back({fmt::format("{}_m{}_k{}_gs{}_n{}{}", fmt_name(f), s.m, s.k, s.gs, s.n,
                                   s.bias ? "_bias" : ""),
                       [c] { run_q_case(c); }});
    }
  // Dynamic sequences on one graph through every route.
  for (QuantFormat f : {QuantFormat::Q4gsw, QuantFormat::Q8})
    for (uint32_t gs : {32u, 64u, 128u}) {
      QCase c{f, gs, gs * 3, 97, 64, {37, 1, 1, 64, 1, 2, 3, 4, 5, 6, 7, 8, 1, 9, 37}, gs == 64};
      cases.push_back({fmt::format("{}_dynamic_gs{}", fmt_name(f), gs), [c] { run_q_case(c); }});
    }
  // Large magnitudes (scales far from 1; f16 scales cover |w| up to 65504 * 7 for q4gsw).
  for (QuantFormat f : {QuantFormat::Q4gsw, QuantFormat::Q8}) {
    QCase c{f, 32, 96, 37, 16, {16, 1, 5}, true, 3e4f};
    cases.push_back({fmt::format("{}_large_values", fmt_name(f)), [c] { run_q_case(c); }});
  }
  // GEMV geometry: K past 16384 (q4) / 8192 (q8), many rows, wide K with few rows.
  struct GemvShape {
    uint32_t k, gs, n;
    bool bias;
  };
  const GemvShape gemv_shapes[] = {
      {16384 + 640, 128, 37, true}, {8192 + 96, 32, 5, false}, {96, 32, 140001, false},
      {4096, 64, 300, true},
  };
  // Each with f32 and with int8 activations (where the device has subgroups of 4 or more).
  for (QuantFormat f : {QuantFormat::Q4gsw, QuantFormat::Q8})
    for (const GemvShape& s : gemv_shapes)
      for (int int8 : {0, 1}) {
        QCase c{f, s.gs, s.k, s.n, 1, {1, 1}, s.bias};
        c.gemv_int8 = int8;
        cases.push_back({fmt::format("{}_gemv_k{}_gs{}_n{}{}{}", fmt_name(f), s.k, s.gs, s.n,
                                     s.bias ? "_bias" : "", int8 ? "_xi8" : ""),
                         [c] { run_q_case(c); }});
      }
  // Every gemv lane count a device may get (the CPU driver picks 16, the H200 64 and 32).
  for (QuantFormat f : {QuantFormat::Q4gsw, QuantFormat::Q8})
    for (uint32_t lanes : {8u, 32u, 64u})
      for (int int8 : {0, 1}) {
        QCase c{f, 64, 4096 + 448, 45, 1, {1}, true};
        c.gemv_lanes = lanes;
        c.gemv_int8 = int8;
        cases.push_back({fmt::format("{}_gemv_lanes{}{}", fmt_name(f), lanes, int8 ? "_xi8" : ""),
                         [c] { run_q_case(c); }});
      }
  // gemv_m: several rows of x over many chunks per lane, every lane count, up to 16 rows.
  for (QuantFormat f : {QuantFormat::Q4gsw, QuantFormat::Q8})
    for (uint32_t lanes : {8u, 32u, 64u}) {
      QCase c{f, 64, 4096 + 448, 45, 16, {16, 3, 9, 2}, true};
      c.gemv_lanes = lanes;
      cases.push_back({fmt::format("{}_gemv_m_lanes{}", fmt_name(f), lanes), [c] { run_q_case(c); }});
    }
  // gemv_multi (forced here: CPU drivers take gemv_m instead): 2 and 4 rows of x per workgroup,
  // live rows that fill the last workgroup and rows that do not, every lane count.
  for (QuantFormat f : {QuantFormat::Q4gsw, QuantFormat::Q8})
    for (uint32_t x : {2u, 4u})
      for (uint32_t lanes : {8u, 32u, 64u}) {
        QCase c{f, 64, 4096 + 448, 45, 16, {16, 3, 1, 9, 2, 5}, true};
        c.gemv_lanes = lanes;
        c.gemv_int8 = 1;
        c.gemv_x = x;
        c.gemv_m_from = ops::kLinearQGemvMaxRows + 1;
        cases.push_back({fmt::format("{}_gemv_multi{}_lanes{}", fmt_name(f), x, lanes), [c] { run_q_case(c); }});
      }
  return cases;
}

WGRT_OP_SWEEP(LinearQ, linear_q_cases, 2);

// Split K's slices: whole activation groups, at most 8 slices of at least 256 values, only
// where the tiles number fewer than the target; one slice (k) elsewhere.
TEST(LinearQSplit, KSlices) {
  if (std::getenv("WGRT_GEMM_SPLIT_WGS")) GTEST_SKIP() << "WGRT_GEMM_SPLIT_WGS set";
  EXPECT_EQ(ops::gemm_kslice(37, 100, 1088, 32), 288u);   // 1 tile: 4 slices (k / 256)
  EXPECT_EQ(ops::gemm_kslice(64, 36, 1280, 128), 256u);   // 5 slices of 2 groups
  EXPECT_EQ(ops::gemm_kslice(20, 1024, 2048, 64), 256u);  // 8 tiles: 8 slices
  EXPECT_EQ(ops::gemm_kslice(512, 512, 2048, 32), 256u);  // 32 tiles: 8 slices
  EXPECT_EQ(ops::gemm_kslice(512, 1024, 4096, 32), 1024u);  // 64 tiles: 4 slices
  EXPECT_EQ(ops::gemm_kslice(512, 2048, 2048, 32), 1024u);  // 128 tiles: 2 slices
  EXPECT_EQ(ops::gemm_kslice(4096, 1024, 4096, 32), 4096u);  // 512 tiles: one
  EXPECT_EQ(ops::gemm_kslice(37, 100, 384, 32), 384u);     // K under 2 x 256: one
}

// f16 weights on the f32 linear's routes: exact products of f16-rounded weights, so the f32
// tolerance applies. Split cases: the weight's rows as several tensors (a matrix past the
// storage binding limit, as the loader splits it), f16 and f32, a kernel per part. The gemv reads
// vec4 words where K allows (K 96, 448, 64, 4104: several rounds of its loads) and scalars
// elsewhere (K 2, 6). Norm cases: x RMS-normalized inside the node (in the vec4 gemv, else an
// rms_norm kernel first) against rms_norm then linear.
std::vector<OpCase> linear_f16_cases() {
  std::vector<OpCase> cases;
  struct Case {
    uint32_t k, n;
    bool bias, f16;
    std::vector<uint32_t> split;  // rows per tensor; empty: one
    bool norm = false;
  };
  for (const Case& c : {Case{96, 131, true, true, {}}, {448, 37, false, true, {}}, {2, 7, true, true, {}},
                        Case{96, 131, true, true, {48, 48, 35}}, {64, 37, false, false, {16, 21}},
                        Case{4104, 9, true, false, {}, true}, {4104, 6, false, true, {}, true},
                        Case{6, 5, false, false, {}, true}, {64, 37, false, false, {16, 21}, true}}) {
    cases.push_back({fmt::format("{}_k{}_n{}{}{}{}", c.f16 ? "f16" : "f32", c.k, c.n, c.bias ? "_bias" : "",
                                 c.split.empty() ? "" : fmt::format("_split{}", c.split.size()), c.norm ? "_norm" : ""),
                     [c] {
                       const auto [k, n, bias, f16, split0, norm] = c;
                       const std::vector<uint32_t> split = split0.empty() ? std::vector<uint32_t>{n} : split0;
                       Graph g(device());
                       const uint32_t max_m = 37;
                       TensorId x = add_input(g, {.name = "x", .max_shape = {max_m, k}, .dynamic_dims = 1});
                       std::vector<TensorId> parts;
                       for (uint32_t r : split)
                         parts.push_back(add_weight(g, {.name = fmt::format("w{}", parts.size()),
                                                        .dtype = f16 ? DType::F16 : DType::F32, .shape = {r, k}}));
                       std::optional<TensorId> b, nw;
                       if (bias) b = add_weight(g, {.name = "b", .shape = {n}});
                       if (norm) nw = add_weight(g, {.name = "nw", .shape = {k}});
                       constexpr float kEps = 1e-5f;
                       TensorId y = ops::add_linear(g, {.name = "y", .x = x, .w = parts[0],
                                                        .more = std::vector<TensorId>(parts.begin() + 1, parts.end()),
                                                        .bias = b, .norm = nw, .eps = kEps});
                       NodeId node = find_node(g, "y");
                       mark_output(g, y);
                       build(g);
                       auto wf = random_floats(size_t(n) * k, 5, -2.f, 2.f);
                       std::vector<float> wr(wf.size());
                       for (size_t i = 0, r0 = 0; i < parts.size(); r0 += split[i++]) {
                         std::vector<float> rows(wf.begin() + r0 * k, wf.begin() + (r0 + split[i]) * k);
                         std::vector<uint32_t> words(rows.size());
                         if (f16) words = ops::pack_f16(rows);
                         else std::memcpy(words.data(), rows.data(), rows.size() * 4);
                         write_tensor<uint32_t>(g, parts[i], words);
                       }
                       for (size_t i = 0; i < wr.size(); ++i)
                         wr[i] = f16 ? ref::half_to_float(ops::f32_to_f16(wf[i])) : wf[i];
                       std::vector<float> bv;
                       if (bias) {
                         bv = random_floats(n, 6);
                         write_tensor<float>(g, *b, bv);
                       }
                       std::vector<float> nwv;
                       if (norm) {
                         nwv = random_floats(k, 7, 0.5f, 1.5f);
                         write_tensor<float>(g, *nw, nwv);
                       }
                       for (uint32_t m : {max_m, 1u, 5u, 1u}) {
                         auto xv = random_floats(size_t(m) * k, m, -3.f, 3.f);
                         ShapeInput s{x, {m, k}};
                         StepInput in{x, xv.data(), xv.size() * 4};
                         auto got = run_step(g, {&s, 1}, {}, {&in, 1}, y);
                         EXPECT_EQ(active_route(g, node), m == 1 ? ops::kLinearGemv : ops::kLinearTiled);
                         const std::vector<float> xn = norm ? ref::rms_norm(xv, nwv, k, kEps) : xv;
                         // f32 sums in another order: 1e-4 + 1e-5 |y| + 2 ulps of sum_k |x w| (K 4104).
                         const std::vector<float> want = ref::linear(xn, wr, bv, m, n, k),
                                                  mags = ref::abs_dot(xn, wr, m, n, k);
                         std::vector<float> bound(want.size());
                         for (size_t i = 0; i < want.size(); ++i)
                           bound[i] = 1e-4f + 1e-5f * std::fabs(want[i]) + 2.4e-7f * mags[i];
                         EXPECT_TRUE(within(got, want, bound)) << "M " << m;
                       }
                     }});
  }
  return cases;
}

WGRT_OP_CASES(LinearF16, linear_f16_cases);

TEST(LinearQErrors, RejectsBadShapes) {
  Graph g(device());
  TensorId x = add_input(g, {.name = "x", .max_shape = {4, 100}, .dynamic_dims = 1});
  TensorId q = add_weight(g, {.name = "q", .dtype = DType::U32, .shape = {8, 12}});
  TensorId s = add_weight(g, {.name = "s", .dtype = DType::F16, .shape = {8, 3}});
  EXPECT_THROW(ops::add_linear_q(g, {.name = "y", .x = x, .q = q, .scales = s}), std::invalid_argument);
  TensorId x2 = add_input(g, {.name = "x2", .max_shape = {4, 96}, .dynamic_dims = 1});
  TensorId s2 = add_weight(g, {.name = "s2", .dtype = DType::F32, .shape = {8, 3}});
  EXPECT_THROW(ops::add_linear_q(g, {.name = "y", .x = x2, .q = q, .scales = s2}), std::invalid_argument);
  EXPECT_THROW(ops::add_linear_q(g, {.name = "y", .gs = 48, .x = x2, .q = q, .scales = s}),
               std::invalid_argument);
  TensorId w = add_weight(g, {.name = "w", .dtype = DType::F16, .shape = {8, 7}});
  TensorId x3 = add_input(g, {.name = "x3", .max_shape = {4, 7}, .dynamic_dims = 1});
  EXPECT_THROW(ops::add_linear(g, {.name = "y", .x = x3, .w = w}), std::invalid_argument);
}

}  // namespace
}  // namespace wgrt::test
