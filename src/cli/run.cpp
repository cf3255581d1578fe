// `wgrt run`: generate text; `wgrt perplexity`: score a text file.
#include <fmt/format.h>

#include <time.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "cli/flags.h"
#include "llm/generate.h"
#include "llm/profile.h"

namespace wgrt::cli {
namespace {

constexpr size_t kCpuTokenwisePrompt = 32;  // docs/perf/demo-model.md, "First run on lavapipe"

struct RunFlags {
  ModelFlags model;
  SamplingFlags sampling;
  std::string prompt = "Once upon a time";
  std::string prompt_file;  // -f: the prompt from FILE, "-" for stdin
  bool display_prompt = true;
  int32_t n_predict = 128;
  std::vector<std::string> stop;
  std::string dump_logits;
  std::string grammar, grammar_file, json_schema;  // constrained output: at most one
  bool warmup = false;
  bool profile = false;
  std::string peaks;
};

// --warmup: the timed generation's own path run untimed first (the prompt's prefill routes,
// the decode step with its sampler and its pipelined read-back), a few decode steps at a
// time until the GPU has run for kWarmupSeconds: a GPU at its idle clocks, or a kernel's
// first use, would otherwise be timed in the first tokens.
constexpr double kWarmupSeconds = 0.5;
constexpr int32_t kWarmupTokens = 32;
constexpr int kWarmupRounds = 8;

void warm_up(llm::Session& s, const llm::GenerateOptions& timed) {
  llm::GenerateOptions o = timed;
  o.n_predict = timed.n_predict < 0 ? kWarmupTokens : std::min(timed.n_predict, kWarmupTokens);
  o.dump_logits.clear();
  double seconds = 0;
  for (int round = 0; round < kWarmupRounds && seconds < kWarmupSeconds; ++round) {
    llm::GenerateStats st = llm::generate(s, o, [](std::string_view) {});
    seconds += st.prompt_seconds + st.generate_seconds;
    llm::reset(s);
  }
}

// Seconds since this process started (the kernel's start time in /proc/self/stat, clock ticks
// of 10 ms, against CLOCK_BOOTTIME): the exec and the library loading count too. NAN where
// /proc cannot tell.
double seconds_since_process_start() {
  std::ifstream in("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t comm_end = stat.rfind(')');  // the command name may hold spaces
  if (comm_end == std::string::npos) return NAN;
  std::istringstream fields(stat.substr(comm_end + 2));
  std::string field;
  for (int i = 3; i < 22 && fields >> field; ++i) {}  // fields 3..21; 22 is the start time
  unsigned long long start_ticks = 0;
  timespec now{};
  if (!(fields >> start_ticks) || clock_gettime(CLOCK_BOOTTIME, &now) != 0) return NAN;
  return double(now.tv_sec) + double(now.tv_nsec) * 1e-9 - double(start_ticks) / double(sysconf(_SC_CLK_TCK));
}

// The whole of `path` ("-": stdin), with a bound so a wrong path (a device, a huge log) fails clearly.
constexpr size_t kMaxPromptFileBytes = size_t(64) << 20;
std::string read_prompt_file(const std::string& path) {
  std::ifstream file;
  std::istream* in = &std::cin;
  if (path != "-") {
    if (std::filesystem::is_directory(path))
      throw std::invalid_argument(fmt::format("-f {}: is a directory (hint: -f names a text file; -f - reads stdin)", path));
    file.open(path, std::ios::binary);
    if (!file)
      throw std::invalid_argument(fmt::format("-f {}: cannot open (hint: check the path; -f - reads stdin)", path));
    in = &file;
  }
  std::string text;
  char buf[65536];
  while (in->read(buf, sizeof buf) || in->gcount() > 0) {
    text.append(buf, size_t(in->gcount()));
    if (text.size() > kMaxPromptFileBytes)
      throw std::invalid_argument(fmt::format("-f {}: more than {} MiB of prompt (hint: is it the right file?)",
                                              path == "-" ? "- (stdin)" : path, kMaxPromptFileBytes >> 20));
  }
  if (in->bad()) throw std::runtime_error(fmt::format("-f {}: read error", path));
  return text;
}

// On the library's internals, not the C API (include/wgrt/wgrt.h): run needs what the C API does
// not offer (the device and memory lines, load progress, stop strings, grammars, the stats line,
// --dump-logits, --warmup, --profile); its generation is the same llm::generate the C API runs.
int run_generate(const gpu::DeviceOptions& dev_opts, RunFlags f) {
  if (!f.prompt_file.empty()) f.prompt = read_prompt_file(f.prompt_file);
  const double t_start = seconds_since_process_start();
  gpu::Device dev = gpu::create_device(dev_opts);
  const double t_device = seconds_since_process_start();
  Progress progress;
  start_progress(progress, dev, f.model.model.empty() ? "the model" : f.model.model);
  llm::Session s = llm::open_session(dev, f.model.model, build_options(f.model, !f.dump_logits.empty()));
  end_progress(progress);
  const double t_model = seconds_since_process_start();
  if (llm::is_default_model(s))
    fmt::print(stderr, "wgrt: running the built-in default model. It has RANDOM WEIGHTS: its text is noise, not "
                       "language.\n");
  else if (f.model.model.empty())
    fmt::print(stderr, "wgrt: no -m given: running wgrt's demo model, a 12.9 M-parameter llama trained on "
                       "public-domain English (models/README.md)\n");
  // A CPU driver (lavapipe) compiles each kernel at its first dispatch, about half a second
  // each on one thread: the prefill routes of a short prompt would cost far more compiling
  // than they save, so the prompt runs on the decode route, one token per step.
  if (dev.caps.adapter.type == WGPUAdapterType_CPU && !f.model.batch_size_set &&
      tokenizer::tokenize(s.tok, f.prompt, true, true).size() <= kCpuTokenwisePrompt)
    s.prompt_step = 1;
  llm::GenerateOptions o;
  o.prompt = f.prompt;
  o.n_predict = f.n_predict;
  o.stop = f.stop;
  o.dump_logits = f.dump_logits;
  o.sampling = sampler_params(f.sampling);
  o.sampling.grammar = grammar_from_flags(f.grammar, f.grammar_file, f.json_schema);
  const uint64_t seed = o.sampling.seed;
  fmt::print(stderr, "wgrt: {} on {} ({}), {:.1f} MiB of weights, context {}, seed {}\n", s.model.path,
             dev.caps.adapter.name, gpu::backend_name(dev.caps.adapter.backend), s.mg.weight_bytes / 1048576.0,
             s.mg.n_ctx, seed);
  fmt::print(stderr, "wgrt: {}\n", graph::describe_memory(graph::memory_plan(*s.mg.graph)));
  if (graph::skipping_kernels(*s.mg.graph))
    fmt::print(stderr, "wgrt: WGRT_SKIP_NODES leaves dispatches out: the text is wrong (a measuring aid)\n");
  if (f.warmup) warm_up(s, o);
  if (f.display_prompt) {
    std::fwrite(f.prompt.data(), 1, f.prompt.size(), stdout);
    std::fflush(stdout);
  }
  double t_first = NAN;  // the first generated text on stdout
  llm::GenerateStats st = llm::generate(s, o, [&](std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    if (std::isnan(t_first)) t_first = seconds_since_process_start();
  });
  std::fputs("\n", stdout);
  fmt::print(stderr, "\nwgrt: prompt {} tokens in {:.3f} s ({:.1f} tok/s); generated {} tokens in {:.3f} s ({:.1f} "
                     "tok/s); stopped by {}\n",
             st.n_prompt, st.prompt_seconds, st.n_prompt / std::max(st.prompt_seconds, 1e-9), st.n_generated,
             st.generate_seconds, st.n_generated / std::max(st.generate_seconds, 1e-9), st.stop_reason);
  if (!std::isnan(t_first))  // docs/perf/demo-model.md, "Second cold run"
    fmt::print(stderr, "wgrt: first token {:.3f} s after the process started (flags and prompt {:.3f} s, device "
                       "{:.3f} s, model and kernels {:.3f} s, to the first token {:.3f} s)\n",
               t_first, t_start, t_device - t_start, t_model - t_device, t_first - t_model);
  if (f.profile) {  // the prompt's prefill (one chunk) and decode steps after it, per kernel
    const std::optional<gpu::Peaks> peaks = llm::find_peaks(dev.caps, f.peaks);
    const uint32_t n = uint32_t(std::min<size_t>(st.n_prompt, s.mg.max_batch));
    llm::reset(s);
    llm::print_profile(stderr, llm::profile_prefill(s, n, 3), peaks);
    s.n_past = n;
    llm::print_profile(stderr, llm::profile_decode(s, 32), peaks);
  }
  return 0;
}

struct PerplexityFlags {
  ModelFlags model;
  std::string file;
};

int run_perplexity(const gpu::DeviceOptions& dev_opts, const PerplexityFlags& f) {
  const std::string text = read_prompt_file(f.file);
  gpu::Device dev = gpu::create_device(dev_opts);
  Progress progress;
  start_progress(progress, dev, f.model.model.empty() ? "the model" : f.model.model);
  llm::Session s = llm::open_session(dev, f.model.model, build_options(f.model, /*all_logits=*/true));
  end_progress(progress);
  std::vector<int32_t> tokens = tokenizer::tokenize(s.tok, text, /*add_special=*/true, /*parse_special=*/false);
  const size_t n_chunks = llm::perplexity_chunks(tokens.size(), s.mg.n_ctx);
  fmt::print(stderr, "wgrt: {} tokens, {} chunks of {}, each scored on its second half ({} tokens)\n", tokens.size(),
             n_chunks, s.mg.n_ctx, s.mg.n_ctx - s.mg.n_ctx / 2 - 1);
  // The running estimate after each chunk, as [chunk]PPL,
  llm::PerplexityResult r = llm::perplexity(s, tokens, [](const llm::PerplexityResult& run) {
    fmt::print("[{}]{:.4f},", run.n_chunks, run.perplexity());
    std::fflush(stdout);
  });
  fmt::print("\n");
  if (std::isnan(r.error()))
    fmt::print("Final estimate: PPL = {:.4f} (no +/-: the scored tokens do not spread)\n", r.perplexity());
  else
    fmt::print("Final estimate: PPL = {:.4f} +/- {:.5f}\n", r.perplexity(), r.error());
  fmt::print(stderr, "wgrt: {} tokens scored in {} chunks, mean NLL {:.4f}, context {}\n", r.n_scored, r.n_chunks,
             r.nll / double(r.n_scored), s.mg.n_ctx);
  return 0;
}

}  // namespace

Run add_run(CLI::App& app, gpu::DeviceOptions& dev_opts) {
  auto* cmd = app.add_subcommand("run", "generate text from a prompt");
  auto f = std::make_shared<RunFlags>();
  add_model_flags(*cmd, f->model);
  auto* prompt = cmd->add_option("-p,--prompt", f->prompt, "the prompt");
  cmd->add_option("-f,--file", f->prompt_file, "read the prompt from FILE (-: from stdin)")->excludes(prompt);
  cmd->add_flag("!--no-display-prompt", f->display_prompt, "do not echo the prompt before the generated text");
  cmd->add_option("-n,--n-predict", f->n_predict, "tokens to generate (0: prompt only, -1: until EOS)")
      ->check(integer_in(-1, 1 << 20));
  add_sampling_flags(*cmd, f->sampling);
  auto* g = cmd->add_option("--grammar", f->grammar, "hold the output to this GBNF grammar (start rule root)");
  auto* gf = cmd->add_option("--grammar-file", f->grammar_file, "hold the output to the GBNF grammar in FILE")
                 ->excludes(g);
  cmd->add_option("-j,--json-schema", f->json_schema, "hold the output to this JSON schema (JSON text)")
      ->excludes(g)->excludes(gf);
  cmd->add_option("--stop", f->stop, "stop before this text (repeatable)")->default_str("");
  cmd->add_option("--dump-logits", f->dump_logits, "write the prompt's logits, f32 [n_prompt, n_vocab], to FILE");
  cmd->add_flag("--warmup", f->warmup, "run the prompt once untimed first, so shader compilation is not timed");
  cmd->add_flag("--profile", f->profile, "afterwards, per-kernel GPU time, bytes and FLOPs against the device peaks "
                                         "and CPU time per step, for the prompt's prefill and for decode (stderr)");
  cmd->add_option("--peaks", f->peaks, "device peaks JSON (default: bench/peaks-*.json for this adapter)");
  add_device_flags(*cmd, dev_opts);
  return [&dev_opts, f] { return run_generate(dev_opts, *f); };
}

Run add_perplexity(CLI::App& app, gpu::DeviceOptions& dev_opts) {
  auto* cmd = app.add_subcommand("perplexity", "perplexity of a model over a text file");
  auto f = std::make_shared<PerplexityFlags>();
  add_model_flags(*cmd, f->model);
  cmd->add_option("-f,--file", f->file, "the text file (-: stdin)")->required();
  add_device_flags(*cmd, dev_opts);
  return [&dev_opts, f] { return run_perplexity(dev_opts, *f); };
}

}  // namespace wgrt::cli
