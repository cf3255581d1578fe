// Steps that mix sequences (ops::KvRows): kv write + attention on one graph whose tokens carry
// (position, region) rows. Sequence s owns cache rows s * C .. s * C + C - 1; each step is a
// list of runs (sequence, tokens) at the sequences' next positions, checked against the CPU
// reference (attention_rows, kv_write_rows) over the whole cache. The steps take both routes:
// flash-decoding for 1 .. decode_max_tokens tokens (each of its own sequence, some crossing
// a chunk boundary, one of a single key), prefill past it with sequence boundaries inside
// tiles; then a max_keys past n_ctx is refused and the graph goes on.
#include <fmt/format.h>

#include <cmath>
#include <tuple>
#include <utility>

#include "attention_support.h"
#include "support/op_harness.h"
#include "support/random.h"
#include "support/xq_row.h"

namespace wgrt::test {
namespace {

using namespace graph;

constexpr float kAtol = 2e-4f, kRtol = 2e-3f;
constexpr uint32_t kRegion = 96;  // cache rows per sequence
constexpr uint32_t kSeqs = 5;

using Run = std::pair<uint32_t, uint32_t>;  // (sequence, tokens)

void run_rows(const AttnConfig& c, const std::vector<std::vector<Run>>& steps) {
  AttnGraph a = build_attn_graph(c, /*caches_out=*/true);
  Graph& g = *a.g;
  const size_t cache_n = size_t(c.n_kv_heads) * c.n_ctx * c.head_dim;
  // Random starting contents: rows no step writes must keep them (attention never reads them).
  auto kc = as_stored(random_floats(cache_n, 11, -1.f, 1.f), c.f16);
  auto vc = as_stored(random_floats(cache_n, 12, -1.f, 1.f), c.f16);
  write_cache(g, a.kcs, pack_cache(kc, c.f16));
  write_cache(g, a.vcs, pack_cache(vc, c.f16));
  const uint32_t kv_w = c.n_kv_heads * c.head_dim, q_w = c.n_heads() * c.head_dim;
  const float scale = 1.0f / std::sqrt(float(c.head_dim));
  std::vector<uint32_t> len(kSeqs, 0);
  uint32_t step = 0;

  auto run = [&](const std::vector<Run>& runs) {
    std::vector<ref::TokenRow> rows;
    for (auto [s, n] : runs)
      for (uint32_t i = 0; i < n; ++i) rows.push_back({len[s] + i, s * kRegion});
    const uint32_t n = uint32_t(rows.size());
    uint32_t max_keys = 0;
    std::vector<uint32_t> table;
    for (const ref::TokenRow& r : rows) {
      table.insert(table.end(), {r.pos, r.base});
      max_keys = std::max(max_keys, r.pos + 1);
    }
    auto q = random_floats(size_t(n) * q_w, 1000 + step, -4.f, 4.f);
    auto k = random_floats(size_t(n) * kv_w, 2000 + step, -1.f, 1.f);
    auto v = random_floats(size_t(n) * kv_w, 3000 + step, -1.f, 1.f);
    std::vector<ShapeInput> shapes = {{a.k, {n, kv_w}}, {a.v, {n, kv_w}}, {a.table, {n, 2}}};
    std::vector<StepInput> in = {{a.k, k.data(), k.size() * 4}, {a.v, v.data(), v.size() * 4},
                                 {a.table, table.data(), table.size() * 4}};
    if (c.with_attention) {
      shapes.push_back({a.q, {n, q_w}});
      in.push_back({a.q, q.data(), q.size() * 4});
    }
    SymbolInput sym[] = {{a.pos, 0}, {a.max_keys, max_keys}};
    auto got = run_step(g, shapes, sym, in, c.with_attention ? a.out : a.kc);
    ref::kv_write_rows(kc, c.kv(), as_stored(k, c.f16), rows);
    ref::kv_write_rows(vc, c.kv(), as_stored(v, c.f16), rows);
    const std::string what = fmt::format("step {}: {} tokens, max_keys {}", step, n, max_keys);
    if (c.with_attention) {
      auto want = ref::attention_rows(q, kc, vc, c.kv(), rows, c.n_heads(), scale, c.window, c.softcap);
      EXPECT_TRUE(all_close(got, want, kAtol, kRtol)) << what;
      const bool decode = n <= c.decode_max_tokens;
      EXPECT_EQ(active_route(g, a.attn), decode ? ops::kAttentionDecode : ops::kAttentionPrefill) << what;
      if (decode) {
        EXPECT_EQ(active_plan(g, a.attn).grids[0].z, n) << what;
      }
      if (c.xq_out && n == 1) {  // the output quantized ahead (support/xq_row.h)
        ref::QuantizedActivations qa;
        check_xq_row(read_output<uint32_t>(g, a.xq), got, got, qa);
      }
    }
    const float rtol = c.f16 ? 1e-3f : 0.f;  // pack2x16float may round either way
    EXPECT_TRUE(all_close(unpack_cache(read_cache(g, a.kcs), cache_n, c.f16), kc, 0, rtol)) << what;
    EXPECT_TRUE(all_close(unpack_cache(read_cache(g, a.vcs), cache_n, c.f16), vc, 0, rtol)) << what;
    for (auto [s, n_s] : runs) len[s] += n_s;
    ++step;
  };
  for (const auto& s : steps) run(s);

  // max_keys past n_ctx: refused by plan, nothing committed; the next step runs.
  {
    std::vector<ShapeInput> shapes = {{a.k, {1, kv_w}}, {a.v, {1, kv_w}}, {a.table, {1, 2}}};
    if (c.with_attention) shapes.push_back({a.q, {1, q_w}});
    SymbolInput sym[] = {{a.pos, 0}, {a.max_keys, int64_t(c.n_ctx) + 1}};
    EXPECT_THROW(update(g, shapes, sym), std::out_of_range);
  }
  run({{1, 1}, {0, 1}});
}

// Prefill (mixed tiles), decode of several sequences at different lengths, then the brief's mix.
std::vector<std::vector<Run>> mixed_steps() {
  std::vector<std::vector<Run>> steps = {
      {{0, 20}, {1, 1}, {2, 27}},           // prefill: boundaries inside tiles
      {{2, 40}, {0, 1}, {3, 7}},            // seq 2 to 67 keys
      {{0, 1}, {1, 1}, {2, 1}},             // decode: 22, 2 and 68 keys (past a 64-key chunk)
      {{3, 1}, {2, 1}, {4, 1}, {0, 1}},     // seq 4's first token: one key
      {{2, 1}},                             // one token
      {{0, 1}, {1, 1}, {3, 1}, {2, 20}, {4, 5}},  // 3 decode tokens, a 20-token chunk, 5 more
  };
  return steps;
}

std::vector<OpCase> rows_cases() {
  std::vector<OpCase> cases;
  using K = ops::DecodeKernel;
  auto add = [&](uint32_t hd, uint32_t group, bool f16, K decode = K::best, bool default_limits = false,
                 uint32_t max_chunks = 0) {
    AttnConfig c{.head_dim = hd, .n_kv_heads = group == 8 ? 1u : 2u, .group = group, .n_ctx = kSeqs * kRegion,
                 .max_tokens = 48, .f16 = f16, .max_chunks = max_chunks, .default_limits = default_limits,
                 .decode = decode, .rows = true, .decode_max_tokens = 4};
    cases.push_back({fmt::format("hd{}_gqa{}_{}{}{}{}", hd, group, f16 ? "f16" : "f32", decode_suffix(decode),
                                 default_limits ? "_default_limits" : "",
                                 max_chunks ? fmt::format("_split{}", max_chunks) : ""),
                     [c] { run_rows(c, mixed_steps()); }});
  };
  // decode_vec (where a row fits a subgroup's lanes), decode_sg (on devices with subgroups) and
  // decode_split, f16 and f32, GQA 1/4/8, head_dim 64, 128 and 40; each case runs both routes.
  add(64, 1, true);
  add(128, 4, false);
  add(128, 8, true);
  add(64, 4, true, K::vec);
  add(32, 8, false, K::vec);
  add(40, 2, true, K::vec);
  add(128, 1, false, K::split);
  add(128, 4, true, K::split);
  add(40, 1, false, K::split);
  add(40, 4, true);
  add(64, 8, true, K::best, /*default_limits=*/true);  // WebGPU's default limits
  add(128, 4, false, K::best, false, /*max_chunks=*/1);  // one chunk: the kernel writes every token's output
  add(64, 4, true, K::vec, false, /*max_chunks=*/1);
  add(64, 4, true, K::sg);  // decode_sg where `best` takes decode_vec
  // Each prefill kernel where `best` takes another (on lavapipe: prefill_rt at head dims 64 and
  // 128, the cases above; the tiles at 40).
  using P = ops::PrefillKernel;
  for (auto [hd, group, f16, pk] : {std::tuple{64u, 1u, true, P::sg}, {128u, 4u, false, P::tile},
                                    {40u, 8u, true, P::sg}, {128u, 8u, true, P::tile}, {128u, 4u, true, P::sg},
                                    {32u, 3u, false, P::rt}}) {
    AttnConfig c{.head_dim = hd, .n_kv_heads = group == 8 ? 1u : 2u, .group = group, .n_ctx = kSeqs * kRegion,
                 .max_tokens = 48, .f16 = f16, .prefill = pk, .rows = true, .decode_max_tokens = 4};
    cases.push_back({fmt::format("hd{}_gqa{}_{}{}", hd, group, f16 ? "f16" : "f32", prefill_suffix(c.prefill)),
                     [c] { run_rows(c, mixed_steps()); }});
  }
  // The output quantized ahead (AttentionDesc::xq_out) at the steps of one token: sequence 2 past
  // a chunk (the merge writes it), then sequences 1 and 4 within one chunk (decode_vec and
  // decode_sg write it themselves), on each decode kernel.
  for (K k : {K::vec, K::sg, K::split}) {
    AttnConfig c{.head_dim = 64, .n_kv_heads = 2, .group = 4, .n_ctx = kSeqs * kRegion, .max_tokens = 48,
                 .f16 = true, .decode = k, .rows = true, .decode_max_tokens = 4, .xq_out = true};
    std::vector<std::vector<Run>> steps = mixed_steps();
    steps.insert(steps.end(), {{{1, 1}}, {{4, 1}}});
    cases.push_back({fmt::format("hd64_gqa4_f16{}_xq", decode_suffix(k)), [c, steps] { run_rows(c, steps); }});
  }
  // Caches split by KV heads (two parts of one head): both routes, every decode kernel.
  for (K k : {K::best, K::vec, K::sg, K::split}) {
    AttnConfig c{.head_dim = 64, .n_kv_heads = 2, .group = 2, .n_ctx = kSeqs * kRegion, .max_tokens = 48,
                 .f16 = true, .decode = k, .rows = true, .decode_max_tokens = 4, .cache_parts = {1, 1}};
    cases.push_back({fmt::format("hd64_gqa2_f16{}_parts2", decode_suffix(k)), [c] { run_rows(c, mixed_steps()); }});
  }
  return cases;
}

WGRT_OP_SWEEP(AttentionRows, rows_cases, 2);

// A sliding window (7 keys; 3) and soft-capping in every sequence's region: every decode kernel
// (the windows start inside chunks and past chunk 0) and every prefill kernel (its runs skip the
// key tiles before the window of their first token, in each sequence's own region).
std::vector<OpCase> rows_window_cases() {
  using K = ops::DecodeKernel;
  using P = ops::PrefillKernel;
  std::vector<OpCase> cases;
  for (auto [dk, pk, window] : {std::tuple{K::vec, P::rt, 7u}, {K::sg, P::sg, 3u}, {K::split, P::tile, 7u}}) {
    AttnConfig c{.head_dim = 64, .n_kv_heads = 2, .group = 2, .n_ctx = kSeqs * kRegion, .max_tokens = 48,
                 .f16 = true, .decode = dk, .prefill = pk, .rows = true, .decode_max_tokens = 4, .window = window,
                 .softcap = 1.5f};
    cases.push_back({fmt::format("hd64_gqa2_f16{}{}_window{}_softcap", decode_suffix(dk), prefill_suffix(pk), window),
                     [c] { run_rows(c, mixed_steps()); }});
  }
  return cases;
}

WGRT_OP_CASES(AttentionRowsWindow, rows_window_cases);

// kv write alone with rows: scattered regions, f32 and f16 caches.
std::vector<OpCase> kv_rows_cases() {
  std::vector<OpCase> cases;
  for (bool f16 : {false, true})
    for (uint32_t hd : {40u, 64u}) {
      AttnConfig c{.head_dim = hd, .n_kv_heads = 3, .n_ctx = kSeqs * kRegion, .max_tokens = 48, .f16 = f16,
                   .with_attention = false, .rows = true};
      cases.push_back({fmt::format("{}_hd{}", f16 ? "f16" : "f32", hd), [c] { run_rows(c, mixed_steps()); }});
    }
  return cases;
}

WGRT_OP_CASES(KvCacheRows, kv_rows_cases);

// Without rows the single-sequence path is as before: flash-decoding on [1, 1] only and every
// kernel built without TABLE (the table code folded away; its binding gets q, never read there).
TEST(AttentionRowsBuild, NoRowsKeepsTheSingleSequencePath) {
  AttnConfig c{.n_ctx = 64, .max_tokens = 8};
  AttnGraph a = build_attn_graph(c);
  EXPECT_EQ(route_info(*a.g, a.attn, ops::kAttentionDecode).hi, 1);
  EXPECT_EQ(route_info(*a.g, a.attn, ops::kAttentionPrefill).lo, 2);
  for (NodeId n : {a.write, a.attn})
    for (const Route& r : node_info(*a.g, n).routes.routes)
      for (const KernelSpec& k : r.kernels)
        for (const gpu::OverrideConstant& oc : k.pipeline.constants)
          EXPECT_NE(oc.name, "TABLE") << node_info(*a.g, n).name << " " << k.pipeline.entry;
}

// A table past the cache (positions and bases of ~4e9) is clamped into it: the writes land in
// the last row of each head, the queries attend that row only, nothing else changes.
TEST(AttentionRowsBuild, BadTableStaysInTheCache) {
  for (uint32_t n : {1u, 6u}) {  // flash-decoding, prefill
    AttnConfig c{.head_dim = 64, .n_kv_heads = 2, .n_ctx = 40, .max_tokens = 8, .rows = true, .decode_max_tokens = 2};
    AttnGraph a = build_attn_graph(c, /*caches_out=*/true);
    Graph& g = *a.g;
    const size_t cache_n = size_t(c.n_kv_heads) * c.n_ctx * c.head_dim;
    auto kc = random_floats(cache_n, 21, -1.f, 1.f), vc = random_floats(cache_n, 22, -1.f, 1.f);
    write_cache(g, a.kcs, pack_cache(kc, false));
    write_cache(g, a.vcs, pack_cache(vc, false));
    const uint32_t kv_w = c.n_kv_heads * c.head_dim, q_w = c.n_heads() * c.head_dim;
    auto q = random_floats(size_t(n) * q_w, 23, -1.f, 1.f);
    auto k = random_floats(size_t(n) * kv_w, 24, -1.f, 1.f);
    std::vector<float> v(size_t(n) * kv_w, 0.5f);  // every token the same: the write order does not matter
    std::vector<uint32_t> table;
    for (uint32_t i = 0; i < n; ++i) table.insert(table.end(), {4'000'000'000u - i, 3'999'999'999u});
    ShapeInput shapes[] = {{a.q, {n, q_w}}, {a.k, {n, kv_w}}, {a.v, {n, kv_w}}, {a.table, {n, 2}}};
    SymbolInput sym[] = {{a.pos, 0}, {a.max_keys, c.n_ctx}};
    StepInput in[] = {{a.q, q.data(), q.size() * 4}, {a.k, k.data(), k.size() * 4}, {a.v, v.data(), v.size() * 4},
                      {a.table, table.data(), table.size() * 4}};
    auto got = run_step(g, shapes, sym, in, a.out);
    EXPECT_TRUE(all_close(got, std::vector<float>(got.size(), 0.5f), 1e-6f, 0)) << n << " tokens";
    auto vgot = unpack_cache(read_cache(g, a.vcs), cache_n, false);
    for (uint32_t h = 0; h < c.n_kv_heads; ++h)
      for (size_t i = size_t(h * c.n_ctx + c.n_ctx - 1) * c.head_dim; i < size_t(h + 1) * c.n_ctx * c.head_dim; ++i)
        vc[i] = 0.5f;
    EXPECT_TRUE(all_close(vgot, vc, 0, 0)) << n << " tokens: only the last row of each head written";
  }
}

TEST(AttentionRowsBuild, RejectsDecodeMaxTokensOutOfRange) {
  for (uint32_t bad : {0u, 49u}) {
    AttnConfig c{.n_ctx = 64, .max_tokens = 48, .with_write = false, .rows = true, .decode_max_tokens = bad};
    try {
      build_attn_graph(c);
      ADD_FAILURE() << "decode_max_tokens " << bad << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("attn: decode_max_tokens"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace wgrt::test
