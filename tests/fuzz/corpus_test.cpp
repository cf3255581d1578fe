// Replays every committed fuzz corpus file (tests/fuzz/corpus/<target>/: seeds and the inputs
// of crashes since fixed) through the fuzz targets' bodies, so the normal and the sanitized
// suites keep them fixed without libFuzzer.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "fuzz/fuzz_targets.h"

namespace wgrt::fuzz {
namespace {

void replay(const std::string& target, void (*body)(std::span<const uint8_t>)) {
  const std::filesystem::path dir = std::filesystem::path(WGRT_SOURCE_DIR) / "tests/fuzz/corpus" / target;
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  EXPECT_FALSE(files.empty()) << dir << " has no corpus files";
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    try {
      body(bytes);
    } catch (const std::exception& e) {
      ADD_FAILURE() << f.string() << ": " << e.what();
    }
  }
}

TEST(FuzzCorpus, Gguf) { replay("gguf", fuzz_gguf); }
TEST(FuzzCorpus, Safetensors) { replay("safetensors", fuzz_safetensors); }
TEST(FuzzCorpus, TokenizerJson) { replay("tokenizer_json", fuzz_tokenizer_json); }
TEST(FuzzCorpus, Tokenize) { replay("tokenize", fuzz_tokenize); }
TEST(FuzzCorpus, ServerRequest) { replay("server_request", fuzz_server_request); }
TEST(FuzzCorpus, ChatTemplate) { replay("chat_template", fuzz_chat_template); }
TEST(FuzzCorpus, HttpRequest) { replay("http_request", fuzz_http_request); }
TEST(FuzzCorpus, Grammar) { replay("grammar", fuzz_grammar); }

}  // namespace
}  // namespace wgrt::fuzz
