// execute(): one command buffer: one compute pass with every active dispatch in order
// (WebGPU orders storage hazards between dispatches), then output copies; one submit.
#include <fmt/format.h>

#include <array>
#include <chrono>
#include <stdexcept>

#include "gpu/buffer.h"
#include "graph/graph.h"
#include "graph/state.h"

namespace wgrt::graph {
namespace {

using Clock = std::chrono::steady_clock;
int64_t ns_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count();
}

uint64_t live_bytes(const GraphState& g, TensorId t) {
  return gpu::align_up(dtype_bytes(g.tensors[t.v].dtype, g.live.shapes[t.v]), 4);
}

}  // namespace

void write_tensor(Graph& graph, TensorId t, const void* data, size_t bytes) {
  const GraphState& g = state(graph);
  if (!g.built) throw std::logic_error("write_tensor: build the graph first");
  if (t.v >= g.tensors.size())
    throw std::invalid_argument(fmt::format("write_tensor: tensor id {} does not exist", t.v));
  const Tensor& tensor = g.tensors[t.v];
  if (bytes > tensor.bytes)
    throw std::invalid_argument(fmt::format("write_tensor: {} bytes do not fit '{}' ({} bytes at "
                                            "max shape {})", bytes, tensor.name, tensor.bytes,
                                            to_string(tensor.max_shape)));
  gpu::upload(*g.dev, g.buffers[g.memory.buffer_of[t.v]].get(), 0, data, bytes);
}

namespace {

int output_index(const GraphState& g, TensorId t) {
  for (size_t i = 0; i < g.outputs.size(); ++i)
    if (g.outputs[i] == t) return int(i);
  return -1;
}

// Waits out and unmaps whatever a slot still has mapped (pending, or kept by read_output),
// before it is filled again.
void drain(GraphState& g, ReadbackSlot& slot, size_t s) {
  for (size_t i = 0; i < slot.maps.size(); ++i) {
    WGPUBuffer staging = g.staging[i][s].get();
    if (slot.maps[i].pending) gpu::map_read_end(*g.dev, staging, slot.maps[i], nullptr, 0);
    gpu::map_release(staging, slot.maps[i]);
  }
  std::fill(slot.bytes.begin(), slot.bytes.end(), 0);
}

}  // namespace

GraphState::~GraphState() {
  for (size_t s = 0; s < readback.size(); ++s)
    for (size_t i = 0; i < readback[s].maps.size(); ++i)
      try {
        if (readback[s].maps[i].pending) gpu::map_read_end(*dev, staging[i][s].get(), readback[s].maps[i], nullptr, 0);
        gpu::map_release(staging[i][s].get(), readback[s].maps[i]);
      } catch (const std::exception&) {  // a lost device: the mapping is void anyway
      }
}

Snapshot execute(Graph& graph, const ExecuteOptions& o) {
  GraphState& g = state(graph);
  if (!g.planned) throw std::logic_error("execute: build the graph first");
  gpu::Device& dev = *g.dev;
  gpu::Profiler* profiler = o.profiler;
  const size_t s = size_t(g.stats.executes % kReadbackSlots);
  ReadbackSlot& slot = g.readback[s];
  drain(g, slot, s);

  const auto t0 = Clock::now();
  auto enc = gpu::CommandEncoder::adopt(wgpuDeviceCreateCommandEncoder(dev.get(), nullptr));
  if (!profiler) {
    gpu::ComputePass pass = gpu::begin_compute_pass(enc.get(), nullptr, "wgrt graph");
    for (size_t n = 0; n < g.nodes.size(); ++n) encode_node(g, n, pass.get());
    wgpuComputePassEncoderEnd(pass.get());
  } else {
    // A pass per node so each gets its own GPU timestamps.
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      const Route& r = g.nodes[n].routes.routes[g.live.nodes[n].route];
      if (r.kernels.empty()) continue;
      gpu::ComputePass pass = gpu::begin_compute_pass(enc.get(), profiler, pass_label(graph, NodeId{uint32_t(n)}));
      encode_node(g, n, pass.get());
      wgpuComputePassEncoderEnd(pass.get());
    }
  }
  auto copy = [&](size_t i) {
    const TensorId t = g.outputs[i];
    slot.bytes[i] = live_bytes(g, t);
    wgpuCommandEncoderCopyBufferToBuffer(enc.get(), g.buffers[g.memory.buffer_of[t.v]].get(), 0, g.staging[i][s].get(), 0,
                                         slot.bytes[i]);
  };
  if (!o.read_none) {
    if (o.read.empty()) {
      for (size_t i = 0; i < g.outputs.size(); ++i) copy(i);
    } else {
      for (TensorId t : o.read) {
        const int i = output_index(g, t);
        if (i < 0)
          throw std::invalid_argument(fmt::format("execute: '{}' is not a marked output (hint: mark_output before "
                                                  "build)", t.v < g.tensors.size() ? g.tensors[t.v].name : "?"));
        copy(size_t(i));
      }
    }
  }
  if (profiler) gpu::resolve_profile(*profiler, enc.get());
  auto cmd = gpu::CommandBuffer::adopt(wgpuCommandEncoderFinish(enc.get(), nullptr));
  const auto t1 = Clock::now();
  WGPUCommandBuffer raw = cmd.get();
  wgpuQueueSubmit(dev.queue.get(), 1, &raw);
  ++g.stats.executes;
  g.stats.dispatches += active_dispatches(graph);
  // Map right after the submit: each mapping then waits for this step's work only.
  for (size_t i = 0; i < g.outputs.size(); ++i)
    if (slot.bytes[i]) gpu::map_read_begin(dev, g.staging[i][s].get(), slot.bytes[i], slot.maps[i]);
  g.stats.encode_ns += ns_between(t0, t1);
  g.stats.submit_ns += ns_between(t1, Clock::now());
  slot.serial = uint64_t(g.stats.executes);
  g.last = Snapshot{slot.serial, uint32_t(s)};
  gpu::check(dev);
  return g.last;
}

namespace {

size_t snapshot_index(const GraphState& g, const Snapshot& snap, TensorId t) {
  const int i = t.v < g.tensors.size() && g.tensors[t.v].is_output ? output_index(g, t) : -1;
  if (i < 0) throw std::invalid_argument(fmt::format("read_output: tensor id {} is not a marked output", t.v));
  if (snap.serial == 0 || snap.slot >= kReadbackSlots || g.readback[snap.slot].serial != snap.serial)
    throw std::invalid_argument(fmt::format(
        "read_output: the snapshot of execute {} is gone (hint: read a step's outputs before two more executes)",
        snap.serial));
  if (g.readback[snap.slot].bytes[size_t(i)] == 0)
    throw std::invalid_argument(fmt::format("read_output: execute {} did not read back '{}' (hint: list it in "
                                            "ExecuteOptions::read)", snap.serial, g.tensors[t.v].name));
  return size_t(i);
}

}  // namespace

uint64_t snapshot_bytes(const Graph& graph, const Snapshot& snap, TensorId t) {
  const GraphState& g = state(graph);
  return g.readback[snap.slot].bytes[snapshot_index(g, snap, t)];
}

void read_output(Graph& graph, const Snapshot& snap, TensorId t, void* dst, size_t bytes, size_t offset) {
  GraphState& g = state(graph);
  const size_t i = snapshot_index(g, snap, t);
  ReadbackSlot& slot = g.readback[snap.slot];
  if (offset > slot.bytes[i] || bytes > slot.bytes[i] - offset)
    throw std::invalid_argument(fmt::format("read_output: bytes {}..{} asked of '{}', whose snapshot holds {}", offset,
                                            offset + bytes, g.tensors[t.v].name, slot.bytes[i]));
  WGPUBuffer staging = g.staging[i][snap.slot].get();
  const auto t0 = Clock::now();
  int64_t waited = 0;
  // The first read waits for the mapping and keeps it; later reads of the snapshot (a step's
  // rows read one by one, several samplers) copy from it until the slot is filled again.
  if (slot.maps[i].pending) gpu::map_read_end(*g.dev, staging, slot.maps[i], nullptr, 0, &waited, /*keep=*/true);
  gpu::map_read_copy(staging, slot.maps[i], dst, bytes, offset);
  g.stats.wait_ns += waited;
  g.stats.readback_ns += ns_between(t0, Clock::now()) - waited;
}

}  // namespace wgrt::graph
