// Model files at the scale a hostile file can claim (heavy: seconds of JSON under ASan, so not
// in CI's suites; the GGUF case, cheaper, is in gguf_test.cpp).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "model/safetensors.h"
#include "support/hf_fixture.h"

namespace wgrt::model {
namespace {

// 200,000 tensors in one checkpoint: the duplicate check looks each name up in an index; it
// compared each with every earlier one (100,000 names took over 100 s under ASan).
TEST(LoaderScaleHeavy, TwoHundredThousandSafetensorsNamesCheckedQuickly) {
  constexpr int kTensors = 200000;
  const std::string dir = test::temp_dir("stmany");
  std::map<std::string, test::StEntry> tensors;
  for (int i = 0; i < kTensors; ++i) tensors[fmt::format("t.{}", i)] = {"BF16", {1}, {0, 0}};
  test::write_safetensors(dir + "/model.safetensors", tensors);
  const auto start = std::chrono::steady_clock::now();
  const StCheckpoint ck = open_safetensors(dir + "/model.safetensors");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(ck.tensors.size(), size_t(kTensors));
  EXPECT_LT(seconds, 10.0) << kTensors << " tensors took " << seconds << " s";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace wgrt::model
