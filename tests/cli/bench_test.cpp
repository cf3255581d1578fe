// `wgrt bench` as a user and a script meet it: every output format parses, with one row per
// test and depth, llama-bench's fields and one sample per repetition; the model is described
// from the file itself; bad flags and impossible tests exit 2 with a hint. Also the property
// bench relies on to prefill a depth once: rewinding the cache to a depth and evaluating
// again gives exactly what a fresh prefill gives.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <sys/wait.h>

#include "llm/session.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "model/random_model.h"
#include "support/device.h"
#include "support/hf_fixture.h"

namespace wgrt {
namespace {

struct Result {
  int code = -1;
  std::string out, err;
};

// `env`: assignments for the command's environment ("NAME=value ...").
Result wgrt(const std::string& args, const std::string& env = "") {
  static const std::string dir = test::temp_dir("benchcli");
  const std::string err_file = dir + "/stderr.txt";
  std::string cmd = env + (env.empty() ? "" : " ") + std::string(WGRT_BINARY) + " " + args + " 2>" + err_file;
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(err_file);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  return r;
}

// The CLI tests' tiny llama (2 layers, byte-level vocabulary), Q4_0 matrices, Q8_0 embeddings.
model::RandomModelSpec fixture_spec() {
  model::RandomModelSpec spec;
  spec.matrix_type = model::GgmlType::Q4_0;
  spec.embd_type = model::GgmlType::Q8_0;
  return spec;
}

std::string fixture_path() {
  static std::string path = [] {
    std::string p = test::temp_dir("benchcli") + "/tiny-q4_0.gguf";
    model::gguf_write_file(model::make_random_model(fixture_spec()), p);
    return p;
  }();
  return path;
}

// -p 16 -n 4 -d 0,24 -r 2: tests in llama-bench's order (per depth: pp, then tg).
const char* kTests = "-p 16 -n 4 -d 0,24 -r 2";
struct Expected {
  uint32_t n_prompt, n_gen, n_depth;
  const char* name;
};
const Expected kRows[] = {{16, 0, 0, "pp16"}, {0, 4, 0, "tg4"}, {16, 0, 24, "pp16 @ d24"}, {0, 4, 24, "tg4 @ d24"}};

// Checks one row against the file (read with the GGUF reader, not through bench) and against
// its own samples.
void check_row(const nlohmann::json& row, const Expected& want) {
  SCOPED_TRACE(want.name);
  model::GgufFile f = model::open_gguf(fixture_path());
  uint64_t bytes = 0, params = 0;
  for (const auto& t : f.tensors) bytes += t.n_bytes, params += t.n_elements;
  EXPECT_EQ(row.at("model_size").get<uint64_t>(), bytes);
  EXPECT_EQ(row.at("model_n_params").get<uint64_t>(), params);
  EXPECT_EQ(row.at("model_filename").get<std::string>(), fixture_path());
  ASSERT_LT(params, 1000000u);  // a size class in thousands of parameters
  EXPECT_EQ(row.at("model_type").get<std::string>(), fmt::format("llama {}K Q4_0", std::llround(params / 1e3)));
  EXPECT_EQ(row.at("n_prompt").get<uint32_t>(), want.n_prompt);
  EXPECT_EQ(row.at("n_gen").get<uint32_t>(), want.n_gen);
  EXPECT_EQ(row.at("n_depth").get<uint32_t>(), want.n_depth);
  EXPECT_EQ(row.at("n_batch").get<uint32_t>(), 512u);
  EXPECT_FALSE(row.at("build_commit").get<std::string>().empty());
  EXPECT_NE(row.at("backends").get<std::string>().find("WebGPU"), std::string::npos);
  EXPECT_FALSE(row.at("gpu_info").get<std::string>().empty());
  EXPECT_GT(row.at("model_gpu_size").get<uint64_t>(), 0u);
  EXPECT_GE(row.at("n_ctx").get<uint32_t>(), 24u + 16u);
  EXPECT_EQ(row.at("test_time").get<std::string>().size(), 20u);  // 2026-12-01T08:00:00Z
  auto ns = row.at("samples_ns").get<std::vector<double>>();
  auto ts = row.at("samples_ts").get<std::vector<double>>();
  ASSERT_EQ(ns.size(), 2u);
  ASSERT_EQ(ts.size(), 2u);
  const double tokens = want.n_prompt + want.n_gen;
  double mean_ns = 0, mean_ts = 0;
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_GT(ns[i], 0);
    EXPECT_NEAR(ts[i], tokens * 1e9 / ns[i], 1e-6 * ts[i]);
    mean_ns += ns[i] / 2, mean_ts += ts[i] / 2;
  }
  EXPECT_NEAR(row.at("avg_ns").get<double>(), mean_ns, 1.0);
  EXPECT_NEAR(row.at("avg_ts").get<double>(), mean_ts, 1e-6 * mean_ts);
  // sample standard deviation of two values: |a - b| / sqrt(2)
  EXPECT_NEAR(row.at("stddev_ts").get<double>(), std::abs(ts[0] - ts[1]) / std::sqrt(2.0), 1e-6 * mean_ts);
  EXPECT_NEAR(row.at("stddev_ns").get<double>(), std::abs(ns[0] - ns[1]) / std::sqrt(2.0), 1.0);
}

TEST(CliBench, JsonRowsPerTestAndDepth) {
  Result r = wgrt(fmt::format("bench -m {} {} -o json", fixture_path(), kTests));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  nlohmann::json rows = nlohmann::json::parse(r.out);
  ASSERT_TRUE(rows.is_array());
  ASSERT_EQ(rows.size(), 4u);
  for (size_t i = 0; i < 4; ++i) check_row(rows[i], kRows[i]);
  // progress (warm-up, repetitions, the depth prefill) on stderr, nothing of it on stdout
  EXPECT_NE(r.err.find(": warm-up ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("repetition 2/2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("depth 24"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("repetition"), std::string::npos);
}

TEST(CliBench, JsonlOneRowPerLine) {
  Result r = wgrt(fmt::format("bench -m {} {} -o jsonl --no-warmup", fixture_path(), kTests));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  std::istringstream lines(r.out);
  size_t i = 0;
  for (std::string line; std::getline(lines, line); ++i) {
    ASSERT_LT(i, 4u) << r.out;
    check_row(nlohmann::json::parse(line), kRows[i]);
  }
  EXPECT_EQ(i, 4u);
  EXPECT_EQ(r.err.find(": warm-up ("), std::string::npos) << r.err;
}

// A CSV line split into fields, every field quoted (doubled quotes inside).
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> f;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') cur += '"', ++i;
    else if (c == '"') quoted = !quoted;
    else if (c == ',' && !quoted) f.push_back(cur), cur.clear();
    else cur += c;
  }
  f.push_back(cur);
  return f;
}

const std::set<std::string> kStringFields = {"build_commit", "cpu_info", "gpu_info", "backends", "model_filename",
                                             "model_type", "type_k", "type_v", "test_time"};

TEST(CliBench, CsvHeaderAndRows) {
  Result r = wgrt(fmt::format("bench -m {} {} -o csv --no-warmup", fixture_path(), kTests));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  std::istringstream lines(r.out);
  std::string header_line;
  ASSERT_TRUE(std::getline(lines, header_line));
  std::vector<std::string> header = csv_fields(header_line);
  size_t i = 0;
  for (std::string line; std::getline(lines, line); ++i) {
    ASSERT_LT(i, 4u) << r.out;
    std::vector<std::string> values = csv_fields(line);
    ASSERT_EQ(values.size(), header.size()) << line;
    nlohmann::json row;
    for (size_t k = 0; k < header.size(); ++k) {
      const std::string& v = values[k];
      if (header[k].starts_with("samples_")) {
        row[header[k]] = nlohmann::json::array();
        std::istringstream parts(v);
        for (std::string x; std::getline(parts, x, ';');) row[header[k]].push_back(std::stod(x));
      } else if (!kStringFields.contains(header[k]) && !v.empty() &&
                 v.find_first_not_of("0123456789.-e+") == std::string::npos) {
        row[header[k]] = std::stod(v);
      } else {
        row[header[k]] = v;
      }
    }
    check_row(row, kRows[i]);
  }
  EXPECT_EQ(i, 4u);
}

TEST(CliBench, MarkdownTable) {
  Result r = wgrt(fmt::format("bench -m {} {} --no-warmup", fixture_path(), kTests));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  std::istringstream lines(r.out);
  std::vector<std::vector<std::string>> table;
  for (std::string line; std::getline(lines, line);) {
    ASSERT_TRUE(line.starts_with("| ") && line.ends_with(" |")) << line;
    std::vector<std::string> cells;
    std::istringstream parts(line.substr(2, line.size() - 4));
    for (std::string c; std::getline(parts, c, '|');) {
      c.erase(0, c.find_first_not_of(' '));
      c.erase(c.find_last_not_of(' ') + 1);
      cells.push_back(c);
    }
    table.push_back(cells);
  }
  ASSERT_EQ(table.size(), 2u + 4u) << r.out;
  EXPECT_EQ(table[0], (std::vector<std::string>{"model", "size", "params", "backend", "adapter", "test", "t/s"}));
  for (size_t i = 0; i < 4; ++i) {
    const auto& row = table[2 + i];
    ASSERT_EQ(row.size(), 7u) << r.out;
    EXPECT_TRUE(row[0].starts_with("llama ") && row[0].ends_with(" Q4_0")) << row[0];
    EXPECT_TRUE(row[1].ends_with(" MiB")) << row[1];
    EXPECT_EQ(row[5], kRows[i].name);
    double mean = 0, sd = -1;
    ASSERT_EQ(std::sscanf(row[6].c_str(), "%lf \xc2\xb1 %lf", &mean, &sd), 2) << row[6];
    EXPECT_GT(mean, 0);
    EXPECT_GE(sd, 0);
  }
}

TEST(CliBench, GuessedFileTypeWhenTheKeyIsMissing) {
  model::GgufWriter w = model::make_random_model(fixture_spec());
  std::erase_if(w.kv, [](const auto& kv) { return kv.first == "general.file_type"; });
  const std::string path = test::temp_dir("benchcli") + "/no-file-type.gguf";
  model::gguf_write_file(w, path);
  Result r = wgrt("bench -m " + path + " -p 4 -n 0 -d 0 -r 1 --no-warmup -o jsonl");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const std::string type = nlohmann::json::parse(r.out).at("model_type").get<std::string>();
  EXPECT_TRUE(type.ends_with(" (guessed) Q4_0")) << type;  // most tensors are Q4_0
}

// --profile: after the rows, a per-kernel table for a prefill and for decode at each depth, on
// stderr, with the step's dispatch count, CPU split and real step time; stdout stays clean JSON.
TEST(CliBench, ProfileReportsKernelsAndSteps) {
  Result r = wgrt(fmt::format("bench -m {} -p 8 -n 4 -d 0,16 -r 1 --no-warmup -o json --profile", fixture_path()));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).size(), 4u);
  for (const char* want : {"profile: prefill of 8 tokens at position 0", "profile: decode at position 0",
                           "profile: decode at position 16", "| linear_q4gsw | gemv |", "| attention | flash_decode |",
                           "dispatches per token: ", "real step, unprofiled: ",
                           "CPU per step: update "})
    EXPECT_NE(r.err.find(want), std::string::npos) << "missing '" << want << "' in:\n" << r.err;
  // Decode at position 0: 5 dispatches per layer (q|k|v with RoPE and the cache write in its
  // epilogue, attention, o, gate|up, down; the attention merge is skipped while the context is
  // one chunk), the embedding, the head's two (2 layers: 13); at 16, still 13.
  EXPECT_NE(r.err.find("dispatches per token: 13.0"), std::string::npos) << r.err;
  // A decode step moves pos alone: one write, the graph's symbol block, while no attention
  // node's chunk count changes (decode at 16: keys 17..20, one key block).
  EXPECT_NE(r.err.find("; uniform writes 1.0\n"), std::string::npos) << r.err;
  // The real step without each family of nodes: the 13 dispatches by family, in node order.
  const size_t families = r.err.find("as the step runs it: the real step (");
  ASSERT_NE(families, std::string::npos) << r.err;
  size_t at = families;
  for (const char* row : {"| token_embd | 1 | 1 | ", "| attn_qkv_rope | 2 | 2 | ", "| attn | 2 | 2 | ",
                          "| attn_residual | 2 | 2 | ", "| ffn_act | 2 | 2 | ", "| ffn_residual | 2 | 2 | ",
                          "| logits | 1 | 2 | "}) {
    at = r.err.find(row, at);
    EXPECT_NE(at, std::string::npos) << "missing '" << row << "' in order in:\n" << r.err.substr(families);
    if (at == std::string::npos) break;
  }
}

// --profile with --parallel: the batched graph's in-place nodes (logit_adjust has no output)
// are listed by their input's shape (it crashed the report once); one sequence through the
// batched graph (what one client of `wgrt serve` runs) is profiled too.
TEST(CliBench, ProfileOfBatchedDecode) {
  Result r = wgrt(fmt::format("bench -m {} -p 0 -n 40 -d 0 -r 1 --no-warmup --parallel 1,2 --profile", fixture_path()));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("profile: batched decode of 1 sequences at position 0"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("profile: batched decode of 2 sequences at position 0"), std::string::npos) << r.err;
}

// WGRT_SKIP_NODES (a measuring aid): said on stderr; the profile then has no family table (the
// step is already partial); a malformed list is an error that names it.
TEST(CliBench, SkipNodesIsSaidAndChecked) {
  Result r = wgrt(fmt::format("bench -m {} -p 0 -n 4 -d 0 -r 1 --no-warmup --profile", fixture_path()),
                  "WGRT_SKIP_NODES=attn.:1,ffn_act.");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("WGRT_SKIP_NODES leaves dispatches out"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("profile: decode at position 0"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("as the step runs it"), std::string::npos) << r.err;
  for (const char* bad : {"attn.:x", "attn.:12", ",attn."}) {
    Result b = wgrt(fmt::format("bench -m {} -p 0 -n 4 -d 0 -r 1 --no-warmup", fixture_path()),
                    fmt::format("WGRT_SKIP_NODES='{}'", bad));
    EXPECT_NE(b.code, 0) << bad << ": " << b.err;
    EXPECT_NE(b.err.find("WGRT_SKIP_NODES"), std::string::npos) << bad << ": " << b.err;
    EXPECT_NE(b.err.find("hint"), std::string::npos) << bad << ": " << b.err;
  }
}

// --parallel: after the single-sequence rows, tg rows of several sequences on the batched
// graph, aggregate tok/s, named "tg4 x3", with n_parallel.
TEST(CliBench, ParallelRowsAfterTheOthers) {
  Result r = wgrt(fmt::format("bench -m {} -p 0 -n 4 -d 0,8 -r 2 --parallel 1,3 -o jsonl --no-warmup", fixture_path()));
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  std::istringstream lines(r.out);
  std::vector<nlohmann::json> rows;
  for (std::string line; std::getline(lines, line);) rows.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(rows.size(), 6u) << r.out;
  const int want[][2] = {{0, 1}, {8, 1}, {0, 1}, {0, 3}, {8, 1}, {8, 3}};  // (depth, parallel)
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i]["n_depth"], want[i][0]) << i;
    EXPECT_EQ(rows[i]["n_parallel"], want[i][1]) << i;
    EXPECT_EQ(rows[i]["batched"], i >= 2) << i;  // "tg4 x1" is on the batched graph, "tg4" is not
    EXPECT_EQ(rows[i]["n_gen"], 4) << i;
    EXPECT_EQ(rows[i]["samples_ts"].size(), 2u) << i;
    EXPECT_GT(rows[i]["avg_ts"].get<double>(), 0) << i;
  }
  EXPECT_NE(r.err.find("tg4 x3 @ d8: repetition 2/2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("batched graph of 3 sequences x 12 positions"), std::string::npos) << r.err;
  Result bad = wgrt(fmt::format("bench -m {} -p 0 -n 4 -b 2 --parallel 3", fixture_path()));
  EXPECT_EQ(bad.code, 2) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("--parallel 3 is past the batch of 2"), std::string::npos) << bad.err;
}

TEST(CliBench, BadFlagsAndImpossibleTestsExitTwo) {
  const std::string m = " -m " + fixture_path();
  for (std::string args : {std::string("bench"), "bench" + m + " -p abc", "bench" + m + " -p 8,x",
                           "bench" + m + " -r 0", "bench" + m + " -o xml", "bench" + m + " -b 0",
                           "bench" + m + " -d -1", "bench" + m + " --bogus", "bench" + m + " -p 0 -n 0"}) {
    Result r = wgrt(args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("hint"), std::string::npos) << args << ": " << r.err;
  }
  Result r = wgrt("bench" + m + " -p 16 -n 4 -d 24 -c 32");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("pp16 @ d24 needs 40 positions but --ctx-size is 32"), std::string::npos) << r.err;
  r = wgrt("bench -m " + test::temp_dir("benchcli") + "/missing.gguf -p 4 -n 0 -d 0 -r 1");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("no such file"), std::string::npos) << r.err;
}

// bench prefills a depth once and rewinds to it for every repetition; that is only sound if
// evaluating after a rewind sees exactly the cache a fresh prefill leaves.
TEST(CliBench, RewindToDepthMatchesFreshPrefill) {
  model::BuildOptions o;
  o.n_ctx = 64;
  o.max_batch = 16;
  llm::Session s = llm::open_session(test::device(), fixture_path(), o);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> id(0, int32_t(s.mg.n_vocab) - 1);
  std::vector<int32_t> depth(24), x(9), y(5);
  for (auto* v : {&depth, &x, &y})
    for (auto& t : *v) t = id(rng);

  llm::eval(s, depth);
  llm::eval(s, x);
  const std::vector<float> fresh = llm::read_logits(s);
  llm::eval(s, y);  // writes past depth + x, as a tg test would

  llm::reset(s);  // bench's rewind: reset, then the depth's positions back in use
  s.n_past = uint32_t(depth.size());
  llm::eval(s, x);
  EXPECT_EQ(llm::read_logits(s), fresh);

  llm::reset(s);  // and the rewind really depends on the cached depth: a different one differs
  std::vector<int32_t> other = depth;
  other[3] = (other[3] + 1) % int32_t(s.mg.n_vocab);
  llm::eval(s, other);
  llm::eval(s, x);
  EXPECT_NE(llm::read_logits(s), fresh);
}

}  // namespace
}  // namespace wgrt
