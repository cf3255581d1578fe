// Row softmax against the reference: odd and prime shapes, then extreme logits (±1e4, all
// equal, one huge among small), on a graph whose row count changes per step.
#include <fmt/format.h>

#include <functional>

#include "ops/softmax/softmax.h"
#include "reference/attention_ref.h"
#include "support/device.h"
#include "support/op_harness.h"
#include "support/random.h"

namespace wgrt::test {
namespace {

using namespace graph;
using Fill = std::function<std::vector<float>(size_t n, uint32_t seed)>;

OpCase softmax_case(std::string name, uint32_t rows, uint32_t n, Fill fill) {
  return {fmt::format("{}_{}x{}", name, rows, n), [=] {
            Graph g(device());
            TensorId x = add_input(g, {.name = "x", .max_shape = {rows, n}, .dynamic_dims = 1});
            TensorId y = ops::add_softmax(g, {.name = "y", .x = x});
            mark_output(g, y);
            build(g);
            for (uint32_t live : {rows, (rows + 1) / 2, 1u}) {
              auto xv = fill(size_t(live) * n, live);
              ShapeInput s{x, {live, n}};
              StepInput in{x, xv.data(), xv.size() * 4};
              auto got = run_step(g, {&s, 1}, {}, {&in, 1}, y);
              EXPECT_TRUE(all_close(got, ref::softmax(xv, live, n), 1e-6f, 1e-4f)) << "rows " << live;
            }
          }};
}

std::vector<OpCase> softmax_cases() {
  Fill uniform = [](size_t n, uint32_t seed) { return random_floats(n, seed, -8.f, 8.f); };
  Fill large = [](size_t n, uint32_t seed) { return random_floats(n, seed, -1e4f, 1e4f); };
  Fill equal = [](size_t n, uint32_t) { return std::vector<float>(n, 3.25e3f); };
  Fill negative = [](size_t n, uint32_t seed) { return random_floats(n, seed, -1e4f, -9.99e3f); };
  Fill one_huge = [](size_t n, uint32_t seed) {
    auto v = random_floats(n, seed, -1.f, 1.f);
    for (size_t i = seed % 7; i < n; i += 97) v[i] = 3e38f;  // one per row of 97
    return v;
  };
  std::vector<OpCase> cases;
  for (auto [r, n] : {std::pair{1u, 1u}, {3u, 7u}, {37u, 97u}, {5u, 4099u}, {2u, 1031u}})
    cases.push_back(softmax_case("uniform", r, n, uniform));
  cases.push_back(softmax_case("pm1e4", 7, 131, large));
  cases.push_back(softmax_case("pm1e4", 3, 4099, large));
  cases.push_back(softmax_case("equal", 5, 257, equal));
  cases.push_back(softmax_case("neg1e4", 4, 33, negative));
  cases.push_back(softmax_case("one_huge", 6, 97, one_huge));
  return cases;
}

WGRT_OP_CASES(Softmax, softmax_cases);

}  // namespace
}  // namespace wgrt::test
