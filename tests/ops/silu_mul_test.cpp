// silu_mul (SwiGLU) against the CPU reference: separate gate/up and the fused gate|up tensor.
#include <fmt/format.h>

#include <cmath>

#include "ops/silu_mul/silu_mul.h"
#include "reference/silu_mul_ref.h"
#include "support/device.h"
#include "support/op_harness.h"
#include "support/random.h"

namespace wgrt::test {
namespace {

using namespace graph;

struct SiluGraph {
  Graph g;
  TensorId gate, up, out;
  bool fused;
  uint32_t ff;
  SiluGraph(uint32_t max_rows, uint32_t ff_, bool fused_) : g(device()), fused(fused_), ff(ff_) {
    gate = add_input(g, {.name = "gate", .max_shape = {max_rows, fused ? 2 * ff : ff}, .dynamic_dims = 1});
    std::optional<TensorId> up_id;
    if (!fused) up = *(up_id = add_input(g, {.name = "up", .max_shape = {max_rows, ff}, .dynamic_dims = 1}));
    out = ops::add_silu_mul(g, {.name = "out", .gate = gate, .up = up_id});
    mark_output(g, out);
    build(g);
  }
  // Runs `rows` tokens; returns (got, want).
  std::pair<std::vector<float>, std::vector<float>> run(uint32_t rows, uint32_t seed, float gmag, float umag) {
    if (fused) {
      auto gu = random_floats(size_t(rows) * 2 * ff, seed, -gmag, gmag);
      for (size_t r = 0; r < rows; ++r)  // the up half at its own scale
        for (uint32_t c = 0; c < ff; ++c) gu[r * 2 * ff + ff + c] *= umag / gmag;
      ShapeInput s{gate, {rows, 2 * ff}};
      StepInput in{gate, gu.data(), gu.size() * 4};
      return {run_step(g, {&s, 1}, {}, {&in, 1}, out), ref::silu_mul_fused(gu, ff)};
    }
    auto gv = random_floats(size_t(rows) * ff, seed, -gmag, gmag);
    auto uv = random_floats(size_t(rows) * ff, seed + 1, -umag, umag);
    ShapeInput s[] = {{gate, {rows, ff}}, {up, {rows, ff}}};
    StepInput in[] = {{gate, gv.data(), gv.size() * 4}, {up, uv.data(), uv.size() * 4}};
    return {run_step(g, s, {}, in, out), ref::silu_mul(gv, uv)};
  }
};

OpCase silu_case(uint32_t rows, uint32_t ff, bool fused, float gmag, float umag, std::string tag = "") {
  return {fmt::format("{}_{}x{}{}", fused ? "fused" : "split", rows, ff, tag), [=] {
            SiluGraph sg(rows, ff, fused);
            auto [got, want] = sg.run(rows, rows * 7 + ff, gmag, umag);
            EXPECT_TRUE(all_close(got, want, 1e-6f, 1e-5f));
          }};
}

OpCase dynamic_case(uint32_t ff, bool fused) {
  return {fmt::format("dynamic_{}_{}", fused ? "fused" : "split", ff), [=] {
            SiluGraph sg(64, ff, fused);
            uint32_t step = 0;
            for (uint32_t rows : {37u, 1u, 1u, 64u, 1u}) {
              auto [got, want] = sg.run(rows, 50 + step++, 8.f, 2.f);
              EXPECT_TRUE(all_close(got, want, 1e-6f, 1e-5f)) << "step " << step << ", n_tokens " << rows;
            }
          }};
}

// GeGLU (GateAct::GeluTanh): gelu_tanh(gate) * up against the reference (in double), gates from
// small to far past where the tanh saturates (the kernel clamps its argument).
OpCase gelu_case(uint32_t rows, uint32_t ff, float gmag) {
  return {fmt::format("gelu_{}x{}_gate{}", rows, ff, gmag), [=] {
            Graph g(device());
            TensorId gate = add_input(g, {.name = "gate", .max_shape = {rows, ff}, .dynamic_dims = 1});
            TensorId up = add_input(g, {.name = "up", .max_shape = {rows, ff}, .dynamic_dims = 1});
            TensorId out = ops::add_silu_mul(g, {.name = "out", .gate = gate, .up = up, .act = ops::GateAct::GeluTanh});
            mark_output(g, out);
            build(g);
            auto gv = random_floats(size_t(rows) * ff, rows + ff, -gmag, gmag);
            auto uv = random_floats(size_t(rows) * ff, rows + ff + 1, -3.f, 3.f);
            ShapeInput s[] = {{gate, {rows, ff}}, {up, {rows, ff}}};
            StepInput in[] = {{gate, gv.data(), gv.size() * 4}, {up, uv.data(), uv.size() * 4}};
            auto got = run_step(g, s, {}, in, out);
            EXPECT_TRUE(all_close(got, ref::gelu_mul(gv, uv), 1e-5f, 1e-5f));
          }};
}

std::vector<OpCase> silu_mul_cases() {
  std::vector<OpCase> cases;
  cases.push_back(gelu_case(3, 97, 4.f));
  cases.push_back(gelu_case(37, 131, 100.f));
  for (bool fused : {false, true})
    for (auto [r, c] : {std::pair{1u, 1u}, {3u, 7u}, {37u, 97u}, {7u, 4099u}, {1u, 14336u}})
      cases.push_back(silu_case(r, c, fused, 6.f, 3.f));
  // Extreme gates: e^-g overflows f32 for g < -88 (silu -> -0, not NaN); large up values.
  cases.push_back(silu_case(3, 131, false, 1000.f, 1e3f, "_huge_gate"));
  cases.push_back(silu_case(3, 131, true, 100.f, 1e20f, "_huge_up"));
  cases.push_back(dynamic_case(4099, false));
  cases.push_back(dynamic_case(131, true));
  cases.push_back({"rejects_mismatched_up", [] {
                     Graph g(device());
                     TensorId a = add_input(g, {.name = "g", .max_shape = {4, 8}, .dynamic_dims = 1});
                     TensorId b = add_input(g, {.name = "u", .max_shape = {4, 9}, .dynamic_dims = 1});
                     EXPECT_THROW(ops::add_silu_mul(g, {.name = "o", .gate = a, .up = b}), std::invalid_argument);
                     TensorId odd = add_input(g, {.name = "gu", .max_shape = {4, 7}, .dynamic_dims = 1});
                     EXPECT_THROW(ops::add_silu_mul(g, {.name = "o2", .gate = odd}), std::invalid_argument);
                   }});
  return cases;
}

WGRT_OP_CASES(SiluMul, silu_mul_cases);

}  // namespace
}  // namespace wgrt::test
