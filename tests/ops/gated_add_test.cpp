// gated_add (x + sigmoid(h · w) * y, Qwen2-MoE's shared expert) against the CPU reference:
// prime sizes, a row count that changes step to step, gates saturated both ways, h RMS-normalized
// in the kernel (the reference normalizes first), bad shapes.
#include <fmt/format.h>

#include "ops/gated_add/gated_add.h"
#include "reference/gated_add_ref.h"
#include "reference/norm_ref.h"
#include "support/device.h"
#include "support/op_harness.h"
#include "support/random.h"

namespace wgrt::test {
namespace {

using namespace graph;

struct GatedGraph {
  Graph g;
  TensorId x, y, h, w, out;
  std::optional<TensorId> nw;
  uint32_t n, k;
  static constexpr float kEps = 1e-6f;
  GatedGraph(uint32_t max_rows, uint32_t n_, uint32_t k_, bool norm = false) : g(device()), n(n_), k(k_) {
    x = add_input(g, {.name = "x", .max_shape = {max_rows, n}, .dynamic_dims = 1});
    y = add_input(g, {.name = "y", .max_shape = {max_rows, n}, .dynamic_dims = 1});
    h = add_input(g, {.name = "h", .max_shape = {max_rows, k}, .dynamic_dims = 1});
    w = add_input(g, {.name = "w", .max_shape = {k}});
    if (norm) nw = add_input(g, {.name = "nw", .max_shape = {k}});
    out = ops::add_gated_add(g, {.name = "out", .x = x, .y = y, .h = h, .w = w, .norm = nw, .eps = kEps});
    mark_output(g, out);
    build(g);
  }
  // Runs `rows` rows, h · w of about wmag * sqrt(k) / 2; returns (got, want).
  std::pair<std::vector<float>, std::vector<float>> run(uint32_t rows, uint32_t seed, float wmag) {
    auto xv = random_floats(size_t(rows) * n, seed, -4.f, 4.f);
    auto yv = random_floats(size_t(rows) * n, seed + 1, -2.f, 2.f);
    auto hv = random_floats(size_t(rows) * k, seed + 2, -1.f, 1.f);
    auto wv = random_floats(k, seed + 3, -wmag, wmag);
    auto nv = random_floats(k, seed + 4, 0.5f, 1.5f);
    ShapeInput s[] = {{x, {rows, n}}, {y, {rows, n}}, {h, {rows, k}}};
    std::vector<StepInput> in = {{x, xv.data(), xv.size() * 4}, {y, yv.data(), yv.size() * 4},
                                 {h, hv.data(), hv.size() * 4}, {w, wv.data(), wv.size() * 4}};
    if (nw) in.push_back({*nw, nv.data(), nv.size() * 4});
    const std::vector<float> hn = nw ? ref::rms_norm(hv, nv, k, kEps) : hv;
    return {run_step(g, s, {}, in, out), ref::gated_add(xv, yv, hn, wv, n, k)};
  }
};

OpCase gated_case(uint32_t rows, uint32_t n, uint32_t k, float wmag, std::string tag = "", bool norm = false) {
  return {fmt::format("rows{}_n{}_k{}{}{}", rows, n, k, tag, norm ? "_norm" : ""), [=] {
            GatedGraph gg(rows, n, k, norm);
            auto [got, want] = gg.run(rows, rows * 13 + n + k, wmag);
            EXPECT_TRUE(all_close(got, want, 1e-5f, 1e-5f));
          }};
}

std::vector<OpCase> gated_add_cases() {
  std::vector<OpCase> cases;
  for (auto [r, n, k] : {std::tuple{1u, 1u, 1u}, {3u, 7u, 5u}, {11u, 257u, 263u}, {2u, 1031u, 97u}, {5u, 64u, 2053u}})
    for (bool norm : {false, true}) cases.push_back(gated_case(r, n, k, 0.5f, "", norm));
  // Gates far past where sigmoid is 0 or 1 in f32 (e^-z overflows for z < -88): no NaN.
  cases.push_back(gated_case(7, 131, 127, 200.f, "_saturated"));
  cases.push_back({"dynamic_rows", [] {
                     GatedGraph gg(64, 67, 131);
                     uint32_t step = 0;
                     for (uint32_t rows : {37u, 1u, 1u, 64u, 2u}) {
                       auto [got, want] = gg.run(rows, 90 + step++, 0.3f);
                       EXPECT_TRUE(all_close(got, want, 1e-5f, 1e-5f)) << "step " << step << ", rows " << rows;
                     }
                   }});
  cases.push_back({"rejects_bad_shapes", [] {
                     Graph g(device());
                     TensorId x = add_input(g, {.name = "x", .max_shape = {4, 8}, .dynamic_dims = 1});
                     TensorId y9 = add_input(g, {.name = "y9", .max_shape = {4, 9}, .dynamic_dims = 1});
                     TensorId h = add_input(g, {.name = "h", .max_shape = {4, 5}, .dynamic_dims = 1});
                     TensorId h3 = add_input(g, {.name = "h3", .max_shape = {3, 5}, .dynamic_dims = 1});
                     TensorId w = add_input(g, {.name = "w", .max_shape = {5}});
                     TensorId w6 = add_input(g, {.name = "w6", .max_shape = {6}});
                     EXPECT_THROW(ops::add_gated_add(g, {.name = "a", .x = x, .y = y9, .h = h, .w = w}),
                                  std::invalid_argument);
                     EXPECT_THROW(ops::add_gated_add(g, {.name = "b", .x = x, .y = x, .h = h3, .w = w}),
                                  std::invalid_argument);
                     EXPECT_THROW(ops::add_gated_add(g, {.name = "c", .x = x, .y = x, .h = h, .w = w6}),
                                  std::invalid_argument);
                   }});
  return cases;
}

WGRT_OP_CASES(GatedAdd, gated_add_cases);

}  // namespace
}  // namespace wgrt::test
