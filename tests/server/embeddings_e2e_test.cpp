// POST /v1/embeddings end to end on loopback: a Qwen3-Embedding-style tiny file (qwen3,
// last-token pooling, the vocabulary appending its end token, Matryoshka metadata) served with
// four slots, driven by the real OpenAI client (tests/server/embeddings_client_test.js); the
// vector it gets is the library's own llm::embed of the same text on a session of the same file.
#include <gtest/gtest.h>
#include <httplib.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "llm/embed.h"
#include "llm/session.h"
#include "model/gguf_writer.h"
#include "model/random_model.h"
#include "server/serve_support.h"
#include "support/device.h"

namespace wgrt {
namespace {

using nlohmann::json;

const std::string& qwen3_embedding_path() {
  static const std::string path = [] {
    model::RandomModelSpec spec;
    spec.arch = model::Arch::Qwen3;
    spec.seed = 9;
    model::GgufWriter w = model::make_random_model(spec);
    model::gguf_set_u32(w, "qwen3.pooling_type", 3);
    model::gguf_set_bool(w, "tokenizer.ggml.add_eos_token", true);
    model::gguf_set_bool(w, "wgrt.embedding.matryoshka", true);
    std::string p = test::temp_dir("serve-embed") + "/qwen3-embedding.gguf";
    model::gguf_write_file(w, p);
    return p;
  }();
  return path;
}

TEST(ServeEmbeddings, OpenAIClientGetsTheLibrarysVectors) {
  const std::string modules = WGRT_SOURCE_DIR "/.deps/server-openai/node_modules";
  if (!std::filesystem::exists(modules + "/openai/package.json"))
    GTEST_SKIP() << "npm openai is absent (hint: run tools/setup-test-data.sh)";
  const std::string path = qwen3_embedding_path();
  llm::Session lib = llm::open_session(test::device(), path, model::BuildOptions{.n_ctx = 1024});
  test::ServerProcess s({"--alias", "qwen3-embedding", "--parallel", "4"}, true, path);
  ASSERT_GT(s.port, 0);
  const std::string out = test::temp_dir("serve-embed-node") + "/out";
  const std::string cmd = "NODE_PATH=" + modules + " node " WGRT_SOURCE_DIR
                          "/tests/server/embeddings_client_test.js http://127.0.0.1:" + std::to_string(s.port) + " " +
                          test::kKey + " qwen3-embedding " + std::to_string(lib.mg.n_embd) + " >" + out + " 2>&1";
  const int rc = std::system(cmd.c_str());
  const std::string log = test::slurp(out);
  ASSERT_EQ(rc, 0) << log << "\nserver:\n" << test::slurp(s.err_path);
  ASSERT_NE(log.find("all ok"), std::string::npos) << log;

  const size_t at = log.find("vector ");
  ASSERT_NE(at, std::string::npos) << log;
  const json got = json::parse(log.substr(at + 7, log.find('\n', at) - at - 7));
  const std::vector<int32_t> ids = llm::embedding_tokens(lib.tok, "hello world");
  ASSERT_EQ(ids.back(), lib.tok.vocab.eos_id);
  const std::vector<float> want = llm::embed(lib, 0, ids);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i].get<float>(), want[i], 1e-3f) << i;

  // The metrics count the embedded tokens as prompt tokens, and the server still generates.
  httplib::Client c = s.client();
  auto r = c.Post("/v1/completions", R"({"prompt": "hi", "max_tokens": 2})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(s.stop(), 0) << test::slurp(s.err_path);
}

}  // namespace
}  // namespace wgrt
