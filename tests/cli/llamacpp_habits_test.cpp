// What llama.cpp's users type works, or fails with a readable error: -f FILE and -f - (stdin)
// for the prompt, --no-display-prompt, -ngl N, --seed -1, "not a number" for non-numbers,
// -ctk/-ctv, defaults in --help, and `wgrt perplexity` printing llama-perplexity's running estimate and
// its "Final estimate: PPL = X +/- Y".
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <regex>
#include <string>

#include "model/gguf_writer.h"
#include "model/random_model.h"
#include "support/hf_fixture.h"
#include "support/run_script.h"

namespace wgrt {
namespace {

using Result = test::ScriptResult;

// The script with $WGRT the binary and stdin /dev/null (support/run_script.h).
Result run_script(const std::string& script) { return test::run_script("habits-run", script, true); }

const std::string& model_path() {
  static std::string path = [] {
    std::string dir = test::temp_dir("habits");
    model::RandomModelSpec spec;  // a tiny llama with a byte-level vocab
    model::gguf_write_file(model::make_random_model(spec), dir + "/tiny.gguf");
    return dir + "/tiny.gguf";
  }();
  return path;
}

const std::string& text_file(const std::string& text) {
  static std::string dir = test::temp_dir("habits-text");
  static std::string path;
  path = dir + "/" + std::to_string(std::hash<std::string>{}(text)) + ".txt";
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(CliHabits, NonNumbersAndRangesAreReadable) {
  Result r = run_script("$WGRT run --temp abc");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("'abc' is not a number"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hint"), std::string::npos) << r.err;

  r = run_script("$WGRT run -n 1.5");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("'1.5' is not a whole number"), std::string::npos) << r.err;

  r = run_script("$WGRT run --seed -2");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("-2 is out of range: from -1 to 9223372036854775807"), std::string::npos) << r.err;
  EXPECT_FALSE(std::regex_search(r.err, std::regex("[0-9]{25}"))) << "a number of 25+ digits: " << r.err;

  r = run_script("$WGRT run --top-p 2");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("2 is out of range: from 0.0001 to 1"), std::string::npos) << r.err;

  r = run_script("$WGRT run -ngl lots");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("'lots' is not a layer count"), std::string::npos) << r.err;
}

// -ctk/-ctv: a bad type names the choices; q8_0 caches run and take about 53% of f16's bytes
// (the load line's "KV cache N MiB").
TEST(CliHabits, CacheTypes) {
  Result r = run_script("$WGRT run -ctk q9");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("'q9' is not a KV cache type (choices: f32, f16, q8_0)"), std::string::npos) << r.err;
  r = run_script("$WGRT run -m " + model_path() + " -p hi -n 2 --temp 0 -ctk f32 -ctv q8_0");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("an f32 cache pairs only with an f32 one"), std::string::npos) << r.err;

  auto kv_mib = [](const std::string& err) {
    std::smatch m;
    EXPECT_TRUE(std::regex_search(err, m, std::regex("KV cache ([0-9.]+) MiB"))) << err;
    return m.size() > 1 ? std::stod(m[1]) : 0.0;
  };
  r = run_script("$WGRT run -m " + model_path() + " -p hi -n 3 --temp 0 -c 4096");
  ASSERT_EQ(r.code, 0) << r.err;
  const double f16 = kv_mib(r.err);
  r = run_script("$WGRT run -m " + model_path() + " -p hi -n 3 --temp 0 -c 4096 -ctk q8_0 -ctv q8_0");
  ASSERT_EQ(r.code, 0) << r.err;
  const double q8 = kv_mib(r.err);
  EXPECT_NEAR(q8 / f16, 34.0 / 64, 0.02) << f16 << " MiB against " << q8;
}

TEST(CliHabits, HelpShowsDefaults) {
  Result r = run_script("$WGRT run --help");
  EXPECT_EQ(r.code, 0);
  for (const char* d : {"=128", "=0.8", "=40", "=0.95", "=0.05", "=-1", "=64", "=Once upon a time"})
    EXPECT_NE(r.out.find(d), std::string::npos) << d << " missing in:\n" << r.out;
  EXPECT_NE(r.out.find("--n-gpu-layers"), std::string::npos);
  EXPECT_NE(r.out.find("--no-display-prompt"), std::string::npos);
}

TEST(CliHabits, PromptFromFileAndStdin) {
  const std::string prompt = "The prompt from a file,\nover two lines.";
  const std::string& file = text_file(prompt);
  // -n 0: the prompt only, echoed as given.
  Result r = run_script("$WGRT run -m " + model_path() + " -f " + file + " -n 0 -ngl 99 --seed -1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, prompt + "\n");
  EXPECT_NE(r.err.find("-ngl 99: wgrt runs every layer on the GPU"), std::string::npos) << r.err;

  EXPECT_EQ(r.err.find("wgrt: loading"), std::string::npos) << "stderr is no terminal: no progress line";

  r = run_script("WGRT_PROGRESS=1 $WGRT run -m " + model_path() + " -f - -n 0 < " + file);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, prompt + "\n");
  EXPECT_NE(r.err.find("wgrt: loading " + model_path()), std::string::npos) << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex("wgrt: compiling kernel 1: [a-z_0-9]+\n"))) << r.err;

  r = run_script("$WGRT run -m " + model_path() + " -f " + file + " -n 2 --temp 0 --no-display-prompt");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("The prompt"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("prompt "), std::string::npos) << r.err;  // the prompt ran: its stats line

  r = run_script("$WGRT run -m " + model_path() + " -f /no/such/prompt.txt -n 0");
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("-f /no/such/prompt.txt: cannot open"), std::string::npos) << r.err;

  r = run_script("$WGRT run -p hi -f " + file);
  EXPECT_EQ(r.code, 2) << r.err;  // one prompt or the other
}

TEST(CliHabits, PerplexityPrintsLlamaCppsFinalEstimate) {
  std::string text;
  for (int i = 0; i < 12; ++i) text += "the cat sat on the mat. ";
  Result r = run_script("$WGRT perplexity -m " + model_path() + " -c 32 -f " + text_file(text));
  ASSERT_EQ(r.code, 0) << r.err;
  // Byte-level vocab: ~290 tokens, 9 chunks of 32; the running estimate after each.
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(^\[1\][0-9.]+,\[2\][0-9.]+,)"))) << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+))"))) << r.out;
  EXPECT_GT(std::stod(m[1]), 1.0);
  EXPECT_GT(std::stod(m[2]), 0.0);

  r = run_script("$WGRT perplexity -m " + model_path() + " -c 32 -f " + text_file("too short"));
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("needs at least 64"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace wgrt
