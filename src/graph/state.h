// The graph's sealed state, for src/graph's implementation files only: everything else uses
// graph.h's functions. build() fills it, update() stages and commits it, execute() reads it.
#pragma once

#include <array>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include "gpu/buffer.h"
#include "gpu/device.h"
#include "graph/graph.h"

namespace wgrt::graph {

struct NodeState {
  uint32_t route = 0;  // index into the node's routes
  Plan plan;
};

// Everything update() may change; staged in a copy, committed by swap.
struct LiveState {
  std::vector<Shape> shapes;      // per tensor
  std::vector<int64_t> symbols;   // per symbol
  std::vector<NodeState> nodes;   // per node
};

struct ReadbackSlot {
  uint64_t serial = 0;                // the execute that filled it (1-based; 0: none)
  std::vector<uint64_t> bytes;        // per output (outputs order): bytes copied, 0 if not
  std::vector<gpu::MapRequest> maps;  // per output; sized once at build (the callbacks hold addresses)
};

struct CompiledKernel {
  const gpu::Pipeline* pipeline = nullptr;  // owned by the device's cache
  gpu::BindGroup bind_group;
};

struct GraphState {
  explicit GraphState(gpu::Device& device) : dev(&device) {}
  GraphState(const GraphState&) = delete;
  GraphState& operator=(const GraphState&) = delete;
  ~GraphState();  // finishes pending read-back mappings (their callbacks hold addresses in here)

  gpu::Device* dev;
  std::deque<Tensor> tensors;  // a deque: references stay valid while ops add tensors
  std::vector<Symbol> symbols;
  std::vector<Node> nodes;
  std::vector<TensorId> outputs;

  // Set by build().
  bool built = false;
  uint32_t uniform_stride = 256;  // per dispatch slot, >= minUniformBufferOffsetAlignment
  MemoryPlan memory;                  // which buffer hosts each tensor, and the sizes
  std::vector<gpu::Buffer> buffers;   // per physical buffer of the plan (memory.buffers)
  std::vector<gpu::Buffer> uniforms;  // per node: kMaxDispatches slots
  gpu::Buffer symbol_block;           // kSymbolBlockBytes; null when no kernel binds it
  std::vector<std::array<gpu::Buffer, kReadbackSlots>> staging;  // per output (outputs order)
  std::array<ReadbackSlot, kReadbackSlots> readback;
  Snapshot last;  // of the latest execute
  std::vector<std::vector<std::vector<CompiledKernel>>> compiled;  // [node][route][kernel]

  LiveState live;
  LiveState staged;  // scratch for update(); same sizes as live, reused every step
  bool planned = false;
  GraphStats stats;
  std::vector<uint32_t> skipped;  // per node: kernels left out of every step (set_skipped_kernels); empty: none
};

// Shared by build() and update(): g.staged holds the new input shapes and symbol values (every
// other entry as in g.live). Runs infer and plan for every node into g.staged, validates it,
// then commits: uniform blocks that changed are written and g.live takes the staged state.
// Throws before the commit on any failure, leaving g.live and the GPU buffers untouched.
void propagate_and_commit(GraphState& g);

// plan_memory (graph/memory.h) on the state.
MemoryPlan plan_memory(const GraphState& g, const MemoryBudget& budget);

// Whether any route of the node binds its uniform block (it then gets a uniform buffer).
bool node_uses_params(const Node& node);
// Whether any kernel of the graph binds the symbol block.
bool graph_uses_symbol_block(const GraphState& g);

// The bind group of kernel `k` of route `r` of node `n` for `pipeline`, a tensor named in
// `overrides` bound to the override's buffer instead of its own (build: none).
gpu::BindGroup make_bind_group(const GraphState& g, size_t n, size_t r, size_t k, const gpu::Pipeline& pipeline,
                               std::span<const BufferOverride> overrides = {});

// WGRT_SKIP_NODES=PREFIX[:KERNEL],... as set_skipped_kernels' masks (empty when unset): every
// node whose name starts with PREFIX ("*": every node), all its kernels or kernel KERNEL. Throws
// std::invalid_argument naming a malformed item.
std::vector<uint32_t> skipped_from_env(const GraphState& g);

// Encodes node `n`'s active dispatches: with its own bind groups, or `groups` (one per kernel
// of the active route).
void encode_node(const GraphState& g, size_t n, WGPUComputePassEncoder pass,
                 const std::vector<gpu::BindGroup>* groups = nullptr);

// "gemv = 1, tiled = 2": a node's routes and their ids, for errors.
std::string describe_routes(const Node& node);

// Throws std::invalid_argument naming `where` and the id when it does not exist.
void check_tensor_id(const GraphState& g, TensorId t, const std::string& where);
void check_node_id(const GraphState& g, NodeId n, const std::string& where);

}  // namespace wgrt::graph
