#include "ops/prefetch/prefetch.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace wgrt::ops {

namespace {
constexpr ParamField kFields[] = {{"end0", offsetof(PrefetchParams, end0)},   {"end1", offsetof(PrefetchParams, end1)},
                                  {"end2", offsetof(PrefetchParams, end2)},   {"end3", offsetof(PrefetchParams, end3)},
                                  {"magic", offsetof(PrefetchParams, magic)}, {"_pad0", offsetof(PrefetchParams, _pad0)},
                                  {"_pad1", offsetof(PrefetchParams, _pad1)}, {"_pad2", offsetof(PrefetchParams, _pad2)}};
constexpr uint64_t kSectorBytes = 32;
}  // namespace

const ParamLayout kPrefetchLayout{"prefetch", sizeof(PrefetchParams), kFields};

uint32_t prefetch_wanted() { return env_count("WGRT_PREFETCH", 0, 15, 0); }

uint64_t prefetch_max_bytes() { return uint64_t(env_count("WGRT_PREFETCH_MB", 1, 4096, kPrefetchMaxMb)) << 20; }

void plan_prefetch(const PrefetchPlanCtx& c, graph::Plan& plan) {
  uint32_t end[kPrefetchMaxTensors] = {};
  uint64_t sectors = 0;
  for (size_t i = 0; i < kPrefetchMaxTensors; ++i) {
    if (i < c.bytes.size()) sectors += ceil_div(c.bytes[i], kSectorBytes);
    end[i] = uint32_t(sectors);
  }
  plan.params[0].set(PrefetchParams{end[0], end[1], end[2], end[3], 0xFFFFFFFFu, 0, 0, 0});
  const uint64_t groups = ceil_div(sectors, uint64_t(kPrefetchWg) * kPrefetchSectorsPerThread);
  plan.grids[0] = graph::Grid{uint32_t(std::clamp<uint64_t>(groups, 1, c.max_groups_per_dim)), 1, 1};
}

graph::NodeId add_prefetch(graph::Graph& g, const PrefetchDesc& d) {
  if (d.tensors.empty() || d.tensors.size() > kPrefetchMaxTensors)
    throw std::invalid_argument(fmt::format("{}: prefetch takes 1 to {} tensors, not {}", d.name, kPrefetchMaxTensors,
                                            d.tensors.size()));
  std::vector<uint64_t> bytes;
  uint64_t sectors = 0;
  for (graph::TensorId t : d.tensors) {
    const graph::Tensor& info = graph::tensor_info(g, t);
    if (info.role != graph::TensorRole::Weight)
      throw std::invalid_argument(fmt::format("{}: prefetch reads weights; '{}' is not one", d.name, info.name));
    bytes.push_back(info.bytes);
    sectors += ceil_div(info.bytes, kSectorBytes);
  }
  if (sectors > UINT32_MAX)
    throw std::invalid_argument(fmt::format("{}: {} bytes to prefetch, past the kernel's 32-bit sector index "
                                            "(hint: fewer tensors per node)", d.name, sectors * kSectorBytes));
  const uint32_t max_rows = graph::tensor_info(g, d.key).max_shape[0];
  graph::TensorId sink = graph::add_weight(g, {.name = d.name + ".sink", .dtype = graph::DType::U32,
                                               .shape = {kPrefetchWg}, .role = graph::TensorRole::State,
                                               .reset_each_step = true});
  std::vector<graph::Binding> bindings;
  for (uint32_t i = 0; i < kPrefetchMaxTensors; ++i)  // slots past the tensors bind the last one again
    bindings.push_back(graph::Binding::of(i, d.tensors[std::min<size_t>(i, d.tensors.size() - 1)]));
  bindings.push_back(graph::Binding::of(4, sink));
  bindings.push_back(graph::Binding::params(5));
  graph::KernelSpec k{gpu::make_key("prefetch", "main"), bindings};
  std::vector<graph::Route> routes = {{kPrefetchL2, "l2", 1, 1, {k}}};
  if (max_rows > 1) routes.push_back({kPrefetchOff, "off", 2, max_rows, {}, /*idle=*/true});
  std::vector<graph::TensorId> inputs = d.tensors;
  inputs.push_back(d.key);
  return graph::add_node(g, graph::Node{
      .name = d.name,
      .op = "prefetch",
      .inputs = inputs,
      .outputs = {sink},
      .dynamic = true,
      .routes = graph::RouteSet{graph::RouteKey::of_dim(d.key, 0), routes},
      .infer = [](const graph::InferArgs&) {},  // the sink keeps its fixed shape
      .plan =
          [bytes](const graph::PlanArgs& a, graph::Plan& p) {
            if (a.route_is(kPrefetchL2)) plan_prefetch({bytes, a.caps->limits.maxComputeWorkgroupsPerDimension}, p);
          },
      .cost = [bytes](const graph::PlanArgs& a) {
        graph::NodeCost c;
        if (a.route_is(kPrefetchL2))
          for (uint64_t b : bytes) c.bytes += b;
        return c;
      },
  });
}

}  // namespace wgrt::ops
