// Elementwise ops against the CPU reference, through the table-driven harness.
#include <fmt/format.h>

#include <cmath>

#include "ops/elementwise/elementwise.h"
#include "reference/reference.h"
#include "support/device.h"
#include "support/op_harness.h"
#include "support/random.h"

namespace wgrt::test {
namespace {

using namespace graph;

OpCase binary_case(ops::Binary op, uint32_t rows, uint32_t cols, bool broadcast) {
  std::string name = fmt::format("{}_{}x{}{}", op == ops::Binary::Add ? "add" : "mul", rows, cols,
                                 broadcast ? "_bcast" : "");
  return {name, [=] {
            Graph g(device());
            TensorId a = add_input(g, {.name = "a", .max_shape = {rows, cols}, .dynamic_dims = 1});
            Shape bshape = broadcast ? Shape{cols} : Shape{rows, cols};
            TensorId b = add_weight(g, {.name = "b", .shape = bshape});
            TensorId out = ops::add_binary(g, {.name = "out", .op = op, .a = a, .b = b});
            mark_output(g, out);
            build(g);
            auto bv = random_floats(bshape.numel(), 2, -1e3f, 1e3f);
            write_tensor<float>(g, b, bv);
            // The max shape, then a smaller live shape on the same graph.
            for (uint32_t live : {rows, (rows + 1) / 2, 1u}) {
              if (broadcast == false && live != rows) continue;  // b is not row-sized then
              auto av = random_floats(size_t(live) * cols, live, -1e3f, 1e3f);
              ShapeInput s{a, {live, cols}};
              StepInput in{a, av.data(), av.size() * 4};
              auto got = run_step(g, {&s, 1}, {}, {&in, 1}, out);
              auto want = op == ops::Binary::Add ? ref::add(av, bv) : ref::mul(av, bv);
              EXPECT_TRUE(all_close(got, want, 0, 1e-6f)) << "live rows " << live;
            }
          }};
}

// x * value (Scale) and value * tanh(x / value) (Softcap) against plain loops in double, on
// values far past the cap (tanh's argument clamped in the kernel must still give +-value).
OpCase unary_case(ops::Unary op, uint32_t rows, uint32_t cols, float value) {
  std::string name = fmt::format("{}_{}x{}", op == ops::Unary::Scale ? "scale" : "softcap", rows, cols);
  return {name, [=] {
            Graph g(device());
            TensorId x = add_input(g, {.name = "x", .max_shape = {rows, cols}, .dynamic_dims = 1});
            TensorId out = ops::add_unary(g, {.name = "out", .op = op, .x = x, .value = value});
            mark_output(g, out);
            build(g);
            for (uint32_t live : {rows, (rows + 1) / 2}) {
              auto xv = random_floats(size_t(live) * cols, live, -1e3f, 1e3f);
              ShapeInput s{x, {live, cols}};
              StepInput in{x, xv.data(), xv.size() * 4};
              auto got = run_step(g, {&s, 1}, {}, {&in, 1}, out);
              std::vector<float> want(xv.size());
              for (size_t i = 0; i < xv.size(); ++i)
                want[i] = op == ops::Unary::Scale ? float(double(xv[i]) * value)
                                                  : float(value * std::tanh(double(xv[i]) / value));
              EXPECT_TRUE(all_close(got, want, 1e-5f, 1e-5f)) << "live rows " << live;
            }
          }};
}

std::vector<OpCase> elementwise_cases() {
  std::vector<OpCase> cases;
  for (auto [r, c] : {std::pair{1u, 1u}, {37u, 97u}, {7u, 4099u}}) {
    cases.push_back(unary_case(ops::Unary::Scale, r, c, 33.94f));
    cases.push_back(unary_case(ops::Unary::Softcap, r, c, 30.f));
  }
  cases.push_back({"softcap_rejects_a_bad_cap", [] {
                     Graph g(device());
                     TensorId x = add_input(g, {.name = "x", .max_shape = {4, 8}, .dynamic_dims = 1});
                     for (float bad : {0.f, -1.f, std::nanf("")})
                       EXPECT_THROW(ops::add_unary(g, {.name = "o", .op = ops::Unary::Softcap, .x = x, .value = bad}),
                                    std::invalid_argument) << bad;
                   }});
  for (auto op : {ops::Binary::Add, ops::Binary::Mul})
    for (auto [r, c] : {std::pair{1u, 1u}, {3u, 7u}, {37u, 97u}, {7u, 4099u}})
      for (bool bc : {false, true}) cases.push_back(binary_case(op, r, c, bc));
  return cases;
}

WGRT_OP_CASES(Elementwise, elementwise_cases);

}  // namespace
}  // namespace wgrt::test
