#include "ops/kv_cache/kv_cache.h"

#include <fmt/format.h>

#include <stdexcept>

namespace wgrt::ops {

namespace {
constexpr ParamField kFields[] = {{"n_tokens", offsetof(KvCacheParams, n_tokens)},
                                  {"n_kv_heads", offsetof(KvCacheParams, n_kv_heads)},
                                  {"head_dim", offsetof(KvCacheParams, head_dim)},
                                  {"pos", offsetof(KvCacheParams, pos)},
                                  {"n_ctx", offsetof(KvCacheParams, n_ctx)},
                                  {"_pad0", offsetof(KvCacheParams, _pad0)},
                                  {"_pad1", offsetof(KvCacheParams, _pad1)},
                                  {"_pad2", offsetof(KvCacheParams, _pad2)}};
constexpr uint32_t kWorkgroup = 256;  // kv_cache.wgsl WG
}  // namespace

const ParamLayout kKvCacheLayout{"kv_cache", sizeof(KvCacheParams), kFields};

graph::TensorId add_kv_cache(graph::Graph& g, const std::string& name, graph::DType dtype,
                             uint32_t n_kv_heads, uint32_t n_ctx, uint32_t head_dim) {
  if (dtype != graph::DType::F32 && dtype != graph::DType::F16)
    throw std::invalid_argument(fmt::format("{}: a KV cache is f32 or f16", name));
  return graph::add_weight(g, {.name = name, .dtype = dtype, .shape = {n_kv_heads, n_ctx, head_dim},
                               .role = graph::TensorRole::State});
}

void infer_kv_write(const KvWriteInferCtx& c) {
  if (c.k.rank != 2 || c.k != c.v || c.cache.rank != 3 || c.k[1] != c.cache[0] * c.cache[2])
    throw std::invalid_argument(fmt::format(
        "kv write: k {} and v {} must both be [n_tokens, n_kv_heads * head_dim] for a cache {}",
        graph::to_string(c.k), graph::to_string(c.v), graph::to_string(c.cache)));
}

void plan_kv_write(const KvWritePlanCtx& c, graph::Plan& plan) {
  if (c.pos < 0 || c.pos + c.n_tokens > c.n_ctx)
    throw std::out_of_range(fmt::format(
        "kv write: {} tokens at pos {} go past the context of {} (hint: the cache holds "
        "positions 0..{}; start a new sequence or build with a larger n_ctx)",
        c.n_tokens, c.pos, c.n_ctx, c.n_ctx - 1));
  plan.params[0].set(KvCacheParams{c.n_tokens, c.n_kv_heads, c.head_dim, uint32_t(c.pos), c.n_ctx,
                                   0, 0, 0});
  uint64_t words = uint64_t(c.n_tokens) * c.n_kv_heads * (c.f16 ? c.head_dim / 2 : c.head_dim);
  plan.grids[0] = grid_1d(ceil_div(words, kWorkgroup), c.max_groups_per_dim);
}

graph::NodeId add_kv_write(graph::Graph& g, const KvCacheDesc& d) {
  const graph::Tensor& k = graph::tensor_info(g, d.k);
  const graph::Tensor& v = graph::tensor_info(g, d.v);
  const graph::Tensor& kc = graph::tensor_info(g, d.k_cache);
  const graph::Tensor& vc = graph::tensor_info(g, d.v_cache);
  if (k.dtype != graph::DType::F32 || v.dtype != graph::DType::F32)
    throw std::invalid_argument(fmt::format("{}: kv write takes f32 k and v", d.name));
  if (kc.role != graph::TensorRole::State || vc.role != graph::TensorRole::State)
    throw std::invalid_argument(fmt::format("{}: the caches must be State tensors (add_kv_cache)", d.name));
  if (kc.dtype != vc.dtype || kc.max_shape != vc.max_shape ||
      (kc.dtype != graph::DType::F32 && kc.dtype != graph::DType::F16))
    throw std::invalid_argument(fmt::format("{}: k and v caches must share one shape and dtype (f32 or f16)", d.name));
  infer_kv_write({k.max_shape, v.max_shape, kc.max_shape});
  const uint32_t n_kv = kc.max_shape[0], n_ctx = kc.max_shape[1], head_dim = kc.max_shape[2];
  const bool f16 = kc.dtype == graph::DType::F16;
  if (f16 && head_dim % 2 != 0)
    throw std::invalid_argument(fmt::format("{}: an f16 cache needs an even head_dim", d.name));

  require_fits(graph::device_caps(g).limits, d.name + ": kv_write", {0, kWorkgroup});  // no workgroup data
  graph::KernelSpec kernel{
      gpu::make_key("kv_cache", "main", {{"F16", f16 ? 1.0 : 0.0}}),
      {graph::Binding::of(0, d.k), graph::Binding::of(1, d.v), graph::Binding::of(2, d.k_cache),
       graph::Binding::of(3, d.v_cache), graph::Binding::params(4)}};
  return graph::add_node(g, graph::Node{
      .name = d.name,
      .op = "kv_write",
      .inputs = {d.k, d.v},
      .outputs = {d.k_cache, d.v_cache},
      .dynamic = true,
      .routes = graph::single_route(graph::RouteKey::of_dim(d.k, 0), 1, k.max_shape[0], {kernel}),
      .infer =
          [](const graph::InferArgs& a) {
            infer_kv_write({a.in[0], a.in[1], a.out[0]});
          },
      .plan =
          [pos = d.pos, f16, n_kv, n_ctx, head_dim](const graph::PlanArgs& a, graph::Plan& p) {
            plan_kv_write({a.in[0][0], n_kv, head_dim, n_ctx, a.sym[pos], f16,
                           a.caps->limits.maxComputeWorkgroupsPerDimension},
                          p);
          },
  });
}

}  // namespace wgrt::ops
