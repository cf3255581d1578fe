// Attention over q8_0 KV caches (ops/kv_cache/kv_cache.h) against the CPU reference on the
// dequantized caches: every decode kernel (vec, sg, split) and prefill kernel (rt / rth, sg,
// tile), K and V q8_0 together and each beside an f16 other side, step sizes that are not
// multiples of the kernels' tiles; kv_write's blocks against the CPU's quantizing rule; and the
// shapes a q8_0 cache refuses.
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "attention_q8_support.h"
#include "attention_support.h"
#include "support/op_harness.h"
#include "support/random.h"

namespace wgrt::test {
namespace {

using namespace graph;

// As attention_test.cpp: the kernels read exactly the reference's values, so only the
// accumulation order differs.
constexpr float kAtol = 2e-4f, kRtol = 2e-3f;

// Whole caches [n_kv_heads, n_ctx, head_dim] into the parts (consecutive KV heads), and back.
void write_q8(Graph& g, const std::vector<TensorId>& parts, const Q8Values& all, uint32_t head_dim) {
  size_t row = 0;
  const size_t bpr = head_dim / ops::kQ8Block;
  for (TensorId t : parts) {
    const Shape& s = tensor_info(g, t).max_shape;
    const size_t rows = size_t(s[0]) * s[1];
    Q8Values part{{all.q.begin() + row * head_dim, all.q.begin() + (row + rows) * head_dim},
                  {all.d.begin() + row * bpr, all.d.begin() + (row + rows) * bpr}};
    const std::vector<uint32_t> words = pack_q8(part, head_dim);
    write_tensor<uint32_t>(g, t, std::span<const uint32_t>(words));
    row += rows;
  }
}
Q8Values read_q8(Graph& g, const std::vector<TensorId>& parts, uint32_t head_dim) {
  Q8Values all;
  for (TensorId t : parts) {
    const Shape& s = tensor_info(g, t).max_shape;
    Q8Values part = unpack_q8(read_output<uint32_t>(g, t), size_t(s[0]) * s[1], head_dim);
    all.q.insert(all.q.end(), part.q.begin(), part.q.end());
    all.d.insert(all.d.end(), part.d.begin(), part.d.end());
  }
  return all;
}

// One side's cache: random values up to key ctx - 1, NaN past it (a kernel reading past the
// causal limit fails the case), written as q8_0 or f16; returns what the kernels read.
std::vector<float> fill_side(AttnGraph& a, const AttnConfig& c, bool v, uint32_t ctx, uint32_t seed) {
  const size_t n = size_t(c.n_kv_heads) * c.n_ctx * c.head_dim;
  std::vector<float> x = random_floats(n, seed, -1.f, 1.f);
  for (uint32_t h = 0; h < c.n_kv_heads; ++h)
    for (size_t i = size_t(h * c.n_ctx + ctx) * c.head_dim; i < size_t(h + 1) * c.n_ctx * c.head_dim; ++i)
      x[i] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<TensorId>& parts = v ? a.vcs : a.kcs;
  if (v ? c.v_q8 : c.k_q8) {
    const Q8Values q = quantize_q8(x);
    write_q8(*a.g, parts, q, c.head_dim);
    return dequantize_q8(q);
  }
  x = as_stored(std::move(x), c.f16);
  write_cache(*a.g, parts, pack_cache(x, c.f16));
  return x;
}

std::string sides(const AttnConfig& c) {
  return fmt::format("k{}_v{}", c.k_q8 ? "q8" : "f16", c.v_q8 ? "q8" : "f16");
}

// n_tokens queries ending at key ctx - 1, then a decode step at the last position.
void check_single(const AttnConfig& c, uint32_t n_tokens, uint32_t ctx, uint32_t seed) {
  AttnGraph a = build_attn_graph(c);
  const std::vector<float> kc = fill_side(a, c, false, ctx, seed), vc = fill_side(a, c, true, ctx, seed + 1);
  const float scale = 1.0f / std::sqrt(float(c.head_dim));
  for (uint32_t n : {n_tokens, 1u}) {
    const uint32_t pos = ctx - n;
    auto q = random_floats(size_t(n) * c.n_heads() * c.head_dim, seed + 2 + n, -4.f, 4.f);
    ShapeInput s{a.q, {n, c.n_heads() * c.head_dim}};
    SymbolInput p{a.pos, pos};
    StepInput in{a.q, q.data(), q.size() * 4};
    auto got = run_step(*a.g, {&s, 1}, {&p, 1}, {&in, 1}, a.out);
    EXPECT_EQ(active_route(*a.g, a.attn), n == 1 ? ops::kAttentionDecode : ops::kAttentionPrefill);
    auto want = ref::attention(q, kc, vc, c.kv(), n, c.n_heads(), pos, scale);
    EXPECT_TRUE(all_close(got, want, kAtol, kRtol)) << "n_tokens " << n << " pos " << pos;
    if (n_tokens == 1) break;
  }
}

std::vector<OpCase> attention_q8_cases() {
  std::vector<OpCase> cases;
  auto add = [&](uint32_t hd, uint32_t group, uint32_t n_tokens, uint32_t ctx, bool k_q8, bool v_q8,
                 ops::DecodeKernel decode = ops::DecodeKernel::best,
                 ops::PrefillKernel prefill = ops::PrefillKernel::best, uint32_t max_chunks = 0) {
    AttnConfig c{.head_dim = hd, .n_kv_heads = group == 8 ? 1u : 2u, .group = group, .n_ctx = ctx + 6,
                 .max_tokens = n_tokens, .f16 = true, .with_write = false, .max_chunks = max_chunks,
                 .decode = decode, .prefill = prefill, .k_q8 = k_q8, .v_q8 = v_q8};
    cases.push_back({fmt::format("hd{}_gqa{}_t{}_ctx{}_{}{}{}{}", hd, group, n_tokens, ctx, sides(c),
                                 max_chunks ? fmt::format("_split{}", max_chunks) : "", decode_suffix(decode),
                                 prefill_suffix(prefill)),
                     [=] {
                       if (!prefill_fits(c)) GTEST_SKIP() << "prefill_rt does not fit this device's workgroup storage";
                       check_single(c, n_tokens, ctx, hd + group * 7 + n_tokens);
                     }});
  };
  // The kernels `best` takes, K and V q8_0 together and each beside f16.
  for (auto [k, v] : {std::pair{true, true}, std::pair{true, false}, std::pair{false, true}}) {
    add(64, 4, 37, 131, k, v);
    add(128, 1, 7, 131, k, v);
  }
  add(96, 8, 3, 131, true, true);   // three blocks a row: an odd scale word
  add(32, 2, 1, 1031, true, true);  // one block a row, several chunks
  // Each decode kernel forced: one chunk and several.
  for (ops::DecodeKernel d : {ops::DecodeKernel::vec, ops::DecodeKernel::sg, ops::DecodeKernel::split})
    for (uint32_t hd : {64u, 128u}) {
      if (d == ops::DecodeKernel::vec && hd == 128) continue;  // a row past lavapipe's 8 lanes
      add(hd, 4, 1, 131, true, true, d);
      add(hd, 1, 1, 1031, true, true, d);
    }
  add(64, 8, 1, 1031, true, false, ops::DecodeKernel::split, ops::PrefillKernel::best, 4);
  // Each prefill kernel forced: steps that are not multiples of its tiles, a long context.
  for (ops::PrefillKernel pk : {ops::PrefillKernel::rt, ops::PrefillKernel::sg, ops::PrefillKernel::tile}) {
    add(64, 1, 37, 131, true, true, ops::DecodeKernel::best, pk);
    add(128, 4, 7, 131, true, true, ops::DecodeKernel::best, pk);
    add(64, 4, 37, 1031, false, true, ops::DecodeKernel::best, pk);
  }
  return cases;
}

WGRT_OP_SWEEP(AttentionQ8, attention_q8_cases, 2);

// kv_write then attention through prefill and decode steps; after each step the caches are read
// back: kv_write's blocks match the CPU's rule (a quant may differ by one where x / d is within
// rounding of a half: the GPU's 1 / d is not exactly rounded), and attention matches the
// reference on the caches as written.
void run_sequence(const AttnConfig& c) {
  AttnGraph a = build_attn_graph(c, /*caches_out=*/true);
  Graph& g = *a.g;
  const uint32_t kv_w = c.n_kv_heads * c.head_dim, q_w = c.n_heads() * c.head_dim;
  const float scale = 1.0f / std::sqrt(float(c.head_dim));
  std::vector<float> kin(size_t(c.n_kv_heads) * c.n_ctx * c.head_dim), vin = kin;  // f32 inputs as cached
  uint32_t pos = 0, step = 0;
  for (uint32_t n : {37u, 1u, 1u, 23u, 1u}) {
    auto q = random_floats(size_t(n) * q_w, 1000 + step, -4.f, 4.f);
    auto k = random_floats(size_t(n) * kv_w, 2000 + step, -1.f, 1.f);
    auto v = random_floats(size_t(n) * kv_w, 3000 + step, -1.f, 1.f);
    k[5] = 0.f;  // ties and zeros
    for (uint32_t i = 0; i < 32 && i < kv_w; ++i) v[i] = 0.f;  // an all-zero block: d = 0
    ShapeInput shapes[] = {{a.q, {n, q_w}}, {a.k, {n, kv_w}}, {a.v, {n, kv_w}}};
    SymbolInput p{a.pos, pos};
    StepInput in[] = {{a.q, q.data(), q.size() * 4}, {a.k, k.data(), k.size() * 4}, {a.v, v.data(), v.size() * 4}};
    auto got = run_step(g, shapes, {&p, 1}, in, a.out);
    ref::kv_write(kin, c.kv(), k, n, pos);
    ref::kv_write(vin, c.kv(), v, n, pos);
    std::vector<float> cache[2];
    for (int side = 0; side < 2; ++side) {
      const bool v_side = side == 1;
      const std::vector<float>& x = v_side ? vin : kin;
      const std::vector<TensorId>& parts = v_side ? a.vcs : a.kcs;
      if (!(v_side ? c.v_q8 : c.k_q8)) {
        cache[side] = unpack_cache(read_cache(g, parts), x.size(), c.f16);
        continue;
      }
      const Q8Values got_q = read_q8(g, parts, c.head_dim), want_q = quantize_q8(x);
      size_t bad = 0;  // over the rows written so far
      for (uint32_t h = 0; h < c.n_kv_heads; ++h)
        for (size_t i = size_t(h) * c.n_ctx * c.head_dim; i < (size_t(h) * c.n_ctx + pos + n) * c.head_dim; ++i) {
          bad += std::abs(int(got_q.q[i]) - int(want_q.q[i])) > 1;
          if (i % ops::kQ8Block == 0)
            bad += std::abs(int(got_q.d[i / ops::kQ8Block]) - int(want_q.d[i / ops::kQ8Block])) > 1;
        }
      EXPECT_EQ(bad, 0u) << (v_side ? "v" : "k") << " cache blocks differ from the CPU's at step " << step;
      cache[side] = dequantize_q8(got_q);
    }
    auto want = ref::attention(q, cache[0], cache[1], c.kv(), n, c.n_heads(), pos, scale);
    EXPECT_TRUE(all_close(got, want, kAtol, kRtol)) << "step " << step << " n_tokens " << n << " pos " << pos;
    // And close to attention over the unquantized values: q8_0 keeps 7 bits a value.
    auto exact = ref::attention(q, kin, vin, c.kv(), n, c.n_heads(), pos, scale);
    EXPECT_TRUE(all_close(got, exact, 0.05f, 0.05f)) << "step " << step;
    pos += n;
    ++step;
  }
}

TEST(AttentionQ8Sequence, Hd64Gqa4) {
  run_sequence({.head_dim = 64, .n_kv_heads = 2, .group = 4, .n_ctx = 96, .max_tokens = 64, .f16 = true,
                .k_q8 = true, .v_q8 = true});
}
TEST(AttentionQ8Sequence, Hd96KOnlyNoSubgroups) {
  run_sequence({.head_dim = 96, .n_kv_heads = 1, .group = 2, .n_ctx = 96, .max_tokens = 64, .f16 = true,
                .decode = ops::DecodeKernel::split, .prefill = ops::PrefillKernel::tile, .k_q8 = true});
}
TEST(AttentionQ8Sequence, Hd32VOnlyCacheParts) {
  run_sequence({.head_dim = 32, .n_kv_heads = 3, .group = 2, .n_ctx = 96, .max_tokens = 64, .f16 = true,
                .cache_parts = {2, 1}, .v_q8 = true});
}

TEST(AttentionQ8Build, RefusesWhatItCannotRead) {
  Graph g(device());
  // A row that is not whole blocks of 32.
  EXPECT_THROW(ops::add_kv_cache(g, "kc", DType::Q8_0, 2, 16, 48), std::invalid_argument);
  // An f32 cache beside a q8_0 one.
  auto kc = ops::add_kv_cache(g, "kc", DType::F32, 2, 16, 64);
  auto vc = ops::add_kv_cache(g, "vc", DType::Q8_0, 2, 16, 64);
  auto pos = add_symbol(g, {.name = "pos", .lo = 0, .hi = 15});
  auto q = add_input(g, {.name = "q", .max_shape = {4, 2 * 64}, .dynamic_dims = 1});
  EXPECT_THROW(ops::add_attention(g, {.name = "attn", .q = q, .k_cache = kc, .v_cache = vc, .pos = pos, .n_heads = 2}),
               std::invalid_argument);
  // The bytes: 34 a block of 32 where the row is whole pairs of blocks, 53% of f16's.
  EXPECT_EQ(tensor_info(g, vc).bytes, uint64_t(2) * 16 * 64 * 34 / 32);
  EXPECT_EQ(dtype_bytes(DType::Q8_0, {2, 16, 96}), uint64_t(2) * 16 * (96 + 8));
}

}  // namespace
}  // namespace wgrt::test
