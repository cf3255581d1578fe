#include <cstring>
#include "support/op_harness.h"

#include <fmt/format.h>

#include <cmath>

namespace wgrt::test {

::testing::AssertionResult all_close(const std::vector<float>& got, const std::vector<float>& want,
                                     float atol, float rtol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != expected " << want.size();
  size_t worst = 0;
  double worst_excess = -1;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double err = std::fabs(double(got[i]) - double(want[i]));
    double allowed = atol + rtol * std::fabs(double(want[i]));
    double excess = std::isnan(got[i]) || std::isnan(want[i]) ? 1e300 : err - allowed;
    if (excess > 0) ++bad;
    if (excess > worst_excess) {
      worst_excess = excess;
      worst = i;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << fmt::format("{} of {} values off (atol {}, rtol {}); worst at [{}]: got {}, want {}",
                        bad, got.size(), atol, rtol, worst, got[worst], want[worst]);
}

std::vector<float> run_step(graph::Graph& g, std::span<const graph::ShapeInput> shapes,
                            std::span<const graph::SymbolInput> symbols,
                            std::span<const StepInput> inputs, graph::TensorId output) {
  graph::update(g, shapes, symbols);
  for (const auto& in : inputs) graph::write_tensor(g, in.tensor, in.data, in.bytes);
  graph::execute(g);
  return graph::read_output<float>(g, output);
}

::testing::AssertionResult bit_equal(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], 4) != 0)
      return ::testing::AssertionFailure() << fmt::format("[{}]: got {} want {}", i, got[i], want[i]);
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult within(const std::vector<float>& got, const std::vector<float>& want,
                                  const std::vector<float>& bound) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  size_t bad = 0, worst = 0;
  double worst_ratio = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double err = std::fabs(double(got[i]) - want[i]);
    double ratio = std::isnan(got[i]) ? 1e300 : err / std::max<double>(bound[i], 1e-30);
    if (ratio > 1) ++bad;
    if (ratio > worst_ratio) worst_ratio = ratio, worst = i;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << fmt::format(
             "{} of {} values off; worst [{}]: got {}, want {}, allowed error {}", bad, got.size(),
             worst, got[worst], want[worst], bound[worst]);
}

}  // namespace wgrt::test
