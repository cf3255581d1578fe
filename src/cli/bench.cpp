// `wgrt bench`: prompt-processing (pp) and generation (tg) speed in llama-bench's conventions,
// so wgrt's rows and a peer's can be set side by side. One row per test (pp512, tg128,
// pp512 @ d4096, tg128 @ d4096), with mean ± sample standard deviation of tok/s over the
// repetitions. Token ids are random (no tokenizer in the timing). Progress goes to stderr,
// rows to stdout as each test finishes. `--parallel 1,8` adds tg rows of several sequences
// decoding together on one graph (continuous batching, as `wgrt serve` steps): "tg128 x8" is
// the aggregate tok/s of 8 sequences of 128 tokens each.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/build_info.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "llm/batch.h"
#include "llm/profile.h"
#include "llm/session.h"
#include "model/file_type.h"

namespace wgrt::cli {
namespace {

using Clock = std::chrono::steady_clock;
using Row = nlohmann::ordered_json;

struct BenchFlags {
  std::string model;
  std::vector<uint32_t> n_prompt{512}, n_gen{128}, depth{0, 4096};  // the four rows wgrt is judged by
  uint32_t reps = 5, batch = 512;
  uint32_t ctx = 0;  // 0: what the largest test needs
  std::string output = "md", quantize = "auto";
  bool no_warmup = false, kv_f32 = false;
  std::string cache_type_k, cache_type_v;  // -ctk / -ctv (flags.h)
  bool profile = false;  // then per kernel: a prefill and decode steps at each depth
  std::string peaks;
  std::vector<uint32_t> parallel;  // sequences per batched tg test; empty: none
};

constexpr uint32_t kProfileSteps = 32;  // decode steps per profile (+ 2 warm-up)
// The warm-up repeats a test until its runs add up to this long: a GPU leaves its idle clocks
// only after about a second of steady work (the H200: 345 to 1980 MHz, bench/peers/profile-h200.sh's
// clocks.csv), and one 35 ms pp512 left the first timed repetition at a fraction of the speed.
constexpr double kWarmupSeconds = 1.0;

struct Test {
  uint32_t n_prompt = 0, n_gen = 0, depth = 0;
  uint32_t parallel = 0;  // > 0: tg of this many sequences on the batched graph
};

std::string test_name(const Test& t) {
  std::string name = t.n_prompt ? fmt::format("pp{}", t.n_prompt) : fmt::format("tg{}", t.n_gen);
  if (t.parallel) name += fmt::format(" x{}", t.parallel);
  return t.depth ? name + fmt::format(" @ d{}", t.depth) : name;
}

uint32_t tokens_of(const Test& t) { return t.n_prompt + t.n_gen * std::max<uint32_t>(t.parallel, 1); }

// llama-bench's order: for each depth, its pp tests, then its tg tests; 0 in a list skips.
std::vector<Test> plan_tests(const BenchFlags& f) {
  std::vector<Test> tests;
  for (uint32_t d : f.depth) {
    for (uint32_t p : f.n_prompt)
      if (p) tests.push_back({.n_prompt = p, .depth = d});
    for (uint32_t n : f.n_gen)
      if (n) tests.push_back({.n_gen = n, .depth = d});
  }
  // The batched rows after the others: they run on a second graph.
  for (uint32_t d : f.depth)
    for (uint32_t n : f.n_gen)
      for (uint32_t p : f.parallel)
        if (n) tests.push_back({.n_gen = n, .depth = d, .parallel = p});
  return tests;
}

uint32_t positions(const Test& t) { return t.depth + t.n_prompt + t.n_gen; }

// Called by CLI11 after parsing, so a test that cannot run is a usage error (exit 2).
void validate(const BenchFlags& f) {
  std::vector<Test> tests = plan_tests(f);
  if (tests.empty()) throw CLI::ValidationError("bench", "no test to run: every -p and -n value is 0");
  for (uint32_t p : f.parallel)
    if (p > f.batch)
      throw CLI::ValidationError("bench", fmt::format("--parallel {} is past the batch of {} tokens per step (hint: "
                                                      "a larger -b)", p, f.batch));
  if (f.ctx)
    for (const Test& t : tests)
      if (positions(t) > f.ctx)
        throw CLI::ValidationError(
            "bench", fmt::format("test {} needs {} positions but --ctx-size is {} (hint: a larger -c, or leave it out "
                                 "to size the context for the largest test)", test_name(t), positions(t), f.ctx));
}

// ---- what the rows say about the model and the machine ----

struct ModelInfo {
  std::string filename, type;  // type: "llama 1B Q4_K - Medium"
  uint64_t size = 0;           // bytes of the file's tensors
  uint64_t n_params = 0;
  uint64_t gpu_weight_bytes = 0;
  std::string backend, adapter, cpu;
};

// "1B", "8B", "1.5B", "494M": the parameter count rounded to a half billion, or millions.
std::string size_class(uint64_t n_params) {
  const double b = n_params / 1e9;
  if (b >= 0.75) {
    const double halves = std::round(b * 2) / 2;
    return halves == std::floor(halves) ? fmt::format("{:.0f}B", halves) : fmt::format("{:.1f}B", halves);
  }
  if (n_params >= 1000000) return fmt::format("{:.0f}M", n_params / 1e6);
  return fmt::format("{:.0f}K", n_params / 1e3);
}

// general.file_type, or the type of most tensors, marked as guessed, as GGUF tools do.
std::string file_type_label(const model::ModelFile& m) {
  if (m.gguf)
    if (auto ft = m.gguf->opt_uint("general.file_type")) return model::file_type_name(uint32_t(*ft));
  std::map<model::GgmlType, size_t> count;
  for (const auto& [name, w] : m.weights) ++count[w.type];
  model::GgmlType most = model::GgmlType::F32;
  size_t best = 0;
  for (auto [type, n] : count)
    if (n > best) most = type, best = n;
  return model::file_type_name(model::file_type_of(most).value_or(0) | model::kFileTypeGuessed);
}

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("model name")) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  return "";
}

ModelInfo describe(const llm::Session& s, const gpu::Device& dev) {
  ModelInfo i;
  i.filename = s.model.path;
  for (const auto& [name, w] : s.model.weights) {
    i.size += w.n_bytes;
    i.n_params += w.n_elements();
  }
  const std::string arch = s.model.gguf ? s.model.gguf->opt_string("general.architecture").value_or("")
                                        : model::arch_name(s.model.config.arch);
  i.type = fmt::format("{} {} {}", arch.empty() ? model::arch_name(s.model.config.arch) : arch,
                       size_class(i.n_params), file_type_label(s.model));
  i.gpu_weight_bytes = s.mg.weight_bytes;
  i.backend = fmt::format("WebGPU ({})", gpu::backend_name(dev.caps.adapter.backend));
  i.adapter = dev.caps.adapter.name;
  i.cpu = cpu_name();
  return i;
}

// ---- timing ----

std::vector<int32_t> random_tokens(std::mt19937& rng, uint32_t n_vocab, uint32_t n) {
  std::uniform_int_distribution<int32_t> id(0, int32_t(n_vocab) - 1);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = id(rng);
  return t;
}

// One repetition of `t` on a cache holding t.depth positions: wall time from the first eval to
// the read-back that ends it. pp: one eval of the prompt, synced by reading its argmax; tg:
// n_gen single-token steps, each fed the argmax of the step before. The only place that times.
uint64_t time_repetition(llm::Session& s, const Test& t, std::span<const int32_t> prompt, int32_t first_token) {
  const auto t0 = Clock::now();
  if (!prompt.empty()) {
    llm::eval(s, prompt, {}, llm::Readout::Argmax);
    (void)llm::read_argmax(s);
  }
  if (t.n_gen > 0) {
    // Greedy decode as `wgrt run` does it: each step embeds the previous step's argmax on the
    // GPU and is in flight while that token is read back.
    llm::eval(s, {&first_token, 1}, {}, llm::Readout::Argmax);
    graph::Snapshot step = s.last;
    for (uint32_t i = 1; i < t.n_gen; ++i) {
      if (!llm::can_feed(s)) {
        int32_t token = llm::read_argmax(s);
        llm::eval(s, {&token, 1}, {}, llm::Readout::Argmax);
        continue;
      }
      graph::Snapshot ahead = llm::submit_fed_step(s);
      (void)llm::read_argmax(s, step);
      step = ahead;
    }
    (void)llm::read_argmax(s, s.last);
  }
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

// A batched tg repetition: t.parallel sequences, each at t.depth, decode n_gen tokens each in
// steps of one token per sequence, each fed its row's argmax of the step before, as `wgrt serve`
// steps greedy slots: the first step from the host, the others embedding the previous step's
// picks on the GPU, submitted before those picks are read (llm/batch.h submit_fed_seqs).
uint64_t time_parallel(llm::Session& s, const Test& t, std::span<const int32_t> first_tokens) {
  std::vector<llm::SeqPart> parts(t.parallel);
  std::vector<uint32_t> seqs(t.parallel);
  for (uint32_t q = 0; q < t.parallel; ++q) {
    parts[q] = {q, {&first_tokens[q], 1}, true};
    seqs[q] = q;
  }
  const auto t0 = Clock::now();
  llm::eval_seqs(s, parts, llm::Readout::Argmax);
  graph::Snapshot step = s.last;
  for (uint32_t i = 1; i < t.n_gen; ++i) {
    graph::Snapshot ahead = llm::submit_fed_seqs(s, seqs);
    for (uint32_t q = 0; q < t.parallel; ++q) (void)llm::read_argmax_row(s, step, q);
    step = ahead;
  }
  for (uint32_t q = 0; q < t.parallel; ++q) (void)llm::read_argmax_row(s, step, q);
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

// Back to `depth` cached positions. Evals at or past a position never change the cache below
// it, so each repetition finds the same depth KV without prefilling it again (llama-bench
// restores a saved state for the same purpose).
void rewind(llm::Session& s, uint32_t depth) {
  llm::reset(s);
  s.n_past = depth;
  for (uint32_t& p : s.seq_past) p = depth;
}

// Fills `depth` positions of KV cache (of every sequence of a batched graph), untimed.
void prefill_depth(llm::Session& s, std::mt19937& rng, uint32_t depth) {
  llm::reset(s);
  const auto t0 = Clock::now();
  for (uint32_t q = 0; q < llm::n_seqs(s); ++q) {
    const std::vector<int32_t> tokens = random_tokens(rng, s.mg.n_vocab, depth);
    for (uint32_t first = 0; first < depth; first += s.mg.max_batch) {
      const uint32_t n = std::min(s.mg.max_batch, depth - first);
      const llm::SeqPart part{q, {tokens.data() + first, n}, true};
      llm::eval_seqs(s, {&part, 1}, llm::Readout::Argmax);
    }
  }
  (void)llm::read_argmax_row(s, 0);
  fmt::print(stderr, "wgrt bench: depth {}: KV prefilled (untimed) in {:.2f} s\n", depth,
             std::chrono::duration<double>(Clock::now() - t0).count());
}

struct Result {
  Test test;
  std::string time;  // when the test started, UTC
  std::vector<uint64_t> samples_ns;
};

std::string utc_now() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Runs `tests` (all on the single-sequence graph, or all batched) on `s`; `done` gets each
// result as it is measured.
void run_tests(llm::Session& s, const BenchFlags& f, const std::vector<Test>& tests, size_t first_index,
               size_t n_tests, const std::function<void(const Result&)>& done) {
  std::mt19937 rng(1234);
  const uint32_t n_vocab = s.mg.n_vocab;
  uint32_t filled_depth = 0;  // the depth whose KV the cache holds
  llm::reset(s);
  for (size_t k = 0; k < tests.size(); ++k) {
    const Test& t = tests[k];
    const size_t i = first_index + k;
    const std::string name = test_name(t);
    if (t.depth != filled_depth && t.depth > 0) prefill_depth(s, rng, t.depth);
    filled_depth = t.depth;
    auto once = [&] {
      rewind(s, t.depth);
      if (t.parallel) return time_parallel(s, t, random_tokens(rng, n_vocab, t.parallel));
      std::vector<int32_t> prompt = random_tokens(rng, n_vocab, t.n_prompt);
      return time_repetition(s, t, prompt, random_tokens(rng, n_vocab, 1)[0]);
    };
    Result r{t, utc_now(), {}};
    if (!f.no_warmup) {
      uint64_t warm_ns = 0;
      int runs = 0;
      do {
        warm_ns += once();
        ++runs;
      } while (double(warm_ns) < kWarmupSeconds * 1e9);
      fmt::print(stderr, "wgrt bench: [{}/{}] {}: warm-up ({} runs, {:.2f} s)\n", i + 1, n_tests, name, runs,
                 double(warm_ns) * 1e-9);
    }
    for (uint32_t rep = 0; rep < f.reps; ++rep) {
      r.samples_ns.push_back(once());
      fmt::print(stderr, "wgrt bench: [{}/{}] {}: repetition {}/{}: {:.2f} tok/s\n", i + 1, n_tests, name,
                 rep + 1, f.reps, tokens_of(t) * 1e9 / double(r.samples_ns.back()));
    }
    done(r);
  }
}

// ---- output ----

double mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / double(v.size());
}

double sample_stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean(v);
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  return std::sqrt(ss / double(v.size() - 1));
}

// llama-bench's field names and meaning, then wgrt's own (n_ctx, model_gpu_size).
Row make_row(const ModelInfo& m, const BenchFlags& f, uint32_t n_ctx, const Result& r) {
  std::vector<double> ns, ts;
  for (uint64_t x : r.samples_ns) {
    ns.push_back(double(x));
    ts.push_back(tokens_of(r.test) * 1e9 / double(x));
  }
  const char* kv = f.kv_f32 ? "f32" : "f16";
  Row row;
  row["build_commit"] = kBuildCommit;
  row["build_number"] = kBuildNumber;
  row["cpu_info"] = m.cpu;
  row["gpu_info"] = m.adapter;
  row["backends"] = m.backend;
  row["model_filename"] = m.filename;
  row["model_type"] = m.type;
  row["model_size"] = m.size;
  row["model_n_params"] = m.n_params;
  row["n_batch"] = f.batch;
  row["n_ubatch"] = f.batch;
  row["type_k"] = f.cache_type_k.empty() ? kv : f.cache_type_k.c_str();
  row["type_v"] = f.cache_type_v.empty() ? kv : f.cache_type_v.c_str();
  row["n_prompt"] = r.test.n_prompt;
  row["n_gen"] = r.test.n_gen;
  row["n_depth"] = r.test.depth;
  row["n_parallel"] = std::max<uint32_t>(r.test.parallel, 1);  // sequences decoding together
  row["batched"] = r.test.parallel > 0;                          // on the batched graph (x1 too)
  row["test_time"] = r.time;
  row["avg_ns"] = uint64_t(std::llround(mean(ns)));
  row["stddev_ns"] = uint64_t(std::llround(sample_stddev(ns)));
  row["avg_ts"] = mean(ts);
  row["stddev_ts"] = sample_stddev(ts);
  row["samples_ns"] = r.samples_ns;
  row["samples_ts"] = ts;
  row["n_ctx"] = n_ctx;
  row["model_gpu_size"] = m.gpu_weight_bytes;
  return row;
}

std::string csv_field(const nlohmann::ordered_json& v) {
  std::string s;
  if (v.is_string()) {
    s = v.get<std::string>();
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ";" : "") + v[i].dump();
  } else {
    s = v.dump();
  }
  std::string quoted = "\"";
  for (char c : s) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

// Prints rows in the chosen format as they come, and what closes the output.
struct Printer {
  std::string format;
  size_t rows = 0;

  void row(const Row& r, const Result& res) {
    if (format == "jsonl") {
      fmt::print("{}\n", r.dump());
    } else if (format == "json") {
      std::string body = r.dump(2);
      for (size_t at = 0; (at = body.find('\n', at)) != std::string::npos; at += 3) body.replace(at, 1, "\n  ");
      fmt::print("{}  {}", rows ? ",\n" : "[\n", body);
    } else if (format == "csv") {
      std::vector<std::string> keys, values;
      for (const auto& [k, v] : r.items()) {
        keys.push_back(k);
        values.push_back(csv_field(v));
      }
      if (!rows) fmt::print("{}\n", fmt::join(keys, ","));
      fmt::print("{}\n", fmt::join(values, ","));
    } else {
      if (!rows)
        fmt::print("| model | size | params | backend | adapter | test | t/s |\n"
                   "| --- | ---: | ---: | --- | --- | ---: | ---: |\n");
      const double n = r["model_n_params"].get<double>();
      fmt::print("| {} | {:.2f} MiB | {} | {} | {} | {} | {:.2f} ± {:.2f} |\n", r["model_type"].get<std::string>(),
                 r["model_size"].get<double>() / 1048576.0,
                 n >= 1e9 ? fmt::format("{:.2f} B", n / 1e9) : fmt::format("{:.2f} M", n / 1e6),
                 r["backends"].get<std::string>(), r["gpu_info"].get<std::string>(), test_name(res.test),
                 r["avg_ts"].get<double>(), r["stddev_ts"].get<double>());
    }
    ++rows;
    std::fflush(stdout);
  }

  void finish() {
    if (format == "json") fmt::print("{}\n", rows ? "\n]" : "[]");
  }
};

int run_bench(const gpu::DeviceOptions& dev_opts, const BenchFlags& f) {
  const std::vector<Test> tests = plan_tests(f);
  uint32_t n_ctx = f.ctx;
  for (const Test& t : tests) n_ctx = std::max(n_ctx, positions(t));
  if (f.profile)
    for (uint32_t d : f.depth) n_ctx = std::max(n_ctx, d + std::max(f.n_prompt[0], kProfileSteps + 2));

  gpu::Device dev = gpu::create_device(dev_opts);
  model::BuildOptions o;
  o.n_ctx = n_ctx;
  o.max_batch = f.batch;
  o.f16_kv = !f.kv_f32;
  apply_cache_types(o, f.cache_type_k, f.cache_type_v);
  o.load.quantize = model::parse_weight_format(f.quantize);
  if (o.load.quantize == model::WeightFormat::Auto && std::filesystem::is_directory(f.model))
    o.load.quantize = model::WeightFormat::Q4gsw;
  const auto t0 = Clock::now();
  llm::Session s = llm::open_session(dev, f.model, o);
  const ModelInfo info = describe(s, dev);
  fmt::print(stderr, "wgrt bench: {} ({}, {:.2f} MiB, {:.1f} MiB of weights on the GPU) loaded in {:.2f} s on {} ({}); "
                     "context {}, batch {}, {} tests x {} repetitions{}\n",
             info.filename, info.type, info.size / 1048576.0, info.gpu_weight_bytes / 1048576.0,
             std::chrono::duration<double>(Clock::now() - t0).count(), info.adapter, info.backend, n_ctx, f.batch,
             tests.size(), f.reps, f.no_warmup ? ", no warm-up" : "");
  fmt::print(stderr, "wgrt bench: {}\n", graph::describe_memory(graph::memory_plan(*s.mg.graph)));
  if (graph::skipping_kernels(*s.mg.graph))
    fmt::print(stderr, "wgrt bench: WGRT_SKIP_NODES leaves dispatches out: timings of a partial step, results wrong "
                       "(a measuring aid)\n");

  Printer out{f.output};
  auto single_end = std::find_if(tests.begin(), tests.end(), [](const Test& t) { return t.parallel > 0; });
  const std::vector<Test> single(tests.begin(), single_end), batched(single_end, tests.end());
  run_tests(s, f, single, 0, tests.size(), [&](const Result& r) { out.row(make_row(info, f, n_ctx, r), r); });
  if (f.profile) {  // on stderr, so json output stays clean
    const std::optional<gpu::Peaks> peaks = llm::find_peaks(dev.caps, f.peaks);
    for (uint32_t d : f.depth) {
      s.n_past = d;  // the cache below holds whatever the tests left: the timing is the same
      if (f.n_prompt[0]) llm::print_profile(stderr, llm::profile_prefill(s, f.n_prompt[0], 3), peaks);
      s.n_past = d;
      llm::print_profile(stderr, llm::profile_decode(s, kProfileSteps), peaks);
    }
  }
  if (!batched.empty()) {
    // A second graph with a KV region per sequence; the first one's buffers go first.
    model::BuildOptions bo = o;
    bo.n_seqs = *std::max_element(f.parallel.begin(), f.parallel.end());
    bo.n_ctx = 1;
    for (const Test& t : batched) bo.n_ctx = std::max(bo.n_ctx, t.depth + t.n_gen);
    s = llm::Session{};
    llm::Session sb = llm::open_session(dev, f.model, bo);
    fmt::print(stderr, "wgrt bench: batched graph of {} sequences x {} positions: {}\n", bo.n_seqs, bo.n_ctx,
               graph::describe_memory(graph::memory_plan(*sb.mg.graph)));
    run_tests(sb, f, batched, single.size(), tests.size(),
              [&](const Result& r) { out.row(make_row(info, f, bo.n_ctx, r), r); });
    if (f.profile) {
      const std::optional<gpu::Peaks> peaks = llm::find_peaks(dev.caps, f.peaks);
      // Every count --parallel names, 1 too where the graph holds more: one sequence through the
      // batched graph is what one client of `wgrt serve` gets.
      for (uint32_t n : f.parallel)
        for (uint32_t d : f.depth)
          if (bo.n_seqs > 1 && d + kProfileSteps + 1 <= bo.n_ctx)
            llm::print_profile(stderr, llm::profile_batched(sb, n, d, kProfileSteps), peaks);
    }
  }
  out.finish();
  return 0;
}

}  // namespace

Run add_bench(CLI::App& app, gpu::DeviceOptions& dev_opts) {
  auto* cmd = app.add_subcommand("bench", "measure prompt and generation speed (llama-bench's tests and fields)");
  auto f = std::make_shared<BenchFlags>();
  const auto count = integer_in(0, 1 << 20);
  cmd->add_option("-m,--model", f->model, "a .gguf file or a Hugging Face model directory")->required();
  cmd->add_option("-p,--n-prompt", f->n_prompt, "prompt tokens of each pp test (comma list; 0: none; default 512)")
      ->delimiter(',')->check(count);
  cmd->add_option("-n,--n-gen", f->n_gen, "generated tokens of each tg test (comma list; 0: none; default 128)")
      ->delimiter(',')->check(count);
  cmd->add_option("-d,--n-depth", f->depth, "positions of KV cache filled before each test (comma list; default 0,4096)")
      ->delimiter(',')->check(count);
  cmd->add_option("-r,--repetitions", f->reps, "timed repetitions of each test")->check(integer_in(1, 1000))->capture_default_str();
  cmd->add_option("-b,--batch-size", f->batch, "prompt tokens per step")->check(integer_in(1, 8192))->capture_default_str();
  cmd->add_option("-c,--ctx-size", f->ctx, "context size (default: what the largest test needs)")
      ->check(integer_in(1, 1 << 21));
  cmd->add_option("-o,--output", f->output, "rows as md, json, jsonl or csv")
      ->check(CLI::IsMember({"md", "json", "jsonl", "csv"}))->capture_default_str();
  cmd->add_flag("--no-warmup", f->no_warmup, "skip the untimed runs of each test before its repetitions (at least one, for 1 s)");
  cmd->add_option("--quantize", f->quantize, "weights on the GPU: q4gsw, q8, none, or auto (GGUF: as stored; "
                                             "Hugging Face: q4gsw)")
      ->check(CLI::IsMember({"auto", "q4gsw", "q8", "none"}));
  cmd->add_flag("--kv-f32", f->kv_f32, "keep the KV cache in f32 (default f16)");
  add_cache_type_flags(*cmd, f->cache_type_k, f->cache_type_v);
  cmd->add_flag("--profile", f->profile, "after the tests, per-kernel GPU time, bytes and FLOPs against the device "
                                         "peaks, and the CPU time per step, at each depth (on stderr)");
  cmd->add_option("--peaks", f->peaks, "device peaks JSON (default: bench/peaks-*.json for this adapter)");
  cmd->add_option("--parallel", f->parallel, "also tg rows of this many sequences decoding together on one graph, "
                                             "aggregate tok/s (comma list, e.g. 1,8; as `wgrt serve` steps its slots)")
      ->delimiter(',')->check(integer_in(1, 256));
  add_device_flags(*cmd, dev_opts);
  cmd->callback([f] { validate(*f); });
  return [&dev_opts, f] { return run_bench(dev_opts, *f); };
}

}  // namespace wgrt::cli
