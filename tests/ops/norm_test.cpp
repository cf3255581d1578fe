// rms_norm against the CPU reference, through the table-driven harness.
#include <fmt/format.h>

#include "ops/norm/norm.h"
#include "reference/norm_ref.h"
#include "support/device.h"
#include "support/op_harness.h"
#include "support/random.h"

namespace wgrt::test {
namespace {

using namespace graph;

struct NormGraph {
  Graph g;
  TensorId x, w, y;
  NormGraph(uint32_t max_rows, uint32_t cols, uint32_t row_size, float eps) : g(device()) {
    x = add_input(g, {.name = "x", .max_shape = {max_rows, cols}, .dynamic_dims = 1});
    w = add_weight(g, {.name = "w", .shape = {row_size ? row_size : cols}});
    y = ops::add_rms_norm(g, {.name = "y", .x = x, .weight = w, .eps = eps, .row_size = row_size});
    mark_output(g, y);
    build(g);
  }
  std::vector<float> run(const std::vector<float>& xv, uint32_t rows, uint32_t cols) {
    ShapeInput s{x, {rows, cols}};
    StepInput in{x, xv.data(), xv.size() * 4};
    return run_step(g, {&s, 1}, {}, {&in, 1}, y);
  }
};

// rows x cols, normalized per `row_size` (0: per row), x uniform in [-mag, mag].
OpCase norm_case(std::string name, uint32_t rows, uint32_t cols, uint32_t row_size, float mag,
                 float eps = 1e-5f) {
  return {name, [=] {
            NormGraph ng(rows, cols, row_size, eps);
            uint32_t rs = row_size ? row_size : cols;
            auto wv = random_floats(rs, 7, -2.f, 2.f);
            write_tensor<float>(ng.g, ng.w, wv);
            auto xv = random_floats(size_t(rows) * cols, rows * 31 + cols, -mag, mag);
            auto got = ng.run(xv, rows, cols);
            EXPECT_TRUE(all_close(got, ref::rms_norm(xv, wv, rs, eps), 1e-5f, 2e-5f));
          }};
}

// One graph, n_tokens 37 -> 1 -> 1 -> 64 -> 1, every step checked (and a shrink must not leave
// stale rows in what is read back: the live output is exactly rows * cols).
OpCase dynamic_case(uint32_t cols, uint32_t row_size) {
  return {fmt::format("dynamic_{}_rows_of_{}", cols, row_size ? row_size : cols), [=] {
            NormGraph ng(64, cols, row_size, 1e-6f);
            uint32_t rs = row_size ? row_size : cols;
            auto wv = random_floats(rs, 3, 0.5f, 1.5f);
            write_tensor<float>(ng.g, ng.w, wv);
            uint32_t step = 0;
            for (uint32_t rows : {37u, 1u, 1u, 64u, 1u}) {
              auto xv = random_floats(size_t(rows) * cols, 100 + step++, -3.f, 3.f);
              auto got = ng.run(xv, rows, cols);
              EXPECT_TRUE(all_close(got, ref::rms_norm(xv, wv, rs, 1e-6), 1e-5f, 2e-5f))
                  << "step " << step << ", n_tokens " << rows;
            }
          }};
}

// y = residual + norm(x) * w (RmsNormDesc::residual) over steps of 37, 1 and 64 rows; a residual of
// another shape is refused at build, a live shape unlike x's at the step.
OpCase residual_case(uint32_t cols) {
  return {fmt::format("residual_{}", cols), [=] {
            Graph g(device());
            TensorId x = add_input(g, {.name = "x", .max_shape = {64, cols}, .dynamic_dims = 1});
            TensorId r = add_input(g, {.name = "r", .max_shape = {64, cols}, .dynamic_dims = 1});
            TensorId w = add_weight(g, {.name = "w", .shape = {cols}});
            TensorId y = ops::add_rms_norm(g, {.name = "y", .x = x, .weight = w, .eps = 1e-6f, .residual = r});
            TensorId w2 = add_weight(g, {.name = "w2", .shape = {cols}});
            TensorId bad = add_input(g, {.name = "bad", .max_shape = {64, cols + 1}, .dynamic_dims = 1});
            EXPECT_THROW(ops::add_rms_norm(g, {.name = "z", .x = x, .weight = w2, .residual = bad}),
                         std::invalid_argument);
            mark_output(g, y);
            build(g);
            auto wv = random_floats(cols, 5, 0.5f, 1.5f);
            write_tensor<float>(g, w, wv);
            uint32_t step = 0;
            for (uint32_t rows : {37u, 1u, 64u}) {
              auto xv = random_floats(size_t(rows) * cols, 200 + step, -3.f, 3.f);
              auto rv = random_floats(size_t(rows) * cols, 300 + step++, -20.f, 20.f);
              ShapeInput s[] = {{x, {rows, cols}}, {r, {rows, cols}}};
              StepInput in[] = {{x, xv.data(), xv.size() * 4}, {r, rv.data(), rv.size() * 4}};
              auto got = run_step(g, s, {}, in, y);
              auto want = ref::rms_norm(xv, wv, cols, 1e-6);
              for (size_t i = 0; i < want.size(); ++i) want[i] += rv[i];
              EXPECT_TRUE(all_close(got, want, 1e-5f, 2e-5f)) << "n_tokens " << rows;
            }
            auto xv = random_floats(size_t(3) * cols, 9, -1.f, 1.f);
            ShapeInput s[] = {{x, {3, cols}}, {r, {2, cols}}};
            StepInput in[] = {{x, xv.data(), xv.size() * 4}, {r, xv.data(), size_t(2) * cols * 4}};
            EXPECT_THROW(run_step(g, s, {}, in, y), std::invalid_argument);
          }};
}

std::vector<OpCase> rms_norm_cases() {
  std::vector<OpCase> cases;
  for (auto [r, c] : {std::pair{1u, 1u}, {3u, 7u}, {7u, 97u}, {37u, 131u}, {5u, 4099u}, {2u, 8192u}, {1u, 16384u}})
    cases.push_back(norm_case(fmt::format("rows_{}x{}", r, c), r, c, 0, 4.f));
  // qwen3 q/k norm: rows of head_dim over [n_tokens, n_heads * head_dim].
  cases.push_back(norm_case("heads_7x8x64", 7, 8 * 64, 64, 4.f, 1e-6f));
  cases.push_back(norm_case("heads_3x5x128", 3, 5 * 128, 128, 4.f, 1e-6f));
  cases.push_back(norm_case("heads_37x3x128", 37, 3 * 128, 128, 4.f, 1e-6f));
  // Extreme magnitudes: x² overflows f32 past ~1.8e19; tiny rows are dominated by eps.
  cases.push_back(norm_case("huge_3x4099", 3, 4099, 0, 3e25f));
  cases.push_back(norm_case("huge_heads_5x4x64", 5, 256, 64, 1e30f));
  cases.push_back(norm_case("large_7x97", 7, 97, 0, 1e15f));
  cases.push_back(norm_case("tiny_3x97", 3, 97, 0, 1e-20f));
  cases.push_back(norm_case("eps_zero_7x131", 7, 131, 0, 1.f, 0.f));
  cases.push_back(dynamic_case(4099, 0));
  cases.push_back(dynamic_case(6 * 128, 128));
  cases.push_back(residual_case(131));
  cases.push_back(residual_case(4099));
  cases.push_back({"rejects_bad_row_size", [] {
                     Graph g(device());
                     TensorId x = add_input(g, {.name = "x", .max_shape = {4, 100}, .dynamic_dims = 1});
                     TensorId w = add_weight(g, {.name = "w", .shape = {64}});
                     EXPECT_THROW(ops::add_rms_norm(g, {.name = "y", .x = x, .weight = w, .row_size = 64}),
                                  std::invalid_argument);
                     TensorId w2 = add_weight(g, {.name = "w2", .shape = {99}});
                     EXPECT_THROW(ops::add_rms_norm(g, {.name = "y", .x = x, .weight = w2}),
                                  std::invalid_argument);
                   }});
  return cases;
}

WGRT_OP_CASES(RmsNorm, rms_norm_cases);

}  // namespace
}  // namespace wgrt::test
