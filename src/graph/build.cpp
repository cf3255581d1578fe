// Graph construction and build: checks, the memory plan and allocation at max shape, pipelines
// and bind groups.
#include <fmt/format.h>

#include <stdexcept>

#include "gpu/buffer.h"
#include "graph/check.h"
#include "graph/graph.h"
#include "graph/state.h"

namespace wgrt::graph {
namespace {

void require_unbuilt(const GraphState& g, const char* what) {
  if (g.built) throw std::logic_error(fmt::format("{}: the graph is already built", what));
}

void check_shape(const Shape& s, const std::string& what) {
  if (s.rank == 0) throw std::invalid_argument(fmt::format("{}: shape has rank 0", what));
  for (int i = 0; i < s.rank; ++i)
    if (s[i] == 0)
      throw std::invalid_argument(fmt::format("{}: dim {} of {} is zero", what, i, to_string(s)));
}

TensorId push_tensor(GraphState& g, Tensor t) {
  check_shape(t.max_shape, fmt::format("tensor '{}'", t.name));
  for (const auto& other : g.tensors)
    if (other.name == t.name)
      throw std::invalid_argument(fmt::format("tensor name '{}' is used twice", t.name));
  t.bytes = dtype_bytes(t.dtype, t.max_shape);
  g.tensors.push_back(std::move(t));
  return TensorId{uint32_t(g.tensors.size() - 1)};
}

// Dataflow in insertion order: intermediates produced once, before any use.
void check_dataflow(const GraphState& g) {
  std::vector<int> producer(g.tensors.size(), -1);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    for (TensorId t : node.inputs) {
      const Tensor& in = g.tensors[t.v];
      if (in.role == TensorRole::Intermediate && producer[t.v] < 0)
        throw std::invalid_argument(fmt::format(
            "node '{}' reads '{}' before any node produces it (hint: add nodes in execution "
            "order)", node.name, in.name));
    }
    for (TensorId t : node.outputs) {
      const Tensor& out = g.tensors[t.v];
      if (out.role == TensorRole::Input || out.role == TensorRole::Weight)
        throw std::invalid_argument(fmt::format("node '{}' writes '{}', which is a graph {}",
                                                node.name, out.name,
                                                out.role == TensorRole::Input ? "input" : "weight"));
      if (out.role == TensorRole::Intermediate) {
        if (producer[t.v] >= 0)
          throw std::invalid_argument(fmt::format("'{}' is produced by both '{}' and '{}'",
                                                  out.name, g.nodes[size_t(producer[t.v])].name,
                                                  node.name));
        producer[t.v] = int(n);
      }
    }
  }
}

// Read-after-write on state tensors: a node reading a state that nodes write this step must
// come after the first writer (attention after the KV-cache write), unless the state is
// declared carried (it hands the previous step's value to an earlier reader).
void check_state_order(const GraphState& g) {
  std::vector<int> first_writer(g.tensors.size(), -1);
  for (size_t n = 0; n < g.nodes.size(); ++n)
    for (TensorId t : g.nodes[n].outputs)
      if (first_writer[t.v] < 0) first_writer[t.v] = int(n);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    for (TensorId t : node.inputs) {
      const Tensor& st = g.tensors[t.v];
      if (st.role != TensorRole::State || st.carried || first_writer[t.v] < 0 || size_t(first_writer[t.v]) < n)
        continue;
      const Node& writer = g.nodes[size_t(first_writer[t.v])];
      throw std::invalid_argument(fmt::format(
          "node '{}' ({}) reads state '{}' before node '{}' ({}) writes it, so it would see the previous "
          "step's contents (hint: add '{}' first; a state meant to carry the previous step's value is "
          "declared with WeightDesc::carried)", node.name, node.op, st.name, writer.name, writer.op, writer.name));
    }
  }
}

// Which tensors can change shape between steps, and whether every node can cope.
void find_varying(GraphState& g) {
  for (auto& t : g.tensors) {
    t.may_vary = t.role == TensorRole::Input && t.dynamic_dims != 0;
    t.read = t.is_output;
  }
  for (const Node& node : g.nodes)
    for (TensorId t : node.inputs) g.tensors[t.v].read = true;
  for (const Node& node : g.nodes) {
    bool varies = false;
    for (TensorId t : node.inputs) {
      if (!g.tensors[t.v].may_vary) continue;
      if (!node.dynamic)
        throw std::invalid_argument(fmt::format(
            "node '{}' ({}) does not support dynamic shapes, but its input '{}' may change shape "
            "per step (hint: give the input a fixed shape, or use an op that supports dynamic "
            "dims)", node.name, node.op, g.tensors[t.v].name));
      varies = true;
    }
    for (SymbolId s : node.shape_symbols) {
      if (g.symbols[s.v].lo == g.symbols[s.v].hi) continue;
      if (!node.dynamic)
        throw std::invalid_argument(fmt::format(
            "node '{}' ({}) does not support dynamic shapes, but its shape depends on symbol "
            "'{}' in [{}, {}]", node.name, node.op, g.symbols[s.v].name, g.symbols[s.v].lo,
            g.symbols[s.v].hi));
      varies = true;
    }
    for (TensorId t : node.outputs)
      if (g.tensors[t.v].role == TensorRole::Intermediate) g.tensors[t.v].may_vary = varies;
  }
}

struct KeyDomain {
  int64_t lo, hi;
  std::string name;
};

KeyDomain key_domain(const GraphState& g, const Node& node) {
  const RouteKey& k = node.routes.key;
  if (k.kind == RouteKey::Kind::Symbol) {
    if (k.symbol.v >= g.symbols.size())
      throw std::invalid_argument(
          fmt::format("node '{}': its routes are keyed on unknown symbol id {}", node.name, k.symbol.v));
    const Symbol& s = g.symbols[k.symbol.v];
    return {s.lo, s.hi, fmt::format("symbol '{}'", s.name)};
  }
  check_tensor_id(g, k.tensor, fmt::format("node '{}' route key", node.name));
  const Tensor& t = g.tensors[k.tensor.v];
  if (k.dim < 0 || k.dim >= t.max_shape.rank)
    throw std::invalid_argument(fmt::format("node '{}': routes keyed on dim {} of '{}', which has "
                                            "rank {}", node.name, k.dim, t.name, t.max_shape.rank));
  return {1, int64_t(t.max_shape[k.dim]), fmt::format("dim {} of '{}'", k.dim, t.name)};
}

void check_routes(const GraphState& g) {
  for (const Node& node : g.nodes) {
    KeyDomain d = key_domain(g, node);
    try {
      validate_routes(node.routes, d.lo, d.hi, d.name);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("node '{}' ({}): {}", node.name, node.op, e.what()));
    }
    for (const Route& r : node.routes.routes) {
      if (r.kernels.size() > size_t(kMaxDispatches))
        throw std::invalid_argument(fmt::format("node '{}': route '{}' has {} kernels (at most {})",
                                                node.name, r.name, r.kernels.size(), kMaxDispatches));
      for (const KernelSpec& k : r.kernels)
        for (const Binding& b : k.bindings)
          if (b.is_tensor())
            check_tensor_id(g, b.tensor, fmt::format("node '{}' route '{}' kernel '{}' binding {}",
                                                     node.name, r.name, k.pipeline.kernel, b.slot));
    }
  }
}

// Plans first, so a graph the device cannot hold is refused before anything is allocated.
void allocate(GraphState& g) {
  gpu::Device& dev = *g.dev;
  g.memory = plan_memory(g, memory_budget(dev.caps.limits, dev.caps.device_memory));
  g.uniform_stride = g.memory.uniform_stride;
  g.buffers.clear();
  g.staging.clear();
  g.uniforms.clear();
  for (const PhysicalBuffer& b : g.memory.buffers) {
    const Tensor& first = g.tensors[b.tensors.front().v];
    std::string label = b.tensors.size() == 1 ? first.name
                                              : fmt::format("{} (+{} sharing)", first.name, b.tensors.size() - 1);
    g.buffers.push_back(gpu::create_buffer(dev, b.bytes, gpu::kStorageUsage, label));
  }
  for (TensorId id : g.outputs) {
    const Tensor& t = g.tensors[id.v];
    auto& slots = g.staging.emplace_back();
    for (int i = 0; i < kReadbackSlots; ++i)
      slots[size_t(i)] = gpu::create_buffer(dev, t.bytes, gpu::kReadbackUsage, fmt::format("{} readback {}", t.name, i));
  }
  for (ReadbackSlot& slot : g.readback) {
    slot.serial = 0;
    slot.bytes.assign(g.outputs.size(), 0);
    slot.maps = std::vector<gpu::MapRequest>(g.outputs.size());
  }
  for (const Node& node : g.nodes)
    g.uniforms.push_back(node_uses_params(node)
                             ? gpu::create_buffer(dev, uint64_t(g.uniform_stride) * kMaxDispatches,
                                                  gpu::kUniformUsage, node.name + " params")
                             : gpu::Buffer{});
  g.symbol_block = graph_uses_symbol_block(g)
                       ? gpu::create_buffer(dev, kSymbolBlockBytes, gpu::kUniformUsage, "symbols")
                       : gpu::Buffer{};
}

void compile(GraphState& g) {
  gpu::Device& dev = *g.dev;
  g.compiled.clear();
  g.compiled.resize(g.nodes.size());
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    for (size_t r = 0; r < node.routes.routes.size(); ++r) {
      const Route& route = node.routes.routes[r];
      auto& route_kernels = g.compiled[n].emplace_back();
      for (size_t j = 0; j < route.kernels.size(); ++j) {
        CompiledKernel ck;
        try {
          ck.pipeline = &gpu::get_pipeline(dev, route.kernels[j].pipeline);
        } catch (const gpu::GpuError& e) {
          throw gpu::GpuError(fmt::format("node '{}' route '{}': {}", node.name, route.name, e.what()));
        }
        ck.bind_group = make_bind_group(g, n, r, j, *ck.pipeline);
        route_kernels.push_back(std::move(ck));
      }
    }
  }
}

}  // namespace

void check_tensor_id(const GraphState& g, TensorId t, const std::string& where) {
  if (t.v >= g.tensors.size())
    throw std::invalid_argument(fmt::format("{}: tensor id {} does not exist ({} tensors)", where,
                                            t.v, g.tensors.size()));
}

void check_node_id(const GraphState& g, NodeId n, const std::string& where) {
  if (n.v >= g.nodes.size())
    throw std::invalid_argument(fmt::format("{}: node id {} does not exist ({} nodes)", where, n.v, g.nodes.size()));
}

gpu::BindGroup make_bind_group(const GraphState& g, size_t n, size_t r, size_t k, const gpu::Pipeline& pipeline,
                               std::span<const BufferOverride> overrides) {
  const Node& node = g.nodes[n];
  const Route& route = node.routes.routes[r];
  const KernelSpec& spec = route.kernels[k];
  std::vector<gpu::BufferBinding> entries;
  for (const Binding& b : spec.bindings) {
    if (b.uniform) {
      entries.push_back({b.slot, g.uniforms[n].get(), uint64_t(g.uniform_stride) * k, kParamBytes});
      continue;
    }
    if (b.symbols) {
      entries.push_back({b.slot, g.symbol_block.get(), 0, kSymbolBlockBytes});
      continue;
    }
    WGPUBuffer buffer = g.buffers[g.memory.buffer_of[b.tensor.v]].get();
    for (const BufferOverride& o : overrides)
      if (o.tensor == b.tensor) buffer = o.buffer;
    // The tensor's own size: its buffer may be larger, shared with bigger tensors.
    entries.push_back({b.slot, buffer, 0, g.tensors[b.tensor.v].bytes});
  }
  return gpu::create_bind_group(*g.dev, pipeline.layout.get(), entries,
                                fmt::format("{}/{}/{}", node.name, route.name, spec.pipeline.kernel));
}

bool graph_uses_symbol_block(const GraphState& g) {
  for (const Node& node : g.nodes)
    for (const Route& r : node.routes.routes)
      for (const KernelSpec& k : r.kernels)
        for (const Binding& b : k.bindings)
          if (b.symbols) return true;
  return false;
}

bool node_uses_params(const Node& node) {
  for (const Route& r : node.routes.routes)
    for (const KernelSpec& k : r.kernels)
      for (const Binding& b : k.bindings)
        if (b.uniform) return true;
  return false;
}

TensorId add_input(Graph& graph, const InputDesc& d) {
  GraphState& g = state(graph);
  require_unbuilt(g, "add_input");
  if (d.dynamic_dims >> d.max_shape.rank)
    throw std::invalid_argument(fmt::format("input '{}': dynamic_dims marks dims past rank {}",
                                            d.name, d.max_shape.rank));
  return push_tensor(g, Tensor{.name = d.name, .dtype = d.dtype, .role = TensorRole::Input,
                               .max_shape = d.max_shape, .dynamic_dims = d.dynamic_dims});
}

TensorId add_weight(Graph& graph, const WeightDesc& d) {
  GraphState& g = state(graph);
  require_unbuilt(g, "add_weight");
  if (d.role != TensorRole::Weight && d.role != TensorRole::State)
    throw std::invalid_argument(fmt::format("weight '{}': role must be Weight or State", d.name));
  if (d.carried && d.role != TensorRole::State)
    throw std::invalid_argument(fmt::format("weight '{}': only a State tensor can be carried", d.name));
  return push_tensor(g, Tensor{.name = d.name, .dtype = d.dtype, .role = d.role, .max_shape = d.shape,
                               .carried = d.carried});
}

TensorId add_tensor(Graph& graph, std::string name, DType dtype, Shape max_shape) {
  GraphState& g = state(graph);
  require_unbuilt(g, "add_tensor");
  return push_tensor(g, Tensor{.name = std::move(name), .dtype = dtype,
                               .role = TensorRole::Intermediate, .max_shape = max_shape});
}

SymbolId add_symbol(Graph& graph, const SymbolDesc& d) {
  GraphState& g = state(graph);
  require_unbuilt(g, "add_symbol");
  if (d.lo > d.hi)
    throw std::invalid_argument(fmt::format("symbol '{}': empty range [{}, {}]", d.name, d.lo, d.hi));
  for (const auto& s : g.symbols)
    if (s.name == d.name) throw std::invalid_argument(fmt::format("symbol '{}' declared twice", d.name));
  if (g.symbols.size() >= kMaxSymbols)
    throw std::invalid_argument(fmt::format("symbol '{}': a graph has at most {} symbols (the symbol block)", d.name,
                                            kMaxSymbols));
  if (d.lo < 0 || d.hi > int64_t(UINT32_MAX))
    throw std::invalid_argument(fmt::format("symbol '{}': range [{}, {}] is outside [0, 2^32) (kernels read it as u32)",
                                            d.name, d.lo, d.hi));
  g.symbols.push_back(Symbol{d.name, d.lo, d.hi});
  return SymbolId{uint32_t(g.symbols.size() - 1)};
}

NodeId add_node(Graph& graph, Node node) {
  GraphState& g = state(graph);
  require_unbuilt(g, "add_node");
  std::string where = fmt::format("node '{}' ({})", node.name, node.op);
  if (node.name.empty()) throw std::invalid_argument("a node needs a name");
  for (const auto& other : g.nodes)
    if (other.name == node.name)
      throw std::invalid_argument(fmt::format("node name '{}' is used twice", node.name));
  if (!node.infer || !node.plan)
    throw std::invalid_argument(fmt::format("{}: infer and plan are both required", where));
  if (node.inputs.size() > kMaxNodeTensors || node.outputs.size() > kMaxNodeTensors)
    throw std::invalid_argument(fmt::format("{}: more than {} inputs or outputs", where, kMaxNodeTensors));
  for (TensorId t : node.inputs) check_tensor_id(g, t, where + " input");
  for (TensorId t : node.outputs) check_tensor_id(g, t, where + " output");
  for (SymbolId s : node.shape_symbols)
    if (s.v >= g.symbols.size())
      throw std::invalid_argument(fmt::format("{}: unknown symbol id {}", where, s.v));
  g.nodes.push_back(std::move(node));
  return NodeId{uint32_t(g.nodes.size() - 1)};
}

void mark_output(Graph& graph, TensorId t) {
  GraphState& g = state(graph);
  require_unbuilt(g, "mark_output");
  check_tensor_id(g, t, "mark_output");
  if (!g.tensors[t.v].is_output) g.outputs.push_back(t);
  g.tensors[t.v].is_output = true;
}

namespace {

// Undoes a failed build: releases what it made (bind groups before the buffers they bind) and
// leaves the graph as before build was called.
void unbuild(GraphState& g) {
  g.compiled.clear();
  g.uniforms.clear();
  g.symbol_block = gpu::Buffer{};
  g.staging.clear();
  g.buffers.clear();
  g.readback = {};
  g.memory = MemoryPlan{};
  g.live = LiveState{};
  g.staged = LiveState{};
  g.last = Snapshot{};
  g.planned = false;
  g.built = false;
}

}  // namespace

void build(Graph& graph) {
  GraphState& g = state(graph);
  require_unbuilt(g, "build");
  try {
    check_dataflow(g);
    check_state_order(g);
    find_varying(g);
    check_routes(g);
    allocate(g);
    compile(g);

    // Live state starts at max shapes and each symbol's lower bound; plan once for it.
    g.live.shapes.clear();
    for (const Tensor& t : g.tensors) g.live.shapes.push_back(t.max_shape);
    g.live.symbols.clear();
    for (const Symbol& s : g.symbols) g.live.symbols.push_back(s.lo);
    g.live.nodes.assign(g.nodes.size(), NodeState{});
    g.staged = g.live;
    propagate_and_commit(g);
    g.skipped = skipped_from_env(g);
  } catch (...) {
    unbuild(g);
    throw;
  }
  g.built = true;
}

TensorId find_tensor(const Graph& graph, std::string_view name) {
  const GraphState& g = state(graph);
  for (uint32_t i = 0; i < g.tensors.size(); ++i)
    if (g.tensors[i].name == name) return TensorId{i};
  throw std::invalid_argument(fmt::format("no tensor named '{}'", name));
}

NodeId find_node(const Graph& graph, std::string_view name) {
  const GraphState& g = state(graph);
  for (uint32_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].name == name) return NodeId{i};
  throw std::invalid_argument(fmt::format("no node named '{}'", name));
}

}  // namespace wgrt::graph
