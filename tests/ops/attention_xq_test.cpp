// The attention's output quantized ahead (AttentionDesc::xq_out): at one token the decode route
// also writes its output as an xq row (xq_row.wgsl) for the output projection's gemv. Checked
// against the plain CPU references, on the graph of attention_test (caches filled on the host,
// NaN past the context) through a prefill step and then a decode step:
//   - the output against ref::attention, as in attention_test;
//   - at one token, the xq row against the reference quantization of that output in blocks of 16
//     (support/xq_row.h), on every kernel that writes it: decode_vec and decode_sg at one chunk,
//     decode_reduce after them and after decode_split; f16 and f32 caches, GQA 1 to 8, head dims
//     16 to 256 (multiples of 16), a cache split by heads, WebGPU's default limits;
//   - an output projection reading it (linear_q xq_in, with a residual as in the model) against
//     the int8-activation reference at one token, and against f32 math within the int8 rounding
//     bound at several tokens (where it stages x from the output);
// and a head dim that is no multiple of 16 is refused at build.
#include <fmt/format.h>
#include <gmock/gmock.h>

#include <cmath>
#include <cstdlib>

#include "attention_support.h"
#include "ops/linear_q/linear_q.h"
#include "reference/linear_q_ref.h"
#include "reference/reference.h"
#include "support/env.h"
#include "support/op_harness.h"
#include "support/quant_weights.h"
#include "support/random.h"
#include "support/throws.h"
#include "support/xq_row.h"

namespace wgrt::test {
namespace {

using namespace graph;

constexpr float kAtol = 2e-4f, kRtol = 2e-3f;
constexpr uint32_t kOut = 48;  // the output projection's rows (with_proj)

// A prefill step of c.max_tokens tokens (where ctx has more keys), then a decode step, both ending
// at key ctx - 1 (the decode step's context is ctx keys). with_proj: an output projection (q4gsw, + a residual) reads
// the attention's output and, at one token, its xq row.
void check_xq(AttnConfig c, uint32_t ctx, bool with_proj, uint32_t seed) {
  c.xq_out = true;
  const uint32_t width = c.n_heads() * c.head_dim;
  ops::QuantTensors w;
  TensorId res, proj;
  AttnGraph a = build_attn_graph(c, false, [&](AttnGraph& ag) {
    if (!with_proj) return;
    Graph& g = *ag.g;
    w = ops::add_quant_weight(g, "wo", ops::QuantFormat::Q4gsw, kOut, width, 32);
    res = add_input(g, {.name = "res", .max_shape = {c.max_tokens, kOut}, .dynamic_dims = 1});
    proj = ops::add_linear_q(g, {.name = "proj", .x = ag.out, .q = w.q, .scales = w.scales, .residual = res,
                                 .gemv_int8 = 1, .gemv_x = 2, .gemv_m_from = ops::kLinearQGemvMaxRows + 1,
                                 .xq_in = ag.xq});
    mark_output(g, proj);
  });
  Graph& g = *a.g;
  std::vector<float> wd;
  if (with_proj) {
    auto [qw, deq] = random_quant_weight(ops::QuantFormat::Q4gsw, kOut, width, 32, seed + 9);
    ops::write_quant_weight(g, w, qw);
    wd = std::move(deq);
  }
  const auto [kc, vc] = fill_caches_to(a, c, ctx, seed);
  const float scale = 1.0f / std::sqrt(float(c.head_dim));

  const std::vector<uint32_t> steps = ctx > c.max_tokens ? std::vector<uint32_t>{c.max_tokens, 1} : std::vector<uint32_t>{1};
  for (uint32_t n : steps) {
    SCOPED_TRACE(fmt::format("{} tokens at {} keys", n, ctx));
    const uint32_t pos = ctx - n;
    auto q = random_floats(size_t(n) * width, seed + 2 + n, -4.f, 4.f);
    auto rv = random_floats(size_t(n) * kOut, seed + 5 + n, -1.f, 1.f);
    std::vector<ShapeInput> shapes = {{a.q, {n, width}}};
    std::vector<StepInput> in = {{a.q, q.data(), q.size() * 4}};
    if (with_proj) {
      shapes.push_back({res, {n, kOut}});
      in.push_back({res, rv.data(), rv.size() * 4});
    }
    SymbolInput p{a.pos, pos};
    const std::vector<float> got = run_step(g, shapes, {&p, 1}, in, a.out);
    EXPECT_EQ(active_route(g, a.attn), n == 1 ? ops::kAttentionDecode : ops::kAttentionPrefill);
    EXPECT_TRUE(all_close(got, ref::attention(q, kc, vc, c.kv(), n, c.n_heads(), pos, scale), kAtol, kRtol));
    ref::QuantizedActivations qa;
    if (n == 1) {  // the xq row of what the step wrote
      check_xq_row(read_output<uint32_t>(g, a.xq), got, got, qa);
      if (::testing::Test::HasFatalFailure()) return;
    }
    if (!with_proj) continue;
    const std::vector<float> y = read_output<float>(g, proj);
    if (n > 1) {  // staged from the output: f32 math within the int8 rounding bound (groups of 32)
      std::vector<float> want = ref::linear(got, wd, {}, n, kOut, width);
      std::vector<float> bound = ref::int8_act_error_bound(got, wd, n, kOut, width, 32);
      const std::vector<float> mass = ref::abs_dot(got, wd, n, kOut, width);
      for (size_t i = 0; i < want.size(); ++i) {
        want[i] += rv[i];
        bound[i] = 1.01f * bound[i] + 1e-5f * mass[i] + 1e-6f;
      }
      EXPECT_TRUE(within(y, want, bound)) << "the projection at " << n << " tokens vs f32 reference";
      continue;
    }
    std::vector<float> want = ref::linear_int8_act(qa, wd, {}, 1, kOut, width, 16);
    std::vector<float> xdq(width);
    for (uint32_t i = 0; i < width; ++i) xdq[i] = qa.q[i] * qa.scales[i / 16];
    std::vector<float> bound = ref::abs_dot(xdq, wd, 1, kOut, width);
    for (uint32_t j = 0; j < kOut; ++j) {
      want[j] += rv[j];
      bound[j] = 2e-5f * bound[j] + 1e-6f;
    }
    EXPECT_TRUE(within(y, want, bound)) << "the projection reading the xq row vs CPU int8-activation reference";
  }
}

std::vector<OpCase> xq_cases() {
  std::vector<OpCase> cases;
  using K = ops::DecodeKernel;
  auto add = [&](uint32_t hd, uint32_t group, uint32_t ctx, bool f16, K decode = K::best, uint32_t max_chunks = 0,
                 bool with_proj = false, std::vector<uint32_t> parts = {}, bool default_limits = false) {
    AttnConfig c{.head_dim = hd, .n_kv_heads = group == 8 ? 1u : 2u, .group = group, .n_ctx = ctx + 6,
                 .max_tokens = 3, .f16 = f16, .with_write = false, .max_chunks = max_chunks,
                 .default_limits = default_limits, .decode = decode, .cache_parts = parts};
    cases.push_back({fmt::format("hd{}_gqa{}_ctx{}_{}{}{}{}{}{}", hd, group, ctx, f16 ? "f16" : "f32",
                                 max_chunks ? fmt::format("_split{}", max_chunks) : "", decode_suffix(decode),
                                 parts.empty() ? "" : "_parts", default_limits ? "_default_limits" : "",
                                 with_proj ? "_proj" : ""),
                     [=] {
                       if (with_proj && !ops::linear_q_takes_xq(device().caps, ops::QuantFormat::Q4gsw, 1))
                         GTEST_SKIP() << "this device's gemv takes no x quantized ahead (int8 x needs subgroups "
                                         "of 4 or more)";
                       check_xq(c, ctx, with_proj, hd + 7 * group + ctx);
                     }});
  };
  // Each kernel that writes the output: one chunk (a short context, or a long one capped at one
  // chunk) and several (decode_reduce), f16 and f32, GQA 1, 4 and 8 (decode_vec where a row's
  // words fit lavapipe's 8 lanes: f16 at head dim 64, f32 at 32).
  for (K k : {K::vec, K::sg, K::split})
    for (uint32_t group : {1u, 4u, 8u}) {
      const bool f16 = k == K::vec || group != 4;
      add(64, group, 40, f16, k);
      add(64, group, 131, k == K::vec || group == 4, k);
    }
  add(32, 4, 40, false, K::vec);
  add(32, 2, 131, false, K::vec);
  add(64, 4, 1031, true, K::vec, 1);
  add(128, 1, 1031, false, K::sg, 1);
  add(64, 4, 1, true, K::vec);  // a context of one key
  // Every head dim that takes it, the device's own kernels.
  for (uint32_t hd : {16u, 32u, 48u, 80u, 96u, 128u, 256u}) add(hd, 4, 131, hd % 32 == 0);
  add(64, 2, 131, true, K::best, 0, false, {1, 1});  // a cache split by heads: a kernel per part
  add(128, 8, 131, true, K::best, 0, false, {}, true);
  add(256, 8, 40, false, K::best, 0, false, {}, true);
  // The output projection reading the row.
  add(64, 4, 40, true, K::best, 0, true);
  add(128, 4, 131, true, K::best, 0, true);
  add(64, 1, 131, false, K::split, 0, true);
  return cases;
}

WGRT_OP_SWEEP(AttentionXq, xq_cases, 2);

// xq_out writes blocks of 16 within a head: head dims 24 and 40 are refused, naming the node.
TEST(AttentionXqBuild, RefusesHeadDimsNotMultiplesOf16) {
  for (uint32_t hd : {24u, 40u}) {
    AttnConfig c{.head_dim = hd, .group = 2, .max_tokens = 2, .with_write = false, .xq_out = true};
    EXPECT_THAT(message_of<std::invalid_argument>([&] { build_attn_graph(c); }),
                ::testing::AllOf(::testing::HasSubstr("attn: xq_out"), ::testing::HasSubstr("head_dim " + std::to_string(hd))));
  }
}

// WGRT_ATTN_XQ (the builders' switch, to measure): unset, from kAttnXqMinWidth values on; 1 at
// any width, 0 at none; anything else refused.
TEST(AttentionXqBuild, EnvSwitch) {
  test::ScopedEnv env("WGRT_ATTN_XQ", nullptr);
  EXPECT_TRUE(ops::attention_xq_wanted(ops::kAttnXqMinWidth));
  EXPECT_TRUE(ops::attention_xq_wanted(8192));
  EXPECT_FALSE(ops::attention_xq_wanted(ops::kAttnXqMinWidth - 64));
  EXPECT_FALSE(ops::attention_xq_wanted(2048));
  env.set("0");
  EXPECT_FALSE(ops::attention_xq_wanted(8192));
  env.set("1");
  EXPECT_TRUE(ops::attention_xq_wanted(2048));
  EXPECT_TRUE(ops::attention_xq_wanted(64));
  env.set("yes");
  EXPECT_THAT(message_of<std::invalid_argument>([] { ops::attention_xq_wanted(4096); }),
              ::testing::HasSubstr("WGRT_ATTN_XQ='yes': not one of the choices (hint: auto|0|1"));
}

}  // namespace
}  // namespace wgrt::test
