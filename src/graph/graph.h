// The dynamic-shape graph: one graph, allocated once at maximum shape, serves every live
// shape (prefill and decode alike).
//
//   build    once: check the graph (dynamic capability, routes), plan memory (intermediates
//            share buffers by lifetime; refused here if the device cannot hold it), allocate
//            at max shape, create all routes' pipelines and bind groups, plan at max shape.
//   update   per step: new input shapes and symbol values -> infer + plan every node into a
//            staged state -> validate -> commit (live shapes, routes, grids, uniform writes).
//            Anything that throws leaves the graph exactly as it was; unchanged inputs do
//            nothing at all.
//   execute  per step: one compute pass with every active dispatch in order, output copies,
//            one submit. Creates nothing but the single-use encoder, pass and command buffer.
//   encode   labs: the same dispatches into a caller's pass (some nodes, or all), optionally
//            with chosen tensors bound to other buffers.
//
// Nodes hold ids (tensors, symbols, routes) and pipeline keys, never WebGPU handles; the graph
// owns every buffer and bind group through RAII, and its state is sealed: callers read and
// change it through the functions below only. docs/ARCHITECTURE.md has the picture.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <array>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "gpu/buffer.h"
#include "gpu/device.h"
#include "gpu/pipeline.h"
#include "gpu/profiler.h"
#include "graph/memory.h"
#include "graph/routes.h"
#include "graph/shape.h"

namespace wgrt::graph {

// ---- tensors and symbols -----------------------------------------------------------------
enum class TensorRole : uint8_t {
  Input,         // written by the caller each step; its dynamic dims are set by update()
  Weight,        // fixed, written once after build
  State,         // persistent across steps (KV cache): fixed shape, written by nodes
  Intermediate,  // produced by exactly one node
};

struct Tensor {
  std::string name;
  DType dtype = DType::F32;
  TensorRole role = TensorRole::Intermediate;
  Shape max_shape;
  uint64_t bytes = 0;        // allocation size, from max_shape
  uint8_t dynamic_dims = 0;  // inputs: bit i set = dim i may change per step
  bool may_vary = false;     // found at build: the live shape can differ between steps
  bool is_output = false;
  bool read = false;         // found at build: a node reads it or it is an output
  bool carried = false;      // State only: read before its writer on purpose (see WeightDesc)
};

struct Symbol {
  std::string name;
  int64_t lo = 0;
  int64_t hi = 0;
};

struct InputDesc {
  std::string name;
  DType dtype = DType::F32;
  Shape max_shape;
  uint8_t dynamic_dims = 0;
};

struct WeightDesc {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;  // DType::Bytes: {byte count}
  TensorRole role = TensorRole::Weight;  // or State
  // State only. Build checks that every node reading a state tensor comes after the first node
  // writing it (the KV cache: written, then attended). A state that carries the previous
  // step's value to an earlier reader (the fed token) says so here.
  bool carried = false;
};

struct SymbolDesc {
  std::string name;
  int64_t lo = 0;
  int64_t hi = 0;
};

// ---- nodes -------------------------------------------------------------------------------
constexpr int kMaxDispatches = 10;    // kernels per route (linear_q of q|k|v in three formats: norm, 2 act quantizations,
                                      // 3 gemm and their split-K combines, rope_qkv)
constexpr size_t kParamBytes = 256;   // one uniform block per dispatch
constexpr size_t kMaxNodeTensors = 16;  // inputs, and outputs, per node
// The symbol block: one uniform buffer holding every symbol's live value as a u32 (symbol i at
// word i; WGSL part graph_symbols.wgsl), written once per update that changes a symbol. Values a
// step changes (pos) live there, so the nodes that read them keep their uniform blocks
// unchanged from one decode step to the next (Binding::symbol_block).
constexpr size_t kMaxSymbols = 16;
constexpr size_t kSymbolBlockBytes = kMaxSymbols * 4;

struct Grid {
  uint32_t x = 1, y = 1, z = 1;
  bool operator==(const Grid&) const = default;
};

struct ParamBlock {
  alignas(16) std::array<std::byte, kParamBytes> bytes{};
  uint32_t size = 0;
  template <class P>
  void set(const P& p) {
    static_assert(std::is_trivially_copyable_v<P> && sizeof(P) <= kParamBytes && sizeof(P) % 16 == 0,
                  "a uniform block is a trivially copyable struct of 16-byte multiple size");
    std::memcpy(bytes.data(), &p, sizeof(P));
    size = sizeof(P);
  }
  bool operator==(const ParamBlock&) const = default;
};

// What `plan` produces for the active route: a grid and a uniform block per kernel.
struct Plan {
  std::array<Grid, kMaxDispatches> grids{};
  std::array<ParamBlock, kMaxDispatches> params{};
  bool operator==(const Plan&) const = default;
};

struct SymbolValues {
  std::span<const int64_t> values;
  int64_t operator[](SymbolId s) const { return values[s.v]; }
};

// Generic views handed to a node's hooks; each op turns them into its own typed context.
struct InferArgs {
  std::span<const Shape> in;
  // Each starts invalid (rank 0) and infer must set it; a State output starts at its fixed
  // shape, and a node's private scratch (read by no other node, not an output) at its max shape.
  std::span<Shape> out;
  SymbolValues sym;
};
struct Node;
struct PlanArgs {
  std::span<const Shape> in;
  std::span<const Shape> out;
  SymbolValues sym;
  RouteId route;  // the active route, chosen by the graph from the node's RouteSet
  const gpu::DeviceCaps* caps = nullptr;
  const Node* node = nullptr;  // whose plan runs
  // Whether `id` is the active route. A plan names routes through this, so one naming an id
  // its node does not declare fails (std::logic_error naming the node, the id and its routes)
  // instead of silently never matching.
  bool route_is(RouteId id) const;
};
using InferFn = std::function<void(const InferArgs&)>;
using PlanFn = std::function<void(const PlanArgs&, Plan&)>;

// What the active route moves and computes (profiles); a node without a cost function is
// taken to read each input and write each output once at its live size.
struct NodeCost {
  uint64_t bytes = 0;
  double flops = 0;
};
using CostFn = std::function<NodeCost(const PlanArgs&)>;

struct Node {
  std::string name;  // unique, e.g. "attn_norm.3"
  std::string op;    // e.g. "rms_norm"
  std::vector<TensorId> inputs;
  std::vector<TensorId> outputs;
  std::vector<SymbolId> shape_symbols;  // symbols `infer` reads
  bool dynamic = true;                  // supports inputs whose live shape varies
  RouteSet routes;
  InferFn infer;
  PlanFn plan;
  CostFn cost;  // optional
};

// ---- the graph ---------------------------------------------------------------------------
struct GraphStats {
  int64_t updates = 0;          // update() calls that changed inputs
  int64_t plans = 0;            // node plan() calls
  int64_t uniform_uploads = 0;  // queue writes of uniform blocks
  int64_t executes = 0;
  int64_t dispatches = 0;       // encoded by execute()
  // CPU time, summed: update(); execute()'s encoding and its submit (+ starting the read-back
  // mappings); read_output()'s wait for the GPU and its copy out.
  int64_t update_ns = 0, encode_ns = 0, submit_ns = 0, wait_ns = 0, readback_ns = 0;
};

// Double-buffered read-back: each execute copies the outputs it is asked for, at their live
// size, into one of two slots of staging buffers and starts mapping them; a Snapshot names that
// execute, so reading it after the next update and execute still gives its own values.
constexpr int kReadbackSlots = 2;
struct Snapshot {
  uint64_t serial = 0;
  uint32_t slot = 0;
};

// The graph's state is sealed: only the functions below (and src/graph's implementation files,
// through graph/state.h) read or change it, so no caller can leave it half-updated.
struct GraphState;
class Graph {
 public:
  explicit Graph(gpu::Device& device);
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph();  // finishes pending read-back mappings (their callbacks hold addresses in the state)

 private:
  friend GraphState& state(Graph& g);
  friend const GraphState& state(const Graph& g);
  std::unique_ptr<GraphState> state_;
};

TensorId add_input(Graph& g, const InputDesc& d);
TensorId add_weight(Graph& g, const WeightDesc& d);
// An intermediate tensor (a node's output or scratch).
TensorId add_tensor(Graph& g, std::string name, DType dtype, Shape max_shape);
SymbolId add_symbol(Graph& g, const SymbolDesc& d);
// For op authors: checks the node's ids and names, then appends it.
NodeId add_node(Graph& g, Node node);
void mark_output(Graph& g, TensorId t);

// Checks, allocates, compiles and plans at max shape. Throws with a message naming the node,
// tensor or route at fault. Atomic: after a throw the graph holds nothing of the attempt (no
// buffers, not built) and, once fixed, can be built again.
void build(Graph& g);

struct ShapeInput {
  TensorId tensor;
  Shape shape;
};
struct SymbolInput {
  SymbolId symbol;
  int64_t value = 0;
};
// Atomic: either every change is committed or none (then the exception says why).
void update(Graph& g, std::span<const ShapeInput> shapes, std::span<const SymbolInput> symbols = {});

// Writes the first `bytes` of a tensor (inputs each step, weights once).
void write_tensor(Graph& g, TensorId t, const void* data, size_t bytes);
template <class T>
void write_tensor(Graph& g, TensorId t, std::span<const T> values) {
  write_tensor(g, t, values.data(), values.size_bytes());
}

struct ExecuteOptions {
  std::span<const TensorId> read;  // the outputs to snapshot (read back); empty: every output
  bool read_none = false;          // snapshot nothing
  gpu::Profiler* profiler = nullptr;
};
// Encodes and submits the step; does not wait for it.
Snapshot execute(Graph& g, const ExecuteOptions& o = {});
inline Snapshot execute(Graph& g, gpu::Profiler* profiler) { return execute(g, ExecuteOptions{.profiler = profiler}); }

// An output's contents as snapshotted by `snap` (waits for that execute's GPU work only), from
// byte `offset` (a row of it). The first read of a snapshot waits; later ones copy from its
// mapping. Throws if the snapshot did not read `t`, holds fewer than offset + bytes of it, or a
// later execute reused its slot.
void read_output(Graph& g, const Snapshot& snap, TensorId t, void* dst, size_t bytes, size_t offset = 0);
// Bytes `snap` holds of output `t`.
uint64_t snapshot_bytes(const Graph& g, const Snapshot& snap, TensorId t);
// The latest execute's snapshot.
Snapshot last_snapshot(const Graph& g);
inline void read_output(Graph& g, TensorId t, void* dst, size_t bytes) { read_output(g, last_snapshot(g), t, dst, bytes); }
template <class T>
std::vector<T> read_output(Graph& g, const Snapshot& snap, TensorId t) {
  std::vector<T> out(size_t(snapshot_bytes(g, snap, t) / sizeof(T)));
  read_output(g, snap, t, out.data(), out.size() * sizeof(T));
  return out;
}
template <class T>
std::vector<T> read_output(Graph& g, TensorId t) {
  return read_output<T>(g, last_snapshot(g), t);
}

// ---- encoding a graph's kernels into a caller's pass (labs, timing) ----------------------
// The active dispatches of `nodes` (every node when empty), in order, at the live state: what
// execute encodes, without its read-back copies or submit.
void encode(const Graph& g, WGPUComputePassEncoder pass, std::span<const NodeId> nodes = {});
// A measuring aid (results wrong on purpose): bit j of masks[i] leaves kernel j of node i out of
// every step, execute's and encode's, until set again (empty: none). --profile's "as the step
// runs it" table sets it; WGRT_SKIP_NODES=PREFIX[:KERNEL],... sets it at build, for any command
// (every node whose name starts with PREFIX, "*" every node; all its kernels or kernel KERNEL).
void set_skipped_kernels(Graph& g, std::vector<uint32_t> masks);
// Whether any kernel is left out.
bool skipping_kernels(const Graph& g);

// The active routes' bind groups with some tensors bound to other buffers (a lab's fresh
// outputs, so no dispatch waits on another's writes). Made per call, so not for the hot path;
// valid while the same routes stay active (encode checks).
struct BufferOverride {
  TensorId tensor;
  WGPUBuffer buffer = nullptr;  // at least the tensor's max-shape bytes
};
struct ReboundNodes {
  std::vector<NodeId> nodes;
  std::vector<RouteId> routes;                        // per node: the route they were made for
  std::vector<std::vector<gpu::BindGroup>> groups;    // per node, per kernel of that route
};
ReboundNodes rebind(Graph& g, std::span<const NodeId> nodes, std::span<const BufferOverride> overrides);
void encode(const Graph& g, WGPUComputePassEncoder pass, const ReboundNodes& rebound);

// ---- reading the graph (ops, tests, dumps, profiles) -------------------------------------
// Each throws std::invalid_argument naming the id when it does not exist.
gpu::Device& device(Graph& g);
const gpu::DeviceCaps& device_caps(const Graph& g);
bool is_built(const Graph& g);
uint32_t tensor_count(const Graph& g);
uint32_t symbol_count(const Graph& g);
uint32_t node_count(const Graph& g);
const Tensor& tensor_info(const Graph& g, TensorId t);  // stays valid while tensors are added
const Symbol& symbol_info(const Graph& g, SymbolId s);
const Node& node_info(const Graph& g, NodeId n);
std::span<const TensorId> graph_outputs(const Graph& g);
TensorId find_tensor(const Graph& g, std::string_view name);
NodeId find_node(const Graph& g, std::string_view name);
const GraphStats& stats(const Graph& g);
// Set by build: which buffer hosts each tensor, and the sizes (graph/memory.h).
const MemoryPlan& memory_plan(const Graph& g);

// The live state (built graphs).
const Shape& live_shape(const Graph& g, TensorId t);
int64_t symbol_value(const Graph& g, SymbolId s);
RouteId active_route(const Graph& g, NodeId n);
const Route& active_route_info(const Graph& g, NodeId n);
// Node `n`'s route `id`; throws std::invalid_argument naming the node, the id and its routes
// when it has none of that id.
const Route& route_info(const Graph& g, NodeId n, RouteId id);
const Plan& active_plan(const Graph& g, NodeId n);
// "attn.3 [attention:decode]": the node and its active route, as profiles label its pass.
std::string pass_label(const Graph& g, NodeId n);
// The physical buffer hosting `t`; intermediates may share it with others (graph/memory.h).
WGPUBuffer tensor_buffer(const Graph& g, TensorId t);
// The node's uniform blocks (kMaxDispatches slots); null when no route binds one.
WGPUBuffer uniform_buffer(const Graph& g, NodeId n);
uint32_t uniform_stride(const Graph& g);  // bytes between a node's slots
// The active route's cost (NodeCost) at the live shapes.
NodeCost node_cost(const Graph& g, NodeId n);
// Dispatches the active routes encode per execute: all of them, or node n's.
uint32_t active_dispatches(const Graph& g);
uint32_t active_dispatches(const Graph& g, NodeId n);

}  // namespace wgrt::graph
