// linear_q with the rope epilogue (LinearQDesc::rope): the q|k|v projection of RMS-normalized
// x, then RoPE of q and k, q out and k and v into the caches at pos + row, on every route (the
// gemv's own epilogue gemv_rope where the layout is normal, else rope_qkv after the kernels),
// against the plain CPU references composed in the same order: ref::rms_norm, ref::linear,
// ref::rope on the q and the k heads, v copied.
//
// With RopeQkv::rows (a step of several sequences) the same on every route with the rows'
// positions and regions (on the gemv routes the gemv's epilogue gemv_rope_rows reads them from
// the table where the device binds its 10 storage buffers, elsewhere rope_qkv).
//
// Tolerances, per output: the unfused projection's (linear_q_fused_test.cpp: 1e-5 * sum_k
// |xn w|, plus the int8 activation rounding bound where the route takes int8 x) of both
// elements of the output's rotation pair (a rotation mixes them with weights <= 1), plus the
// rotation's own rounding (rope_test.cpp's 1e-5 + 1e-4 |want|), plus f16 rounding of the caches.
#include <fmt/format.h>

#include <bit>
#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "ops/linear_q/linear_q.h"
#include "ops/quant/quant.h"
#include "ops/rope/rope.h"
#include "reference/linear_q_ref.h"
#include "reference/norm_ref.h"
#include "reference/quant_ref.h"
#include "reference/reference.h"
#include "reference/rope_ref.h"
#include "support/device.h"
#include "support/op_harness.h"
#include "support/random.h"

namespace wgrt::test {
namespace {

using namespace graph;
using ops::QuantFormat;

struct RopeLinCase {
  std::vector<QuantFormat> formats;  // q|k|v as one weight (one format), or one weight per q, k, v
  uint32_t n_heads, n_kv, head_dim, n_rot;
  bool neox = false, f16 = false, bias = false;
  int gemv_int8 = 0;
  bool rows = false;  // RopeQkv::rows: three sequences in regions of kRegion rows
  uint32_t gemv_x = 0;  // LinearQDesc::gemv_x; with it gemv_m is off (gemv_multi forced)
};

constexpr uint32_t kRegion = 16;

// The runs (sequence, tokens) of a rows step of m tokens.
std::vector<std::pair<uint32_t, uint32_t>> runs_for(uint32_t m, uint32_t step) {
  if (m == 1) return {{step % 3, 1}};
  if (m == 3) return {{2, 1}, {0, 1}, {1, 1}};
  return {{1, 4}, {0, 1}, {2, m - 5}};
}

constexpr double kTheta = 500000;

uint32_t group_of(QuantFormat f) { return f == QuantFormat::Q6K ? 256 : 32; }

// A weight [n, k] and the reference's reading of it.
std::pair<ops::QuantWeight, std::vector<float>> make_weight(QuantFormat f, uint32_t n, uint32_t k, uint32_t seed) {
  const size_t count = size_t(n) * k;
  if (f == QuantFormat::Q4K) {
    auto b = random_k_blocks(count / 256, seed, false);
    return {ops::repack_gguf_q4_k(b, n, k), ref::dequant_gguf_q4_k(b, count)};
  }
  if (f == QuantFormat::Q6K) {
    auto b = random_q6_k_blocks(count / 256, seed);
    return {ops::repack_gguf_q6_k(b, n, k), ref::dequant_gguf_q6_k(b, count)};
  }
  ops::QuantWeight w = ops::quantize(f, random_floats(count, seed, -1.f, 1.f), n, k, 32);
  std::vector<float> wd = f == QuantFormat::Q4gsw ? ref::dequant_q4gsw(w.q, w.scales, n, k, 32)
                                                  : ref::dequant_q8(w.q, w.scales, n, k, 32);
  return {w, wd};
}

// Rows of x's route: the gemv from one row (int8 x as the case says), else the matrix routes.
bool int8_route(const RopeLinCase& c, uint32_t m) {
  if (m > 1) return true;  // small_m of q6k and every gemm take int8 x; small_m's f32 is within it
  return ops::gemv_takes_int8(device().caps, c.gemv_int8);
}

void run_rope_linear(const RopeLinCase& c) {
  const uint32_t k = 256, max_m = 9, n_ctx = c.rows ? 3 * kRegion : 40, hd = c.head_dim;
  const uint32_t q_dim = c.n_heads * hd, kv_dim = c.n_kv * hd, n = q_dim + 2 * kv_dim;
  Graph g(device());
  TensorId x = add_input(g, {.name = "x", .max_shape = {max_m, k}, .dynamic_dims = 1});
  SymbolId pos = add_symbol(g, {.name = "pos", .lo = 0, .hi = n_ctx - 1});
  std::optional<ops::KvRows> kv_rows;
  TensorId table;
  SymbolId max_keys;
  if (c.rows) {
    table = add_input(g, {.name = "rows", .dtype = DType::U32, .max_shape = {max_m, 2}, .dynamic_dims = 1});
    max_keys = add_symbol(g, {.name = "max_keys", .lo = 1, .hi = n_ctx});
    kv_rows = ops::KvRows{.table = table, .max_keys = max_keys};
  }
  ops::RopeFreqs freqs{.n_rot = c.n_rot, .theta = kTheta};
  TensorId ft = ops::add_rope_freqs(g, "rope_freqs", c.n_rot);
  const DType cd = c.f16 ? DType::F16 : DType::F32;
  TensorId kc = add_weight(g, {.name = "k_cache", .dtype = cd, .shape = {c.n_kv, n_ctx, hd}, .role = TensorRole::State});
  TensorId vc = add_weight(g, {.name = "v_cache", .dtype = cd, .shape = {c.n_kv, n_ctx, hd}, .role = TensorRole::State});
  // The weights: one of n rows, or q, k and v.
  std::vector<uint32_t> rows = c.formats.size() == 1 ? std::vector<uint32_t>{n} : std::vector<uint32_t>{q_dim, kv_dim, kv_dim};
  std::vector<ops::QuantTensors> wts;
  for (size_t i = 0; i < rows.size(); ++i)
    wts.push_back(ops::add_quant_weight(g, fmt::format("w{}", i), c.formats[i], rows[i], k, group_of(c.formats[i])));
  TensorId norm = add_weight(g, {.name = "norm", .shape = {k}});
  std::optional<TensorId> bias;
  if (c.bias) bias = add_weight(g, {.name = "bias", .shape = {n}});
  ops::LinearQDesc d{.name = "q", .format = c.formats[0], .gs = group_of(c.formats[0]), .x = x, .q = wts[0].q,
                     .scales = wts[0].scales, .bias = bias, .norm = norm, .eps = 1e-5f,
                     .rope = ops::RopeQkv{.freqs = ft, .pos = pos, .n_heads = c.n_heads, .n_kv_heads = c.n_kv,
                                          .head_dim = hd, .n_rot = c.n_rot,
                                          .layout = c.neox ? ops::RopeLayout::Neox : ops::RopeLayout::Normal,
                                          .k_cache = kc, .v_cache = vc, .rows = kv_rows},
                     .gemv_int8 = c.gemv_int8, .gemv_x = c.gemv_x,
                     .gemv_m_from = c.gemv_x ? ops::kLinearQGemvMaxRows + 1 : 0};
  for (size_t i = 1; i < rows.size(); ++i)
    d.more.push_back({c.formats[i], group_of(c.formats[i]), wts[i].q, wts[i].scales});
  TensorId y = ops::add_linear_q(g, d);
  NodeId node = find_node(g, "q");
  for (TensorId t : {y, kc, vc}) mark_output(g, t);
  build(g);

  write_tensor<uint32_t>(g, ft, ops::rope_freq_table(freqs));
  std::vector<float> wd;
  for (size_t i = 0; i < rows.size(); ++i) {
    auto [w, deq] = make_weight(c.formats[i], rows[i], k, 70 + uint32_t(i));
    ops::write_quant_weight(g, wts[i], w);
    wd.insert(wd.end(), deq.begin(), deq.end());
  }
  const std::vector<float> nv = random_floats(k, 5, 0.5f, 1.5f);
  write_tensor<float>(g, norm, nv);
  std::vector<float> bv;
  if (bias) {
    bv = random_floats(n, 6, -1.f, 1.f);
    write_tensor<float>(g, *bias, bv);
  }

  ref::RopeRefConfig rq{.n_heads = c.n_heads, .head_dim = hd, .n_rot = c.n_rot, .neox = c.neox, .theta = kTheta};
  ref::RopeRefConfig rk = rq;
  rk.n_heads = c.n_kv;
  // The other element of the rotation pair of element e of a head.
  auto partner = [&](uint32_t e) -> uint32_t {
    if (e >= c.n_rot) return e;
    if (!c.neox) return e ^ 1u;
    return e < c.n_rot / 2 ? e + c.n_rot / 2 : e - c.n_rot / 2;
  };
  auto cache_value = [&](const std::vector<uint32_t>& words, size_t i) {
    return c.f16 ? ref::half_to_float(uint16_t(words[i / 2] >> (16 * (i % 2)))) : std::bit_cast<float>(words[i]);
  };
  int64_t p = 0;
  uint32_t step = 0;
  std::vector<uint32_t> len(3, 0);  // rows: the sequences' lengths
  for (uint32_t m : {1u, 3u, 9u, 1u, 1u}) {
    SCOPED_TRACE(fmt::format("step {}: {} rows at {}", step, m, p));
    // Each row's position and first cache row (one sequence at p without rows).
    std::vector<int64_t> at_pos;
    std::vector<uint32_t> at_base, tv;
    uint32_t keys = 0;
    if (c.rows) {
      for (auto [sq, count] : runs_for(m, step))
        for (uint32_t i = 0; i < count; ++i) {
          at_pos.push_back(len[sq]++);
          at_base.push_back(sq * kRegion);
          tv.insert(tv.end(), {uint32_t(at_pos.back()), at_base.back()});
          keys = std::max(keys, uint32_t(at_pos.back()) + 1);
        }
    } else {
      for (uint32_t t = 0; t < m; ++t) {
        at_pos.push_back(p + t);
        at_base.push_back(0);
      }
    }
    auto xv = random_floats(size_t(m) * k, 200 + step++, -2.f, 2.f);
    std::vector<ShapeInput> s = {{x, {m, k}}};
    std::vector<SymbolInput> sv = {{pos, p}};
    std::vector<StepInput> in = {{x, xv.data(), xv.size() * 4}};
    if (c.rows) {
      s.push_back({table, {m, 2}});
      sv.push_back({max_keys, keys});
      in.push_back({table, tv.data(), tv.size() * 4});
    }
    std::vector<float> got = run_step(g, s, sv, in, y);
    const Route& route = active_route_info(g, node);
    ASSERT_EQ(route.id, ops::linear_q_route(device().caps, n, m, c.gemv_int8, c.gemv_x,
                                            c.gemv_x ? ops::kLinearQGemvMaxRows + 1 : 0));
    const bool fused = route.kernels[0].pipeline.entry == (c.rows ? "gemv_rope_rows" : "gemv_rope");
    const bool gemv = route.id == ops::kLinearQGemv || route.id == ops::kLinearQGemvMulti;
    EXPECT_EQ(fused, gemv && !c.neox &&
                         device().caps.limits.maxStorageBuffersPerShaderStage >= (c.rows ? 10u : 9u));

    // The reference: q|k|v of the normalized rows, its bounds, then the rotations.
    const std::vector<float> xn = ref::rms_norm(xv, nv, k, 1e-5);
    const std::vector<float> qkv = ref::linear(xn, wd, bv, m, n, k);
    std::vector<float> eb = ref::abs_dot(xn, wd, m, n, k);
    const std::vector<float> act = int8_route(c, m) ? ref::int8_act_error_bound(xn, wd, m, n, k, 32)
                                                    : std::vector<float>(eb.size(), 0.f);
    for (size_t i = 0; i < eb.size(); ++i) eb[i] = 1e-5f * (eb[i] + 1.f) + 1.01f * act[i];
    std::vector<float> qs, ks, vs;
    for (uint32_t t = 0; t < m; ++t) {
      const float* row = qkv.data() + size_t(t) * n;
      qs.insert(qs.end(), row, row + q_dim);
      ks.insert(ks.end(), row + q_dim, row + q_dim + kv_dim);
      vs.insert(vs.end(), row + q_dim + kv_dim, row + n);
    }
    const std::vector<float> q_want = ref::rope_at(qs, at_pos, rq), k_want = ref::rope_at(ks, at_pos, rk);
    // Bound of output column `col` (of q|k|v) of row t: its pair's projection bounds + rounding.
    auto bound = [&](uint32_t t, uint32_t col, float want, bool rotated, bool cache) {
      const uint32_t head0 = col - col % hd, e = col % hd;
      float b = eb[size_t(t) * n + col];
      if (rotated) b += eb[size_t(t) * n + head0 + partner(e)];
      b += 1e-5f + 1e-4f * std::fabs(want);
      if (cache && c.f16) b += 1e-3f * std::fabs(want);
      return b;
    };
    std::vector<float> qb;
    for (uint32_t t = 0; t < m; ++t)
      for (uint32_t col = 0; col < q_dim; ++col) qb.push_back(bound(t, col, q_want[size_t(t) * q_dim + col], true, false));
    ASSERT_EQ(live_shape(g, y), (Shape{m, q_dim}));
    EXPECT_TRUE(within(got, q_want, qb)) << "q";

    const std::vector<uint32_t> kgot = read_output<uint32_t>(g, kc), vgot = read_output<uint32_t>(g, vc);
    std::vector<float> kg, vg, kw, vw, kb, vb;
    for (uint32_t t = 0; t < m; ++t)
      for (uint32_t h = 0; h < c.n_kv; ++h)
        for (uint32_t e = 0; e < hd; ++e) {
          const size_t at = (size_t(h) * n_ctx + at_base[t] + size_t(at_pos[t])) * hd + e;
          const size_t src = (size_t(t) * c.n_kv + h) * hd + e;
          kg.push_back(cache_value(kgot, at));
          vg.push_back(cache_value(vgot, at));
          kw.push_back(k_want[src]);
          vw.push_back(vs[src]);
          kb.push_back(bound(t, q_dim + h * hd + e, k_want[src], true, true));
          vb.push_back(bound(t, q_dim + kv_dim + h * hd + e, vs[src], false, true));
        }
    EXPECT_TRUE(within(kg, kw, kb)) << "k cache";
    EXPECT_TRUE(within(vg, vw, vb)) << "v cache";
    p += m;
  }
}

std::vector<OpCase> rope_linear_cases() {
  std::vector<OpCase> cases;
  const RopeLinCase shapes[] = {
      {{QuantFormat::Q4gsw}, 4, 2, 32, 32, false, true, false},
      {{QuantFormat::Q8}, 4, 1, 16, 8, false, false, true},     // partial rotation, a bias
      {{QuantFormat::Q8}, 2, 2, 64, 64, true, true, true},      // neox: rope_qkv after the gemv
      {{QuantFormat::Q4K, QuantFormat::Q4K, QuantFormat::Q6K}, 4, 2, 64, 64, false, true, false},  // as Q4_K_M
      {{QuantFormat::Q4K, QuantFormat::Q4K, QuantFormat::Q6K}, 2, 1, 128, 96, false, false, true},
  };
  for (const RopeLinCase& s : shapes)
    for (int int8 : {0, 1}) {
      RopeLinCase c = s;
      c.gemv_int8 = int8;
      std::string formats;
      for (QuantFormat f : c.formats) formats += std::string(formats.empty() ? "" : "_") + ops::quant_format_name(f);
      cases.push_back({fmt::format("{}_h{}_kv{}_hd{}_rot{}_{}{}{}{}", formats, c.n_heads, c.n_kv, c.head_dim, c.n_rot,
                                   c.neox ? "neox" : "normal", c.f16 ? "_f16" : "_f32", c.bias ? "_bias" : "",
                                   int8 ? "_xi8" : ""),
                       [c] { run_rope_linear(c); }});
    }
  // gemv_multi (forced): rows 3 and 9 take 4 (or 2) rows of x per workgroup, RoPE in its epilogue.
  for (size_t i : {0, 2, 3})
    for (uint32_t x : {4u, 2u}) {
      if (x == 2 && i != 0) continue;
      RopeLinCase c = shapes[i];
      c.gemv_int8 = 1, c.gemv_x = x;
      std::string formats;
      for (QuantFormat f : c.formats) formats += std::string(formats.empty() ? "" : "_") + ops::quant_format_name(f);
      cases.push_back({fmt::format("{}_hd{}_{}_gemv_multi{}", formats, c.head_dim, c.neox ? "neox" : "normal", x),
                       [c] { run_rope_linear(c); }});
    }
  return cases;
}

WGRT_OP_CASES(LinearQRope, rope_linear_cases);

// The same with KvRows: every route (M = 1, 3, 9) with rows of three sequences.
std::vector<OpCase> rope_linear_rows_cases() {
  std::vector<OpCase> cases;
  const RopeLinCase shapes[] = {
      {{QuantFormat::Q4gsw}, 4, 2, 32, 32, false, true, false, 1},
      {{QuantFormat::Q8}, 2, 2, 64, 64, true, false, true, 0},  // neox
      {{QuantFormat::Q4K, QuantFormat::Q4K, QuantFormat::Q6K}, 2, 1, 128, 96, false, false, true, 1},
  };
  for (RopeLinCase c : shapes)
    for (uint32_t x : {0u, 4u}) {  // 4: gemv_multi forced (rows of 3 and 9)
      c.rows = true;
      c.gemv_x = x;
      if (x) c.gemv_int8 = 1;
      std::string formats;
      for (QuantFormat f : c.formats) formats += std::string(formats.empty() ? "" : "_") + ops::quant_format_name(f);
      cases.push_back({fmt::format("{}_h{}_kv{}_hd{}_{}{}{}", formats, c.n_heads, c.n_kv, c.head_dim,
                                   c.neox ? "neox" : "normal", c.f16 ? "_f16" : "_f32", x ? "_gemv_multi4" : ""),
                       [c] { run_rope_linear(c); }});
    }
  return cases;
}

WGRT_OP_CASES(LinearQRopeRows, rope_linear_rows_cases);

// A step past the context is refused naming the sizes, and the graph keeps its last state.
TEST(LinearQRopeShapes, RefusesPositionsPastTheContext) {
  Graph g(device());
  TensorId x = add_input(g, {.name = "x", .max_shape = {4, 64}, .dynamic_dims = 1});
  SymbolId pos = add_symbol(g, {.name = "pos", .lo = 0, .hi = 100});
  TensorId ft = ops::add_rope_freqs(g, "rope_freqs", 16);
  TensorId kc = add_weight(g, {.name = "kc", .dtype = DType::F16, .shape = {1, 8, 16}, .role = TensorRole::State});
  TensorId vc = add_weight(g, {.name = "vc", .dtype = DType::F16, .shape = {1, 8, 16}, .role = TensorRole::State});
  ops::QuantTensors w = ops::add_quant_weight(g, "w", QuantFormat::Q8, 64, 64, 32);
  TensorId y = ops::add_linear_q(g, {.name = "q", .format = QuantFormat::Q8, .x = x, .q = w.q, .scales = w.scales,
                                     .rope = ops::RopeQkv{.freqs = ft, .pos = pos, .n_heads = 2, .n_kv_heads = 1,
                                                          .head_dim = 16, .k_cache = kc, .v_cache = vc}});
  mark_output(g, y);
  build(g);
  ShapeInput ok{x, {1, 64}};
  SymbolInput at7{pos, 7};
  update(g, {&ok, 1}, {&at7, 1});
  ShapeInput two{x, {2, 64}};
  try {
    update(g, {&two, 1}, {&at7, 1});
    ADD_FAILURE() << "2 tokens at 7 of a context of 8 were taken";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("2 tokens at pos 7 go past the context of 8"), std::string::npos) << e.what();
  }
  EXPECT_EQ(live_shape(g, y), (Shape{1, 32}));
  // The epilogue takes no swiglu, residual or last row; q|k|v must have the heads' columns.
  ops::LinearQDesc bad{.name = "b", .format = QuantFormat::Q8, .x = x, .q = w.q, .scales = w.scales,
                       .last_row = true,
                       .rope = ops::RopeQkv{.freqs = ft, .pos = pos, .n_heads = 2, .n_kv_heads = 1, .head_dim = 16,
                                            .k_cache = kc, .v_cache = vc}};
  EXPECT_THROW(ops::add_linear_q(g, bad), std::invalid_argument);
  bad.last_row = false;
  bad.rope->n_heads = 3;
  EXPECT_THROW(ops::add_linear_q(g, bad), std::invalid_argument);
}

}  // namespace
}  // namespace wgrt::test
