// rope against the CPU reference (double angles): both layouts, partial rotation, llama3
// scaling, frequency factors, large positions, and a dynamic sequence with pos advancing.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <optional>
#include <utility>

#include "ops/attention_q8_support.h"
#include "ops/rope/rope.h"
#include "reference/norm_ref.h"
#include "reference/quant_ref.h"
#include "reference/rope_ref.h"
#include "support/device.h"
#include "support/op_harness.h"
#include "support/random.h"

namespace wgrt::test {
namespace {

using namespace graph;

struct RopeCase {
  uint32_t n_heads = 1, head_dim = 64, n_rot = 0;
  bool neox = false;
  double theta = 10000;
  bool llama3 = false;
  bool factors = false;
};

ops::RopeFreqs freqs_of(const RopeCase& c) {
  ops::RopeFreqs f{.n_rot = c.n_rot ? c.n_rot : c.head_dim, .theta = c.theta};
  if (c.llama3) f.llama3 = ops::Llama3RopeScaling{.factor = 8, .low_freq_factor = 1, .high_freq_factor = 4,
                                                  .original_max_position = 8192};
  if (c.factors)
    for (uint32_t j = 0; j < f.n_rot / 2; ++j) f.freq_factors.push_back(1.f + 0.25f * float(j % 5));
  return f;
}

ref::RopeRefConfig ref_of(const RopeCase& c) {
  ref::RopeRefConfig r{.n_heads = c.n_heads, .head_dim = c.head_dim, .n_rot = c.n_rot ? c.n_rot : c.head_dim,
                       .neox = c.neox, .theta = c.theta};
  if (c.llama3) {
    r.factor = 8;
    r.low_freq_factor = 1;
    r.high_freq_factor = 4;
    r.original_max_position = 8192;
  }
  if (c.factors)
    for (uint32_t j = 0; j < r.n_rot / 2; ++j) r.freq_factors.push_back(1.0 + 0.25 * (j % 5));
  return r;
}

struct RopeGraph {
  Graph g;
  TensorId x, freqs, y;
  SymbolId pos;
  RopeGraph(uint32_t max_tokens, int64_t max_pos, const RopeCase& c) : g(device()) {
    uint32_t cols = c.n_heads * c.head_dim;
    ops::RopeFreqs f = freqs_of(c);
    x = add_input(g, {.name = "x", .max_shape = {max_tokens, cols}, .dynamic_dims = 1});
    pos = add_symbol(g, {.name = "pos", .lo = 0, .hi = max_pos});
    freqs = ops::add_rope_freqs(g, "rope_freqs", f.n_rot);
    y = ops::add_rope(g, {.name = "y", .x = x, .freqs = freqs, .pos = pos, .head_dim = c.head_dim,
                          .n_rot = c.n_rot, .layout = c.neox ? ops::RopeLayout::Neox : ops::RopeLayout::Normal});
    mark_output(g, y);
    build(g);
    write_tensor<uint32_t>(g, freqs, ops::rope_freq_table(f));
  }
  std::vector<float> run(const std::vector<float>& xv, uint32_t tokens, uint32_t cols, int64_t p) {
    ShapeInput s{x, {tokens, cols}};
    SymbolInput sv{pos, p};
    StepInput in{x, xv.data(), xv.size() * 4};
    return run_step(g, {&s, 1}, {&sv, 1}, {&in, 1}, y);
  }
};

// Angles are reduced exactly (rope.h), so the error stays at f32 sin/cos level at any position.
constexpr float kAtol = 2e-5f, kRtol = 1e-5f;

OpCase rope_case(std::string name, uint32_t tokens, int64_t pos, RopeCase c) {
  return {name, [=] {
            uint32_t cols = c.n_heads * c.head_dim;
            RopeGraph rg(tokens, pos + 1, c);
            auto xv = random_floats(size_t(tokens) * cols, tokens + cols + uint32_t(pos), -2.f, 2.f);
            auto got = rg.run(xv, tokens, cols, pos);
            EXPECT_TRUE(all_close(got, ref::rope(xv, tokens, pos, ref_of(c)), kAtol, kRtol));
          }};
}

OpCase dynamic_case(RopeCase c) {
  return {fmt::format("dynamic_{}_hd{}", c.neox ? "neox" : "normal", c.head_dim), [=] {
            uint32_t cols = c.n_heads * c.head_dim;
            RopeGraph rg(64, 4096, c);
            int64_t pos = 0;
            uint32_t step = 0;
            for (uint32_t tokens : {37u, 1u, 1u, 64u, 1u}) {
              auto xv = random_floats(size_t(tokens) * cols, 900 + step++, -2.f, 2.f);
              auto got = rg.run(xv, tokens, cols, pos);
              EXPECT_TRUE(all_close(got, ref::rope(xv, tokens, pos, ref_of(c)), kAtol, kRtol))
                  << "step " << step << ", n_tokens " << tokens << ", pos " << pos;
              pos += tokens;
            }
          }};
}

std::vector<OpCase> rope_cases() {
  std::vector<OpCase> cases;
  for (bool neox : {false, true}) {
    std::string l = neox ? "neox" : "normal";
    cases.push_back(rope_case(l + "_1tok_1x64", 1, 0, {.n_heads = 1, .head_dim = 64, .neox = neox}));
    cases.push_back(rope_case(l + "_3tok_7x64", 3, 5, {.n_heads = 7, .head_dim = 64, .neox = neox}));
    cases.push_back(rope_case(l + "_37tok_3x128", 37, 11, {.n_heads = 3, .head_dim = 128, .neox = neox}));
    cases.push_back(rope_case(l + "_7tok_5x128_theta1e6", 7, 97, {.n_heads = 5, .head_dim = 128, .neox = neox, .theta = 1e6}));
    // Partial rotation: the first n_rot dims turn, the rest pass through.
    cases.push_back(rope_case(l + "_5tok_3x64_rot32", 5, 3, {.n_heads = 3, .head_dim = 64, .n_rot = 32, .neox = neox}));
    cases.push_back(rope_case(l + "_3tok_2x128_rot26", 3, 131, {.n_heads = 2, .head_dim = 128, .n_rot = 26, .neox = neox}));
    // llama3 frequency scaling (theta 500000, factor 8, 1/4, 8192), llama 3.1 positions.
    cases.push_back(rope_case(l + "_7tok_4x128_llama3", 7, 70000, {.n_heads = 4, .head_dim = 128, .neox = neox, .theta = 500000, .llama3 = true}));
    cases.push_back(rope_case(l + "_3tok_2x64_factors", 3, 4099, {.n_heads = 2, .head_dim = 64, .neox = neox, .factors = true}));
    // Large positions: f32 pos * inv_freq would be off by ~1e-2 rad here.
    cases.push_back(rope_case(l + "_3tok_2x128_pos131071", 3, 131071, {.n_heads = 2, .head_dim = 128, .neox = neox, .theta = 500000}));
    cases.push_back(rope_case(l + "_2tok_3x64_pos1e7", 2, 10'000'000, {.n_heads = 3, .head_dim = 64, .neox = neox}));
    cases.push_back(rope_case(l + "_1tok_1x64_pos2e9", 1, 2'000'000'000, {.n_heads = 1, .head_dim = 64, .neox = neox}));
    cases.push_back(dynamic_case({.n_heads = 3, .head_dim = 128, .neox = neox, .theta = 1e6}));
    // The other head sizes of 16..256 that real models use.
    for (uint32_t hd : {16u, 24u, 40u, 80u, 96u, 256u})
      cases.push_back(rope_case(fmt::format("{}_5tok_3x{}", l, hd), 5, 17, {.n_heads = 3, .head_dim = hd, .neox = neox}));
  }
  cases.push_back(dynamic_case({.n_heads = 5, .head_dim = 64, .n_rot = 48, .theta = 500000, .llama3 = true}));
  cases.push_back({"freq_table_matches_reference", [] {
                     // The table's 0.64 fixed point turns per position, read back as radians.
                     RopeCase c{.head_dim = 128, .theta = 500000, .llama3 = true};
                     auto table = ops::rope_freq_table(freqs_of(c));
                     auto want = ref::rope_inv_freq(ref_of(c));
                     ASSERT_EQ(table.size(), want.size() * 2);
                     for (size_t j = 0; j < want.size(); ++j) {
                       double turns = (double(table[2 * j]) + double(table[2 * j + 1]) / 4294967296.0) / 4294967296.0;
                       EXPECT_NEAR(turns * 2 * 3.14159265358979323846, want[j], 1e-15) << "pair " << j;
                     }
                   }});
  cases.push_back({"rejects_bad_dims", [] {
                     Graph g(device());
                     TensorId x = add_input(g, {.name = "x", .max_shape = {4, 100}, .dynamic_dims = 1});
                     SymbolId pos = add_symbol(g, {.name = "pos", .lo = 0, .hi = 10});
                     TensorId f = ops::add_rope_freqs(g, "f", 64);
                     EXPECT_THROW(ops::add_rope(g, {.name = "y", .x = x, .freqs = f, .pos = pos, .head_dim = 64}),
                                  std::invalid_argument);  // 100 is not n_heads * 64
                     TensorId x2 = add_input(g, {.name = "x2", .max_shape = {4, 128}, .dynamic_dims = 1});
                     EXPECT_THROW(ops::add_rope(g, {.name = "y2", .x = x2, .freqs = f, .pos = pos, .head_dim = 64, .n_rot = 32}),
                                  std::invalid_argument);  // table is for n_rot 64
                   }});
  return cases;
}

WGRT_OP_CASES(Rope, rope_cases);

// KvRows: a step's rows of several sequences, (sequence, tokens) runs, at their own positions.
using Runs = std::vector<std::pair<uint32_t, uint32_t>>;
struct RowsStep {
  std::vector<int64_t> pos;
  std::vector<uint32_t> base, table;
  uint32_t max_keys = 0;
};
RowsStep rows_step(std::vector<uint32_t>& len, const Runs& runs, uint32_t region) {
  RowsStep r;
  for (auto [s, n] : runs)
    for (uint32_t i = 0; i < n; ++i) {
      r.pos.push_back(len[s]++);
      r.base.push_back(s * region);
      r.table.insert(r.table.end(), {uint32_t(r.pos.back()), r.base.back()});
      r.max_keys = std::max(r.max_keys, uint32_t(r.pos.back()) + 1);
    }
  return r;
}

// rope with a table: positions from the rows (the regions do not matter to rope), both layouts,
// steps whose rows differ.
void run_rope_rows(const RopeCase& c) {
  Graph g(device());
  const uint32_t cols = c.n_heads * c.head_dim, max_t = 37;
  ops::RopeFreqs f = freqs_of(c);
  TensorId x = add_input(g, {.name = "x", .max_shape = {max_t, cols}, .dynamic_dims = 1});
  SymbolId pos = add_symbol(g, {.name = "pos", .lo = 0, .hi = 10});
  TensorId table = add_input(g, {.name = "rows", .dtype = DType::U32, .max_shape = {max_t, 2}, .dynamic_dims = 1});
  SymbolId max_keys = add_symbol(g, {.name = "max_keys", .lo = 1, .hi = 1 << 20});
  TensorId freqs = ops::add_rope_freqs(g, "rope_freqs", f.n_rot);
  TensorId y = ops::add_rope(g, {.name = "y", .x = x, .freqs = freqs, .pos = pos, .head_dim = c.head_dim,
                                 .n_rot = c.n_rot, .layout = c.neox ? ops::RopeLayout::Neox : ops::RopeLayout::Normal,
                                 .rows = ops::KvRows{.table = table, .max_keys = max_keys}});
  mark_output(g, y);
  build(g);
  write_tensor<uint32_t>(g, freqs, ops::rope_freq_table(f));
  std::vector<uint32_t> len = {0, 5000, 70000, 3};  // sequences at different depths
  uint32_t step = 0;
  for (const Runs& runs : {Runs{{0, 10}, {1, 1}, {2, 20}, {3, 6}}, Runs{{2, 1}, {0, 1}, {1, 1}}, Runs{{3, 1}},
                           Runs{{1, 1}, {0, 7}, {2, 3}}}) {
    RowsStep r = rows_step(len, runs, 0);
    const uint32_t n = uint32_t(r.pos.size());
    auto xv = random_floats(size_t(n) * cols, 300 + step, -2.f, 2.f);
    ShapeInput s[] = {{x, {n, cols}}, {table, {n, 2}}};
    SymbolInput sv[] = {{pos, 0}, {max_keys, r.max_keys}};
    StepInput in[] = {{x, xv.data(), xv.size() * 4}, {table, r.table.data(), r.table.size() * 4}};
    auto got = run_step(g, s, sv, in, y);
    EXPECT_TRUE(all_close(got, ref::rope_at(xv, r.pos, ref_of(c)), kAtol, kRtol)) << "step " << step;
    ++step;
  }
}

std::vector<OpCase> rope_rows_cases() {
  std::vector<OpCase> cases;
  for (bool neox : {false, true}) {
    cases.push_back({fmt::format("{}_3x64", neox ? "neox" : "normal"),
                     [=] { run_rope_rows({.n_heads = 3, .head_dim = 64, .neox = neox}); }});
    cases.push_back({fmt::format("{}_2x40_rot24_llama3", neox ? "neox" : "normal"), [=] {
                       run_rope_rows({.n_heads = 2, .head_dim = 40, .n_rot = 24, .neox = neox, .theta = 500000,
                                      .llama3 = true});
                     }});
  }
  return cases;
}

WGRT_OP_CASES(RopeRows, rope_rows_cases);

// rope_qkv: the rotated q against ref::rope on the q heads, the caches (read back whole) against
// ref::rope on the k heads and the v heads copied, at each step's positions; f16 caches within
// f16 rounding, q8_0 caches (rope_qkv_q8) within half a quantization step of each block.
struct QkvCase {
  uint32_t n_heads, n_kv, head_dim, n_rot;
  bool neox, f16;
  bool rows = false;  // RopeQkv::rows: four sequences in regions of 24 rows
  bool q8 = false;    // q8_0 caches (f16 unused)
  bool norm = false;  // RopeQkv::q_norm / k_norm: each q and k head RMS-normalized before it turns
};

std::string qkv_case_name(const QkvCase& c) {
  return fmt::format("{}_h{}_kv{}_hd{}_rot{}_{}{}", c.neox ? "neox" : "normal", c.n_heads, c.n_kv, c.head_dim, c.n_rot,
                     c.q8 ? "q8_0" : c.f16 ? "f16" : "f32", c.norm ? "_qk_norm" : "");
}

void run_rope_qkv(const QkvCase& c) {
  Graph g(device());
  const uint32_t max_t = 37, n_ctx = 96, hd = c.head_dim;
  const uint32_t width = (c.n_heads + 2 * c.n_kv) * hd;
  RopeCase rc{.n_heads = c.n_heads, .head_dim = hd, .n_rot = c.n_rot, .neox = c.neox, .theta = 500000};
  TensorId x = add_input(g, {.name = "qkv", .max_shape = {max_t, width}, .dynamic_dims = 1});
  SymbolId pos = add_symbol(g, {.name = "pos", .lo = 0, .hi = n_ctx - 1});
  std::optional<ops::KvRows> kv_rows;
  TensorId table;
  SymbolId max_keys;
  if (c.rows) {
    table = add_input(g, {.name = "rows", .dtype = DType::U32, .max_shape = {max_t, 2}, .dynamic_dims = 1});
    max_keys = add_symbol(g, {.name = "max_keys", .lo = 1, .hi = n_ctx});
    kv_rows = ops::KvRows{.table = table, .max_keys = max_keys};
  }
  ops::RopeFreqs f = freqs_of(rc);
  TensorId freqs = ops::add_rope_freqs(g, "rope_freqs", f.n_rot);
  const DType cd = c.q8 ? DType::Q8_0 : c.f16 ? DType::F16 : DType::F32;
  TensorId kc = add_weight(g, {.name = "k_cache", .dtype = cd, .shape = {c.n_kv, n_ctx, hd}, .role = TensorRole::State});
  TensorId vc = add_weight(g, {.name = "v_cache", .dtype = cd, .shape = {c.n_kv, n_ctx, hd}, .role = TensorRole::State});
  ops::RopeQkv spec{.freqs = freqs, .pos = pos, .n_heads = c.n_heads, .n_kv_heads = c.n_kv, .head_dim = hd,
                    .n_rot = c.n_rot, .layout = c.neox ? ops::RopeLayout::Neox : ops::RopeLayout::Normal,
                    .k_cache = kc, .v_cache = vc, .rows = kv_rows};
  if (c.norm) {
    spec.q_norm = add_weight(g, {.name = "q_norm", .shape = {hd}});
    spec.k_norm = add_weight(g, {.name = "k_norm", .shape = {hd}});
    spec.norm_eps = 1e-6f;
  }
  TensorId y = ops::add_rope_qkv(g, {.name = "q", .qkv = x, .rope = spec});
  for (TensorId t : {y, kc, vc}) mark_output(g, t);
  build(g);
  write_tensor<uint32_t>(g, freqs, ops::rope_freq_table(f));
  const std::vector<float> qn = random_floats(hd, 7, 0.5f, 1.5f), kn = random_floats(hd, 8, 0.5f, 1.5f);
  if (c.norm) {
    write_tensor<float>(g, *spec.q_norm, qn);
    write_tensor<float>(g, *spec.k_norm, kn);
  }

  auto cache_value = [&](const std::vector<uint32_t>& words, size_t i) {
    return c.f16 && !c.q8 ? ref::half_to_float(uint16_t(words[i / 2] >> (16 * (i % 2)))) : std::bit_cast<float>(words[i]);
  };
  RopeCase kcase = rc;
  kcase.n_heads = c.n_kv;
  int64_t p = 0;
  uint32_t step = 0;
  std::vector<uint32_t> len(4, 0);
  const Runs rows_runs[] = {{{0, 10}, {1, 1}, {2, 20}, {3, 6}}, {{1, 1}}, {{2, 1}}, {{1, 1}, {0, 1}, {3, 2}, {2, 1}},
                            {{0, 1}}};
  for (uint32_t n : {37u, 1u, 1u, 5u, 1u}) {
    SCOPED_TRACE(fmt::format("step {}: {} tokens at {}", step, n, p));
    // Each row's position and region (without rows: one sequence at p).
    RowsStep r;
    if (c.rows) {
      r = rows_step(len, rows_runs[step], n_ctx / 4);
    } else {
      for (uint32_t t = 0; t < n; ++t) {
        r.pos.push_back(p + t);
        r.base.push_back(0);
      }
    }
    ASSERT_EQ(r.pos.size(), n);
    auto xv = random_floats(size_t(n) * width, 40 + step++, -2.f, 2.f);
    std::vector<ShapeInput> s = {{x, {n, width}}};
    std::vector<SymbolInput> sv = {{pos, p}};
    if (c.rows) {
      s.push_back({table, {n, 2}});
      sv.push_back({max_keys, r.max_keys});
    }
    update(g, s, sv);
    write_tensor(g, x, xv.data(), xv.size() * 4);
    if (c.rows) write_tensor<uint32_t>(g, table, r.table);
    execute(g);
    std::vector<float> qv, kv, vv;
    for (uint32_t t = 0; t < n; ++t) {
      const float* row = xv.data() + size_t(t) * width;
      qv.insert(qv.end(), row, row + c.n_heads * hd);
      kv.insert(kv.end(), row + c.n_heads * hd, row + (c.n_heads + c.n_kv) * hd);
      vv.insert(vv.end(), row + (c.n_heads + c.n_kv) * hd, row + width);
    }
    if (c.norm) {  // each head over its head_dim values, as stored
      qv = ref::rms_norm(qv, qn, hd, 1e-6f);
      kv = ref::rms_norm(kv, kn, hd, 1e-6f);
    }
    EXPECT_TRUE(all_close(read_output<float>(g, y), ref::rope_at(qv, r.pos, ref_of(rc)), kAtol, kRtol));
    std::vector<float> kw = ref::rope_at(kv, r.pos, ref_of(kcase));
    std::vector<uint32_t> kgot = read_output<uint32_t>(g, kc), vgot = read_output<uint32_t>(g, vc);
    if (c.q8) {  // the caches' values as the attention kernels read them, as f32 words
      for (std::vector<uint32_t>* w : {&kgot, &vgot}) {
        const std::vector<float> v = dequantize_q8(unpack_q8(*w, size_t(c.n_kv) * n_ctx, hd));
        w->assign(v.size(), 0);
        std::transform(v.begin(), v.end(), w->begin(), [](float value) { return std::bit_cast<uint32_t>(value); });
      }
    }
    std::vector<float> kg, vg, kwant, vwant;
    for (uint32_t t = 0; t < n; ++t)
      for (uint32_t h = 0; h < c.n_kv; ++h)
        for (uint32_t e = 0; e < hd; ++e) {
          const size_t at = (size_t(h) * n_ctx + r.base[t] + size_t(r.pos[t])) * hd + e;
          const size_t src = (size_t(t) * c.n_kv + h) * hd + e;
          kg.push_back(cache_value(kgot, at));
          vg.push_back(cache_value(vgot, at));
          kwant.push_back(kw[src]);
          vwant.push_back(vv[src]);
        }
    const float rt = c.f16 ? 1e-3f : kRtol;
    // q8_0: values within [-2.9, 2.9], so a block's step d is at most 0.023 and q is off by at most d / 2.
    const float at = c.q8 ? 0.0125f : kAtol;
    EXPECT_TRUE(all_close(kg, kwant, at, c.q8 ? 1e-3f : rt)) << "k cache";
    EXPECT_TRUE(all_close(vg, vwant, at, c.q8 ? 1e-3f : rt)) << "v cache";
    p += n;
  }
}

std::vector<OpCase> rope_qkv_cases() {
  std::vector<OpCase> cases;
  const QkvCase shapes[] = {{4, 2, 64, 64, false, true},  {4, 2, 64, 64, true, true},   {3, 1, 128, 128, true, false},
                            {2, 2, 64, 32, false, false}, {6, 2, 128, 96, true, true},  {1, 1, 16, 16, false, true},
                            {2, 2, 24, 24, true, true},   {4, 1, 40, 40, false, true},  {4, 2, 80, 80, true, false},
                            {2, 1, 96, 96, false, true},  {8, 1, 256, 256, true, false}, {2, 2, 256, 64, false, true},
                            // q8_0 caches: heads of 64 (16 quads: 16 heads a workgroup), 96 (24 quads:
                            // 10 heads, 16 threads idle) and 128; normal and neox pairs.
                            {4, 2, 64, 64, false, false, false, true}, {4, 2, 64, 64, true, false, false, true},
                            {2, 1, 96, 96, false, false, false, true}, {6, 2, 128, 96, true, false, false, true},
                            {8, 1, 256, 256, true, false, false, true},
                            // q and k heads RMS-normalized first (Qwen3, Gemma 3): heads of 64, 128 (partial
                            // rotary too) and 256, f32 / f16 / q8_0 caches.
                            {4, 2, 64, 64, false, true, false, false, true}, {3, 1, 128, 128, true, false, false, false, true},
                            {6, 2, 128, 96, true, true, false, false, true}, {8, 1, 256, 256, true, false, false, false, true},
                            {4, 2, 64, 64, true, false, false, true, true}};
  for (const QkvCase& c : shapes) cases.push_back({qkv_case_name(c), [c] { run_rope_qkv(c); }});
  return cases;
}

WGRT_OP_CASES(RopeQkv, rope_qkv_cases);

std::vector<OpCase> rope_qkv_rows_cases() {
  std::vector<OpCase> cases;
  const QkvCase shapes[] = {{4, 2, 64, 64, false, true, true}, {4, 2, 64, 64, true, false, true},
                            {4, 1, 40, 40, false, false, true}, {6, 2, 128, 96, true, true, true},
                            {4, 2, 64, 64, true, false, true, true}, {4, 2, 64, 64, true, false, true, false, true}};
  for (const QkvCase& c : shapes)
    cases.push_back({qkv_case_name(c),
                     [c] { run_rope_qkv(c); }});
  return cases;
}

WGRT_OP_CASES(RopeQkvRows, rope_qkv_rows_cases);

}  // namespace
}  // namespace wgrt::test
