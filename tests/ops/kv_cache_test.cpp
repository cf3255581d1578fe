// KV-cache write at `pos` against the reference: the whole cache (written rows and the rows
// around them) after every step of a dynamic sequence, f32 and f16 caches; a write past
// n_ctx fails in update and leaves the graph usable.
#include <fmt/format.h>

#include "attention_support.h"
#include "support/op_harness.h"
#include "support/random.h"

namespace wgrt::test {
namespace {

using namespace graph;

void check_writes(const AttnConfig& c) {
  AttnGraph a = build_attn_graph(c, /*caches_out=*/true);
  Graph& g = *a.g;
  const size_t cache_n = size_t(c.n_kv_heads) * c.n_ctx * c.head_dim;
  // Start from random contents: rows not written must keep them.
  auto kc = as_stored(random_floats(cache_n, 7, -3.f, 3.f), c.f16);
  auto vc = as_stored(random_floats(cache_n, 8, -3.f, 3.f), c.f16);
  write_cache(g, a.kcs, pack_cache(kc, c.f16));
  write_cache(g, a.vcs, pack_cache(vc, c.f16));
  const uint32_t w = c.n_kv_heads * c.head_dim;
  uint32_t pos = 0, step = 0;

  auto run = [&](uint32_t n) {
    auto k = random_floats(size_t(n) * w, 100 + step, -100.f, 100.f);
    auto v = random_floats(size_t(n) * w, 200 + step, -1e-3f, 1e-3f);
    ShapeInput shapes[] = {{a.k, {n, w}}, {a.v, {n, w}}};
    SymbolInput p{a.pos, pos};
    update(g, shapes, {&p, 1});
    write_tensor<float>(g, a.k, k);
    write_tensor<float>(g, a.v, v);
    execute(g);
    auto got_k = unpack_cache(read_cache(g, a.kcs), cache_n, c.f16);
    auto got_v = unpack_cache(read_cache(g, a.vcs), cache_n, c.f16);
    ref::kv_write(kc, c.kv(), as_stored(k, c.f16), n, pos);
    ref::kv_write(vc, c.kv(), as_stored(v, c.f16), n, pos);
    // pack2x16float may round either way (WGSL leaves it to the implementation): one f16 ulp.
    const float rtol = c.f16 ? 1e-3f : 0.f;
    EXPECT_TRUE(all_close(got_k, kc, 0, rtol)) << "k, step " << step << " pos " << pos;
    EXPECT_TRUE(all_close(got_v, vc, c.f16 ? 1e-7f : 0.f, rtol)) << "v, step " << step << " pos " << pos;
    pos += n;
    ++step;
  };
  for (uint32_t n : {37u, 1u, 1u, 64u, 1u}) run(n);

  // 37 tokens at pos 104 of 131: rejected by plan, nothing committed, then writes go on.
  ShapeInput bad[] = {{a.k, {37, w}}, {a.v, {37, w}}};
  SymbolInput bad_pos{a.pos, pos};
  try {
    update(g, bad, {&bad_pos, 1});
    ADD_FAILURE() << "a write past n_ctx was accepted";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("past the context of 131"), std::string::npos) << e.what();
  }
  EXPECT_EQ(live_shape(g, a.k), (Shape{1, w}));
  run(1);
  run(c.n_ctx - pos);  // ends exactly at n_ctx
}

std::vector<OpCase> kv_cache_cases() {
  std::vector<OpCase> cases;
  for (bool f16 : {false, true})
    for (uint32_t hd : {16u, 24u, 40u, 64u, 80u, 96u, 128u, 256u})
      for (uint32_t n_kv : {1u, 3u}) {
        AttnConfig c{.head_dim = hd, .n_kv_heads = n_kv, .n_ctx = 131, .max_tokens = 64,
                     .f16 = f16, .with_attention = false};
        cases.push_back({fmt::format("{}_hd{}_kv{}", f16 ? "f16" : "f32", hd, n_kv),
                         [c] { check_writes(c); }});
      }
  // Caches split by KV heads: a kernel per part, each taking its heads' columns of k and v.
  for (bool f16 : {false, true})
    for (std::vector<uint32_t> parts : {std::vector<uint32_t>{1, 2}, {2, 1, 2}}) {
      uint32_t n_kv = 0;
      for (uint32_t h : parts) n_kv += h;
      AttnConfig c{.head_dim = 64, .n_kv_heads = n_kv, .n_ctx = 131, .max_tokens = 64, .f16 = f16,
                   .with_attention = false, .cache_parts = parts};
      cases.push_back({fmt::format("{}_hd64_kv{}_parts{}", f16 ? "f16" : "f32", n_kv, parts.size()),
                       [c] { check_writes(c); }});
    }
  return cases;
}

WGRT_OP_CASES(KvCache, kv_cache_cases);

TEST(KvCacheBuild, RejectsMismatchedCaches) {
  Graph g(device());
  auto pos = add_symbol(g, {.name = "pos", .lo = 0, .hi = 7});
  auto kc = ops::add_kv_cache(g, "kc", DType::F32, 2, 8, 64);
  auto vc = ops::add_kv_cache(g, "vc", DType::F16, 2, 8, 64);
  auto k = add_input(g, {.name = "k", .max_shape = {4, 128}, .dynamic_dims = 1});
  auto v = add_input(g, {.name = "v", .max_shape = {4, 128}, .dynamic_dims = 1});
  EXPECT_THROW(ops::add_kv_write(g, {.name = "w", .k = k, .v = v, .k_cache = kc, .v_cache = vc, .pos = pos}),
               std::invalid_argument);
  auto vc32 = ops::add_kv_cache(g, "vc32", DType::F32, 2, 8, 64);
  auto k_bad = add_input(g, {.name = "k_bad", .max_shape = {4, 100}, .dynamic_dims = 1});
  EXPECT_THROW(ops::add_kv_write(g, {.name = "w2", .k = k_bad, .v = v, .k_cache = kc, .v_cache = vc32, .pos = pos}),
               std::invalid_argument);
}

}  // namespace
}  // namespace wgrt::test
