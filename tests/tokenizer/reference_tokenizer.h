// The independent reference for tokenizer.json behaviour: @huggingface/tokenizers (JavaScript,
// in .deps/tok-ref, fetched by tools/setup-test-data.sh) run by node through
// reference_encode.mjs.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>
#include <vector>

#include "tokenizer_fixture.h"

namespace wgrt::tokenizer::test {

inline std::string reference_lib() { return WGRT_SOURCE_DIR "/.deps/tok-ref/dist/tokenizers.mjs"; }

// Why the reference cannot run here ("" when it can).
inline std::string reference_missing() {
  if (!std::filesystem::exists(reference_lib()))
    return reference_lib() + " is missing (hint: run tools/setup-test-data.sh)";
  if (std::system("node --version > /dev/null 2>&1") != 0)
    return "node is not installed (hint: run tools/setup.sh)";
  return "";
}

#define WGRT_REQUIRE_REFERENCE()                                  \
  do {                                                            \
    const std::string why = reference_missing();                  \
    if (!why.empty()) GTEST_SKIP() << why;                        \
  } while (0)

struct RefEncoding {
  std::vector<int32_t> ids;
  std::string normalized;
};

// `request` holds "tokenizer" (the JSON) or "tokenizer_path"; "texts" is added here. Fails the
// test (and returns empty) when node fails.
inline std::vector<RefEncoding> reference_encode(nlohmann::json request,
                                                 const std::vector<std::string>& texts) {
  static int counter = 0;
  const auto dir = std::filesystem::temp_directory_path();
  const std::string stem = fmt::format("wgrt-tokref-{}-{}", getpid(), counter++);
  const std::string req = (dir / (stem + ".json")).string();
  const std::string out = (dir / (stem + ".out")).string();
  request["texts"] = texts;
  {
    std::ofstream f(req, std::ios::binary);
    f << request.dump();
  }
  const std::string cmd = fmt::format("node '{}/tests/tokenizer/reference_encode.mjs' '{}' '{}' > '{}'",
                                      WGRT_SOURCE_DIR, reference_lib(), req, out);
  const int rc = std::system(cmd.c_str());
  const std::string text = read_text(out);
  std::filesystem::remove(req);
  std::filesystem::remove(out);
  if (rc != 0) {
    ADD_FAILURE() << "the reference failed (" << rc << "): " << cmd;
    return {};
  }
  std::vector<RefEncoding> results;
  for (const auto& r : nlohmann::json::parse(text))
    results.push_back({r.at("ids").get<std::vector<int32_t>>(), r.at("normalized").get<std::string>()});
  EXPECT_EQ(results.size(), texts.size());
  return results;
}

}  // namespace wgrt::tokenizer::test
