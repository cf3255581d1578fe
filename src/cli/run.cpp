// `wgrt run`: generate text; `wgrt perplexity`: score a text file.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>

#include "cli/commands.h"
#include "llm/generate.h"

namespace wgrt::cli {
namespace {

struct ModelFlags {
  std::string model;
  uint32_t ctx_size = 2048;
  uint32_t batch_size = 64;
  std::string quantize = "auto";
  uint32_t group_size = 32;
  bool kv_f32 = false;
};

void add_model_flags(CLI::App& cmd, ModelFlags& f) {
  cmd.add_option("-m,--model", f.model, "a .gguf file or a Hugging Face model directory (default: the built-in "
                                        "random-weight model)");
  cmd.add_option("-c,--ctx-size", f.ctx_size, "context size in tokens")->check(CLI::Range(1u, 1u << 20));
  cmd.add_option("-b,--batch-size", f.batch_size, "prompt tokens per step")->check(CLI::Range(1u, 8192u));
  cmd.add_option("--quantize", f.quantize, "weights on the GPU: q4gsw, q8, none, or auto (GGUF: as stored; "
                                           "Hugging Face: q4gsw)")
      ->check(CLI::IsMember({"auto", "q4gsw", "q8", "none"}));
  cmd.add_option("--group-size", f.group_size, "quantization group size")->check(CLI::IsMember({32u, 64u, 128u}));
  cmd.add_flag("--kv-f32", f.kv_f32, "keep the KV cache in f32 (default f16)");
}

model::BuildOptions build_options(const ModelFlags& f, bool all_logits) {
  model::BuildOptions o;
  o.n_ctx = f.ctx_size;
  o.max_batch = f.batch_size;
  o.f16_kv = !f.kv_f32;
  o.all_logits = all_logits;
  o.load.group_size = f.group_size;
  o.load.quantize = model::parse_weight_format(f.quantize);
  if (o.load.quantize == model::WeightFormat::Auto && std::filesystem::is_directory(f.model))
    o.load.quantize = model::WeightFormat::Q4gsw;
  return o;
}

struct RunFlags {
  ModelFlags model;
  std::string prompt = "Once upon a time";
  int32_t n_predict = 128;
  float temp = 0.8f;
  uint32_t top_k = 40;
  float top_p = 0.95f, min_p = 0.05f, repeat_penalty = 1.0f;
  int64_t seed = -1;
  std::vector<std::string> stop;
  std::string dump_logits;
  bool warmup = false;
};

int run_generate(const gpu::DeviceOptions& dev_opts, const RunFlags& f) {
  gpu::Device dev = gpu::create_device(dev_opts);
  llm::Session s = llm::open_session(dev, f.model.model, build_options(f.model, !f.dump_logits.empty()));
  if (llm::is_default_model(s))
    fmt::print(stderr, "wgrt: no -m given: running the built-in default model. It has RANDOM WEIGHTS: its text "
                       "is noise, not language.\n");
  llm::GenerateOptions o;
  o.prompt = f.prompt;
  o.n_predict = f.n_predict;
  o.stop = f.stop;
  o.dump_logits = f.dump_logits;
  uint64_t seed = f.seed >= 0 ? uint64_t(f.seed) : std::random_device{}();
  o.sampling = {.temperature = f.temp, .top_k = f.top_k, .top_p = f.top_p, .min_p = f.min_p,
                .repeat_penalty = f.repeat_penalty, .seed = seed};
  fmt::print(stderr, "wgrt: {} on {} ({}), {:.1f} MiB of weights, context {}, seed {}\n", s.model.path,
             dev.caps.adapter.name, gpu::backend_name(dev.caps.adapter.backend), s.mg.weight_bytes / 1048576.0,
             s.mg.n_ctx, seed);
  if (f.warmup) {  // compile every pipeline the timed run uses (prefill and decode routes)
    std::vector<int32_t> ids = tokenizer::tokenize(s.tok, f.prompt, true, true);
    llm::eval(s, ids);
    llm::eval(s, std::span<const int32_t>(ids.data(), 1));
    (void)llm::read_top_k(s);
    llm::reset(s);
  }
  std::fputs(f.prompt.c_str(), stdout);
  std::fflush(stdout);
  llm::GenerateStats st = llm::generate(s, o, [](std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  });
  std::fputs("\n", stdout);
  fmt::print(stderr, "\nwgrt: prompt {} tokens in {:.3f} s ({:.1f} tok/s); generated {} tokens in {:.3f} s ({:.1f} "
                     "tok/s); stopped by {}\n",
             st.n_prompt, st.prompt_seconds, st.n_prompt / std::max(st.prompt_seconds, 1e-9), st.n_generated,
             st.generate_seconds, st.n_generated / std::max(st.generate_seconds, 1e-9), st.stop_reason);
  return 0;
}

struct PerplexityFlags {
  ModelFlags model;
  std::string file;
};

int run_perplexity(const gpu::DeviceOptions& dev_opts, const PerplexityFlags& f) {
  std::ifstream in(f.file, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open (hint: check the path given to -f)", f.file));
  std::stringstream text;
  text << in.rdbuf();
  gpu::Device dev = gpu::create_device(dev_opts);
  llm::Session s = llm::open_session(dev, f.model.model, build_options(f.model, /*all_logits=*/true));
  std::vector<int32_t> tokens = tokenizer::tokenize(s.tok, text.str(), /*add_special=*/true, /*parse_special=*/false);
  if (tokens.size() < 2) throw std::invalid_argument(fmt::format("{}: fewer than 2 tokens to score", f.file));
  llm::PerplexityResult r = llm::perplexity(s, tokens, [](size_t done, size_t total) {
    fmt::print(stderr, "\rwgrt: {}/{} tokens", done, total);
  });
  fmt::print(stderr, "\n");
  fmt::print("perplexity {:.4f} over {} scored tokens (mean NLL {:.4f}), context {}\n", r.perplexity(), r.n_scored,
             r.nll / double(r.n_scored), s.mg.n_ctx);
  return 0;
}

}  // namespace

Run add_run(CLI::App& app, gpu::DeviceOptions& dev_opts) {
  auto* cmd = app.add_subcommand("run", "generate text from a prompt");
  auto f = std::make_shared<RunFlags>();
  add_model_flags(*cmd, f->model);
  cmd->add_option("-p,--prompt", f->prompt, "the prompt");
  cmd->add_option("-n,--n-predict", f->n_predict, "tokens to generate (0: prompt only, -1: until EOS)")
      ->check(CLI::Range(-1, 1 << 20));
  cmd->add_option("--temp", f->temp, "temperature (0: greedy)")->check(CLI::Range(0.0f, 100.0f));
  cmd->add_option("--top-k", f->top_k, "top-k candidates (0: all)")->check(CLI::Range(0u, 1u << 20));
  cmd->add_option("--top-p", f->top_p, "nucleus sampling mass")->check(CLI::Range(0.0001f, 1.0f));
  cmd->add_option("--min-p", f->min_p, "drop tokens below this share of the best")->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--repeat-penalty", f->repeat_penalty, "penalty for recent tokens (1: off)")
      ->check(CLI::Range(0.01f, 100.0f));
  cmd->add_option("--seed", f->seed, "sampling seed (default: random)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--stop", f->stop, "stop before this text (repeatable)");
  cmd->add_option("--dump-logits", f->dump_logits, "write the prompt's logits, f32 [n_prompt, n_vocab], to FILE");
  cmd->add_flag("--warmup", f->warmup, "run the prompt once untimed first, so shader compilation is not timed");
  add_device_flags(*cmd, dev_opts);
  return [&dev_opts, f] { return run_generate(dev_opts, *f); };
}

Run add_perplexity(CLI::App& app, gpu::DeviceOptions& dev_opts) {
  auto* cmd = app.add_subcommand("perplexity", "perplexity of a model over a text file");
  auto f = std::make_shared<PerplexityFlags>();
  add_model_flags(*cmd, f->model);
  cmd->add_option("-f,--file", f->file, "the text file")->required();
  add_device_flags(*cmd, dev_opts);
  return [&dev_opts, f] { return run_perplexity(dev_opts, *f); };
}

}  // namespace wgrt::cli
