// SDPA over the KV cache against the CPU reference: head dims 16..256 (the 64/128 fast paths
// and the generic ones), GQA ratios 1 to 8 (3, 5, 6, 7: groups that split unevenly),
// odd token counts, prime contexts, f32 and f16 caches, both routes; and one graph of
// kv write + attention driven through a prefill/decode sequence.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "attention_support.h"
#include "support/op_harness.h"
#include "support/random.h"

namespace wgrt::test {
namespace {

using namespace graph;

constexpr float kAtol = 2e-4f, kRtol = 2e-3f;

// Attention alone over caches filled on the host: n_tokens queries ending at key ctx - 1.
// Slots past ctx - 1 hold NaN, so a kernel reading past the causal limit fails the case.
void check_single(const AttnConfig& c, uint32_t n_tokens, uint32_t ctx, uint32_t seed) {
  AttnGraph a = build_attn_graph(c);
  Graph& g = *a.g;
  const auto [kc, vc] = fill_caches_to(a, c, ctx, seed);
  const float scale = 1.0f / std::sqrt(float(c.head_dim));

  // The case's shape, then a decode step at the last position on the same graph.
  for (uint32_t n : {n_tokens, 1u}) {
    uint32_t pos = ctx - n;
    auto q = random_floats(size_t(n) * c.n_heads() * c.head_dim, seed + 2 + n, -4.f, 4.f);
    ShapeInput s{a.q, {n, c.n_heads() * c.head_dim}};
    SymbolInput p{a.pos, pos};
    StepInput in{a.q, q.data(), q.size() * 4};
    auto got = run_step(g, {&s, 1}, {&p, 1}, {&in, 1}, a.out);
    EXPECT_EQ(active_route(g, a.attn), n == 1 ? ops::kAttentionDecode : ops::kAttentionPrefill);
    auto want = ref::attention(q, kc, vc, c.kv(), n, c.n_heads(), pos, scale);
    EXPECT_TRUE(all_close(got, want, kAtol, kRtol)) << "n_tokens " << n << " pos " << pos;
    if (n_tokens == 1) break;
  }
}

std::vector<OpCase> attention_cases() {
  std::vector<OpCase> cases;
  auto add = [&](uint32_t hd, uint32_t group, uint32_t n_tokens, uint32_t ctx, bool f16,
                 uint32_t max_chunks = 0, bool default_limits = false,
                 ops::DecodeKernel decode = ops::DecodeKernel::best,
                 ops::PrefillKernel prefill = ops::PrefillKernel::best) {
    std::string name = fmt::format("hd{}_gqa{}_t{}_ctx{}_{}{}{}{}{}", hd, group, n_tokens, ctx,
                                   f16 ? "f16" : "f32", max_chunks ? fmt::format("_split{}", max_chunks) : "",
                                   default_limits ? "_default_limits" : "", decode_suffix(decode),
                                   prefill_suffix(prefill));
    AttnConfig c{.head_dim = hd, .n_kv_heads = group == 8 ? 1u : 2u, .group = group,
                 .n_ctx = ctx + 6, .max_tokens = n_tokens, .f16 = f16, .with_write = false,
                 .max_chunks = max_chunks, .default_limits = default_limits, .decode = decode,
                 .prefill = prefill};
    cases.push_back({name, [=] {
                       if (!prefill_fits(c)) GTEST_SKIP() << "prefill_rt does not fit this device's workgroup storage";
                       check_single(c, n_tokens, ctx, hd + group * 7 + n_tokens);
                     }});
  };
  for (uint32_t hd : {64u, 128u})
    for (uint32_t group : {1u, 4u, 8u})
      for (uint32_t n : {1u, 3u, 7u, 37u}) add(hd, group, n, 131, false);
  for (uint32_t hd : {64u, 128u})
    for (uint32_t group : {1u, 8u})
      for (uint32_t n : {1u, 37u}) add(hd, group, n, 131, true);
  // Long prime context: several blocks per chunk (split 4) and one block per chunk.
  add(128, 4, 1, 1031, false);
  add(64, 8, 1, 1031, true, 4);
  add(128, 1, 7, 1031, true, 3);
  add(64, 4, 37, 1031, false);
  add(64, 1, 2, 64, false);   // one key tile exactly
  add(128, 8, 1, 1, false);   // a context of one key
  // Every other head size real models use, and the edges of the range: rows that are not a
  // multiple of a lane count, fewer words than lanes (16, 24), rows past 32 words (256 f32).
  // Each prefill case also runs a decode step at its last position.
  for (uint32_t hd : {16u, 24u, 40u, 80u, 96u, 256u}) {
    add(hd, 1, 37, 131, false);
    add(hd, 4, 7, 131, true);
    add(hd, 8, 3, 131, hd % 16 == 0);
  }
  add(80, 4, 1, 1031, true, 3);  // several blocks per chunk
  add(256, 1, 1, 1031, false);   // 32-key blocks
  add(32, 8, 1, 8300, true, 200);  // 130 chunks: more than decode_reduce's threads
  add(32, 8, 1, 8300, false);     // one KV head: the default cap (384 / 1) clamped to kMaxDecodeChunks
  // On a device with WebGPU's default limits (16 KiB of workgroup storage): the variants with
  // fewer query heads per decode workgroup and smaller prefill tiles.
  add(128, 8, 37, 131, true, 0, true);
  add(256, 8, 7, 131, false, 0, true);
  add(256, 2, 37, 131, true, 0, true);
  add(80, 8, 3, 131, true, 0, true);
  // decode_split, the decode kernel of devices without subgroups (the cases above take decode_vec
  // or decode_sg wherever the device has them).
  for (uint32_t hd : {64u, 80u, 128u, 256u})
    for (uint32_t group : {1u, 4u, 8u})
      add(hd, group, 1, hd == 80 ? 1031 : 131, hd != 256, 0, false, ops::DecodeKernel::split);
  add(64, 8, 1, 1031, true, 4, false, ops::DecodeKernel::split);
  // decode_vec on every row it takes with lavapipe's 8 subgroup lanes: each head size whose row fits
  // the lanes, a lane per word (fewer words than lanes: 16, 24, 40), f16 and f32, GQA 1/2/4/8,
  // several chunks (ctx 1031) and one, on default limits.
  for (uint32_t hd : {16u, 24u, 32u, 40u, 64u})
    for (uint32_t group : {1u, 2u, 4u, 8u})
      add(hd, group, 1, group == 2 ? 1031 : 131, hd != 32, 0, false, ops::DecodeKernel::vec);
  add(64, 4, 1, 1031, true, 1, false, ops::DecodeKernel::vec);
  add(64, 8, 1, 1031, true, 0, true, ops::DecodeKernel::vec);
  add(32, 4, 1, 1031, false, 0, true, ops::DecodeKernel::vec);
  // decode_sg, which `best` takes for groups past 4 or rows wider than the lanes, forced on the
  // shapes decode_vec takes first: GQA 1/4, f16 and f32, several chunks and one.
  for (uint32_t hd : {64u, 128u})
    for (uint32_t group : {1u, 4u})
      add(hd, group, 1, hd == 64 ? 1031 : 131, group == 4, 0, false, ops::DecodeKernel::sg);
  add(64, 4, 1, 1031, true, 1, false, ops::DecodeKernel::sg);
  // prefill (tiles), the prefill kernel of head dims that are not multiples of 32 below 128 and of
  // devices without subgroups (the cases above take prefill_rt or prefill_sg where the device has
  // them): the 64/128 fast paths and the generic head sizes, GQA 1/4/8 and an odd group, f16 and
  // f32, default limits, a long context.
  for (uint32_t hd : {24u, 64u, 80u, 128u})
    for (uint32_t group : {1u, 4u, 7u})
      add(hd, group, hd == 64 ? 37 : 7, 131, group != 4, 0, false, ops::DecodeKernel::best, ops::PrefillKernel::tile);
  add(128, 8, 37, 131, true, 0, true, ops::DecodeKernel::best, ops::PrefillKernel::tile);
  add(64, 4, 37, 1031, false, 0, false, ops::DecodeKernel::best, ops::PrefillKernel::tile);
  // prefill_sg forced below head dim 128 and where `best` takes prefill_rt (at 128 it takes
  // prefill_sg on default limits): one vec4 per lane (16), three (80: lanes past the row), the 64
  // fast path, GQA 1/2/4/7/8, f16 and f32, default limits, a long context.
  add(16, 2, 37, 131, true, 0, false, ops::DecodeKernel::best, ops::PrefillKernel::sg);
  add(64, 1, 37, 131, true, 0, false, ops::DecodeKernel::best, ops::PrefillKernel::sg);
  add(64, 7, 7, 1031, false, 0, false, ops::DecodeKernel::best, ops::PrefillKernel::sg);
  add(80, 4, 7, 131, false, 0, true, ops::DecodeKernel::best, ops::PrefillKernel::sg);
  add(128, 8, 37, 1031, true, 0, true, ops::DecodeKernel::best, ops::PrefillKernel::sg);
  // prefill_rt, which `best` takes at head dims 32..128 in steps of 32 (the cases above at 64 and
  // 128): forced on every head dim it runs, GQA 1/3/4/7/8 (rows past whole tokens), f16 and f32
  // (f32 tiles: 4 words per thread), step sizes that are not a multiple of its 64 rows, a long
  // context (causal limits inside key tiles), default limits.
  for (uint32_t hd : {32u, 64u, 96u, 128u})
    for (uint32_t group : {1u, 3u, 8u})
      add(hd, group, group == 3 ? 7 : 37, 131, group != 8, 0, false, ops::DecodeKernel::best, ops::PrefillKernel::rt);
  add(128, 4, 37, 1031, true, 0, false, ops::DecodeKernel::best, ops::PrefillKernel::rt);
  add(64, 7, 37, 1031, false, 0, false, ops::DecodeKernel::best, ops::PrefillKernel::rt);
  add(64, 4, 37, 131, true, 0, true, ops::DecodeKernel::best, ops::PrefillKernel::rt);
  // Caches split by KV heads (a cache past the storage binding limit): a decode or prefill kernel
  // per part writing its heads' columns, one merge; every decode kernel, both routes, f16/f32.
  auto add_parts = [&](uint32_t hd, uint32_t group, uint32_t n_tokens, bool f16, std::vector<uint32_t> parts,
                       ops::DecodeKernel decode, uint32_t max_chunks = 0) {
    uint32_t n_kv = 0;
    for (uint32_t h : parts) n_kv += h;
    AttnConfig c{.head_dim = hd, .n_kv_heads = n_kv, .group = group, .n_ctx = 137, .max_tokens = n_tokens,
                 .f16 = f16, .with_write = false, .max_chunks = max_chunks, .decode = decode, .cache_parts = parts};
    cases.push_back({fmt::format("hd{}_gqa{}_t{}_{}_parts{}{}{}", hd, group, n_tokens, f16 ? "f16" : "f32",
                                 parts.size(), decode_suffix(decode), max_chunks ? "_split1" : ""),
                     [=] { check_single(c, n_tokens, 131, hd + group + n_tokens); }});
  };
  add_parts(64, 2, 1, true, {2, 1}, ops::DecodeKernel::best);
  add_parts(64, 4, 37, false, {1, 1, 1}, ops::DecodeKernel::best);
  add_parts(64, 2, 1, true, {1, 2}, ops::DecodeKernel::vec);
  add_parts(64, 2, 1, true, {1, 2}, ops::DecodeKernel::vec, 1);
  add_parts(128, 4, 1, false, {2, 1}, ops::DecodeKernel::split);
  add_parts(40, 7, 7, true, {1, 1}, ops::DecodeKernel::best);
  // Groups that no power of two divides (Qwen2.5: 7 and 6; Qwen2.5-14B, Qwen3-14B: 5): the last
  // decode workgroup of a KV head takes fewer heads, prefill tiles leave rows past whole tokens
  // idle. Every decode kernel, both routes, f16 and f32, default limits.
  for (uint32_t group : {3u, 5u, 6u, 7u}) {
    add(64, group, 1, 131, group % 2 == 1);
    add(128, group, 37, 131, group % 2 == 0);
    add(64, group, 7, 1031, true, 3);
    add(64, group, 1, 1031, true, 0, false, ops::DecodeKernel::split);
    add(64, group, 1, 1031, false, 0, false, ops::DecodeKernel::split);
    add(64, group, 1, 1031, true, 0, false, ops::DecodeKernel::vec);
    add(32, group, 1, 131, false, 1, false, ops::DecodeKernel::vec);
    add(80, group, 3, 131, true, 0, true);
  }
  return cases;
}

WGRT_OP_SWEEP(Attention, attention_cases, 4);

// One graph, kv write + attention, n_tokens 37 -> 1 -> 1 -> 64 -> 1 with pos advancing;
// every step against the reference over the whole cache history.
void run_sequence(const AttnConfig& c) {
  AttnGraph a = build_attn_graph(c);
  Graph& g = *a.g;
  const size_t cache_n = size_t(c.n_kv_heads) * c.n_ctx * c.head_dim;
  std::vector<float> kc(cache_n, 0.f), vc(cache_n, 0.f);
  const uint32_t kv_w = c.n_kv_heads * c.head_dim, q_w = c.n_heads() * c.head_dim;
  const float scale = 1.0f / std::sqrt(float(c.head_dim));
  uint32_t pos = 0, step = 0;
  std::vector<uint32_t> splits, want_splits;

  auto run = [&](uint32_t n) {
    auto q = random_floats(size_t(n) * q_w, 1000 + step, -4.f, 4.f);
    auto k = random_floats(size_t(n) * kv_w, 2000 + step, -1.f, 1.f);
    auto v = random_floats(size_t(n) * kv_w, 3000 + step, -1.f, 1.f);
    ShapeInput shapes[] = {{a.q, {n, q_w}}, {a.k, {n, kv_w}}, {a.v, {n, kv_w}}};
    SymbolInput p{a.pos, pos};
    StepInput in[] = {{a.q, q.data(), q.size() * 4}, {a.k, k.data(), k.size() * 4},
                      {a.v, v.data(), v.size() * 4}};
    auto got = run_step(g, shapes, {&p, 1}, in, a.out);
    ref::kv_write(kc, c.kv(), as_stored(k, c.f16), n, pos);
    ref::kv_write(vc, c.kv(), as_stored(v, c.f16), n, pos);
    auto want = ref::attention(q, kc, vc, c.kv(), n, c.n_heads(), pos, scale);
    EXPECT_TRUE(all_close(got, want, kAtol, kRtol)) << "step " << step << " n_tokens " << n << " pos " << pos;
    EXPECT_EQ(active_route(g, a.attn), n == 1 ? ops::kAttentionDecode : ops::kAttentionPrefill);
    if (n == 1) {
      uint32_t chunks = active_plan(g, a.attn).grids[0].x;
      const uint32_t max_chunks = c.max_chunks ? c.max_chunks : ops::kDecodeWorkgroups / c.n_kv_heads;
      const ops::AttentionVariants var =
          ops::attention_variants(device_caps(g).limits, "attn", c.head_dim, c.group, c.f16,
                                  gpu::subgroup_lanes(device_caps(g)), c.decode, c.prefill);
      const uint32_t want_chunks = ops::decode_split(pos + 1, max_chunks, var.key_block, var.one_chunk_keys).n_chunks;
      EXPECT_EQ(chunks, want_chunks) << "pos " << pos;
      splits.push_back(chunks);
      want_splits.push_back(want_chunks);
      // decode_vec and decode_sg write a single chunk's output themselves: the merge is not dispatched.
      const bool sg = c.decode != ops::DecodeKernel::split && gpu::subgroup_lanes(device_caps(g)) >= 4;
      const size_t merge = std::max<size_t>(c.cache_parts.size(), 1);  // after a kernel per cache part
      EXPECT_EQ(active_plan(g, a.attn).grids[merge] == (Grid{0, 0, 0}), sg && chunks == 1) << "pos " << pos;
    }
    pos += n;
    ++step;
  };
  for (uint32_t n : {37u, 1u, 1u, 64u, 1u}) run(n);
  if (c.max_chunks == 0 && want_splits.front() != want_splits.back()) {
    EXPECT_NE(splits.front(), splits.back()) << "the flash-decoding split did not follow the context";
  }

  // Past the context: 37 tokens at pos 104 of 131 must fail and change nothing.
  Plan before = active_plan(g, a.attn);
  ShapeInput bad[] = {{a.q, {37, q_w}}, {a.k, {37, kv_w}}, {a.v, {37, kv_w}}};
  SymbolInput bad_pos{a.pos, pos};
  EXPECT_THROW(update(g, bad, {&bad_pos, 1}), std::out_of_range);
  EXPECT_EQ(live_shape(g, a.q), (Shape{1, q_w}));
  EXPECT_EQ(active_plan(g, a.attn), before);
  // Still usable: decode continues, then a prefill that ends exactly at n_ctx.
  run(1);
  run(c.n_ctx - pos);
}

TEST(AttentionSequence, F32Hd64Gqa4) {
  run_sequence({.head_dim = 64, .n_kv_heads = 2, .group = 4, .n_ctx = 131, .max_tokens = 64});
}
TEST(AttentionSequence, F16Hd128Gqa8) {
  run_sequence({.head_dim = 128, .n_kv_heads = 1, .group = 8, .n_ctx = 131, .max_tokens = 64, .f16 = true});
}
TEST(AttentionSequence, F16Hd64Gqa4NoSubgroups) {
  run_sequence({.head_dim = 64, .n_kv_heads = 2, .group = 4, .n_ctx = 131, .max_tokens = 64, .f16 = true,
                .decode = ops::DecodeKernel::split});
}
TEST(AttentionSequence, F16Hd64Gqa4DecodeVec) {
  run_sequence({.head_dim = 64, .n_kv_heads = 2, .group = 4, .n_ctx = 131, .max_tokens = 64, .f16 = true,
                .decode = ops::DecodeKernel::vec});
}
TEST(AttentionSequence, F16Hd64Gqa7) {
  run_sequence({.head_dim = 64, .n_kv_heads = 2, .group = 7, .n_ctx = 131, .max_tokens = 64, .f16 = true});
}
TEST(AttentionSequence, F16Hd64Gqa6DecodeVec) {
  run_sequence({.head_dim = 64, .n_kv_heads = 2, .group = 6, .n_ctx = 131, .max_tokens = 64, .f16 = true,
                .decode = ops::DecodeKernel::vec});
}
TEST(AttentionSequence, F16Hd64Gqa2CacheParts) {
  run_sequence({.head_dim = 64, .n_kv_heads = 3, .group = 2, .n_ctx = 131, .max_tokens = 64, .f16 = true,
                .cache_parts = {1, 2}});
}
TEST(AttentionSequence, F32Hd64Gqa4CachePartsNoSubgroups) {
  run_sequence({.head_dim = 64, .n_kv_heads = 2, .group = 4, .n_ctx = 131, .max_tokens = 64,
                .decode = ops::DecodeKernel::split, .cache_parts = {1, 1}});
}
TEST(AttentionSequence, F32Hd128Gqa1SmallSplit) {
  run_sequence({.head_dim = 128, .n_kv_heads = 2, .group = 1, .n_ctx = 131, .max_tokens = 64,
                .max_chunks = 1});
}

// The variant choice follows the device's workgroup storage: everything fits the limit it
// was picked for, the large limit keeps the fast variants, and a limit no variant fits is a
// build error naming the limit and the kernel.
TEST(AttentionBuild, VariantsFitTheLimits) {
  WGPULimits small{}, large{};
  small.maxComputeWorkgroupStorageSize = 16384;
  small.maxComputeInvocationsPerWorkgroup = 256;
  large.maxComputeWorkgroupStorageSize = 49152;
  large.maxComputeInvocationsPerWorkgroup = 1024;
  for (uint32_t hd = ops::kMinHeadDim; hd <= ops::kMaxHeadDim; hd += 8)
    for (uint32_t group = 1; group <= 8; ++group)
      for (bool f16 : {false, true}) {
        SCOPED_TRACE(fmt::format("hd {} group {} {}", hd, group, f16 ? "f16" : "f32"));
        for (const WGPULimits& l : {small, large}) {
          ops::AttentionVariants v = ops::attention_variants(l, "attn", hd, group, f16);
          for (const ops::WorkgroupFootprint& f : {v.decode, v.reduce, v.prefill}) {
            EXPECT_LE(f.storage_bytes, l.maxComputeWorkgroupStorageSize);
            EXPECT_LE(f.invocations, l.maxComputeInvocationsPerWorkgroup);
          }
          EXPECT_LE(v.decode_heads, group);
          EXPECT_GE(v.prefill_rows, group);
          if ((group & (group - 1)) == 0) {  // powers of two: every head of a workgroup and tile row used
            EXPECT_EQ(group % v.decode_heads, 0u);
            EXPECT_EQ(v.prefill_rows % group, 0u);
          }
          // The outputs staged for xq_out fit too, with and without subgroups, and are counted (xo: 1
          // value without xq_out) where the same kernel shape is picked.
          for (uint32_t sg : {1u, 8u, 32u}) {
            if (hd % 16 != 0) break;
            SCOPED_TRACE(fmt::format("xq_out, {} lanes", sg));
            const ops::AttentionVariants x = ops::attention_variants(
                l, "attn", hd, group, f16, sg, ops::DecodeKernel::best, ops::PrefillKernel::best, /*xq_out=*/true);
            const ops::AttentionVariants plain = ops::attention_variants(l, "attn", hd, group, f16, sg);
            EXPECT_LE(x.decode.storage_bytes, l.maxComputeWorkgroupStorageSize);
            EXPECT_EQ(x.reduce.storage_bytes, plain.reduce.storage_bytes + hd * 4 - 16);
            if (x.decode_kernel != ops::DecodeKernel::split && x.decode_kernel == plain.decode_kernel &&
                x.decode_heads == plain.decode_heads && x.decode.invocations == plain.decode.invocations) {
              EXPECT_EQ(x.decode.storage_bytes, plain.decode.storage_bytes + hd * 4 * x.decode_heads - 16);
            }
          }
        }
        // 48 KiB (the H200) keeps every query head of a group in one decode workgroup.
        EXPECT_EQ(ops::attention_variants(large, "attn", hd, group, f16).decode_heads, group);
      }
  // Today's tiles for the 64/128 fast paths on a 48 KiB device.
  ops::AttentionVariants v = ops::attention_variants(large, "attn", 128, 8, true);
  EXPECT_EQ(v.prefill_rows, 32u);
  EXPECT_EQ(v.prefill_keys, 32u);
  EXPECT_EQ(v.key_block, 64u);
  // 16 KiB: an f16 head of 128 with 8 query heads per KV head splits the group.
  EXPECT_LT(ops::attention_variants(small, "attn", 128, 8, true).decode_heads, 8u);
  EXPECT_EQ(ops::attention_variants(small, "attn", 256, 1, false).key_block, 32u);
  // With subgroups (8 lanes as lavapipe, 32 as the H200): decode_vec wherever a row's words fit
  // the lanes, decode_sg (also when asked for) wherever a lane's share of a row fits its
  // registers, within the same limits.
  for (uint32_t sg : {8u, 32u})
    for (uint32_t hd = ops::kMinHeadDim; hd <= ops::kMaxHeadDim; hd += 8)
      for (uint32_t group = 1; group <= 8; ++group)
        for (bool f16 : {false, true}) {
          SCOPED_TRACE(fmt::format("sg {} hd {} group {} {}", sg, hd, group, f16 ? "f16" : "f32"));
          ops::AttentionVariants sv = ops::attention_variants(small, "attn", hd, group, f16, sg);
          EXPECT_LE(sv.decode.storage_bytes, small.maxComputeWorkgroupStorageSize);
          EXPECT_LE(sv.decode_heads, group);
          const uint32_t words = hd / (f16 ? 8 : 4);
          if (words <= sg) {
            ops::AttentionVariants vv =
                ops::attention_variants(small, "attn", hd, group, f16, sg, ops::DecodeKernel::vec);
            EXPECT_LE(vv.decode.storage_bytes, small.maxComputeWorkgroupStorageSize);
            EXPECT_EQ(vv.decode_kernel, ops::DecodeKernel::vec);
            EXPECT_EQ(vv.decode_heads, ops::ceil_div(group, ops::ceil_div(group, 4u)));
            EXPECT_GE(vv.vec.lanes, words);
            EXPECT_LT(vv.vec.lanes / 2, words);
            EXPECT_EQ(vv.vec.threads % sg, 0u);
          }
          // best: decode_vec first wherever a row's words fit the lanes, whatever the group (up to 4
          // heads a workgroup); then decode_sg's shape where it is asked for.
          if (words <= sg) {
            EXPECT_EQ(sv.decode_kernel, ops::DecodeKernel::vec);
            sv = ops::attention_variants(small, "attn", hd, group, f16, sg, ops::DecodeKernel::sg);
          }
          if (sv.decode_kernel != ops::DecodeKernel::sg) {
            uint32_t lanes = 1;
            while (lanes * 2 <= std::min(words, sg)) lanes *= 2;
            EXPECT_GT(ops::ceil_div(words, lanes), 4u) << "decode_split only where a lane would hold over 4 words of a row";
            continue;
          }
          EXPECT_EQ(sv.sg.threads % sg, 0u);
          EXPECT_LE(sv.sg.lanes, std::min(words, sg));
          EXPECT_EQ(sv.sg.lanes & (sv.sg.lanes - 1), 0u);
          EXPECT_GE(sv.sg.lanes * sv.sg.row_words, words);
          EXPECT_GE(sv.sg.keys, 1u);
        }
  for (uint32_t hd : {64u, 128u}) {
    ops::AttentionVariants sv = ops::attention_variants(large, "attn", hd, 4, true, 32);
    EXPECT_EQ(sv.decode_kernel, ops::DecodeKernel::vec);
    // GQA 8 takes decode_vec too, 4 heads a workgroup (two workgroups a KV head).
    const ops::AttentionVariants g8 = ops::attention_variants(large, "attn", hd, 8, true, 32);
    EXPECT_EQ(g8.decode_kernel, ops::DecodeKernel::vec);
    EXPECT_EQ(g8.decode_heads, 4u);
    // One chunk for 4 of decode_vec's turns: 128 threads, a key group of hd / 8 lanes, 4 keys a turn.
    EXPECT_EQ(sv.one_chunk_keys, 4 * (128 / (hd / 8)) * 4);
    EXPECT_EQ(ops::decode_split(sv.one_chunk_keys, 48, sv.key_block, sv.one_chunk_keys).n_chunks, 1u);
    EXPECT_EQ(ops::decode_split(sv.one_chunk_keys + 1, 48, sv.key_block, sv.one_chunk_keys).n_chunks,
              sv.one_chunk_keys / sv.key_block + 1);
    sv = ops::attention_variants(large, "attn", hd, 4, true, 32, ops::DecodeKernel::sg);
    EXPECT_EQ(sv.decode_kernel, ops::DecodeKernel::sg);
    EXPECT_EQ(sv.decode_heads, 4u);
    EXPECT_EQ(sv.sg.row_words, 1u);
    EXPECT_EQ(sv.one_chunk_keys, sv.key_block);
    sv = ops::attention_variants(large, "attn", hd, 4, true, 32, ops::DecodeKernel::vec);
    EXPECT_EQ(sv.decode_kernel, ops::DecodeKernel::vec);
    EXPECT_EQ(sv.decode_heads, 4u);
    EXPECT_EQ(sv.vec.lanes, hd / 8);
  }
  // prefill_rt wherever the head dim is a multiple of 32 up to 128 and the rows' q and a K/V tile
  // fit the workgroup storage (the most threads that do, up to 128); else prefill_sg from head dim
  // 128 wherever a key group (up to 4 vec4s of a row per lane) fits the subgroup; else the tiles.
  // Each kernel forced where `best` takes another, with its shape within the limits.
  for (uint32_t sg : {8u, 32u})
    for (uint32_t hd = ops::kMinHeadDim; hd <= ops::kMaxHeadDim; hd += 8)
      for (const WGPULimits& l : {small, large}) {
        SCOPED_TRACE(fmt::format("sg {} hd {} limit {}", sg, hd, l.maxComputeWorkgroupStorageSize));
        ops::AttentionVariants pv = ops::attention_variants(l, "attn", hd, 4, true, sg);
        const bool rt_shape = hd % 32 == 0 && hd <= 128;
        // At 16 KiB only head dims up to 64 hold 16 rows of q beside the tile.
        const bool rt_fits = rt_shape && (l.maxComputeWorkgroupStorageSize > 16384 || hd <= 64);
        uint32_t lanes = 1;
        while (lanes * 4 < hd / 4) lanes *= 2;
        const ops::PrefillKernel want = rt_fits                   ? ops::PrefillKernel::rt
                                        : lanes <= sg && hd >= 128 ? ops::PrefillKernel::sg
                                                                   : ops::PrefillKernel::tile;
        EXPECT_EQ(pv.prefill_kernel, want);
        if (rt_fits) {
          EXPECT_LE(pv.prefill.storage_bytes, l.maxComputeWorkgroupStorageSize);
          EXPECT_EQ(pv.prt.threads % sg, 0u);
          EXPECT_EQ(pv.prt.threads % 8, 0u);
          EXPECT_LE(pv.prt.threads, 128u);
          EXPECT_EQ(pv.prefill_rows, pv.prt.threads / 2);
          EXPECT_TRUE(pv.prt.f16_tiles);  // an f16 cache: prefill_rth
          const uint32_t words = ops::kPrefillRthKeys * (hd / 8);  // f16 words of a tile
          if (pv.prt.fetch > 0) {
            EXPECT_GE(pv.prt.fetch * pv.prt.threads, words);
          }
          EXPECT_EQ(pv.prt.fetch == 0, words > 4 * pv.prt.threads);
          EXPECT_LE(pv.prt.fetch, 4u);
        } else if (rt_shape) {
          EXPECT_THROW(ops::attention_variants(l, "attn", hd, 4, true, sg, ops::DecodeKernel::best,
                                               ops::PrefillKernel::rt),
                       std::invalid_argument);
        }
        if (lanes > sg) continue;
        if (want != ops::PrefillKernel::sg)
          pv = ops::attention_variants(l, "attn", hd, 4, true, sg, ops::DecodeKernel::best, ops::PrefillKernel::sg);
        EXPECT_EQ(pv.prefill_kernel, ops::PrefillKernel::sg);
        EXPECT_LE(pv.prefill.storage_bytes, l.maxComputeWorkgroupStorageSize);
        EXPECT_EQ(pv.psg.lanes, lanes);
        EXPECT_GE(pv.psg.lanes * pv.psg.vec4s, hd / 4);
        EXPECT_LE(pv.psg.vec4s, 4u);
        EXPECT_EQ(pv.psg.threads % sg, 0u);
        EXPECT_EQ(pv.prefill_rows, 4 * pv.psg.threads / lanes);
        EXPECT_GE(pv.psg.keys, 4u);
        EXPECT_GE(pv.psg.fetch * pv.psg.threads, pv.psg.keys * (hd / 8));  // f16 words of a tile
        EXPECT_LE(pv.psg.fetch, 4u);
      }
  EXPECT_EQ(ops::attention_variants(large, "attn", 128, 4, true, 32).prt.threads, 128u);
  EXPECT_EQ(ops::attention_variants(large, "attn", 128, 4, false, 32).prt.fetch, 4u);
  WGPULimits mid = large;  // lavapipe's 32 KiB: 64 threads at head dim 128, an f32 tile of 8 words each
  mid.maxComputeWorkgroupStorageSize = 32768;
  EXPECT_EQ(ops::attention_variants(mid, "attn", 128, 4, false, 8).prt.threads, 64u);
  EXPECT_EQ(ops::attention_variants(mid, "attn", 128, 4, false, 8).prt.fetch, 0u);
  EXPECT_FALSE(ops::attention_variants(mid, "attn", 128, 4, false, 8).prt.f16_tiles);
  EXPECT_EQ(ops::attention_variants(small, "attn", 64, 4, true, 32).prt.threads, 64u);
  EXPECT_EQ(ops::attention_variants(large, "attn", 128, 4, true, 32, ops::DecodeKernel::best, ops::PrefillKernel::sg)
                .psg.keys,
            32u);
  EXPECT_EQ(ops::attention_variants(small, "attn", 128, 4, true, 32).psg.keys, 16u);
  EXPECT_EQ(ops::attention_variants(large, "attn", 128, 4, true, 32, ops::DecodeKernel::best, ops::PrefillKernel::tile)
                .prefill_kernel,
            ops::PrefillKernel::tile);
  // A forced kernel that cannot run this shape is an error naming it.
  for (uint32_t hd : {80u, 256u}) {
    try {
      ops::attention_variants(large, "attn.0", hd, 4, true, 32, ops::DecodeKernel::best, ops::PrefillKernel::rt);
      ADD_FAILURE() << "prefill_rt takes head dims 32..128 in steps of 32, not " << hd;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("prefill_rt"), std::string::npos) << e.what();
    }
  }
  try {
    ops::attention_variants(large, "attn.0", 256, 4, true, 8, ops::DecodeKernel::best, ops::PrefillKernel::sg);
    ADD_FAILURE() << "prefill_sg cannot hold a 64-vec4 row in 8 lanes of 4 vec4s";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("prefill_sg"), std::string::npos) << e.what();
  }
  try {
    ops::attention_variants(large, "attn.0", 256, 4, false, 8, ops::DecodeKernel::vec);
    ADD_FAILURE() << "decode_vec cannot hold a 64-word row in 8 lanes";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("decode_vec"), std::string::npos) << e.what();
  }
  WGPULimits tiny = small;
  tiny.maxComputeWorkgroupStorageSize = 4096;
  try {
    ops::attention_variants(tiny, "attn.0", 256, 8, false);
    ADD_FAILURE() << "no variant fits 4 KiB";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("maxComputeWorkgroupStorageSize"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("attn.0: attention"), std::string::npos) << e.what();
  }
}

TEST(AttentionBuild, RejectsUnsupportedShapes) {
  Graph g(device());
  auto kc = ops::add_kv_cache(g, "kc", DType::F32, 2, 16, 96);
  auto vc = ops::add_kv_cache(g, "vc", DType::F32, 2, 16, 96);
  auto pos = add_symbol(g, {.name = "pos", .lo = 0, .hi = 15});
  auto q = add_input(g, {.name = "q", .max_shape = {4, 2 * 96}, .dynamic_dims = 1});
  auto kc1 = ops::add_kv_cache(g, "kc1", DType::F32, 2, 16, 100);
  auto vc1 = ops::add_kv_cache(g, "vc1", DType::F32, 2, 16, 100);
  auto q1 = add_input(g, {.name = "q1", .max_shape = {4, 2 * 100}, .dynamic_dims = 1});
  EXPECT_THROW(ops::add_attention(g, {.name = "a", .q = q1, .k_cache = kc1, .v_cache = vc1, .pos = pos,
                                      .n_heads = 2}),
               std::invalid_argument);  // head_dim 100 is not a multiple of 8
  auto kc3 = ops::add_kv_cache(g, "kc3", DType::F32, 2, 16, 264);
  auto vc3 = ops::add_kv_cache(g, "vc3", DType::F32, 2, 16, 264);
  auto q3 = add_input(g, {.name = "q3", .max_shape = {4, 2 * 264}, .dynamic_dims = 1});
  EXPECT_THROW(ops::add_attention(g, {.name = "c", .q = q3, .k_cache = kc3, .v_cache = vc3, .pos = pos,
                                      .n_heads = 2}),
               std::invalid_argument);  // head_dim 264 is past 256
  EXPECT_NO_THROW(ops::add_attention(g, {.name = "d", .q = q, .k_cache = kc, .v_cache = vc, .pos = pos,
                                         .n_heads = 2}));  // head_dim 96
  auto kc2 = ops::add_kv_cache(g, "kc2", DType::F32, 2, 16, 64);
  auto vc2 = ops::add_kv_cache(g, "vc2", DType::F32, 2, 16, 64);
  auto q2 = add_input(g, {.name = "q2", .max_shape = {4, 18 * 64}, .dynamic_dims = 1});
  try {
    ops::add_attention(g, {.name = "b", .q = q2, .k_cache = kc2, .v_cache = vc2, .pos = pos, .n_heads = 18});
    ADD_FAILURE() << "GQA ratio 9 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("18 query heads over 2 KV heads"), std::string::npos) << e.what();
  }
  auto q6 = add_input(g, {.name = "q6", .max_shape = {4, 6 * 64}, .dynamic_dims = 1});
  EXPECT_NO_THROW(ops::add_attention(g, {.name = "e", .q = q6, .k_cache = kc2, .v_cache = vc2, .pos = pos,
                                         .n_heads = 6}));  // GQA ratio 3
}

}  // namespace
}  // namespace wgrt::test
