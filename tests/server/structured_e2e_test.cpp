// Structured output through `wgrt serve` and the real OpenAI client
// (tests/server/structured_client_test.js): json_schema / json_object / grammar replies of a
// random-weight model hold to their constraint, streamed or not; tool_choice "required" and a
// named function on a model whose template teaches Hermes <tool_call> blocks.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "model/gguf_writer.h"
#include "model/random_model.h"
#include "server/serve_support.h"

namespace wgrt {
namespace {

// A random model whose template offers tools and shows Hermes-style calls.
const std::string& tools_model_path() {
  static const std::string path = [] {
    model::GgufWriter w = model::make_random_model(model::RandomModelSpec{});
    model::gguf_set_string(w, "tokenizer.chat_template",
                           "{% if tools %}Tools: {{ tools | tojson }}. Call one as <tool_call>{...}</tool_call>\n"
                           "{% endif %}{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
                           "{% if add_generation_prompt %}assistant: {% endif %}");
    std::string p = test::temp_dir("serve-tools") + "/tiny-tools.gguf";
    model::gguf_write_file(w, p);
    return p;
  }();
  return path;
}

TEST(ServeE2E, OpenAIClientStructuredOutput) {
  const std::string modules = WGRT_SOURCE_DIR "/.deps/server-openai/node_modules";
  if (!std::filesystem::exists(modules + "/openai/package.json"))
    GTEST_SKIP() << "npm openai is absent (hint: run tools/setup-test-data.sh)";
  test::ServerProcess s;
  test::ServerProcess t({}, true, tools_model_path());
  ASSERT_GT(s.port, 0);
  ASSERT_GT(t.port, 0);
  const std::string out = test::temp_dir("serve-node-structured") + "/out";
  const std::string cmd = "NODE_PATH=" + modules + " node " WGRT_SOURCE_DIR
                          "/tests/server/structured_client_test.js http://127.0.0.1:" + std::to_string(s.port) + " " +
                          test::kKey + " http://127.0.0.1:" + std::to_string(t.port) + " >" + out + " 2>&1";
  const int rc = std::system(cmd.c_str());
  const std::string log = test::slurp(out);
  EXPECT_EQ(rc, 0) << log << "\nserver:\n" << test::slurp(s.err_path) << "\ntools server:\n" << test::slurp(t.err_path);
  EXPECT_NE(log.find("all ok"), std::string::npos) << log;
  EXPECT_EQ(s.stop(), 0) << test::slurp(s.err_path);
  EXPECT_EQ(t.stop(), 0) << test::slurp(t.err_path);
}

}  // namespace
}  // namespace wgrt
