// The prefetch kernel against a CPU reference of what each thread reads: words chosen so that
// some threads' xor of their sectors' first words meets the magic write their sink lane, which
// only happens where the kernel read exactly those words (every source, several workgroups); the
// next step, with no thread meeting it, finds the sink cleared (reset each step). Then the node's
// routes and its refusals.
#include <fmt/format.h>
#include <gmock/gmock.h>

#include <cstring>
#include <random>
#include <set>

#include "ops/prefetch/prefetch.h"
#include "support/device.h"
#include "support/op_harness.h"
#include "support/random.h"
#include "support/throws.h"

namespace wgrt::test {
namespace {

using namespace graph;

constexpr uint32_t kMagic = 0xFFFFFFFFu;  // plan_prefetch's

std::vector<uint32_t> random_u32(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint32_t> v(n);
  for (auto& w : v) w = rng();
  return v;
}

// The sectors (32 bytes) each tensor of `bytes` holds, laid end to end.
std::vector<uint32_t> sector_ends(const std::vector<uint32_t>& bytes) {
  std::vector<uint32_t> ends;
  uint32_t s = 0;
  for (uint32_t b : bytes) ends.push_back(s += (b + 31) / 32);
  return ends;
}

// Word index (tensor, word) of concatenated sector s.
std::pair<size_t, size_t> sector_word(const std::vector<uint32_t>& ends, uint32_t s) {
  size_t i = 0;
  while (s >= ends[i]) ++i;
  return {i, size_t(s - (i ? ends[i - 1] : 0)) * 8};
}

// The xor each thread of a grid of `groups` workgroups computes (prefetch.wgsl's reference).
uint32_t thread_xor(const std::vector<std::vector<uint32_t>>& words, const std::vector<uint32_t>& ends, uint32_t t,
                    uint32_t groups) {
  uint32_t acc = 0;
  for (uint32_t s = t; s < ends.back(); s += groups * ops::kPrefetchWg) {
    const auto [i, w] = sector_word(ends, s);
    acc ^= words[i][w];
  }
  return acc;
}

OpCase prefetch_case(std::vector<uint32_t> bytes) {
  return {fmt::format("tensors_{}_first_{}_bytes", bytes.size(), bytes[0]), [=] {
            Graph g(device());
            TensorId x = add_input(g, {.name = "x", .max_shape = {4, 8}, .dynamic_dims = 1});
            std::vector<TensorId> ws;
            for (size_t i = 0; i < bytes.size(); ++i)
              ws.push_back(add_weight(g, {.name = fmt::format("w{}", i), .dtype = DType::Bytes, .shape = {bytes[i]}}));
            const NodeId node = ops::add_prefetch(g, {.name = "pf", .key = x, .tensors = ws});
            build(g);
            const TensorId sink = find_tensor(g, "pf.sink");
            const std::vector<uint32_t> ends = sector_ends(bytes);
            const uint32_t groups = uint32_t(
                std::max<uint64_t>(1, ops::ceil_div(ends.back(), ops::kPrefetchWg * ops::kPrefetchSectorsPerThread)));

            std::vector<std::vector<uint32_t>> words;
            for (size_t i = 0; i < bytes.size(); ++i) words.push_back(random_u32((bytes[i] + 3) / 4, uint32_t(7 + i)));
            // Threads whose last sector is the last of each tensor, and the very last thread: each
            // one's last word is set so that its xor meets the magic (a word no other thread reads).
            const uint32_t threads = groups * ops::kPrefetchWg;
            std::set<uint32_t> lanes;
            for (uint32_t end : ends) {
              const uint32_t s = end - 1, t = s % threads;
              if (!lanes.insert(t % ops::kPrefetchWg).second) continue;  // one thread a lane
              uint32_t last = s;  // the thread's last sector
              while (last + threads < ends.back()) last += threads;
              const auto [i, w] = sector_word(ends, last);
              words[i][w] ^= thread_xor(words, ends, t, groups) ^ kMagic;
            }
            for (size_t i = 0; i < bytes.size(); ++i) write_tensor<uint32_t>(g, ws[i], words[i]);

            ShapeInput one{x, {1, 8}};
            update(g, {&one, 1});
            EXPECT_EQ(active_route_info(g, node).id, ops::kPrefetchL2);
            execute(g);
            std::vector<uint32_t> want(ops::kPrefetchWg, 0);
            for (uint32_t t = 0; t < threads; ++t)
              if (thread_xor(words, ends, t, groups) == kMagic) want[t % ops::kPrefetchWg] = kMagic;
            EXPECT_EQ(std::count(want.begin(), want.end(), kMagic), std::ptrdiff_t(lanes.size()));
            EXPECT_EQ(gpu::read_buffer<uint32_t>(device(), tensor_buffer(g, sink), ops::kPrefetchWg), want);

            // No thread meets it now: the sink is cleared before the step, so it reads all zeros.
            for (size_t i = 0; i < bytes.size(); ++i) write_tensor<uint32_t>(g, ws[i], random_u32(words[i].size(), 99));
            execute(g);
            EXPECT_EQ(gpu::read_buffer<uint32_t>(device(), tensor_buffer(g, sink), ops::kPrefetchWg),
                      std::vector<uint32_t>(ops::kPrefetchWg, 0));

            ShapeInput three{x, {3, 8}};  // several rows: idle
            update(g, {&three, 1});
            EXPECT_EQ(active_route_info(g, node).id, ops::kPrefetchOff);
            EXPECT_TRUE(active_route_info(g, node).kernels.empty());
          }};
}

std::vector<OpCase> prefetch_cases() {
  return {prefetch_case({100}),                       // one workgroup, a partial last sector
          prefetch_case({4, 40, 4100, 200000}),       // every source, 2 workgroups
          prefetch_case({300000, 300004}),            // 5 workgroups, the last source bound twice
          prefetch_case({1 << 20, 8, 8, 1 << 20})};   // 17 workgroups
}

WGRT_OP_CASES(Prefetch, prefetch_cases);

TEST(PrefetchPlan, SectorsAndGrid) {
  graph::Plan p;
  ops::plan_prefetch({{100, 64, 33}, 65535}, p);
  ops::PrefetchParams got;
  std::memcpy(&got, p.params[0].bytes.data(), sizeof got);
  EXPECT_EQ(got.end0, 4u);
  EXPECT_EQ(got.end1, 6u);
  EXPECT_EQ(got.end2, 8u);
  EXPECT_EQ(got.end3, 8u);
  EXPECT_EQ(got.magic, kMagic);
  EXPECT_EQ(p.grids[0], (Grid{1, 1, 1}));
  ops::plan_prefetch({{uint64_t(21) << 20}, 65535}, p);  // 21 MiB: 688,128 sectors, 4,096 a workgroup
  EXPECT_EQ(p.grids[0], (Grid{168, 1, 1}));
  ops::plan_prefetch({{uint64_t(21) << 20}, 100}, p);
  EXPECT_EQ(p.grids[0], (Grid{100, 1, 1}));
}

TEST(PrefetchBuild, Refusals) {
  Graph g(device());
  TensorId x = add_input(g, {.name = "x", .max_shape = {4, 8}, .dynamic_dims = 1});
  TensorId w = add_weight(g, {.name = "w", .dtype = DType::Bytes, .shape = {64}});
  EXPECT_THAT(message_of<std::invalid_argument>([&] { ops::add_prefetch(g, {.name = "none", .key = x}); }),
              ::testing::HasSubstr("none: prefetch takes 1 to 4 tensors, not 0"));
  EXPECT_THAT(message_of<std::invalid_argument>([&] {
                ops::add_prefetch(g, {.name = "five", .key = x, .tensors = {w, w, w, w, w}});
              }),
              ::testing::HasSubstr("not 5"));
  EXPECT_THAT(message_of<std::invalid_argument>([&] { ops::add_prefetch(g, {.name = "in", .key = x, .tensors = {x}}); }),
              ::testing::HasSubstr("in: prefetch reads weights; 'x' is not one"));
}

TEST(PrefetchBuild, EnvSwitches) {
  const char* was = std::getenv("WGRT_PREFETCH");
  const std::string saved = was ? was : "";
  unsetenv("WGRT_PREFETCH");
  EXPECT_EQ(ops::prefetch_wanted(), 0u);
  setenv("WGRT_PREFETCH", "6", 1);
  EXPECT_EQ(ops::prefetch_wanted(), uint32_t(ops::kPrefetchOutput | ops::kPrefetchGateUp));
  setenv("WGRT_PREFETCH", "16", 1);
  EXPECT_THAT(message_of<std::invalid_argument>([] { ops::prefetch_wanted(); }), ::testing::HasSubstr("WGRT_PREFETCH"));
  if (was) setenv("WGRT_PREFETCH", saved.c_str(), 1);
  else unsetenv("WGRT_PREFETCH");
  EXPECT_EQ(ops::prefetch_max_bytes(), uint64_t(ops::kPrefetchMaxMb) << 20);
}

}  // namespace
}  // namespace wgrt::test
