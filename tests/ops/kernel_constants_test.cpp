// The constants kernels share with C++ (ops/kernel_constants.cpp): each is used by its file and
// declared only by the table, and each module that holds the file gets it once, with C++'s value.
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <regex>
#include <set>
#include <string>
#include <utility>

#include "gpu/pipeline.h"
#include "ops/attention/attention.h"
#include "ops/linear_q/linear_q.h"
#include "ops/rope/rope.h"

namespace wgrt::gpu {
namespace {

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(KernelConstants, EachIsUsedByItsFileAndDeclaredOnlyByTheTable) {
  ASSERT_GE(kernel_constants().size(), 20u);
  std::set<std::pair<std::string_view, std::string_view>> seen;
  for (const KernelConstant& c : kernel_constants()) {
    EXPECT_TRUE(seen.insert({c.file, c.name}).second) << c.file << " " << c.name << " is listed twice";
    const std::string src(kernel_source(c.file));
    EXPECT_TRUE(std::regex_search(src, std::regex("\\b" + std::string(c.name) + "\\b")))
        << c.file << ".wgsl does not use " << c.name;
    EXPECT_FALSE(std::regex_search(src, std::regex("(const|override|let|var)\\s+" + std::string(c.name) + "\\b")))
        << c.file << ".wgsl declares " << c.name << " itself; C++ owns it";
  }
}

// A module gets each constant of each file it holds exactly once: a kernel's own, and its parts'
// (linear_q_mma holds linear_q_matrix through linear_q).
TEST(KernelConstants, ModulesHoldTheirFilesConstantsOnce) {
  for (const KernelConstant& c : kernel_constants()) {
    const std::string decl = fmt::format("const {}: u32 = {}u;", c.name, c.value);
    EXPECT_EQ(count(kernel_module_source(c.file), decl), 1u) << c.file << ": " << decl;
  }
  const std::string mma = kernel_module_source("linear_q_mma");
  EXPECT_EQ(count(mma, fmt::format("const MMA_LD: u32 = {}u;", ops::kLinearQMmaLd)), 1u);
  EXPECT_EQ(count(mma, fmt::format("const BN: u32 = {}u;", ops::kLinearQGemmBN)), 1u);
  EXPECT_LT(mma.find("const BN: u32"), mma.find("// ---- linear_q.wgsl")) << "linear_q_matrix's before linear_q";
  // The values are the C++ names the planners use.
  const std::string attn = kernel_module_source("attention");
  EXPECT_EQ(count(attn, fmt::format("const MAX_CHUNKS: u32 = {}u;", ops::kMaxDecodeChunks)), 1u);
  EXPECT_EQ(count(kernel_module_source("rope"), fmt::format("const WG: u32 = {}u;", ops::kRopeQ8MaxHeadDim / 4)), 1u);
}

}  // namespace
}  // namespace wgrt::gpu
