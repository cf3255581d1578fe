// The wgrt command as a user meets it: bad flags and bad files give a clear error and a
// non-zero exit (2 for flags), and the main commands work on a GGUF written like a download.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include "model/gguf_writer.h"
#include "model/random_model.h"
#include "support/hf_fixture.h"

namespace wgrt {
namespace {

struct Result {
  int code = -1;
  std::string out;  // stdout and stderr
};

// `wgrt ARGS` with the environment's assignments `env` ("NAME=VALUE ...") added.
Result wgrt_env(const std::string& env, const std::string& args) {
  std::string cmd = "env " + env + " " + std::string(WGRT_BINARY) + " " + args + " 2>&1";
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

Result wgrt(const std::string& args) { return wgrt_env("", args); }

std::string fixture_path() {
  static std::string path = [] {
    std::string dir = test::temp_dir("cli");
    model::RandomModelSpec spec;  // a tiny llama: 2 layers, GQA 4/2, byte-level vocab
    spec.matrix_type = model::GgmlType::Q4_0;
    spec.embd_type = model::GgmlType::Q8_0;
    model::gguf_write_file(model::make_random_model(spec), dir + "/tiny-q4_0.gguf");
    return dir + "/tiny-q4_0.gguf";
  }();
  return path;
}

TEST(Cli, HelpAndVersion) {
  Result r = wgrt("--help");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("run"), std::string::npos) << r.out;
  r = wgrt("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find("wgrt "), std::string::npos);
}

TEST(Cli, BadFlagsExitTwo) {
  for (const char* args : {"--bogus", "info --bogus", "run --temp abc", "run -n", "run --top-p 2",
                           "run --quantize q3", "tokenize", "frobnicate", "info --adapter -1",
                           "run --presence-penalty 3", "run --frequency-penalty -2.5", "run --repeat-last-n -1"}) {
    Result r = wgrt(args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.out;
    EXPECT_NE(r.out.find("hint"), std::string::npos) << args << ": " << r.out;
  }
}

TEST(Cli, BadModelFilesFailCleanly) {
  std::string dir = test::temp_dir("clibad");
  std::ofstream(dir + "/junk.gguf") << "this is not a model";
  Result r = wgrt("run -m " + dir + "/junk.gguf -n 1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("magic"), std::string::npos) << r.out;

  r = wgrt("run -m " + dir + "/missing.gguf -n 1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("no such file"), std::string::npos) << r.out;

  std::ofstream(dir + "/config.json") << R"({"architectures": ["BertModel"]})";
  r = wgrt("run -m " + dir + " -n 1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("BertModel"), std::string::npos) << r.out;

  // A truncated copy of a real fixture.
  std::ifstream in(fixture_path(), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::ofstream(dir + "/cut.gguf", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  r = wgrt("run -m " + dir + "/cut.gguf -n 1");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("truncated"), std::string::npos) << r.out;
  std::filesystem::remove_all(dir);
}

TEST(Cli, RunGeneratesAndReportsSpeed) {
  Result r = wgrt("run -m " + fixture_path() + " -p 'Hello' -n 6 --temp 0");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Hello"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tok/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("generated 6 tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("wgrt: memory: weights "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" MiB, KV cache "), std::string::npos) << r.out;
  // Greedy runs repeat exactly: the same text between the prompt and the speed line.
  auto text = [](const std::string& out) {
    size_t b = out.find("Hello"), e = out.find("\nwgrt: prompt");
    return b == std::string::npos || e == std::string::npos ? out : out.substr(b, e - b);
  };
  EXPECT_EQ(text(wgrt("run -m " + fixture_path() + " -p 'Hello' -n 6 --temp 0").out), text(r.out));
}

// The penalties change a greedy run of the demo model, which repeats itself ("and the two ...")
// within 24 tokens, and a run with them repeats exactly.
TEST(Cli, PenaltiesChangeAGreedyRun) {
  const std::string base = "run -p 'Once upon a time' -n 24 --temp 0";
  const Result plain = wgrt(base);
  ASSERT_EQ(plain.code, 0) << plain.out;
  const std::string flags = " --presence-penalty 1.5 --frequency-penalty 1 --repeat-last-n 64";
  const Result penalized = wgrt(base + flags);
  ASSERT_EQ(penalized.code, 0) << penalized.out;
  // The text between the prompt and the speed line (the header names a random seed).
  auto text = [](const std::string& out) {
    size_t b = out.find("Once upon a time"), e = out.find("\nwgrt: prompt");
    return b == std::string::npos || e == std::string::npos ? out : out.substr(b, e - b);
  };
  EXPECT_NE(text(penalized.out), text(plain.out));
  EXPECT_EQ(text(wgrt(base + flags).out), text(penalized.out));
  EXPECT_NE(text(wgrt(base + " --repeat-penalty 1.5").out), text(plain.out));
}

// `wgrt info` says what the device offers for fast math: shader-f16, subgroups and each
// subgroup-matrix configuration (none on lavapipe), in text and JSON.
TEST(Cli, InfoListsFastMathFeatures) {
  Result text = wgrt("info");
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("enabled       shader-f16 "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("matrices      subgroup-matrix "), std::string::npos) << text.out;
  Result json = wgrt("info --json");
  ASSERT_EQ(json.code, 0) << json.out;
  auto j = nlohmann::json::parse(json.out.substr(json.out.find('{')));
  EXPECT_TRUE(j["enabled"].contains("shader-f16"));
  EXPECT_TRUE(j["enabled"].contains("subgroups"));
  ASSERT_TRUE(j["enabled"].contains("subgroup-matrix"));
  ASSERT_TRUE(j["subgroup_matrix_configs"].is_array());
  EXPECT_EQ(j["enabled"]["subgroup-matrix"].get<bool>(), !j["subgroup_matrix_configs"].empty());
  for (const auto& c : j["subgroup_matrix_configs"])
    for (const char* key : {"component", "result", "m", "n", "k"}) EXPECT_TRUE(c.contains(key)) << c.dump();
}

// Dawn's toggles by stage (WGRT_TOGGLES): a stage that does not exist is a clear error; a
// default toggle can be turned off.
TEST(Cli, TogglesNameTheirStage) {
  Result bad = wgrt_env("WGRT_TOGGLES=plate:allow_unsafe_apis", "info");
  EXPECT_NE(bad.code, 0) << bad.out;
  EXPECT_NE(bad.out.find("names no stage 'plate'"), std::string::npos) << bad.out;
  Result off = wgrt_env("WGRT_TOGGLES=instance:-allow_unsafe_apis,device:disable_robustness", "info --json");
  ASSERT_EQ(off.code, 0) << off.out;
  auto j = nlohmann::json::parse(off.out.substr(off.out.find('{')));
  EXPECT_FALSE(j["enabled"]["subgroup-matrix"].get<bool>());  // experimental: needs allow_unsafe_apis
}

// --warmup runs the same generation untimed first and then forgets it: a sampled run with a
// seed prints the same text with and without it.
TEST(Cli, WarmupLeavesTheRunUnchanged) {
  const std::string args = "run -m " + fixture_path() + " -p 'Hello' -n 6 --temp 0.9 --seed 7";
  Result cold = wgrt(args);
  Result warm = wgrt(args + " --warmup");
  ASSERT_EQ(cold.code, 0) << cold.out;
  ASSERT_EQ(warm.code, 0) << warm.out;
  auto text = [](const std::string& out) {
    size_t b = out.find("Hello"), e = out.find("\nwgrt: prompt");
    return b == std::string::npos || e == std::string::npos ? out : out.substr(b, e - b);
  };
  EXPECT_EQ(text(warm.out), text(cold.out));
  EXPECT_NE(warm.out.find("generated 6 tokens"), std::string::npos) << warm.out;
}

// --json-schema and --grammar hold the text (the generation is the C API's, with its grammar),
// --stop ends it before the stop text; a grammar that does not compile fails before the model
// loads, naming its flag.
TEST(Cli, RunHoldsGrammarsAndStops) {
  // What `run --no-display-prompt` generated: after the memory line, before the speed line.
  auto generated = [](const std::string& out) {
    const size_t m = out.find("wgrt: memory"), b = out.find('\n', m) + 1, e = out.find("\nwgrt: prompt");
    return m == std::string::npos || e == std::string::npos ? "(not found) " + out : out.substr(b, e - b);
  };
  for (const std::string rule : {"-j '{\"enum\": [\"yes\", \"no\"]}'", "--grammar 'root ::= \"yes\" | \"no\"'"}) {
    Result r = wgrt("run -p 'Is the sea blue?' --no-display-prompt -n 16 --seed 2 " + rule);
    ASSERT_EQ(r.code, 0) << r.out;
    const std::string reply = generated(r.out), want = rule[1] == 'j' ? "\"" : "";
    EXPECT_TRUE(reply == want + "yes" + want || reply == want + "no" + want) << rule << "\n" << r.out;
    EXPECT_NE(r.out.find("stopped by eos"), std::string::npos) << r.out;
  }
  const Result plain = wgrt("run -p 'Once upon a time' -n 12 --temp 0 --no-display-prompt");
  ASSERT_EQ(plain.code, 0) << plain.out;
  const std::string text = generated(plain.out);
  ASSERT_GE(text.size(), 8u) << plain.out;
  const std::string cut = text.substr(text.size() / 2, 3);
  const Result stopped = wgrt("run -p 'Once upon a time' -n 12 --temp 0 --no-display-prompt --stop '" + cut + "'");
  EXPECT_EQ(generated(stopped.out), text.substr(0, text.find(cut))) << stopped.out;
  EXPECT_NE(stopped.out.find("stopped by stop string"), std::string::npos) << stopped.out;
  const Result bad = wgrt("run -p x -n 2 --grammar 'root ::= nowhere'");
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("--grammar: grammar line 1"), std::string::npos) << bad.out;
  EXPECT_EQ(bad.out.find("wgrt: memory"), std::string::npos) << "the model loaded first:\n" << bad.out;
}

// llama.cpp's -l/--logit-bias and --ignore-eos on the random fixture (byte tokens: a byte's id
// is its value; the end token is 257): the end token forced ends the run at its first token,
// --ignore-eos overrides that and runs to -n, and -inf keeps the greedy first letter out.
TEST(Cli, LogitBiasAndIgnoreEos) {
  const std::string base = "run -m " + fixture_path() + " -p 'Hello' --no-display-prompt -n 12 --temp 0";
  const Result forced = wgrt(base + " -l 257+100");
  ASSERT_EQ(forced.code, 0) << forced.out;
  EXPECT_NE(forced.out.find("generated 0 tokens"), std::string::npos) << forced.out;
  EXPECT_NE(forced.out.find("stopped by eos"), std::string::npos) << forced.out;
  const Result ignored = wgrt(base + " -l 257+100 --ignore-eos");
  ASSERT_EQ(ignored.code, 0) << ignored.out;
  EXPECT_NE(ignored.out.find("generated 12 tokens"), std::string::npos) << ignored.out;
  EXPECT_NE(ignored.out.find("stopped by length"), std::string::npos) << ignored.out;

  auto generated = [](const std::string& out) {
    const size_t m = out.find("wgrt: memory"), b = out.find('\n', m) + 1, e = out.find("\nwgrt: prompt");
    return m == std::string::npos || e == std::string::npos ? "(not found) " + out : out.substr(b, e - b);
  };
  // Letters only (the random model's bytes are mostly not UTF-8), so the first byte names its token.
  const std::string letters = base + " --ignore-eos --grammar 'root ::= [a-z]+'";
  const std::string plain = generated(wgrt(letters).out);
  ASSERT_FALSE(plain.empty());
  const int first = static_cast<unsigned char>(plain[0]);
  ASSERT_TRUE(first >= 'a' && first <= 'z') << plain;
  const std::string banned = generated(wgrt(letters + " --logit-bias " + std::to_string(first) + "-inf").out);
  ASSERT_FALSE(banned.empty());
  EXPECT_NE(static_cast<unsigned char>(banned[0]), first) << plain << " | " << banned;

  for (const auto& [flag, says] : {std::pair<std::string, std::string>{"-l abc", "is not TOKEN_ID(+/-)BIAS"},
                                   {"-l 999+1", "token 999 is outside the model's vocabulary of 258"},
                                   {"-l 5*2", "is not TOKEN_ID(+/-)BIAS"}}) {
    const Result bad = wgrt(base + " " + flag);
    EXPECT_EQ(bad.code, 1) << flag << ": " << bad.out;
    EXPECT_NE(bad.out.find(says), std::string::npos) << flag << ": " << bad.out;
  }
}

TEST(Cli, DefaultModelSaysRandomWeights) {
  Result r = wgrt("run -m builtin:random -n 4 --seed 3");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("RANDOM WEIGHTS"), std::string::npos) << r.out;
}

TEST(Cli, DumpLogitsWritesEveryPromptRow) {
  std::string out = test::temp_dir("dump") + "/logits.bin";
  Result r = wgrt("run -m " + fixture_path() + " -p 'abcd' -n 0 --dump-logits " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  Result ids = wgrt("tokenize -m " + fixture_path() + " --json abcd");
  ASSERT_EQ(ids.code, 0) << ids.out;
  size_t n_prompt = nlohmann::json::parse(ids.out).size();
  EXPECT_EQ(n_prompt, 5u);  // BOS + 4 bytes
  EXPECT_EQ(std::filesystem::file_size(out), n_prompt * 258 * sizeof(float));
}

TEST(Cli, TokenizeJsonAndNoBos) {
  Result r = wgrt("tokenize -m " + fixture_path() + " --json 'hi'");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out), nlohmann::json({256, 104, 105}));
  r = wgrt("tokenize -m " + fixture_path() + " --json --no-bos 'hi'");
  EXPECT_EQ(nlohmann::json::parse(r.out), nlohmann::json({104, 105}));
}

TEST(Cli, PromptPastContextIsAnError) {
  Result r = wgrt("run -m " + fixture_path() + " -c 8 -p 'a prompt longer than eight bytes' -n 2");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("past the context"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--ctx-size"), std::string::npos) << r.out;
}

TEST(Cli, Perplexity) {
  std::string dir = test::temp_dir("ppl");
  std::ofstream(dir + "/text.txt") << "In the beginning God created the heaven and the earth.";
  // ~56 byte tokens: 3 chunks of 16 (llama-perplexity's windows need 2 at least).
  Result r = wgrt("perplexity -m " + fixture_path() + " -f " + dir + "/text.txt -c 16");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Final estimate: PPL = "), std::string::npos) << r.out;
  r = wgrt("perplexity -m " + fixture_path() + " -f " + dir + "/none.txt");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("cannot open"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace wgrt
