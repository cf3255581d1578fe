// Prefetch: brings the weights of a later kernel into L2 while the kernel dispatched before it
// runs, so that later kernel reads them from L2 instead of memory.
//
// A decode step is a chain of dependent kernels, each starting only after the barrier that ends
// the one before; a gemv that reads a few MB spends as long waiting on its first loads and its
// tail as streaming (docs/PERFORMANCE.md), and the attention leaves most SMs idle. The prefetch
// kernel reads one word of every 32-byte sector of up to four buffers; its only writable binding
// is a sink that nothing reads, reset each step (graph::WeightDesc::reset_each_step), so Dawn
// places no barrier before it and it runs beside the kernel before it. The barrier before the
// next kernel waits for both.
//
// Routes on the live dim 0 of `key` (the rows of the step): "l2" [1, 1] runs the kernel, "off"
// [2, max] is idle (at several rows the gemm routes are not bound by their first loads).
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"
#include "ops/common.h"

namespace wgrt::ops {

constexpr uint32_t kPrefetchMaxTensors = 4;  // prefetch.wgsl's src0..src3
constexpr uint32_t kPrefetchWg = 256;        // prefetch.wgsl WG
// Sectors (32 bytes) a thread reads: the grid is the tensors' sectors / (kPrefetchWg * this).
constexpr uint32_t kPrefetchSectorsPerThread = 16;

inline constexpr graph::RouteId kPrefetchL2{1}, kPrefetchOff{2};

struct PrefetchDesc {
  std::string name;                      // node name; the sink is "<name>.sink"
  graph::TensorId key;                   // whose live dim 0 picks the route (1: run)
  std::vector<graph::TensorId> tensors;  // 1..kPrefetchMaxTensors weight tensors
};
// Returns the node.
graph::NodeId add_prefetch(graph::Graph& g, const PrefetchDesc& d);

// Which projections the model builders prefetch: WGRT_PREFETCH, a sum of the bits below (0, the
// default: none; 15: all four).
enum PrefetchBits : uint32_t { kPrefetchQkv = 1, kPrefetchOutput = 2, kPrefetchGateUp = 4, kPrefetchDown = 8 };
uint32_t prefetch_wanted();
// The most bytes one prefetch node brings in: WGRT_PREFETCH_MB, default kPrefetchMaxMb.
constexpr uint32_t kPrefetchMaxMb = 24;
uint64_t prefetch_max_bytes();

struct PrefetchParams {
  uint32_t end0, end1, end2, end3;  // running sums of the tensors' sectors
  uint32_t magic;                   // the sink is written where the words' xor equals it
  uint32_t _pad0, _pad1, _pad2;
};
static_assert(sizeof(PrefetchParams) == 32);
extern const ParamLayout kPrefetchLayout;

struct PrefetchPlanCtx {
  std::vector<uint64_t> bytes;  // per tensor
  uint32_t max_groups_per_dim;
};
void plan_prefetch(const PrefetchPlanCtx& c, graph::Plan& plan);

}  // namespace wgrt::ops
