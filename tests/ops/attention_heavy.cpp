// Heavy attention cases for a real GPU (CI skips the heavy label): long contexts (4099,
// 8192) with the llama-3-8B head layout, both routes, f32 and f16 caches.
#include <fmt/format.h>

#include <cmath>

#include "attention_support.h"
#include "support/op_harness.h"
#include "support/random.h"

namespace wgrt::test {
namespace {

using namespace graph;

OpCase heavy_case(uint32_t hd, uint32_t n_tokens, uint32_t ctx, bool f16) {
  return {fmt::format("hd{}_t{}_ctx{}_{}", hd, n_tokens, ctx, f16 ? "f16" : "f32"), [=] {
            AttnConfig c{.head_dim = hd, .n_kv_heads = 8, .group = 4, .n_ctx = ctx,
                         .max_tokens = n_tokens, .f16 = f16, .with_write = false};
            AttnGraph a = build_attn_graph(c);
            Graph& g = *a.g;
            const size_t cache_n = size_t(c.n_kv_heads) * ctx * hd;
            auto kc = as_stored(random_floats(cache_n, 11, -1.f, 1.f), f16);
            auto vc = as_stored(random_floats(cache_n, 12, -1.f, 1.f), f16);
            write_cache(g, a.kcs, pack_cache(kc, f16));
            write_cache(g, a.vcs, pack_cache(vc, f16));
            for (uint32_t n : {n_tokens, 1u}) {
              const uint32_t pos = ctx - n, w = c.n_heads() * hd;
              auto q = random_floats(size_t(n) * w, 13 + n, -4.f, 4.f);
              ShapeInput s{a.q, {n, w}};
              SymbolInput p{a.pos, pos};
              StepInput in{a.q, q.data(), q.size() * 4};
              auto got = run_step(g, {&s, 1}, {&p, 1}, {&in, 1}, a.out);
              auto want = ref::attention(q, kc, vc, c.kv(), n, c.n_heads(), pos, 1.0f / std::sqrt(float(hd)));
              EXPECT_TRUE(all_close(got, want, 2e-4f, 2e-3f)) << "n_tokens " << n;
            }
          }};
}

std::vector<OpCase> attention_heavy_cases() {
  std::vector<OpCase> cases;
  for (uint32_t hd : {64u, 128u})
    for (bool f16 : {false, true}) {
      cases.push_back(heavy_case(hd, 37, 4099, f16));
      cases.push_back(heavy_case(hd, 129, 8192, f16));
    }
  return cases;
}

WGRT_OP_CASES(AttentionHeavy, attention_heavy_cases);

}  // namespace
}  // namespace wgrt::test
