// The table-driven op harness: each op test file lists cases (name, shapes, dtypes,
// tolerance folded into a body that builds a one-op graph, runs it on the GPU and compares
// with the CPU reference in tests/reference/).
//
//   std::vector<test::OpCase> rms_norm_cases() { ... {"f32_37x4099", [] { ... }} ... }
//   WGRT_OP_CASES(RmsNorm, rms_norm_cases)
//
// Heavy cases (big shapes; run on a real GPU, skipped in CI) go in *_heavy.cpp files.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace wgrt::test {

struct OpCase {
  std::string name;  // letters, digits and '_' (a gtest name)
  std::function<void()> body;
};

class OpCaseTest : public ::testing::TestWithParam<OpCase> {};

// GPU values against reference values: |got - want| <= atol + rtol * |want| everywhere;
// the failure names the worst index and both values. NaN or size mismatch fails.
::testing::AssertionResult all_close(const std::vector<float>& got, const std::vector<float>& want,
                                     float atol, float rtol);

// Bit for bit (NaN payloads and the sign of zero included); the failure names the first
// differing index and both values.
::testing::AssertionResult bit_equal(const std::vector<float>& got, const std::vector<float>& want);

// |got - want| <= bound elementwise (NaN fails); the message names the worst element.
::testing::AssertionResult within(const std::vector<float>& got, const std::vector<float>& want,
                                  const std::vector<float>& bound);

// One step of a built graph: set shapes/symbols, write inputs, execute, read one output.
struct StepInput {
  graph::TensorId tensor;
  const void* data;
  size_t bytes;
};
std::vector<float> run_step(graph::Graph& g, std::span<const graph::ShapeInput> shapes,
                            std::span<const graph::SymbolInput> symbols,
                            std::span<const StepInput> inputs, graph::TensorId output);

}  // namespace wgrt::test

namespace wgrt::test {
// The share of a sweep that a CPU Vulkan driver runs: every `every`-th case (the first, then
// each `every`-th after it) when `wide` is false, the others when it is true. A sweep lists its
// cases section by section (a route, then its shapes), so each section keeps some on lavapipe.
template <class Case>
std::vector<Case> sweep_share(std::vector<Case> all, size_t every, bool wide) {
  std::vector<Case> out;
  for (size_t i = 0; i < all.size(); ++i)
    if ((i % every == 0) != wide) out.push_back(std::move(all[i]));
  return out;
}
}  // namespace wgrt::test

#define WGRT_OP_CASE_NAME [](const ::testing::TestParamInfo<::wgrt::test::OpCase>& i) { return i.param.name; }

#define WGRT_OP_CASES(Suite, cases_fn)                                                     \
  class Suite : public ::wgrt::test::OpCaseTest {};                                        \
  TEST_P(Suite, MatchesReference) { GetParam().body(); }                                   \
  INSTANTIATE_TEST_SUITE_P(, Suite, ::testing::ValuesIn(cases_fn()), WGRT_OP_CASE_NAME)

// A sweep too wide for CI's CPU driver (each case compiles its own pipelines, seconds apiece on
// lavapipe): one case in `every` runs in the main suite, the rest as Wide/Suite.* (label "heavy",
// with the heavy cases on a real GPU: tests/CMakeLists.txt). Every case runs with `ctest -L heavy`.
#define WGRT_OP_SWEEP(Suite, cases_fn, every)                                                             \
  class Suite : public ::wgrt::test::OpCaseTest {};                                                        \
  TEST_P(Suite, MatchesReference) { GetParam().body(); }                                                   \
  INSTANTIATE_TEST_SUITE_P(, Suite, ::testing::ValuesIn(::wgrt::test::sweep_share(cases_fn(), every, false)), \
                           WGRT_OP_CASE_NAME);                                                             \
  INSTANTIATE_TEST_SUITE_P(Wide, Suite, ::testing::ValuesIn(::wgrt::test::sweep_share(cases_fn(), every, true)), \
                           WGRT_OP_CASE_NAME)

namespace wgrt::test {
// gtest prints the parameter of each case: its name, not its bytes.
inline void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }
}  // namespace wgrt::test
