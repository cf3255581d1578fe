// WGSL kernels against the CPU, and the pipeline cache (typed keys, override constants).
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include "gpu/pipeline.h"
#include "selftest.h"
#include "support/device.h"

namespace wgrt::gpu {
namespace {

using test::SelftestParams;

// Written here rather than embedded: create_pipeline must take any source.
constexpr std::string_view kInlineAxpb = R"(
struct Params {
  n: u32,
  a: f32,
  b: f32,
  pad: u32,
}
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn axpb(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x < params.n) {
    y[gid.x] = params.a * x[gid.x] + params.b;
  }
}
)";

TEST(GpuKernel, InlineWgslMatchesCpu) {
  Device& dev = test::device();
  Pipeline pipe = create_pipeline(dev, "inline axpb", kInlineAxpb, "axpb");
  ASSERT_TRUE(pipe.pipeline);
  ASSERT_TRUE(pipe.layout);
  for (uint32_t n : {1u, 63u, 65u, 1001u}) {  // odd lengths: partial last workgroup
    SCOPED_TRACE(n);
    SelftestParams p{.n = n, .a = 1.5f, .b = -0.25f};
    auto x = test::selftest_input(n);
    auto y = test::run_selftest(dev, pipe, p, x);
    EXPECT_EQ(y, test::selftest_cpu(p, x));
  }
  check(dev);
}

TEST(GpuKernel, WritesOnlyTheLiveRange) {
  Device& dev = test::device();
  Pipeline pipe = create_pipeline(dev, "inline axpb", kInlineAxpb, "axpb");
  SelftestParams p{.n = 100, .a = 2.0f, .b = 1.0f};
  auto x = test::selftest_input(130);
  test::SelftestJob job = test::make_selftest_job(dev, pipe, SelftestParams{.n = 130}, x);
  upload(dev, job.params.get(), 0, &p, sizeof(p));  // live n 100 of 130 allocated
  auto enc = test::make_encoder(dev);
  test::encode_selftest(enc.get(), pipe, job);
  test::submit(dev, enc);
  auto y = read_buffer<float>(dev, job.y.get(), 130);
  auto want = test::selftest_cpu(p, x);
  for (uint32_t i = 0; i < 130; ++i) {
    if (i < 100) EXPECT_EQ(y[i], want[i]) << i;
    else EXPECT_TRUE(std::isnan(y[i])) << i << ": " << y[i];
  }
}

TEST(GpuPipelineCache, SelftestKernelIsEmbedded) {
  EXPECT_NE(kernel_source("gpu_selftest").find("override SCALE"), std::string_view::npos);
  EXPECT_THROW(kernel_source("no_such_kernel_anywhere"), GpuError);
}

// A lookup table copied into private or function memory (a `var` initialized with an array, or
// with a module-scope `const` array) is indexed at run time by data, and NVIDIA's compiler places
// it in local memory: the IQ4 grid read that way held its gemv to 3.5% of the H200's read peak
// (docs/perf/2026-12-05.md, "The peer table at a768ed6"). Tables are read from workgroup memory (iq4_grid.wgsl) or a binding.
// (Accumulator arrays, private or function-scope, indexed by loops with constant or override
// bounds, such as gemv_m's gm_acc, are unrolled into registers and stay allowed.)
TEST(GpuPipelineCache, NoKernelCopiesATableIntoPrivateMemory) {
  const std::regex const_table(R"(const\s+(\w+)\s*=\s*array\s*<)");
  std::vector<std::string> tables;
  for (const EmbeddedKernel& k : embedded_kernels()) {
    const std::string src(k.source);
    for (std::sregex_iterator it(src.begin(), src.end(), const_table), end; it != end; ++it)
      tables.push_back((*it)[1]);
  }
  ASSERT_FALSE(tables.empty());  // IQ4_GRID at least
  std::string names;
  for (const auto& t : tables) names += (names.empty() ? "" : "|") + t;
  // A copy of a module-scope const array, or a module-scope private array with an initializer.
  const std::regex copy(R"(var\s*(<\s*(private|function)\s*>)?\s+\w+\s*(:[^=;]*)?=\s*()" + names +
                        R"()\s*;|var\s*<\s*private\s*>\s*\w+\s*:\s*array\s*<[^;]*=)");
  for (const EmbeddedKernel& k : embedded_kernels()) {
    const std::string src(k.source);
    std::smatch m;
    EXPECT_FALSE(std::regex_search(src, m, copy)) << k.name << ".wgsl copies a table: " << m.str(0);
  }
  for (const char* bad : {"var<private> t: array<f32, 16> = IQ4_GRID;", "var grid = IQ4_GRID;",
                          "var<private> t: array<u32, 2> = array<u32, 2>(1u, 2u);"})
    EXPECT_TRUE(std::regex_search(std::string(bad), copy)) << bad;
  for (const char* fine : {"var<private> gm_acc: array<vec4<f32>, 16>;", "var part = array<f32, 4>(0.0, 0.0, 0.0, 0.0);",
                           "let v = IQ4_GRID[3];"})
    EXPECT_FALSE(std::regex_search(std::string(fine), copy)) << fine;
}

// A kernel that extends another (linear_q_mma.wgsl: `//! use linear_q`) gets that kernel's
// parts too, each once and ahead of what uses them, with every `enable` directive first.
TEST(GpuPipelineCache, ModuleSourceNestsPartsAndHoistsDirectives) {
  const std::string src = kernel_module_source("linear_q_mma");
  EXPECT_EQ(src.rfind("enable f16;\nenable chromium_experimental_subgroup_matrix;\n", 0), 0u) << src.substr(0, 300);
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = src.find(what); at != std::string::npos; at = src.find(what, at + 1)) ++n;
    return n;
  };
  for (const char* part : {"// ---- iq4_grid.wgsl", "// ---- linear_q_matrix.wgsl", "// ---- linear_q.wgsl"})
    EXPECT_EQ(count(part), 1u) << part;
  EXPECT_LT(src.find("// ---- linear_q_matrix.wgsl"), src.find("// ---- linear_q.wgsl"));
  EXPECT_LT(src.find("// ---- linear_q.wgsl"), src.find("fn gemm_mma("));
  EXPECT_EQ(count("\nenable "), 1u);  // the first line is the other
  EXPECT_EQ(hoist_directives("fn a() {}\nenable f16;\nenable f16;\n"), "enable f16;\nfn a() {}\n");
}

TEST(GpuPipelineCache, HitForEqualKeysMissForOtherConstant) {
  Device& dev = test::device();
  PipelineCache& cache = *dev.pipelines;
  // Constants not used elsewhere in the suite, so the first lookup of each is a miss.
  PipelineKey k3 = make_key("gpu_selftest", "main", {{"SCALE", 3.0}, {"OFFSET", 0.5}});
  PipelineKey k3_again = make_key("gpu_selftest", "main", {{"OFFSET", 0.5}, {"SCALE", 3.0}});
  PipelineKey k_neg = make_key("gpu_selftest", "main", {{"SCALE", -0.5}, {"OFFSET", 0.5}});
  EXPECT_EQ(k3, k3_again);  // make_key sorts constants
  EXPECT_NE(k3, k_neg);
  const bool warm = cache.pipelines.contains(k3) || cache.pipelines.contains(k_neg);  // --gtest_repeat

  const int64_t hits0 = cache.hits, misses0 = cache.misses;
  const Pipeline* p3 = &get_pipeline(dev, k3);
  EXPECT_EQ(cache.misses - misses0, warm ? 0 : 1);
  EXPECT_EQ(cache.hits - hits0, warm ? 1 : 0);

  const int64_t hits1 = cache.hits, misses1 = cache.misses;
  const Pipeline* p3_again = &get_pipeline(dev, k3_again);
  EXPECT_EQ(cache.hits - hits1, 1);
  EXPECT_EQ(cache.misses - misses1, 0);
  EXPECT_EQ(p3, p3_again);
  EXPECT_EQ(p3->pipeline.get(), p3_again->pipeline.get());

  const int64_t hits2 = cache.hits, misses2 = cache.misses;
  const Pipeline* p_neg = &get_pipeline(dev, k_neg);
  if (!warm) {
    EXPECT_EQ(cache.misses - misses2, 1);
    EXPECT_EQ(cache.hits - hits2, 0);
  }
  EXPECT_NE(p3, p_neg);
  EXPECT_NE(p3->pipeline.get(), p_neg->pipeline.get());
  // One shader module per kernel, whatever the constants.
  EXPECT_EQ(cache.modules.count("gpu_selftest"), 1u);

  // Each pipeline computes with its own constant.
  SelftestParams p{.n = 257, .a = 1.5f, .b = -0.25f};
  auto x = test::selftest_input(p.n);
  auto y3 = test::run_selftest(dev, *p3, p, x);
  auto y_neg = test::run_selftest(dev, *p_neg, p, x);
  EXPECT_EQ(y3, test::selftest_cpu(p, x, 3.0f, 0.5f));
  EXPECT_EQ(y_neg, test::selftest_cpu(p, x, -0.5f, 0.5f));
  EXPECT_NE(y3, y_neg);

  // Defaults from the WGSL when a key sets no constants.
  auto y_default = test::run_selftest(dev, get_pipeline(dev, make_key("gpu_selftest")), p, x);
  EXPECT_EQ(y_default, test::selftest_cpu(p, x, 1.0f, 0.0f));
  check(dev);
}

TEST(GpuPipelineCache, UnknownKernelThrowsAndCachesNothing) {
  Device& dev = test::device();
  size_t before = dev.pipelines->pipelines.size();
  EXPECT_THROW(get_pipeline(dev, make_key("no_such_kernel_anywhere")), GpuError);
  EXPECT_EQ(dev.pipelines->pipelines.size(), before);
}

}  // namespace
}  // namespace wgrt::gpu
