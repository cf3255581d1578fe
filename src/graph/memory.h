// The memory plan: which physical GPU buffer hosts each tensor, and what the graph needs in
// all, computed once at build before anything is allocated.
//
// Intermediates share buffers by lifetime: a tensor lives from the first node that references
// it (an input, an output, or any binding of any of the node's routes) to the last, in
// execution order, both ends included. Two intermediates whose lifetimes overlap never share a
// buffer. Buffers are shared whole, never packed at offsets: WebGPU refuses a buffer bound
// writable and read-only in one dispatch even at disjoint ranges, and a node's inputs and
// outputs are both live at that node. Inputs, weights, state and graph outputs (read back
// after the step, possibly after the next step is submitted) each keep a buffer of their own.
//
// Assignment is greedy interval colouring: intermediates in order of size (largest first, then
// by first use, then by id) go to the smallest existing buffer none of whose tensors' lifetimes
// overlap theirs, or to a new buffer of their size; so each buffer has the size of the largest
// tensor it hosts, and the plan depends on the graph alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpu/webgpu.h"
#include "graph/shape.h"

namespace wgrt::graph {

class Graph;

enum class BufferUse : uint8_t { Input, Weight, State, Scratch, Output };

struct PhysicalBuffer {
  uint64_t bytes = 0;
  BufferUse use = BufferUse::Scratch;
  std::vector<TensorId> tensors;  // hosted, in assignment order
};

// Nodes (execution order) referencing a tensor, both ends included; first = -1: none does.
struct Lifetime {
  int32_t first = -1;
  int32_t last = -1;
  bool overlaps(const Lifetime& o) const { return first <= o.last && o.first <= last; }
};

struct MemoryPlan {
  std::vector<uint32_t> buffer_of;      // per tensor: index into buffers
  std::vector<PhysicalBuffer> buffers;  // storage buffers, created in this order
  std::vector<Lifetime> lifetimes;      // per tensor (intermediates; others unused)
  uint64_t weight_bytes = 0;    // Weight tensors
  uint64_t state_bytes = 0;     // State tensors (KV cache)
  uint64_t input_bytes = 0;     // Input tensors
  uint64_t scratch_bytes = 0;   // the buffers of intermediates, graph outputs included
  uint64_t unshared_bytes = 0;  // what intermediates would take with a buffer each
  uint64_t readback_bytes = 0;  // read-back staging of the outputs (kReadbackSlots each)
  uint64_t uniform_bytes = 0;   // per-node uniform blocks
  uint32_t uniform_stride = 256;
  uint64_t total() const {
    return weight_bytes + state_bytes + input_bytes + scratch_bytes + readback_bytes + uniform_bytes;
  }
};

// What the device offers; device_memory 0: not reported, only the buffer limits are checked.
struct MemoryBudget {
  uint64_t max_buffer_size = 0;
  uint64_t max_binding_size = 0;  // maxStorageBufferBindingSize: every tensor is bound as storage
  uint32_t min_uniform_alignment = 256;
  uint64_t device_memory = 0;
};
MemoryBudget memory_budget(const WGPULimits& limits, uint64_t device_memory = 0);

// Plans a graph whose nodes are all added (built or not); touches no GPU. Throws
// std::invalid_argument, naming the sizes needed and available, when a tensor is past a buffer
// or binding limit or the total is past the device's memory.
MemoryPlan plan_memory(const Graph& g, const MemoryBudget& budget);

// "memory: weights 728.0 MiB, KV cache 256.0 MiB, scratch 143.2 MiB, other 1.0 MiB"
std::string describe_memory(const MemoryPlan& p);

}  // namespace wgrt::graph
