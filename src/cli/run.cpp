// `wgrt run`: generate text; `wgrt perplexity`: score a text file.
#include <algorithm>
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

#include "api/handle.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "llm/generate.h"
#include "llm/profile.h"
#include "wgrt/wgrt.h"

namespace wgrt::cli {
namespace {

constexpr size_t kCpuTokenwisePrompt = 32;  // docs/perf/demo-model.md, "First run on lavapipe"

struct RunFlags {
  ModelFlags model;
  SamplingFlags sampling;
  std::string prompt = "Once upon a time";
  std::string prompt_file;  // -f: the prompt from FILE, "-" for stdin
  bool display_prompt = true;
  bool ignore_eos = false;
  int32_t n_predict = 128;
  std::vector<std::string> stop;
  std::string dump_logits;
  std::string grammar, grammar_file, json_schema;  // constrained output: at most one
  bool warmup = false;
  bool profile = false;
  std::string peaks;
};

// --warmup: the timed generation's own call run untimed first (the prompt's prefill routes,
// the decode step with its sampler and its pipelined read-back), a few decode steps at a
// time until the GPU has run for kWarmupSeconds: a GPU at its idle clocks, or a kernel's
// first use, would otherwise be timed in the first tokens.
constexpr double kWarmupSeconds = 0.5;
constexpr int32_t kWarmupTokens = 32;
constexpr int kWarmupRounds = 8;

void check(wgrt_status st) {
  if (st < 0) throw std::runtime_error(wgrt_last_error());
}

wgrt_generate_stats last_stats(wgrt_model* m) {
  wgrt_generate_stats st{.struct_size = sizeof(wgrt_generate_stats)};
  check(wgrt_last_generate_stats(m, &st));
  return st;
}

void warm_up(wgrt_model* m, const std::string& prompt, wgrt_sampling_params sp) {
  sp.max_tokens = sp.max_tokens < 0 ? kWarmupTokens : std::min(sp.max_tokens, kWarmupTokens);
  const wgrt_token_callback ignore = [](const char*, size_t, int32_t, void*) { return 0; };
  double seconds = 0;
  for (int round = 0; round < kWarmupRounds && seconds < kWarmupSeconds; ++round) {
    check(wgrt_generate(m, prompt.c_str(), &sp, ignore, nullptr));
    const wgrt_generate_stats st = last_stats(m);
    seconds += st.prompt_seconds + st.generate_seconds;
  }
}

const char* stop_reason_name(wgrt_stop_reason r) {
  switch (r) {
    case WGRT_STOP_EOS: return "eos";
    case WGRT_STOP_LENGTH: return "length";
    case WGRT_STOP_STRING: return "stop string";
    case WGRT_STOP_CONTEXT: return "context";
    case WGRT_STOP_CALLBACK: return "callback";
    case WGRT_STOP_CANCELLED: return "interrupted";
    case WGRT_STOP_NONE: break;
  }
  return "nothing";
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

// The generation runs through the C API (include/wgrt/wgrt.h), as a program linking libwgrt
// would, on a handle over the session built here: run's graph, device and quantization flags
// are more than wgrt_model_params carries. What it prints around the generation (the device and
// memory lines, load progress) and its lab options (--dump-logits, --profile) use the library.
int run_generate(const gpu::DeviceOptions& dev_opts, RunFlags f) {
  if (!f.prompt_file.empty()) f.prompt = read_prompt_file(f.prompt_file);
  const GrammarText grammar = grammar_from_flags(f.grammar, f.grammar_file, f.json_schema);
  const double t_start = seconds_since_process_start();
  auto dev = std::make_unique<gpu::Device>(gpu::create_device(dev_opts));
  const double t_device = seconds_since_process_start();
  Progress progress;
  start_progress(progress, *dev, f.model.model.empty() ? "the model" : f.model.model);
  llm::Session session = llm::open_session(*dev, f.model.model, build_options(f.model, !f.dump_logits.empty()));
  end_progress(progress);
  const gpu::Device& d = *dev;
  std::unique_ptr<wgrt_model, void (*)(wgrt_model*)> model(api::adopt(std::move(dev), std::move(session),
                                                                      f.model.model),
                                                           wgrt_model_free);
  llm::Session& s = api::session_of(model.get());
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
  const std::vector<int32_t> prompt_ids = tokenizer::tokenize(s.tok, f.prompt, true, true);
  const int32_t n_vocab = int32_t(std::min<size_t>(s.tok.vocab.n_vocab(), s.mg.n_vocab));
  llm::SamplerParams p = sampler_params(f.sampling, n_vocab);
  if (f.ignore_eos) {  // every end token (end of text, of a turn) kept out, whatever -l gave it
    std::erase_if(p.logit_bias, [&](const auto& b) { return llm::is_end_token(s, b.first); });
    for (int32_t id = 0; id < n_vocab; ++id)
      if (llm::is_end_token(s, id)) p.logit_bias.emplace_back(id, kBanBias);
  }
  std::vector<wgrt_logit_bias> bias;
  for (const auto& [token, value] : p.logit_bias) bias.push_back({token, value});
  if (d.caps.adapter.type == WGPUAdapterType_CPU && !f.model.batch_size_set && prompt_ids.size() <= kCpuTokenwisePrompt)
    s.prompt_step = 1;
  std::vector<const char*> stops;
  for (const std::string& t : f.stop) stops.push_back(t.c_str());
  wgrt_sampling_params sp = wgrt_sampling_default_params();
  sp.temperature = p.temperature;
  sp.top_k = p.top_k;
  sp.top_p = p.top_p;
  sp.min_p = p.min_p;
  sp.repeat_penalty = p.repeat_penalty;
  sp.presence_penalty = p.presence_penalty;
  sp.frequency_penalty = p.frequency_penalty;
  sp.repeat_last_n = p.repeat_last_n;
  sp.seed = p.seed;
  sp.max_tokens = f.n_predict;
  sp.logit_bias = bias.data();
  sp.n_logit_bias = bias.size();
  sp.stop = stops.data();
  sp.n_stop = stops.size();
  sp.grammar = grammar.gbnf.empty() ? nullptr : grammar.gbnf.c_str();
  sp.json_schema = grammar.json_schema.empty() ? nullptr : grammar.json_schema.c_str();
  fmt::print(stderr, "wgrt: {} on {} ({}), {:.1f} MiB of weights, context {}, seed {}\n", s.model.path,
             d.caps.adapter.name, gpu::backend_name(d.caps.adapter.backend), s.mg.weight_bytes / 1048576.0,
             s.mg.n_ctx, p.seed);
  fmt::print(stderr, "wgrt: {}\n", graph::describe_memory(graph::memory_plan(*s.mg.graph)));
  if (graph::skipping_kernels(*s.mg.graph))
    fmt::print(stderr, "wgrt: WGRT_SKIP_NODES leaves dispatches out: the text is wrong (a measuring aid)\n");
  if (!f.dump_logits.empty()) {  // the prompt's rows, from a pass of its own
    llm::dump_prompt_logits(s, prompt_ids, f.dump_logits);
    llm::reset(s);
  }
  if (f.warmup) warm_up(model.get(), f.prompt, sp);
  if (f.display_prompt) {
    std::fwrite(f.prompt.data(), 1, f.prompt.size(), stdout);
    std::fflush(stdout);
  }
  double t_first = NAN;  // the first generated text on stdout
  const wgrt_token_callback print = [](const char* text, size_t len, int32_t, void* user) {
    if (len == 0) return 0;
    std::fwrite(text, 1, len, stdout);
    std::fflush(stdout);
    if (double& t = *static_cast<double*>(user); std::isnan(t)) t = seconds_since_process_start();
    return 0;
  };
  check(wgrt_generate(model.get(), f.prompt.c_str(), &sp, print, &t_first));
  const wgrt_generate_stats st = last_stats(model.get());
  std::fputs("\n", stdout);
  fmt::print(stderr, "\nwgrt: prompt {} tokens in {:.3f} s ({:.1f} tok/s); generated {} tokens in {:.3f} s ({:.1f} "
                     "tok/s); stopped by {}\n",
             st.n_prompt, st.prompt_seconds, st.n_prompt / std::max(st.prompt_seconds, 1e-9), st.n_generated,
             st.generate_seconds, st.n_generated / std::max(st.generate_seconds, 1e-9),
             stop_reason_name(st.stop_reason));
  if (!std::isnan(t_first))  // docs/perf/demo-model.md, "Second cold run"
    fmt::print(stderr, "wgrt: first token {:.3f} s after the process started (flags and prompt {:.3f} s, device "
                       "{:.3f} s, model and kernels {:.3f} s, to the first token {:.3f} s)\n",
               t_first, t_start, t_device - t_start, t_model - t_device, t_first - t_model);
  if (f.profile) {  // the prompt's prefill (one chunk) and decode steps after it, per kernel
    const std::optional<gpu::Peaks> peaks = llm::find_peaks(d.caps, f.peaks);
    const uint32_t n = uint32_t(std::min<size_t>(size_t(st.n_prompt), s.mg.max_batch));
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
  cmd->add_flag("--ignore-eos", f->ignore_eos, "never stop at an end token: keep generating to -n (as --logit-bias "
                                               "EOS-inf for every end token)");
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
