#include "cli/flags.h"

#include <fmt/format.h>

#include <filesystem>
#include <random>

namespace wgrt::cli {

void add_model_flags(CLI::App& cmd, ModelFlags& f) {
  cmd.add_option("-m,--model", f.model, "a .gguf file or a Hugging Face model directory (default: wgrt's demo "
                                        "model, models/wgrt-demo-q8_0.gguf; builtin:random: random weights)");
  cmd.add_option("-c,--ctx-size", f.ctx_size,
                 fmt::format("context size in tokens (default: the model's trained context, at most {})",
                             model::kDefaultMaxCtx))
      ->check(CLI::Range(1u, 1u << 20));
  cmd.add_option("-b,--batch-size", f.batch_size, "prompt tokens per step")
      ->check(CLI::Range(1u, 8192u))
      ->each([&f](const std::string&) { f.batch_size_set = true; });
  cmd.add_option("--quantize", f.quantize, "weights on the GPU: q4gsw, q8, none, or auto (GGUF: as stored; "
                                           "Hugging Face: q4gsw)")
      ->check(CLI::IsMember({"auto", "q4gsw", "q8", "none"}));
  cmd.add_option("--group-size", f.group_size, "quantization group size")->check(CLI::IsMember({32u, 64u, 128u}));
  cmd.add_flag("--kv-f32", f.kv_f32, "keep the KV cache in f32 (default f16)");
  cmd.add_flag("--allow-unused-tensors", f.allow_unused,
               "run a file with tensors the architecture does not read (a warning instead of an error)");
}

model::BuildOptions build_options(const ModelFlags& f, bool all_logits) {
  model::BuildOptions o;
  o.n_ctx = f.ctx_size;
  o.max_batch = f.batch_size;
  o.f16_kv = !f.kv_f32;
  o.all_logits = all_logits;
  o.load.group_size = f.group_size;
  o.load.allow_unused = f.allow_unused;
  o.load.quantize = model::parse_weight_format(f.quantize);
  if (o.load.quantize == model::WeightFormat::Auto && std::filesystem::is_directory(f.model))
    o.load.quantize = model::WeightFormat::Q4gsw;
  return o;
}

void add_sampling_flags(CLI::App& cmd, SamplingFlags& f) {
  cmd.add_option("--temp", f.temp, "temperature (0: greedy)")->check(CLI::Range(0.0f, 100.0f));
  cmd.add_option("--top-k", f.top_k, "top-k candidates (0: all)")->check(CLI::Range(0u, 1u << 20));
  cmd.add_option("--top-p", f.top_p, "nucleus sampling mass")->check(CLI::Range(0.0001f, 1.0f));
  cmd.add_option("--min-p", f.min_p, "drop tokens below this share of the best")->check(CLI::Range(0.0f, 1.0f));
  cmd.add_option("--repeat-penalty", f.repeat_penalty, "penalty for recent tokens (1: off)")
      ->check(CLI::Range(0.01f, 100.0f));
  cmd.add_option("--seed", f.seed, "sampling seed (default: random)")->check(CLI::NonNegativeNumber);
}

llm::SamplerParams sampler_params(const SamplingFlags& f) {
  uint64_t seed = f.seed >= 0 ? uint64_t(f.seed) : std::random_device{}();
  return {.temperature = f.temp, .top_k = f.top_k, .top_p = f.top_p, .min_p = f.min_p,
          .repeat_penalty = f.repeat_penalty, .seed = seed};
}

}  // namespace wgrt::cli
