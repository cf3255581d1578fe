// Flags that several commands share: the model and its graph (-m, --ctx-size, ...) and
// sampling (--temp, --top-k, ...).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "llm/sampler.h"
#include "model/transformer.h"

namespace wgrt::cli {

struct ModelFlags {
  std::string model;
  uint32_t ctx_size = 0;  // 0: model::default_ctx
  uint32_t batch_size = 64;
  bool batch_size_set = false;  // -b given
  std::string quantize = "auto";
  uint32_t group_size = 32;
  bool kv_f32 = false;
  bool allow_unused = false;
};

void add_model_flags(CLI::App& cmd, ModelFlags& f);
model::BuildOptions build_options(const ModelFlags& f, bool all_logits);

struct SamplingFlags {
  float temp = 0.8f;
  uint32_t top_k = 40;
  float top_p = 0.95f, min_p = 0.05f, repeat_penalty = 1.0f;
  int64_t seed = -1;  // < 0: random
};

void add_sampling_flags(CLI::App& cmd, SamplingFlags& f);
// The sampler's parameters; a random seed is drawn here when none was given.
llm::SamplerParams sampler_params(const SamplingFlags& f);

}  // namespace wgrt::cli
