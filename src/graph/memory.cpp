// plan_memory(): lifetimes, the buffer assignment and the checks against the device's limits.
#include "graph/memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "gpu/buffer.h"
#include "graph/graph.h"
#include "graph/state.h"

namespace wgrt::graph {
namespace {

constexpr double kMiB = 1048576.0;

std::vector<Lifetime> find_lifetimes(const GraphState& g) {
  std::vector<Lifetime> life(g.tensors.size());
  auto touch = [&](TensorId t, int32_t n) {
    if (t.v >= life.size())
      throw std::invalid_argument(fmt::format("node '{}' binds tensor id {}, which does not exist ({} tensors)",
                                              g.nodes[size_t(n)].name, t.v, life.size()));
    Lifetime& l = life[t.v];
    if (l.first < 0) l.first = n;
    l.last = n;
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& node = g.nodes[i];
    const int32_t n = int32_t(i);
    for (TensorId t : node.inputs) touch(t, n);
    for (TensorId t : node.outputs) touch(t, n);
    // Routes may bind tensors the node does not list (or list differently): take them all.
    for (const Route& r : node.routes.routes)
      for (const KernelSpec& k : r.kernels)
        for (const Binding& b : k.bindings)
          if (b.is_tensor()) touch(b.tensor, n);
  }
  return life;
}

bool shareable(const Tensor& t, const Lifetime& l) {
  return t.role == TensorRole::Intermediate && !t.is_output && l.first >= 0;
}

BufferUse own_use(const Tensor& t) {
  switch (t.role) {
    case TensorRole::Input: return BufferUse::Input;
    case TensorRole::Weight: return BufferUse::Weight;
    case TensorRole::State: return BufferUse::State;
    case TensorRole::Intermediate: break;
  }
  return t.is_output ? BufferUse::Output : BufferUse::Scratch;
}

uint32_t new_buffer(MemoryPlan& p, TensorId t, uint64_t bytes, BufferUse use) {
  p.buffers.push_back(PhysicalBuffer{bytes, use, {t}});
  p.buffer_of[t.v] = uint32_t(p.buffers.size() - 1);
  return p.buffer_of[t.v];
}

// Greedy interval colouring, largest tensors first, each into the smallest buffer free for its
// whole lifetime. Every earlier tensor is at least as large, so any free buffer fits.
void assign_shared(const GraphState& g, MemoryPlan& p, std::vector<uint32_t> order) {
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    if (g.tensors[a].bytes != g.tensors[b].bytes) return g.tensors[a].bytes > g.tensors[b].bytes;
    if (p.lifetimes[a].first != p.lifetimes[b].first) return p.lifetimes[a].first < p.lifetimes[b].first;
    return a < b;
  });
  std::vector<uint32_t> pool;  // indices into p.buffers
  for (uint32_t t : order) {
    const Lifetime& l = p.lifetimes[t];
    int best = -1;
    for (uint32_t b : pool) {
      const PhysicalBuffer& buf = p.buffers[b];
      bool free = true;
      for (TensorId other : buf.tensors)
        if (p.lifetimes[other.v].overlaps(l)) {
          free = false;
          break;
        }
      if (free && (best < 0 || buf.bytes < p.buffers[size_t(best)].bytes)) best = int(b);
    }
    if (best < 0) {
      pool.push_back(new_buffer(p, TensorId{t}, g.tensors[t].bytes, BufferUse::Scratch));
    } else {
      p.buffers[size_t(best)].tensors.push_back(TensorId{t});
      p.buffer_of[t] = uint32_t(best);
    }
  }
}

std::string mib(uint64_t bytes) { return fmt::format("{:.1f} MiB ({} bytes)", double(bytes) / kMiB, bytes); }

void check_limits(const Tensor& t, const MemoryBudget& b) {
  const bool past_binding = t.bytes > b.max_binding_size;
  if (!past_binding && t.bytes <= b.max_buffer_size) return;
  const std::string limit = past_binding
                                ? fmt::format("storage binding limit (maxStorageBufferBindingSize) of {}",
                                              mib(b.max_binding_size))
                                : fmt::format("buffer size limit (maxBufferSize) of {}", mib(b.max_buffer_size));
  const char* what = t.role == TensorRole::Weight  ? "weight"
                     : t.role == TensorRole::State ? "state tensor"
                     : t.role == TensorRole::Input ? "input"
                                                   : "intermediate tensor";
  const char* hint = t.role == TensorRole::Weight
                         ? "a weight tensor is bound whole (hint: the model loader splits a matrix past the limit "
                           "into tensors of rows, LoadOptions::max_tensor_bytes; a tensor added by hand must fit)"
                     : t.role == TensorRole::State ? "(hint: a smaller context)"
                                                   : "(hint: a smaller context or batch)";
  throw std::invalid_argument(fmt::format("{} '{}' {} {} needs {}, past this device's {}: {}", what, t.name,
                                          dtype_name(t.dtype), to_string(t.max_shape), mib(t.bytes), limit,
                                          hint));
}

std::string breakdown(const MemoryPlan& p) {
  return fmt::format("weights {:.1f} MiB, KV cache {:.1f} MiB, scratch {:.1f} MiB, other {:.1f} MiB",
                     double(p.weight_bytes) / kMiB, double(p.state_bytes) / kMiB, double(p.scratch_bytes) / kMiB,
                     double(p.input_bytes + p.readback_bytes + p.uniform_bytes) / kMiB);
}

}  // namespace

MemoryBudget memory_budget(const WGPULimits& limits, uint64_t device_memory) {
  return MemoryBudget{.max_buffer_size = limits.maxBufferSize,
                      .max_binding_size = limits.maxStorageBufferBindingSize,
                      .min_uniform_alignment = std::max<uint32_t>(limits.minUniformBufferOffsetAlignment, 1),
                      .device_memory = device_memory};
}

MemoryPlan plan_memory(const Graph& g, const MemoryBudget& budget) { return plan_memory(state(g), budget); }

MemoryPlan plan_memory(const GraphState& g, const MemoryBudget& budget) {
  // Before any arithmetic on sizes: a tensor past a limit is the clearest error.
  for (const Tensor& t : g.tensors) check_limits(t, budget);

  MemoryPlan p;
  p.lifetimes = find_lifetimes(g);
  p.buffer_of.assign(g.tensors.size(), UINT32_MAX);
  std::vector<uint32_t> shared;
  for (uint32_t i = 0; i < g.tensors.size(); ++i) {
    const Tensor& t = g.tensors[i];
    if (shareable(t, p.lifetimes[i]))
      shared.push_back(i);
    else
      new_buffer(p, TensorId{i}, t.bytes, own_use(t));
  }
  assign_shared(g, p, std::move(shared));

  for (uint32_t i = 0; i < g.tensors.size(); ++i) {
    const Tensor& t = g.tensors[i];
    if (t.role == TensorRole::Intermediate) p.unshared_bytes += t.bytes;
  }
  for (const PhysicalBuffer& b : p.buffers) {
    switch (b.use) {
      case BufferUse::Input: p.input_bytes += b.bytes; break;
      case BufferUse::Weight: p.weight_bytes += b.bytes; break;
      case BufferUse::State: p.state_bytes += b.bytes; break;
      case BufferUse::Scratch:
      case BufferUse::Output: p.scratch_bytes += b.bytes; break;
    }
  }
  for (TensorId t : g.outputs) p.readback_bytes += uint64_t(kReadbackSlots) * g.tensors[t.v].bytes;
  p.uniform_stride = uint32_t(gpu::align_up(kParamBytes, budget.min_uniform_alignment));
  for (const Node& node : g.nodes)
    if (node_uses_params(node)) p.uniform_bytes += uint64_t(p.uniform_stride) * kMaxDispatches;
  if (graph_uses_symbol_block(g)) p.uniform_bytes += kSymbolBlockBytes;

  if (budget.device_memory != 0 && p.total() > budget.device_memory)
    throw std::invalid_argument(fmt::format(
        "the model needs {:.1f} MiB on the GPU ({}), past the adapter's {:.1f} MiB of device memory (hint: a "
        "smaller context or batch, or a more compact weight type)",
        double(p.total()) / kMiB, breakdown(p), double(budget.device_memory) / kMiB));
  return p;
}

std::string describe_memory(const MemoryPlan& p) { return "memory: " + breakdown(p); }

}  // namespace wgrt::graph
