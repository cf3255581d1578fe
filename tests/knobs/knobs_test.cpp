// The knob registry (support/knobs.h): one parser for every WGRT_* variable, its errors, the
// doc table and `wgrt info --knobs` generated from the declarations, and no source reading a
// WGRT_* variable around it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/env.h"
#include "support/knobs.h"
#include "support/run_script.h"
#include "support/throws.h"

namespace wgrt::test {
namespace {

using ::testing::HasSubstr;

std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(Knobs, ValuesAreCheckedAgainstTheirDeclaration) {
  {
    ScopedEnv env("WGRT_GEMM_SPLIT_N", nullptr);
    EXPECT_EQ(knobs::value("WGRT_GEMM_SPLIT_N"), std::nullopt);
  }
  {
    ScopedEnv env("WGRT_GEMM_SPLIT_N", "2048");
    EXPECT_EQ(knobs::value("WGRT_GEMM_SPLIT_N"), "2048");
  }
  {
    ScopedEnv env("WGRT_GEMM_SPLIT_N", "abc");  // a count: names the variable, the value, the range
    EXPECT_THAT(message_of<std::invalid_argument>([] { (void)knobs::value("WGRT_GEMM_SPLIT_N"); }), HasSubstr("WGRT_GEMM_SPLIT_N='abc': not a number (hint: 0..65536; unset it for the default, 4096)"));
  }
  {
    ScopedEnv env("WGRT_GEMM_SPLIT_N", "70000");
    EXPECT_THAT(message_of<std::invalid_argument>([] { (void)knobs::value("WGRT_GEMM_SPLIT_N"); }), HasSubstr("out of range"));
  }
  {
    ScopedEnv env("WGRT_GEMM_SPLIT_N", "12 ");  // no trailing text
    EXPECT_THAT(message_of<std::invalid_argument>([] { (void)knobs::value("WGRT_GEMM_SPLIT_N"); }), HasSubstr("not a number"));
  }
  {
    ScopedEnv env("WGRT_MMA_BM", "96");  // a choice
    EXPECT_THAT(message_of<std::invalid_argument>([] { (void)knobs::value("WGRT_MMA_BM"); }), HasSubstr("WGRT_MMA_BM='96': not one of the choices (hint: auto|64|128"));
  }
  {
    ScopedEnv env("WGRT_PREFILL_TILE", "32x");  // dims
    EXPECT_THAT(message_of<std::invalid_argument>([] { (void)knobs::value("WGRT_PREFILL_TILE"); }), HasSubstr("not AxB"));
  }
  {
    ScopedEnv env("WGRT_PREFILL_TILE", "32x16");
    EXPECT_EQ(knobs::value("WGRT_PREFILL_TILE"), "32x16");
  }
  EXPECT_THROW(knobs::value("WGRT_NO_SUCH_KNOB"), std::logic_error);
}

TEST(Knobs, DeclarationsAreCheckedOnce) {
  EXPECT_THROW(knobs::Count("WGRT_GEMM_SPLIT_N", 0, 1, 0, "again"), std::logic_error);  // declared twice
  EXPECT_THROW(knobs::Text("GEMM_SPLIT_N", "not a WGRT_ name"), std::logic_error);
  EXPECT_THROW(knobs::Choice("WGRT_KNOB_TEST_ONLY", "0|1", "2", "a default not among the choices"),
               std::logic_error);
  EXPECT_EQ(knobs::value("WGRT_GEMM_SPLIT_N"), std::nullopt);  // the first declaration stands
}

// The doc table is `wgrt info --knobs` (every knob the command links, the CLI's own included), and
// every knob this test binary links is a row of it.
TEST(Knobs, DocTableAndInfoListEveryKnob) {
  const std::string doc = read_text(std::filesystem::path(WGRT_SOURCE_DIR) / "docs" / "KNOBS.md");
  std::string table;
  std::istringstream lines(doc);
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with("|")) table += line + "\n";

  const ScriptResult info = run_script("knobs", "$WGRT info --knobs", true);
  EXPECT_EQ(info.code, 0) << info.err;
  EXPECT_EQ(table, info.out) << "docs/KNOBS.md is stale (hint: build/wgrt info --knobs)";

  std::istringstream linked(knobs::table());
  for (std::string row; std::getline(linked, row);)
    EXPECT_NE(table.find(row + "\n"), std::string::npos) << "not in docs/KNOBS.md: " << row;
  for (const char* name : {"WGRT_ADAPTER", "WGRT_TOGGLES", "WGRT_LIMITS", "WGRT_MMA", "WGRT_DAWN_LIB", "WGRT_PROGRESS"})
    EXPECT_NE(table.find(std::string("`") + name + "`"), std::string::npos) << name;
}

// Every WGRT_* variable goes through the registry: no source reads one itself.
TEST(Knobs, NoSourceReadsTheEnvironmentAroundThem) {
  const std::filesystem::path src = std::filesystem::path(WGRT_SOURCE_DIR) / "src";
  for (const auto& e : std::filesystem::recursive_directory_iterator(src)) {
    const auto ext = e.path().extension();
    if (ext != ".cpp" && ext != ".h") continue;
    if (e.path().filename() == "knobs.cpp") continue;
    const std::string text = read_text(e.path());
    EXPECT_EQ(text.find("getenv(\"WGRT_"), std::string::npos) << e.path();
  }
}

}  // namespace
}  // namespace wgrt::test
