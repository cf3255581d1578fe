// x quantized ahead (linear_q.h LinearQDesc::xq_out / xq_in): a producer linear_q writes its
// output y1 and, at one row, y1's int8 blocks of 16 (times the consumer's norm weight where the
// consumer normalizes); the consumer's gemv reads its x from those blocks. Checked against the
// plain CPU references:
//   - the producer's xq row against the int8 quantization in blocks of 16 of the y1 (x nw) it
//     wrote (ref::quantize_activations' rounding, up to WGSL's division accuracy), its int8 sums
//     exactly, its sums of squares within f32 rounding;
//   - the consumer at one row against ref::linear_int8_act on those activations (times
//     1 / rms(y1) where it normalizes), within f32 rounding of the dot products;
//   - the consumer at several rows (forced gemv_multi), where it stages x from y1 as without xq,
//     against f32 math within the int8 rounding bound;
//   - an output head as consumer (norm, last_row, argmax): at one row the gemv reads xq as
//     above, past one row gemv_last stages the last row; the argmax is the best of its logits.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ops/linear_q/linear_q.h"
#include "reference/linear_q_ref.h"
#include "reference/norm_ref.h"
#include "reference/reference.h"
#include "reference/silu_mul_ref.h"
#include "support/device.h"
#include "support/op_harness.h"
#include "support/quant_weights.h"
#include "support/random.h"
#include "support/xq_row.h"

namespace wgrt::test {
namespace {

using namespace graph;
using ops::QuantFormat;

struct XqCase {
  QuantFormat producer, consumer;
  enum Kind { Residual, SwiGlu, Plain, Head } kind;  // Residual: + a residual, the consumer normalizes;
                                                     // Head: that, the consumer last_row + argmax
  uint32_t max_m = 1;                          // > 1: gemv_multi forced, steps of several rows too
  std::vector<uint32_t> steps = {1, 1};
};

constexpr uint32_t kK0 = 256, kK1 = 512, kN2 = 131;

uint32_t gs_of(QuantFormat f) { return ops::has_block_d(f) ? 256 : 32; }

void run_xq(const XqCase& c) {
  if (!ops::linear_q_takes_xq(device().caps, c.consumer, 1))
    GTEST_SKIP() << "this device's gemv takes no x quantized ahead (int8 x needs subgroups of 4 or more)";
  const bool head = c.kind == XqCase::Head, norm = c.kind == XqCase::Residual || head;
  const bool swiglu = c.kind == XqCase::SwiGlu;
  const uint32_t n1 = swiglu ? 2 * kK1 : kK1;  // the producer's weight rows
  Graph g(device());
  TensorId x = add_input(g, {.name = "x", .max_shape = {c.max_m, kK0}, .dynamic_dims = 1});
  ops::QuantTensors w1 = ops::add_quant_weight(g, "w1", c.producer, n1, kK0, gs_of(c.producer));
  ops::QuantTensors w2 = ops::add_quant_weight(g, "w2", c.consumer, kN2, kK1, gs_of(c.consumer));
  std::optional<TensorId> res, nw, am;
  if (head) am = add_weight(g, {.name = "am", .dtype = DType::U32, .shape = {1}, .role = TensorRole::State});
  if (norm) {
    res = add_input(g, {.name = "res", .max_shape = {c.max_m, kK1}, .dynamic_dims = 1});
    nw = add_weight(g, {.name = "nw", .shape = {kK1}});
  }
  const uint32_t gemv_x = c.max_m > 1 ? 2 : 0, m_from = c.max_m > 1 ? ops::kLinearQGemvMaxRows + 1 : 0;
  TensorId y1 = ops::add_linear_q(g, {.name = "p", .format = c.producer, .gs = gs_of(c.producer), .x = x, .q = w1.q,
                                      .scales = w1.scales, .residual = res, .swiglu = swiglu, .gemv_int8 = 1,
                                      .gemv_x = gemv_x, .gemv_m_from = m_from, .xq_out = true, .xq_norm = nw});
  TensorId xq = ops::linear_q_xq(g, "p");
  TensorId y2 = ops::add_linear_q(g, {.name = "c", .format = c.consumer, .gs = gs_of(c.consumer), .x = y1, .q = w2.q,
                                      .scales = w2.scales, .norm = nw, .eps = 1e-5f, .last_row = head,
                                      .argmax_out = am, .gemv_int8 = 1, .gemv_x = head ? 0 : gemv_x,
                                      .gemv_m_from = m_from, .xq_in = xq});
  for (TensorId t : {y1, y2, xq}) mark_output(g, t);
  if (am) mark_output(g, *am);
  build(g);
  auto [q1, wd1] = random_quant_weight(c.producer, n1, kK0, gs_of(c.producer), 31);
  auto [q2, wd2] = random_quant_weight(c.consumer, kN2, kK1, gs_of(c.consumer), 32);
  ops::write_quant_weight(g, w1, q1);
  ops::write_quant_weight(g, w2, q2);
  std::vector<float> nv;
  if (nw) {
    nv = random_floats(kK1, 5, 0.5f, 1.5f);
    write_tensor<float>(g, *nw, nv);
  }

  uint32_t step = 0;
  for (uint32_t m : c.steps) {
    SCOPED_TRACE(fmt::format("step {}: M = {}", step, m));
    auto xv = random_floats(size_t(m) * kK0, 400 + step, -2.f, 2.f);
    auto rv = random_floats(size_t(m) * kK1, 500 + step++, -1.f, 1.f);
    std::vector<ShapeInput> shapes = {{x, {m, kK0}}};
    std::vector<StepInput> inputs = {{x, xv.data(), xv.size() * 4}};
    if (res) {
      shapes.push_back({*res, {m, kK1}});
      inputs.push_back({*res, rv.data(), rv.size() * 4});
    }
    const std::vector<float> got = run_step(g, shapes, {}, inputs, y2);
    const std::vector<float> h = read_output<float>(g, y1);  // the producer's f32 output
    ASSERT_EQ(h.size(), size_t(m) * kK1);
    if (head) {  // the argmax of the logits the head wrote
      const uint32_t best = uint32_t(std::max_element(got.begin(), got.end()) - got.begin());
      EXPECT_EQ(read_output<uint32_t>(g, *am)[0], best) << "the head's argmax";
      EXPECT_EQ(active_route(g, find_node(g, "c")), m == 1 ? ops::kLinearQGemv : ops::kLinearQGemvLast);
    }
    if (m > 1) {  // staged from y1 as without xq: f32 math within the int8 rounding bound (groups of 32)
      const uint32_t rows = head ? 1 : m;  // the head: the last row
      const std::vector<float> hx(h.end() - ptrdiff_t(rows) * kK1, h.end());
      const std::vector<float> xn = norm ? ref::rms_norm(hx, nv, kK1, 1e-5) : hx;
      const std::vector<float> want = ref::linear(xn, wd2, {}, rows, kN2, kK1);
      std::vector<float> bound = ref::int8_act_error_bound(xn, wd2, rows, kN2, kK1, 32);
      const std::vector<float> mass = ref::abs_dot(xn, wd2, rows, kN2, kK1);
      for (size_t i = 0; i < bound.size(); ++i) bound[i] = 1.01f * bound[i] + 1e-5f * mass[i] + 1e-6f;
      EXPECT_TRUE(within(got, want, bound)) << "consumer at " << m << " rows vs f32 reference";
      continue;
    }
    // The producer's xq row against the reference quantization of what it wrote (u: y1 times the
    // consumer's norm weight where the producer multiplies it in; the squares are y1's).
    std::vector<float> u = h;
    if (norm)
      for (uint32_t i = 0; i < kK1; ++i) u[i] *= nv[i];
    ref::QuantizedActivations qa;  // what the producer wrote (the consumer's activations)
    check_xq_row(read_output<uint32_t>(g, xq), u, h, qa);
    if (::testing::Test::HasFatalFailure()) return;
    // The consumer: the int8 activations' dot products, times 1 / rms(y1) where it normalizes.
    std::vector<float> want = ref::linear_int8_act(qa, wd2, {}, 1, kN2, kK1, 16);
    std::vector<float> xdq(kK1);
    for (uint32_t i = 0; i < kK1; ++i) xdq[i] = qa.q[i] * qa.scales[i / 16];
    std::vector<float> bound = ref::abs_dot(xdq, wd2, 1, kN2, kK1);
    double inv = 1;
    if (norm) {
      double ss = 0;
      for (float v : h) ss += double(v) * v;
      inv = 1 / std::sqrt(ss / kK1 + 1e-5);
    }
    for (uint32_t j = 0; j < kN2; ++j) {
      want[j] = float(want[j] * inv);
      bound[j] = float(2e-5 * bound[j] * inv) + 1e-6f;
    }
    EXPECT_TRUE(within(got, want, bound)) << "consumer at one row vs CPU int8-activation reference";
  }
}

std::vector<OpCase> xq_cases() {
  std::vector<OpCase> cases;
  const std::pair<QuantFormat, QuantFormat> pairs[] = {
      {QuantFormat::Q4gsw, QuantFormat::Q4gsw}, {QuantFormat::Q8, QuantFormat::Q6K}, {QuantFormat::Q4K, QuantFormat::Q4K},
      {QuantFormat::Q6K, QuantFormat::Q8},      {QuantFormat::Q4K, QuantFormat::Q5K}, {QuantFormat::Q4gsw, QuantFormat::Q41},
      {QuantFormat::IQ4NL, QuantFormat::Q4gsw}, {QuantFormat::Q4gsw, QuantFormat::IQ4NL},  // the grid by byte pairs
  };
  const std::pair<XqCase::Kind, const char*> kinds[] = {
      {XqCase::Residual, "residual_norm"}, {XqCase::SwiGlu, "swiglu"}, {XqCase::Plain, "plain"},
      {XqCase::Head, "head"}};
  for (const auto& [p, q] : pairs)
    for (const auto& [kind, kname] : kinds)
      for (uint32_t max_m : {1u, 8u}) {
        XqCase c{p, q, kind, max_m};
        if (max_m > 1) c.steps = {1, 3, 1, 8, 2, 1};
        cases.push_back({fmt::format("{}_to_{}_{}{}", ops::quant_format_name(p), ops::quant_format_name(q), kname,
                                     max_m > 1 ? "_rows" : ""),
                         [c] { run_xq(c); }});
      }
  return cases;
}

WGRT_OP_SWEEP(LinearQXq, xq_cases, 2);

// What the builder may wire: one weight of a multiple of 16 outputs, no rope / argmax / last_row,
// xq_norm only with xq_out and without norm, xq_in of the right size.
TEST(LinearQXqBuild, RejectsWhatItCannotQuantize) {
  Graph g(device());
  TensorId x = add_input(g, {.name = "x", .max_shape = {1, 256}, .dynamic_dims = 1});
  ops::QuantTensors w = ops::add_quant_weight(g, "w", QuantFormat::Q4gsw, 40, 256, 32);
  TensorId nw = add_weight(g, {.name = "nw", .shape = {40}});
  auto desc = [&] { return ops::LinearQDesc{.name = "y", .x = x, .q = w.q, .scales = w.scales}; };
  ops::LinearQDesc d = desc();
  d.xq_out = true;  // 40 outputs
  EXPECT_THROW(ops::add_linear_q(g, d), std::invalid_argument);
  d = desc();
  d.xq_norm = nw;  // without xq_out
  EXPECT_THROW(ops::add_linear_q(g, d), std::invalid_argument);
  TensorId bad = add_weight(g, {.name = "bad", .dtype = DType::U32, .shape = {7}});
  d = desc();
  d.xq_in = bad;
  EXPECT_THROW(ops::add_linear_q(g, d), std::invalid_argument);
}

}  // namespace
}  // namespace wgrt::test
