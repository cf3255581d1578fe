// GraphMemory: the memory plan. Intermediates share a buffer only when their lifetimes are
// disjoint, each buffer has the size of its largest tensor, inputs/weights/state/outputs keep
// their own, results still match the CPU, and a graph past the device's limits or memory is
// refused before anything is allocated.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "gpu/handles.h"
#include "graph/graph.h"
#include "ops/elementwise/elementwise.h"
#include "support/device.h"
#include "support/random.h"

namespace wgrt::graph {
namespace {

// The plan's invariants, checked from the graph alone.
void expect_valid_plan(const Graph& g, const MemoryPlan& p) {
  ASSERT_EQ(p.buffer_of.size(), tensor_count(g));
  for (uint32_t b = 0; b < p.buffers.size(); ++b) {
    const PhysicalBuffer& buf = p.buffers[b];
    ASSERT_FALSE(buf.tensors.empty()) << "buffer " << b;
    uint64_t largest = 0;
    for (TensorId t : buf.tensors) {
      EXPECT_EQ(p.buffer_of[t.v], b) << tensor_info(g, t).name;
      largest = std::max(largest, tensor_info(g, t).bytes);
    }
    EXPECT_EQ(buf.bytes, largest) << "buffer " << b << " is not the size of its largest tensor";
    if (buf.tensors.size() == 1) continue;
    for (size_t i = 0; i < buf.tensors.size(); ++i) {
      const Tensor& a = tensor_info(g, buf.tensors[i]);
      EXPECT_TRUE(a.role == TensorRole::Intermediate && !a.is_output) << a.name << " shares a buffer";
      for (size_t j = i + 1; j < buf.tensors.size(); ++j)
        EXPECT_FALSE(p.lifetimes[buf.tensors[i].v].overlaps(p.lifetimes[buf.tensors[j].v]))
            << a.name << " and " << tensor_info(g, buf.tensors[j]).name << " share a buffer while both live";
    }
  }
}

bool shared(const MemoryPlan& p, TensorId a, TensorId b) { return p.buffer_of[a.v] == p.buffer_of[b.v]; }

// ---- pure planning: nodes without kernels, planned against made-up limits ----------------------

Node plain_node(std::string name, std::vector<TensorId> in, std::vector<TensorId> out,
                std::vector<TensorId> also_bound = {}) {
  Node n;
  n.name = n.op = std::move(name);
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  n.infer = [](const InferArgs&) {};
  n.plan = [](const PlanArgs&, Plan&) {};
  std::vector<KernelSpec> kernels;  // never compiled: these graphs are planned, not built
  if (!also_bound.empty()) {
    KernelSpec k{gpu::make_key("unused", "main", {}), {}};
    for (uint32_t i = 0; i < also_bound.size(); ++i) k.bindings.push_back(Binding::of(i, also_bound[i]));
    kernels.push_back(std::move(k));
  }
  n.routes = single_route(RouteKey::of_dim(n.inputs.front(), 0), 1, 1, std::move(kernels));
  return n;
}

struct Sized {
  TensorId x, big, small, tiny, mid, y;
};

// n0: x -> big (1000 B), small (200 B); n1: big, small -> tiny (48 B); n2: tiny -> mid (100 B);
// n3: mid -> y (output). Lifetimes: big, small [0,1]; tiny [1,2]; mid [2,3].
Sized add_sized(Graph& g, bool n3_binds_big) {
  Sized s;
  s.x = add_input(g, {.name = "x", .max_shape = {1}});
  s.big = add_tensor(g, "big", DType::F32, {250});
  s.small = add_tensor(g, "small", DType::F32, {50});
  s.tiny = add_tensor(g, "tiny", DType::F32, {12});
  s.mid = add_tensor(g, "mid", DType::F32, {25});
  s.y = add_tensor(g, "y", DType::F32, {25});
  add_node(g, plain_node("n0", {s.x}, {s.big, s.small}));
  add_node(g, plain_node("n1", {s.big, s.small}, {s.tiny}));
  add_node(g, plain_node("n2", {s.tiny}, {s.mid}));
  // A route binding the node does not list still extends the lifetime.
  add_node(g, plain_node("n3", {s.mid}, {s.y}, n3_binds_big ? std::vector<TensorId>{s.big} : std::vector<TensorId>{}));
  mark_output(g, s.y);
  return s;
}

MemoryBudget roomy() { return MemoryBudget{.max_buffer_size = 1 << 20, .max_binding_size = 1 << 20}; }

TEST(GraphMemory, BestFitIntoTheSmallestFreeBuffer) {
  Graph g(test::device());
  Sized s = add_sized(g, false);
  const MemoryPlan p = plan_memory(g, roomy());
  expect_valid_plan(g, p);
  EXPECT_EQ(p.lifetimes[s.big.v].first, 0);
  EXPECT_EQ(p.lifetimes[s.big.v].last, 1);
  EXPECT_EQ(p.lifetimes[s.mid.v].first, 2);
  EXPECT_EQ(p.lifetimes[s.mid.v].last, 3);
  EXPECT_FALSE(shared(p, s.big, s.small));  // both live at n0 and n1
  EXPECT_FALSE(shared(p, s.tiny, s.small));  // both live at n1
  EXPECT_FALSE(shared(p, s.tiny, s.mid));    // both live at n2
  // mid (100 B) may go where big (1000 B) or small (200 B) was: the smaller wins.
  EXPECT_TRUE(shared(p, s.mid, s.small));
  EXPECT_FALSE(shared(p, s.y, s.big));  // an output keeps its own buffer
  EXPECT_EQ(p.scratch_bytes, 1000u + 200 + 48 + 100);  // big, small(+mid), tiny, y
  EXPECT_EQ(p.unshared_bytes, 1000u + 200 + 48 + 100 + 100);
  EXPECT_EQ(p.input_bytes, 4u);
}

TEST(GraphMemory, EveryRouteBindingCountsForTheLifetime) {
  Graph g(test::device());
  Sized s = add_sized(g, true);
  const MemoryPlan p = plan_memory(g, roomy());
  expect_valid_plan(g, p);
  EXPECT_EQ(p.lifetimes[s.big.v].last, 3);
  EXPECT_FALSE(shared(p, s.mid, s.big));
  EXPECT_TRUE(shared(p, s.mid, s.small));
}

TEST(GraphMemory, TensorPastABindingOrBufferLimitIsRefusedWithSizes) {
  Graph g(test::device());
  add_sized(g, false);
  MemoryBudget b = roomy();
  b.max_binding_size = 512;
  try {
    (void)plan_memory(g, b);
    FAIL() << "a 1000-byte tensor fit a 512-byte binding";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("intermediate tensor 'big'"), std::string::npos) << m;
    EXPECT_NE(m.find("1000 bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("maxStorageBufferBindingSize"), std::string::npos) << m;
    EXPECT_NE(m.find("512 bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("smaller context or batch"), std::string::npos) << m;
  }
  b = roomy();
  b.max_buffer_size = 600;
  try {
    (void)plan_memory(g, b);
    FAIL() << "a 1000-byte tensor fit a 600-byte buffer";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("maxBufferSize"), std::string::npos) << e.what();
  }
}

TEST(GraphMemory, WeightPastTheBindingLimitIsRefusedNamingIt) {
  Graph g(test::device());
  Sized s = add_sized(g, false);
  TensorId w = add_weight(g, {.name = "token_embd.weight", .dtype = DType::F16, .shape = {500, 2}});
  add_node(g, plain_node("n4", {s.y, w}, {add_tensor(g, "z", DType::F32, {1})}));
  MemoryBudget b = roomy();
  b.max_binding_size = 1024;  // the intermediates fit; the 2000-byte weight does not
  try {
    (void)plan_memory(g, b);
    FAIL() << "a 2000-byte weight fit a 1024-byte binding";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("weight 'token_embd.weight' f16 [500, 2] needs"), std::string::npos) << m;
    EXPECT_NE(m.find("2000 bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("bound whole"), std::string::npos) << m;
    EXPECT_NE(m.find("splits a matrix past the limit"), std::string::npos) << m;
    EXPECT_EQ(m.find("smaller context or batch"), std::string::npos) << "wrong hint for a weight: " << m;
  }
}

TEST(GraphMemory, TotalPastTheDeviceMemoryIsRefusedWithTheBreakdown) {
  Graph g(test::device());
  add_sized(g, false);
  MemoryBudget b = roomy();
  const uint64_t need = plan_memory(g, b).total();
  EXPECT_EQ(need, 4u + 1348 + 2 * 100);  // x; scratch; y's two read-back slots; no uniforms
  b.device_memory = need;
  EXPECT_NO_THROW((void)plan_memory(g, b));
  b.device_memory = need - 1;
  try {
    (void)plan_memory(g, b);
    FAIL() << "the plan fit one byte less than it needs";
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("device memory"), std::string::npos) << m;
    EXPECT_NE(m.find("scratch 0.0 MiB"), std::string::npos) << m;
  }
}

// ---- on the device: the buffers created are the plan's, and results match the CPU ------------

constexpr uint32_t kRows = 16, kCols = 24;

// a0 = x + w; a1 = a0 + w; a2 = a1 + w; a3 = a2 + a0 (a skip: a0 lives to n3); y = a3 + w.
struct Chain {
  TensorId x, w, a0, a1, a2, a3, y;
};

Chain add_chain(Graph& g) {
  Chain c;
  c.x = add_input(g, {.name = "x", .max_shape = {kRows, kCols}, .dynamic_dims = 1});
  c.w = add_weight(g, {.name = "w", .shape = {kCols}});
  c.a0 = ops::add_binary(g, {.name = "a0", .a = c.x, .b = c.w});
  c.a1 = ops::add_binary(g, {.name = "a1", .a = c.a0, .b = c.w});
  c.a2 = ops::add_binary(g, {.name = "a2", .a = c.a1, .b = c.w});
  c.a3 = ops::add_binary(g, {.name = "a3", .a = c.a2, .b = c.a0});
  c.y = ops::add_binary(g, {.name = "y", .a = c.a3, .b = c.w});
  mark_output(g, c.y);
  return c;
}

std::vector<float> chain_reference(const std::vector<float>& x, const std::vector<float>& w) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float wi = w[i % w.size()];
    const float a0 = x[i] + wi, a1 = a0 + wi, a2 = a1 + wi, a3 = a2 + a0;
    y[i] = a3 + wi;
  }
  return y;
}

TEST(GraphMemory, SharedBuffersKeepResultsAndAreTheBuffersCreated) {
  Graph g(test::device());
  Chain c = add_chain(g);
  build(g);
  const MemoryPlan& p = memory_plan(g);
  expect_valid_plan(g, p);
  EXPECT_FALSE(shared(p, c.a0, c.a1));
  EXPECT_FALSE(shared(p, c.a0, c.a2));  // a0 is live until a3 reads it
  EXPECT_FALSE(shared(p, c.a2, c.a3));
  EXPECT_TRUE(shared(p, c.a1, c.a3));   // a1 dies at n2, a3 is born at n3
  for (TensorId t : {c.a0, c.a1, c.a2, c.a3}) EXPECT_FALSE(shared(p, t, c.y));
  EXPECT_LT(p.scratch_bytes, p.unshared_bytes);

  // The buffers created are the plan's: one per physical buffer, of its size, hosting its tensors.
  std::vector<WGPUBuffer> created;
  uint64_t scratch = 0;
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const WGPUBuffer buffer = tensor_buffer(g, p.buffers[b].tensors.front());
    for (TensorId t : p.buffers[b].tensors) EXPECT_EQ(tensor_buffer(g, t), buffer) << tensor_info(g, t).name;
    EXPECT_EQ(std::count(created.begin(), created.end(), buffer), 0) << "buffer " << b << " is another's";
    created.push_back(buffer);
    EXPECT_EQ(wgpuBufferGetSize(buffer), p.buffers[b].bytes) << "buffer " << b;
    if (p.buffers[b].use == BufferUse::Scratch || p.buffers[b].use == BufferUse::Output)
      scratch += wgpuBufferGetSize(buffer);
  }
  EXPECT_EQ(scratch, p.scratch_bytes);

  const auto w = test::random_floats(kCols, 3);
  write_tensor<float>(g, c.w, w);
  // Pipelined: each step is submitted before the previous one is read.
  std::vector<std::pair<Snapshot, std::vector<float>>> pending;
  for (uint32_t rows : {kRows, 5u, 1u, kRows}) {
    const auto x = test::random_floats(size_t(rows) * kCols, rows);
    ShapeInput s{c.x, {rows, kCols}};
    update(g, {&s, 1});
    write_tensor<float>(g, c.x, x);
    pending.push_back({execute(g), chain_reference(x, w)});
    if (pending.size() == 2) {
      const auto got = read_output<float>(g, pending[0].first, c.y);
      ASSERT_EQ(got.size(), pending[0].second.size());
      for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], pending[0].second[i], 1e-5f) << i;
      pending.erase(pending.begin());
    }
  }
  const auto got = read_output<float>(g, pending[0].first, c.y);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], pending[0].second[i], 1e-5f) << i;
}

TEST(GraphMemory, BuildRefusesBeforeAnyAllocation) {
  Graph g(test::device());
  const uint64_t limit = test::device().caps.limits.maxStorageBufferBindingSize;
  TensorId x = add_input(g, {.name = "x", .max_shape = {1, 1024}});
  // One row more than the binding holds; never allocated.
  TensorId w = add_weight(g, {.name = "w", .shape = {uint32_t(limit / 4096 + 1), 1024}});
  mark_output(g, ops::add_binary(g, {.name = "y", .a = w, .b = x}));
  const int64_t before = gpu::object_counts().created_of(gpu::ObjectKind::Buffer);
  try {
    build(g);
    FAIL() << "a weight past the binding limit was built";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("weight 'w'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(gpu::object_counts().created_of(gpu::ObjectKind::Buffer), before) << "buffers were created";
}

}  // namespace
}  // namespace wgrt::graph
