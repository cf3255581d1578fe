// ModelMemory: a small model's GPU buffers against its memory plan: the buffers created add up
// to the plan's figures, weights take their tensor bytes (and what the loader counted), the KV
// cache its shape's bytes, and intermediates share buffers only while not both live.
#include <gtest/gtest.h>

#include <array>
#include <string>

#include "gpu/handles.h"

#include "model/gguf_writer.h"
#include "model/random_model.h"
#include "model/transformer.h"
#include "support/device.h"

namespace wgrt::model {
namespace {

TEST(ModelMemory, BuffersCreatedMatchThePlan) {
  RandomModelSpec spec = default_model_spec();
  ModelFile file = open_gguf_bytes(gguf_serialize(make_random_model(spec)), "memory.gguf");
  BuildOptions o;
  o.n_ctx = 48;
  o.max_batch = 16;
  o.f16_kv = false;
  ModelGraph mg = build_model(test::device(), file, o);
  const graph::Graph& g = *mg.graph;
  const graph::MemoryPlan& p = graph::memory_plan(g);

  std::array<uint64_t, 5> created{};  // by BufferUse
  for (size_t b = 0; b < p.buffers.size(); ++b) {  // each physical buffer as its tensors see it
    const WGPUBuffer buffer = graph::tensor_buffer(g, p.buffers[b].tensors.front());
    for (graph::TensorId t : p.buffers[b].tensors) EXPECT_EQ(graph::tensor_buffer(g, t), buffer) << "buffer " << b;
    const uint64_t size = wgpuBufferGetSize(buffer);
    EXPECT_EQ(size, p.buffers[b].bytes) << "buffer " << b;
    created[size_t(p.buffers[b].use)] += size;
  }
  EXPECT_EQ(created[size_t(graph::BufferUse::Weight)], p.weight_bytes);
  EXPECT_EQ(created[size_t(graph::BufferUse::State)], p.state_bytes);
  EXPECT_EQ(created[size_t(graph::BufferUse::Scratch)] + created[size_t(graph::BufferUse::Output)], p.scratch_bytes);

  // Weights: their tensors' bytes, which is what the loader uploaded plus the RoPE table.
  uint64_t weights = 0;
  for (uint32_t i = 0; i < graph::tensor_count(g); ++i) {
    const graph::Tensor& t = graph::tensor_info(g, graph::TensorId{i});
    if (t.role == graph::TensorRole::Weight) weights += t.bytes;
  }
  EXPECT_EQ(p.weight_bytes, weights);
  EXPECT_EQ(p.weight_bytes, mg.weight_bytes + graph::tensor_info(g, graph::find_tensor(g, "rope_freqs")).bytes);
  // KV cache: K and V per layer, f32 [n_kv_heads, n_ctx, head_dim]; and the fed token.
  const ModelConfig& c = file.config;
  EXPECT_EQ(p.state_bytes, 2ull * c.n_layers * c.n_kv_heads * o.n_ctx * c.head_dim * 4 + 4);

  // Sharing happened, and only between intermediates that are never live together.
  EXPECT_LT(p.scratch_bytes, p.unshared_bytes);
  size_t shared = 0;
  for (const graph::PhysicalBuffer& b : p.buffers) {
    if (b.tensors.size() < 2) continue;
    ++shared;
    for (size_t i = 0; i < b.tensors.size(); ++i)
      for (size_t j = i + 1; j < b.tensors.size(); ++j)
        EXPECT_FALSE(p.lifetimes[b.tensors[i].v].overlaps(p.lifetimes[b.tensors[j].v]))
            << graph::tensor_info(g, b.tensors[i]).name << " / " << graph::tensor_info(g, b.tensors[j]).name;
  }
  EXPECT_GT(shared, 0u);
  EXPECT_EQ(graph::describe_memory(p).rfind("memory: weights ", 0), 0u) << graph::describe_memory(p);
}

// Q4_1 / Q5_0 / Q5_1 / IQ4_NL / IQ4_XS files: every matrix (and the embedding) read in its blocks by linear_q
// and the embedding, so the weights take the file's tensor bytes (dims are multiples of 128:
// no fifth-bit padding), nothing expanded.
TEST(ModelMemory, LegacyBlockFilesTakeTheirTensorBytes) {
  for (GgmlType t : {GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::IQ4_NL, GgmlType::IQ4_XS}) {
    SCOPED_TRACE(ggml_type_name(uint32_t(t)));
    RandomModelSpec spec = default_model_spec();
    spec.matrix_type = t;
    spec.embd_type = t;
    ModelFile file = open_gguf_bytes(gguf_serialize(make_random_model(spec)), "legacy.gguf");
    uint64_t file_bytes = 0;
    for (const auto& [name, w] : file.weights)
      if (name != "rope_freqs.weight") file_bytes += w.n_bytes;
    BuildOptions o;
    o.n_ctx = 32;
    o.max_batch = 8;
    ModelGraph mg = build_model(test::device(), file, o);
    EXPECT_EQ(mg.weight_bytes, file_bytes);
    const std::string fmt_name = t == GgmlType::Q4_1     ? "q4_1"
                                 : t == GgmlType::Q5_0   ? "q5_0"
                                 : t == GgmlType::Q5_1   ? "q5_1"
                                 : t == GgmlType::IQ4_NL ? "iq4_nl"
                                                         : "iq4_xs";
    size_t linear = 0, embedding = 0;
    for (uint32_t i = 0; i < graph::node_count(*mg.graph); ++i) {
      const graph::Node& n = graph::node_info(*mg.graph, graph::NodeId{i});
      linear += n.op.rfind("linear_" + fmt_name, 0) == 0;
      embedding += n.op == "embedding_" + fmt_name;
      EXPECT_NE(n.op, "linear") << n.name << ": a float matrix in a " << fmt_name << " file";
    }
    EXPECT_GE(linear, size_t(spec.n_layers) * 3 + 1);  // q|k|v, o, the FFN's two, the head
    EXPECT_EQ(embedding, 1u);
  }
}

// The shared test device made to report smaller limits while one build runs: the plan refuses
// before allocating, so nothing is created under limits the device does not really have.
struct FakeLimits {
  gpu::DeviceCaps saved = test::device().caps;
  ~FakeLimits() { test::device().caps = saved; }
};

TEST(ModelMemory, ModelPastTheDeviceIsRefusedBeforeAllocation) {
  RandomModelSpec spec = default_model_spec();
  spec.embd_type = GgmlType::F32;  // token_embd f32 [258, 256]: 264,192 bytes
  ModelFile file = open_gguf_bytes(gguf_serialize(make_random_model(spec)), "memory.gguf");
  BuildOptions o;
  o.n_ctx = 32;
  o.max_batch = 8;
  {
    // Past one binding: the table is loaded as tensors of rows (192 rows fit 200 KiB).
    FakeLimits fake;
    test::device().caps.limits.maxStorageBufferBindingSize = 200 << 10;
    ModelGraph mg = build_model(test::device(), file, o);
    std::vector<std::string> parts;
    for (uint32_t i = 0; i < graph::tensor_count(*mg.graph); ++i) {
      const graph::Tensor& t = graph::tensor_info(*mg.graph, graph::TensorId{i});
      if (t.name.starts_with("token_embd.weight")) parts.push_back(t.name + " " + graph::to_string(t.max_shape));
    }
    EXPECT_EQ(parts, (std::vector<std::string>{"token_embd.weight.rows0 [192, 256]", "token_embd.weight.rows192 [66, 256]"}));
  }
  const int64_t before = gpu::object_counts().created_of(gpu::ObjectKind::Buffer);
  {
    // 16 KiB: 16 rows a tensor, 17 tensors, past the 5 a weight may take.
    FakeLimits fake;
    test::device().caps.limits.maxStorageBufferBindingSize = 16 << 10;
    try {
      (void)build_model(test::device(), file, o);
      FAIL() << "a 264,192-byte weight was split into 17 bindings";
    } catch (const ModelError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("token_embd.weight: this [258, 256] weight takes 264192 bytes, past 5 storage bindings of "
                       "16384 bytes"), std::string::npos) << m;
      EXPECT_NE(m.find("maxStorageBufferBindingSize"), std::string::npos) << m;
    }
  }
  {
    FakeLimits fake;
    test::device().caps.device_memory = 1 << 20;
    try {
      (void)build_model(test::device(), file, o);
      FAIL() << "the model fit 1 MiB of device memory";
    } catch (const std::invalid_argument& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("past the adapter's 1.0 MiB of device memory"), std::string::npos) << m;
      EXPECT_NE(m.find("weights "), std::string::npos) << m;
      EXPECT_NE(m.find("KV cache "), std::string::npos) << m;
    }
  }
  EXPECT_EQ(gpu::object_counts().created_of(gpu::ObjectKind::Buffer), before) << "buffers were created";
}

}  // namespace
}  // namespace wgrt::model
