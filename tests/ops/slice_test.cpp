// last_rows and gather_rows against a plain CPU copy of the rows, over changing live shapes
// and row lists (an index past the live rows reads the last one).
#include <fmt/format.h>

#include "ops/slice/slice.h"
#include "support/device.h"
#include "support/op_harness.h"
#include "support/random.h"

namespace wgrt::test {
namespace {

using namespace graph;

// The CPU reference: rows idx[j] (clamped to the live rows) of x [rows, cols].
std::vector<float> pick_rows(const std::vector<float>& x, uint32_t rows, uint32_t cols, const std::vector<uint32_t>& idx) {
  std::vector<float> out;
  for (uint32_t i : idx) {
    const uint32_t r = std::min(i, rows - 1);
    out.insert(out.end(), x.begin() + size_t(r) * cols, x.begin() + size_t(r + 1) * cols);
  }
  return out;
}

OpCase gather_case(uint32_t cols, std::vector<std::pair<uint32_t, std::vector<uint32_t>>> steps) {
  return {fmt::format("gather_rows_{}_cols_{}_steps", cols, steps.size()), [=] {
            Graph g(device());
            TensorId x = add_input(g, {.name = "x", .max_shape = {16, cols}, .dynamic_dims = 1});
            TensorId idx = add_input(g, {.name = "idx", .dtype = DType::U32, .max_shape = {6}, .dynamic_dims = 1});
            TensorId out = ops::add_gather_rows(g, {.name = "out", .x = x, .rows = idx});
            mark_output(g, out);
            build(g);
            uint32_t seed = 3;
            for (const auto& [rows, want_rows] : steps) {
              auto xv = random_floats(size_t(rows) * cols, seed++, -4.f, 4.f);
              ShapeInput s[] = {{x, {rows, cols}}, {idx, {uint32_t(want_rows.size())}}};
              StepInput in[] = {{x, xv.data(), xv.size() * 4}, {idx, want_rows.data(), want_rows.size() * 4}};
              EXPECT_EQ(run_step(g, s, {}, in, out), pick_rows(xv, rows, cols, want_rows))
                  << rows << " rows, " << want_rows.size() << " picked";
            }
          }};
}

OpCase last_rows_case(uint32_t count, uint32_t cols) {
  return {fmt::format("last_rows_{}_of_{}_cols", count, cols), [=] {
            Graph g(device());
            TensorId x = add_input(g, {.name = "x", .max_shape = {16, cols}, .dynamic_dims = 1});
            TensorId out = ops::add_last_rows(g, {.name = "out", .x = x, .count = count});
            mark_output(g, out);
            build(g);
            for (uint32_t rows : {16u, 1u, 5u}) {
              auto xv = random_floats(size_t(rows) * cols, rows, -4.f, 4.f);
              std::vector<uint32_t> last;
              for (uint32_t r = rows - std::min(rows, count); r < rows; ++r) last.push_back(r);
              ShapeInput s{x, {rows, cols}};
              StepInput in{x, xv.data(), xv.size() * 4};
              EXPECT_EQ(run_step(g, {&s, 1}, {}, {&in, 1}, out), pick_rows(xv, rows, cols, last)) << rows << " rows";
            }
          }};
}

std::vector<OpCase> slice_cases() {
  std::vector<OpCase> cases;
  cases.push_back(last_rows_case(1, 7));
  cases.push_back(last_rows_case(3, 300));
  cases.push_back(gather_case(5, {{9, {8}}, {9, {0, 4, 8}}, {16, {15, 2, 2, 0, 9, 3}}, {3, {1, 7}}}));
  cases.push_back(gather_case(1031, {{4, {3, 0}}, {1, {0}}, {12, {11, 5, 6, 10}}}));
  cases.push_back({"gather_rows_rejects_bad_tensors", [] {
                     Graph g(device());
                     TensorId x = add_input(g, {.name = "x", .max_shape = {4, 8}, .dynamic_dims = 1});
                     TensorId fidx = add_input(g, {.name = "f", .max_shape = {2}, .dynamic_dims = 1});
                     EXPECT_THROW(ops::add_gather_rows(g, {.name = "o", .x = x, .rows = fidx}), std::invalid_argument);
                     TensorId idx = add_input(g, {.name = "i", .dtype = DType::U32, .max_shape = {2}, .dynamic_dims = 1});
                     TensorId x3 = add_input(g, {.name = "x3", .max_shape = {2, 2, 2}});
                     EXPECT_THROW(ops::add_gather_rows(g, {.name = "o2", .x = x3, .rows = idx}), std::invalid_argument);
                   }});
  return cases;
}

WGRT_OP_CASES(Slice, slice_cases);

}  // namespace
}  // namespace wgrt::test
