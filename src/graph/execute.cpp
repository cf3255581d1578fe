// execute(): one command buffer: one compute pass with every active dispatch in order
// (WebGPU orders storage hazards between dispatches), then output copies; one submit.
#include <fmt/format.h>

#include <stdexcept>

#include "gpu/buffer.h"
#include "graph/graph.h"

namespace wgrt::graph {
namespace {

void encode_node(const Graph& g, size_t n, WGPUComputePassEncoder pass) {
  const NodeState& ns = g.live.nodes[n];
  const auto& kernels = g.compiled[n][ns.route];
  for (size_t j = 0; j < kernels.size(); ++j) {
    const Grid& gr = ns.plan.grids[j];
    wgpuComputePassEncoderSetPipeline(pass, kernels[j].pipeline->pipeline.get());
    wgpuComputePassEncoderSetBindGroup(pass, 0, kernels[j].bind_group.get(), 0, nullptr);
    wgpuComputePassEncoderDispatchWorkgroups(pass, gr.x, gr.y, gr.z);
  }
}

uint64_t live_bytes(const Graph& g, TensorId t) {
  return gpu::align_up(dtype_bytes(g.tensors[t.v].dtype, g.live.shapes[t.v]), 4);
}

}  // namespace

void write_tensor(Graph& g, TensorId t, const void* data, size_t bytes) {
  if (!g.built) throw std::logic_error("write_tensor: build the graph first");
  if (t.v >= g.tensors.size())
    throw std::invalid_argument(fmt::format("write_tensor: tensor id {} does not exist", t.v));
  const Tensor& tensor = g.tensors[t.v];
  if (bytes > tensor.bytes)
    throw std::invalid_argument(fmt::format("write_tensor: {} bytes do not fit '{}' ({} bytes at "
                                            "max shape {})", bytes, tensor.name, tensor.bytes,
                                            to_string(tensor.max_shape)));
  gpu::upload(*g.dev, g.buffers[t.v].get(), 0, data, bytes);
}

void execute(Graph& g, gpu::Profiler* profiler) {
  if (!g.planned) throw std::logic_error("execute: build the graph first");
  gpu::Device& dev = *g.dev;
  auto enc = gpu::CommandEncoder::adopt(wgpuDeviceCreateCommandEncoder(dev.get(), nullptr));
  if (!profiler) {
    gpu::ComputePass pass = gpu::begin_compute_pass(enc.get(), nullptr, "wgrt graph");
    for (size_t n = 0; n < g.nodes.size(); ++n) encode_node(g, n, pass.get());
    wgpuComputePassEncoderEnd(pass.get());
  } else {
    // A pass per node so each gets its own GPU timestamps.
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      const Route& r = g.nodes[n].routes.routes[g.live.nodes[n].route];
      gpu::ComputePass pass = gpu::begin_compute_pass(
          enc.get(), profiler, fmt::format("{} [{}:{}]", g.nodes[n].name, g.nodes[n].op, r.name));
      encode_node(g, n, pass.get());
      wgpuComputePassEncoderEnd(pass.get());
    }
  }
  for (TensorId t : g.outputs)
    wgpuCommandEncoderCopyBufferToBuffer(enc.get(), g.buffers[t.v].get(), 0, g.staging[t.v].get(),
                                         0, live_bytes(g, t));
  if (profiler) gpu::resolve_profile(*profiler, enc.get());
  auto cmd = gpu::CommandBuffer::adopt(wgpuCommandEncoderFinish(enc.get(), nullptr));
  WGPUCommandBuffer raw = cmd.get();
  wgpuQueueSubmit(dev.queue.get(), 1, &raw);
  ++g.stats.executes;
  gpu::check(dev);
}

void read_output(Graph& g, TensorId t, void* dst, size_t bytes) {
  if (t.v >= g.tensors.size() || !g.tensors[t.v].is_output)
    throw std::invalid_argument(fmt::format("read_output: tensor id {} is not a marked output", t.v));
  uint64_t live = dtype_bytes(g.tensors[t.v].dtype, g.live.shapes[t.v]);
  if (bytes > live)
    throw std::invalid_argument(fmt::format("read_output: {} bytes asked of '{}', whose live shape "
                                            "{} holds {}", bytes, g.tensors[t.v].name,
                                            to_string(g.live.shapes[t.v]), live));
  gpu::map_read(*g.dev, g.staging[t.v].get(), bytes, dst);
}

}  // namespace wgrt::graph
