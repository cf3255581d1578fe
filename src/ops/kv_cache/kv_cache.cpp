#include "ops/kv_cache/kv_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace wgrt::ops {

namespace {
constexpr ParamField kFields[] = {{"n_tokens", offsetof(KvCacheParams, n_tokens)},
                                  {"n_kv_heads", offsetof(KvCacheParams, n_kv_heads)},
                                  {"head_dim", offsetof(KvCacheParams, head_dim)},
                                  {"pos_sym", offsetof(KvCacheParams, pos_sym)},
                                  {"n_ctx", offsetof(KvCacheParams, n_ctx)},
                                  {"head_off", offsetof(KvCacheParams, head_off)},
                                  {"row_heads", offsetof(KvCacheParams, row_heads)},
                                  {"units", offsetof(KvCacheParams, units)}};
}  // namespace

const ParamLayout kKvCacheLayout{"kv_cache", sizeof(KvCacheParams), kFields};

graph::TensorId add_kv_cache(graph::Graph& g, const std::string& name, graph::DType dtype,
                             uint32_t n_kv_heads, uint32_t n_ctx, uint32_t head_dim) {
  if (dtype != graph::DType::F32 && dtype != graph::DType::F16 && dtype != graph::DType::Q8_0)
    throw std::invalid_argument(fmt::format("{}: a KV cache is f32, f16 or q8_0", name));
  if (dtype == graph::DType::Q8_0 && head_dim % kQ8Block != 0)
    throw std::invalid_argument(fmt::format(
        "{}: a q8_0 KV cache needs a head_dim that is a multiple of {}, got {} (hint: -ctk/-ctv f16)", name,
        kQ8Block, head_dim));
  return graph::add_weight(g, {.name = name, .dtype = dtype, .shape = {n_kv_heads, n_ctx, head_dim},
                               .role = graph::TensorRole::State});
}

uint32_t kv_write_units(graph::DType dtype, uint32_t head_dim) {
  switch (dtype) {
    case graph::DType::F16: return head_dim / 2;
    case graph::DType::Q8_0: return q8_scale_words(head_dim);
    default: return head_dim;
  }
}

void infer_kv_write(const KvWriteInferCtx& c) {
  const uint32_t heads = c.n_kv_heads ? c.n_kv_heads : (c.cache.rank == 3 ? c.cache[0] : 0);
  if (c.k.rank != 2 || c.k != c.v || c.cache.rank != 3 || c.k[1] != heads * c.cache[2])
    throw std::invalid_argument(fmt::format(
        "kv write: k {} and v {} must both be [n_tokens, n_kv_heads * head_dim] for a cache {}",
        graph::to_string(c.k), graph::to_string(c.v), graph::to_string(c.cache)));
}

void check_kv_rows(const graph::Graph& g, const std::string& name, const KvRows& rows, uint32_t max_tokens) {
  if (rows.table.v >= graph::tensor_count(g))
    throw std::invalid_argument(fmt::format("{}: unknown KvRows table id {}", name, rows.table.v));
  const graph::Tensor& t = graph::tensor_info(g, rows.table);
  if (t.role != graph::TensorRole::Input || t.dtype != graph::DType::U32 ||
      t.max_shape != graph::Shape{max_tokens, 2} || (t.dynamic_dims & 1) == 0 || (t.dynamic_dims & 2) != 0)
    throw std::invalid_argument(fmt::format(
        "{}: the KvRows table '{}' must be a u32 input [{}, 2] with dynamic dim 0 (one row per token), got {} {}",
        name, t.name, max_tokens, graph::dtype_name(t.dtype), graph::to_string(t.max_shape)));
  if (rows.max_keys.v >= graph::symbol_count(g))
    throw std::invalid_argument(fmt::format("{}: unknown max_keys symbol id {}", name, rows.max_keys.v));
}

void check_kv_rows_live(const std::string& name, const graph::Shape& table, uint32_t n_tokens) {
  if (table.rank != 2 || table[0] != n_tokens || table[1] != 2)
    throw std::invalid_argument(fmt::format("{}: the KvRows table is {}, expected [{}, 2] (a row per token)", name,
                                            graph::to_string(table), n_tokens));
}

void check_max_keys(const std::string& name, int64_t max_keys, uint32_t n_ctx) {
  if (max_keys < 1 || max_keys > int64_t(n_ctx))
    throw std::out_of_range(fmt::format(
        "{}: max_keys {} is outside 1..{} (hint: a sequence's positions must stay below the context of {}; "
        "start a new sequence or build with a larger n_ctx)", name, max_keys, n_ctx, n_ctx));
}

void plan_kv_write(const KvWritePlanCtx& c, graph::Plan& plan) {
  if (c.rows) {
    check_max_keys("kv write", c.pos, c.n_ctx);
  } else if (c.pos < 0 || c.pos + c.n_tokens > c.n_ctx)
    throw std::out_of_range(fmt::format(
        "kv write: {} tokens at pos {} go past the context of {} (hint: the cache holds "
        "positions 0..{}; start a new sequence or build with a larger n_ctx)",
        c.n_tokens, c.pos, c.n_ctx, c.n_ctx - 1));
  uint32_t row_heads = 0;
  for (uint32_t h : c.part_heads) row_heads += h;
  uint32_t head_off = 0;
  for (size_t i = 0; i < c.part_heads.size(); ++i) {
    const uint32_t heads = c.part_heads[i];
    plan.params[i].set(KvCacheParams{c.n_tokens, heads, c.head_dim, c.pos_sym, c.n_ctx, head_off,
                                     row_heads, c.units});
    uint64_t words = uint64_t(c.n_tokens) * heads * c.units;
    plan.grids[i] = grid_1d(ceil_div(words, kKvCacheWorkgroup), c.max_groups_per_dim);
    head_off += heads;
  }
}

// The KV heads of each cache part (k and v alike), checking the parts agree with the first.
std::vector<uint32_t> kv_part_heads(const graph::Graph& g, const std::string& name, graph::TensorId k_cache,
                                    graph::TensorId v_cache, const std::vector<KvCachePart>& more) {
  const graph::Tensor& first = graph::tensor_info(g, k_cache);
  std::vector<uint32_t> heads;
  std::vector<KvCachePart> parts = {{k_cache, v_cache}};
  parts.insert(parts.end(), more.begin(), more.end());
  for (const KvCachePart& part : parts) {
    const graph::Tensor& kc = graph::tensor_info(g, part.k);
    const graph::Tensor& vc = graph::tensor_info(g, part.v);
    if (kc.role != graph::TensorRole::State || vc.role != graph::TensorRole::State)
      throw std::invalid_argument(fmt::format("{}: the caches must be State tensors (add_kv_cache)", name));
    auto cache_type = [](graph::DType t) {
      return t == graph::DType::F32 || t == graph::DType::F16 || t == graph::DType::Q8_0;
    };
    const graph::Tensor& first_v = graph::tensor_info(g, v_cache);
    if (kc.max_shape != vc.max_shape || kc.dtype != first.dtype || vc.dtype != first_v.dtype ||
        !cache_type(kc.dtype) || !cache_type(vc.dtype) || kc.max_shape.rank != 3 ||
        kc.max_shape[1] != first.max_shape[1] || kc.max_shape[2] != first.max_shape[2])
      throw std::invalid_argument(fmt::format("{}: k and v caches ('{}', '{}') must be f32, f16 or q8_0, each part of "
                                              "the first part's dtypes, [heads, {}, {}]", name, kc.name, vc.name,
                                              first.max_shape.rank == 3 ? first.max_shape[1] : 0,
                                              first.max_shape.rank == 3 ? first.max_shape[2] : 0));
    heads.push_back(kc.max_shape[0]);
  }
  return heads;
}

graph::NodeId add_kv_write(graph::Graph& g, const KvCacheDesc& d) {
  const graph::Tensor& k = graph::tensor_info(g, d.k);
  const graph::Tensor& v = graph::tensor_info(g, d.v);
  if (k.dtype != graph::DType::F32 || v.dtype != graph::DType::F32)
    throw std::invalid_argument(fmt::format("{}: kv write takes f32 k and v", d.name));
  const std::vector<uint32_t> part_heads = kv_part_heads(g, d.name, d.k_cache, d.v_cache, d.more);
  const graph::Tensor& kc = graph::tensor_info(g, d.k_cache);
  uint32_t n_kv = 0;
  for (uint32_t h : part_heads) n_kv += h;
  infer_kv_write({k.max_shape, v.max_shape, kc.max_shape, n_kv});
  const uint32_t n_ctx = kc.max_shape[1], head_dim = kc.max_shape[2];
  const graph::DType kt = kc.dtype, vt = graph::tensor_info(g, d.v_cache).dtype;
  if ((kt == graph::DType::F32) != (vt == graph::DType::F32))  // as attention reads them (attention.h)
    throw std::invalid_argument(fmt::format("{}: a k cache of {} with a v cache of {}: an f32 cache pairs only with "
                                            "an f32 one", d.name, graph::dtype_name(kt), graph::dtype_name(vt)));
  if ((kt == graph::DType::F16 || vt == graph::DType::F16) && head_dim % 2 != 0)
    throw std::invalid_argument(fmt::format("{}: an f16 cache needs an even head_dim", d.name));
  const uint32_t units = std::max(kv_write_units(kt, head_dim), kv_write_units(vt, head_dim));

  require_fits(graph::device_caps(g).limits, d.name + ": kv_write", {0, kKvCacheWorkgroup});  // no workgroup data
  const bool rows = d.rows.has_value();
  if (rows) check_kv_rows(g, d.name, *d.rows, k.max_shape[0]);
  const uint32_t max_tokens = k.max_shape[0];
  std::vector<gpu::OverrideConstant> consts = {{"K_F16", kt == graph::DType::F16 ? 1.0 : 0.0},
                                              {"V_F16", vt == graph::DType::F16 ? 1.0 : 0.0},
                                              {"K_Q8", kt == graph::DType::Q8_0 ? 1.0 : 0.0},
                                              {"V_Q8", vt == graph::DType::Q8_0 ? 1.0 : 0.0}};
  if (rows) consts.push_back({"TABLE", 1.0});
  std::vector<KvCachePart> parts = {{d.k_cache, d.v_cache}};
  parts.insert(parts.end(), d.more.begin(), d.more.end());
  std::vector<graph::KernelSpec> kernels;  // a kernel per cache part
  std::vector<graph::TensorId> outputs;
  for (const KvCachePart& part : parts) {
    kernels.push_back({gpu::make_key("kv_cache", "main", consts),
                       {graph::Binding::of(0, d.k), graph::Binding::of(1, d.v), graph::Binding::of(2, part.k),
                        graph::Binding::of(3, part.v), graph::Binding::params(4),
                        graph::Binding::of(5, kv_rows_binding(d.rows, d.k)), graph::Binding::symbol_block(6)}});
    outputs.push_back(part.k);
    outputs.push_back(part.v);
  }
  std::vector<graph::TensorId> inputs = {d.k, d.v};
  if (rows) inputs.push_back(d.rows->table);
  const std::string name = d.name;
  return graph::add_node(g, graph::Node{
      .name = d.name,
      .op = "kv_write",
      .inputs = inputs,
      .outputs = outputs,
      .dynamic = true,
      .routes = graph::single_route(graph::RouteKey::of_dim(d.k, 0), 1, max_tokens, kernels),
      .infer =
          [name, rows, n_kv](const graph::InferArgs& a) {
            infer_kv_write({a.in[0], a.in[1], a.out[0], n_kv});
            if (rows) check_kv_rows_live(name, a.in[2], a.in[0][0]);
          },
      .plan =
          [sym = rows ? d.rows->max_keys : d.pos, rows, units, part_heads, n_ctx, head_dim](const graph::PlanArgs& a,
                                                                                         graph::Plan& p) {
            plan_kv_write({a.in[0][0], part_heads, head_dim, n_ctx, a.sym[sym], sym.v, units,
                           a.caps->limits.maxComputeWorkgroupsPerDimension, rows},
                          p);
          },
  });
}

}  // namespace wgrt::ops
