// The sliding window (AttentionDesc::window) and logit soft-capping (AttentionDesc::softcap) on
// every decode and prefill kernel against the CPU reference: windows of 1, 3, 7, 100 and 300
// keys that start inside key tiles and decode chunks (contexts of 131 and 1031 keys over several
// chunks) and past whole ones, f16 and f32 caches, soft-capping alone
// and with a window. q is scaled up so that the cap bends the scores.
#include <fmt/format.h>

#include <cmath>

#include "attention_support.h"
#include "support/op_harness.h"
#include "support/random.h"

namespace wgrt::test {
namespace {

using namespace graph;

constexpr float kAtol = 2e-4f, kRtol = 2e-3f;

// n_tokens queries ending at key ctx - 1, then a decode step at the last position; slots past
// ctx - 1 hold NaN (fill_caches_to).
void check_window(const AttnConfig& c, uint32_t n_tokens, uint32_t ctx, uint32_t seed) {
  AttnGraph a = build_attn_graph(c);
  Graph& g = *a.g;
  const auto [kc, vc] = fill_caches_to(a, c, ctx, seed);
  const float scale = 1.0f / std::sqrt(float(c.head_dim));
  for (uint32_t n : {n_tokens, 1u}) {
    const uint32_t pos = ctx - n;
    auto q = random_floats(size_t(n) * c.n_heads() * c.head_dim, seed + 2 + n, -8.f, 8.f);
    ShapeInput s{a.q, {n, c.n_heads() * c.head_dim}};
    SymbolInput p{a.pos, pos};
    StepInput in{a.q, q.data(), q.size() * 4};
    auto got = run_step(g, {&s, 1}, {&p, 1}, {&in, 1}, a.out);
    EXPECT_EQ(active_route(g, a.attn), n == 1 ? ops::kAttentionDecode : ops::kAttentionPrefill);
    auto want = ref::attention(q, kc, vc, c.kv(), n, c.n_heads(), pos, scale, c.window, c.softcap);
    EXPECT_TRUE(all_close(got, want, kAtol, kRtol)) << "n_tokens " << n << " pos " << pos;
    if (c.window || c.softcap) {  // the case must differ from plain attention (else it tests nothing)
      auto plain = ref::attention(q, kc, vc, c.kv(), n, c.n_heads(), pos, scale);
      EXPECT_FALSE(all_close(plain, want, kAtol, kRtol)) << "n_tokens " << n << ": window/softcap change nothing";
    }
    if (n_tokens == 1) break;
  }
}

std::vector<OpCase> window_cases() {
  std::vector<OpCase> cases;
  using K = ops::DecodeKernel;
  using P = ops::PrefillKernel;
  auto add = [&](uint32_t hd, uint32_t group, uint32_t n_tokens, uint32_t ctx, bool f16, uint32_t window,
                 float softcap, K decode, P prefill, uint32_t max_chunks = 0) {
    if (decode == K::vec) f16 = true;  // decode_vec's f32 rows of 64 do not fit 8 subgroup lanes (lavapipe)
    AttnConfig c{.head_dim = hd, .n_kv_heads = 2, .group = group, .n_ctx = ctx + 6, .max_tokens = n_tokens,
                 .f16 = f16, .with_write = false, .max_chunks = max_chunks, .decode = decode, .prefill = prefill,
                 .window = window, .softcap = softcap};
    cases.push_back({fmt::format("hd{}_gqa{}_t{}_ctx{}_{}_window{}{}{}{}{}", hd, group, n_tokens, ctx,
                                 f16 ? "f16" : "f32", window, softcap > 0 ? "_softcap" : "",
                                 max_chunks ? fmt::format("_split{}", max_chunks) : "", decode_suffix(decode),
                                 prefill_suffix(prefill)),
                     [=] {
                       if (!prefill_fits(c)) GTEST_SKIP() << "prefill_rt does not fit this device's workgroup storage";
                       check_window(c, n_tokens, ctx, hd + group * 7 + n_tokens + window);
                     }});
  };
  for (K dk : {K::vec, K::sg, K::split})
    for (P pk : {P::rt, P::sg, P::tile}) {
      const bool f16 = pk != P::sg;
      add(64, 2, 37, 131, f16, 7, 0, dk, pk);
      add(64, 4, 20, 131, !f16, 3, 20.f, dk, pk);
    }
  for (K dk : {K::best, K::vec, K::sg, K::split}) {
    add(64, 2, 1, 1031, true, 7, 0, dk, P::best, 4);     // the window inside the last of 4 chunks
    add(64, 2, 1, 1031, false, 300, 0, dk, P::best, 8);  // over chunk boundaries, chunks before it empty
    add(64, 2, 1, 1031, true, 1, 0, dk, P::best);        // the token's own key alone
  }
  add(128, 4, 37, 1031, true, 100, 0, K::best, P::best);  // prefill: tiles before the window skipped by mask
  add(128, 1, 7, 131, false, 0, 2.f, K::best, P::best);   // soft-capping alone
  add(80, 4, 7, 131, true, 5, 2.f, K::best, P::tile);     // a generic head size
  return cases;
}

WGRT_OP_CASES(AttentionWindow, window_cases);

TEST(AttentionWindowBuild, RejectsABadSoftcap) {
  for (float bad : {-1.f, std::nanf("")}) {
    AttnConfig c{.n_ctx = 64, .max_tokens = 8, .with_write = false, .softcap = bad};
    EXPECT_THROW(build_attn_graph(c), std::invalid_argument) << bad;
  }
}

}  // namespace
}  // namespace wgrt::test
