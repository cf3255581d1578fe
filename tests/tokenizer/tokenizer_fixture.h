// Shared test data for the tokenizer tests: llama.cpp's vocab test vectors and the npm
// tokenizer.json files (tools/setup-test-data.sh), each tokenizer loaded once per process.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "model/gguf.h"
#include "tokenizer/tokenizer.h"

namespace wgrt::tokenizer::test {

inline std::string vocab_dir() { return WGRT_SOURCE_DIR "/.deps/llama-vocab/models"; }
inline std::string json_dir() { return WGRT_SOURCE_DIR "/.deps/tokenizer-json"; }

inline std::string gguf_path(const std::string& name) {
  return vocab_dir() + "/ggml-vocab-" + name + ".gguf";
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

// <vocab>.gguf.inp: cases each followed by "\n__ggml_vocab_test__\n"; .gguf.out: one line of
// space-separated ids per case.
inline std::vector<Case> load_cases(const std::string& name) {
  const std::string inp = read_text(gguf_path(name) + ".inp");
  const std::string out = read_text(gguf_path(name) + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<Case> cases;
  for (size_t pos = 0;;) {
    size_t end = inp.find(sep, pos);
    if (end == std::string::npos) break;
    cases.push_back({inp.substr(pos, end - pos), {}});
    pos = end + sep.size();
  }
  std::istringstream lines(out);
  std::string line;
  for (size_t i = 0; std::getline(lines, line); ++i) {
    if (i >= cases.size()) {
      ADD_FAILURE() << name << ".out has more lines than .inp has cases";
      break;
    }
    std::istringstream nums(line);
    int32_t id = 0;
    while (nums >> id) cases[i].ids.push_back(id);
  }
  return cases;
}

// Tokenizers by key ("gguf:<name>" or "json:<name>"), built once.
inline const Tokenizer& cached(const std::string& key) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto it = cache.find(key);
  if (it == cache.end()) {
    Vocab v = key.starts_with("gguf:")
                  ? vocab_from_gguf(model::open_gguf(gguf_path(key.substr(5))))
                  : vocab_from_tokenizer_json(json_dir() + "/" + key.substr(5) + "/tokenizer.json");
    it = cache.emplace(key, std::make_unique<Tokenizer>(build_tokenizer(std::move(v)))).first;
  }
  return *it->second;
}

inline std::string ids_str(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += " " + std::to_string(id);
  return s;
}

#define WGRT_REQUIRE_FILE(path)                                                              \
  do {                                                                                       \
    if (!std::filesystem::exists(path))                                                      \
      GTEST_SKIP() << (path) << " is missing (hint: run tools/setup-test-data.sh)";           \
  } while (0)

}  // namespace wgrt::tokenizer::test
