// Shared by the attention, KV-cache and heavy attention tests: a graph of
// [kv write ->] attention over f32/f16 caches, with a CPU mirror of the caches.
#pragma once

#include <fmt/format.h>

#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "graph/graph.h"
#include "ops/attention/attention.h"
#include "ops/kv_cache/kv_cache.h"
#include "reference/attention_ref.h"
#include "support/device.h"
#include "support/random.h"

namespace wgrt::test {

struct AttnConfig {
  uint32_t head_dim = 64;
  uint32_t n_kv_heads = 2;
  uint32_t group = 1;  // query heads per KV head
  uint32_t n_ctx = 131;
  uint32_t max_tokens = 64;
  bool f16 = false;
  bool with_write = true;   // kv write node before attention
  bool with_attention = true;
  uint32_t max_chunks = 0;  // AttentionDesc::decode_max_chunks
  bool default_limits = false;  // build on default_limits_device()
  ops::DecodeKernel decode = ops::DecodeKernel::best;  // AttentionDesc::decode_kernel
  ops::PrefillKernel prefill = ops::PrefillKernel::best;  // AttentionDesc::prefill_kernel
  bool rows = false;            // a KvRows table (input "rows") and max_keys for both nodes
  uint32_t decode_max_tokens = 1;  // AttentionDesc::decode_max_tokens (rows)
  std::vector<uint32_t> cache_parts;  // KV heads per cache tensor (a cache split by heads); empty: one
  bool xq_out = false;             // AttentionDesc::xq_out (AttnGraph::xq an output)
  bool k_q8 = false, v_q8 = false;  // q8_0 K / V caches (kv_cache.h); the other side as f16 says
  uint32_t window = 0;   // AttentionDesc::window
  float softcap = 0;     // AttentionDesc::softcap
  uint32_t n_heads() const { return n_kv_heads * group; }
  ref::KvShape kv() const { return {n_kv_heads, n_ctx, head_dim}; }
};

struct AttnGraph {
  std::unique_ptr<graph::Graph> g;
  graph::TensorId q, k, v, kc, vc, out;  // kc, vc: the caches' first parts
  std::vector<graph::TensorId> kcs, vcs;  // every part, in head order
  graph::SymbolId pos;
  graph::NodeId write, attn;
  graph::TensorId xq;        // xq_out only: the output quantized ahead
  graph::TensorId table;     // rows only: u32 [max_tokens, 2]
  graph::SymbolId max_keys;  // rows only, declared up to n_ctx + 64 (plans refuse past n_ctx)
};

// A case name's suffix for a forced decode kernel ("" for best).
inline const char* decode_suffix(ops::DecodeKernel k) {
  switch (k) {
    case ops::DecodeKernel::vec: return "_vec";
    case ops::DecodeKernel::sg: return "_sg";
    case ops::DecodeKernel::split: return "_no_subgroups";
    case ops::DecodeKernel::best: break;
  }
  return "";
}

// A case name's suffix for a forced prefill kernel ("" for best).
inline const char* prefill_suffix(ops::PrefillKernel k) {
  switch (k) {
    case ops::PrefillKernel::rt: return "_prefill_rt";
    case ops::PrefillKernel::sg: return "_prefill_sg";
    case ops::PrefillKernel::tile: return "_prefill_tile";
    case ops::PrefillKernel::best: break;
  }
  return "";
}

// Whether c's forced prefill kernel fits the device c builds on (prefill_rt needs more workgroup
// storage than WebGPU's default limits give from head dim 96 on): forced-kernel cases skip where
// it does not, as `best` would take another kernel there.
inline bool prefill_fits(const AttnConfig& c) {
  if (c.prefill != ops::PrefillKernel::rt) return true;
  const gpu::Device& dev = c.default_limits ? default_limits_device() : device();
  try {
    ops::attention_variants(dev.caps.limits, "attn", c.head_dim, c.group, c.f16, gpu::subgroup_lanes(dev.caps),
                            c.decode, c.prefill);
  } catch (const std::invalid_argument&) {
    return false;
  }
  return true;
}

// `extend`: called on the graph before it is built (further nodes reading the attention's outputs).
inline AttnGraph build_attn_graph(const AttnConfig& c, bool caches_out = false,
                                  const std::function<void(AttnGraph&)>& extend = {}) {
  using namespace graph;
  AttnGraph a;
  a.g = std::make_unique<Graph>(c.default_limits ? default_limits_device() : device());
  Graph& g = *a.g;
  const DType dt = c.f16 ? DType::F16 : DType::F32;
  const DType kt = c.k_q8 ? DType::Q8_0 : dt, vt = c.v_q8 ? DType::Q8_0 : dt;
  a.pos = add_symbol(g, {.name = "pos", .lo = 0, .hi = int64_t(c.n_ctx) - 1});
  std::optional<ops::KvRows> rows;
  if (c.rows) {
    a.table = add_input(g, {.name = "rows", .dtype = DType::U32, .max_shape = {c.max_tokens, 2}, .dynamic_dims = 1});
    a.max_keys = add_symbol(g, {.name = "max_keys", .lo = 1, .hi = int64_t(c.n_ctx) + 64});
    rows = ops::KvRows{.table = a.table, .max_keys = a.max_keys};
  }
  std::vector<ops::KvCachePart> more;
  for (uint32_t heads : c.cache_parts.empty() ? std::vector<uint32_t>{c.n_kv_heads} : c.cache_parts) {
    a.kcs.push_back(ops::add_kv_cache(g, fmt::format("k_cache.{}", a.kcs.size()), kt, heads, c.n_ctx, c.head_dim));
    a.vcs.push_back(ops::add_kv_cache(g, fmt::format("v_cache.{}", a.vcs.size()), vt, heads, c.n_ctx, c.head_dim));
    if (a.kcs.size() > 1) more.push_back({a.kcs.back(), a.vcs.back()});
  }
  a.kc = a.kcs[0];
  a.vc = a.vcs[0];
  if (c.with_write) {
    Shape kv{c.max_tokens, c.n_kv_heads * c.head_dim};
    a.k = add_input(g, {.name = "k", .max_shape = kv, .dynamic_dims = 1});
    a.v = add_input(g, {.name = "v", .max_shape = kv, .dynamic_dims = 1});
    a.write = ops::add_kv_write(g, {.name = "kv_write", .k = a.k, .v = a.v, .k_cache = a.kc,
                                    .v_cache = a.vc, .more = more, .pos = a.pos, .rows = rows});
  }
  if (c.with_attention) {
    a.q = add_input(g, {.name = "q", .max_shape = {c.max_tokens, c.n_heads() * c.head_dim},
                        .dynamic_dims = 1});
    a.out = ops::add_attention(g, {.name = "attn", .q = a.q, .k_cache = a.kc, .v_cache = a.vc,
                                   .more_caches = more, .pos = a.pos, .n_heads = c.n_heads(),
                                   .window = c.window, .softcap = c.softcap, .decode_max_chunks = c.max_chunks, .decode_kernel = c.decode,
                                   .prefill_kernel = c.prefill, .rows = rows,
                                   .decode_max_tokens = c.decode_max_tokens, .xq_out = c.xq_out});
    a.attn = find_node(g, "attn");
    mark_output(g, a.out);
    if (c.xq_out) {
      a.xq = ops::attention_xq(g, "attn");
      mark_output(g, a.xq);
    }
  }
  if (caches_out)
    for (size_t i = 0; i < a.kcs.size(); ++i) {
      mark_output(g, a.kcs[i]);
      mark_output(g, a.vcs[i]);
    }
  if (extend) extend(a);
  build(g);
  return a;
}

// A host cache as the GPU holds it: f32 words, or halves packed two per u32.
inline std::vector<uint32_t> pack_cache(const std::vector<float>& v, bool f16) {
  std::vector<uint32_t> w(f16 ? (v.size() + 1) / 2 : v.size());
  if (!f16) {
    std::memcpy(w.data(), v.data(), v.size() * 4);
  } else {
    for (size_t i = 0; i < v.size(); ++i)
      w[i / 2] |= uint32_t(ref::f32_to_f16(v[i])) << (16 * (i % 2));
  }
  return w;
}

inline std::vector<float> unpack_cache(const std::vector<uint32_t>& w, size_t n, bool f16) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    if (f16) {
      v[i] = ref::f16_to_f32(uint16_t(w[i / 2] >> (16 * (i % 2))));
    } else {
      std::memcpy(&v[i], &w[i], 4);
    }
  }
  return v;
}

// Values as an f16 cache stores them (identity for f32).
inline std::vector<float> as_stored(std::vector<float> v, bool f16) {
  if (f16)
    for (auto& x : v) x = ref::round_f16(x);
  return v;
}

// A whole cache's words (pack_cache) into its parts (consecutive KV heads), and back.
inline void write_cache(graph::Graph& g, const std::vector<graph::TensorId>& parts, const std::vector<uint32_t>& words) {
  size_t at = 0;
  for (graph::TensorId t : parts) {
    const size_t n = graph::tensor_info(g, t).bytes / 4;
    graph::write_tensor<uint32_t>(g, t, std::span<const uint32_t>(words).subspan(at, n));
    at += n;
  }
}
inline std::vector<uint32_t> read_cache(graph::Graph& g, const std::vector<graph::TensorId>& parts) {
  std::vector<uint32_t> all;
  for (graph::TensorId t : parts) {
    std::vector<uint32_t> w = graph::read_output<uint32_t>(g, t);
    all.insert(all.end(), w.begin(), w.end());
  }
  return all;
}

// Random caches (as stored) up to key ctx - 1 of each KV head and NaN past it, so a kernel that
// reads past the causal limit fails the case, written to a's caches; the host copies (K, V).
inline std::pair<std::vector<float>, std::vector<float>> fill_caches_to(AttnGraph& a, const AttnConfig& c,
                                                                        uint32_t ctx, uint32_t seed) {
  const size_t cache_n = size_t(c.n_kv_heads) * c.n_ctx * c.head_dim;
  auto kc = as_stored(random_floats(cache_n, seed, -1.f, 1.f), c.f16);
  auto vc = as_stored(random_floats(cache_n, seed + 1, -1.f, 1.f), c.f16);
  for (uint32_t h = 0; h < c.n_kv_heads; ++h)
    for (size_t i = size_t(h * c.n_ctx + ctx) * c.head_dim; i < size_t(h + 1) * c.n_ctx * c.head_dim; ++i)
      kc[i] = vc[i] = std::numeric_limits<float>::quiet_NaN();
  write_cache(*a.g, a.kcs, pack_cache(kc, c.f16));
  write_cache(*a.g, a.vcs, pack_cache(vc, c.f16));
  return {std::move(kc), std::move(vc)};
}

}  // namespace wgrt::test
