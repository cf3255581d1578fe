// Flags that several commands share: the model and its graph (-m, --ctx-size, ...) and
// sampling (--temp, --top-k, ...).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>

#include "gpu/device.h"
#include "llm/sampler.h"
#include "model/transformer.h"

namespace wgrt::cli {

// Checks for numeric flags. A value that does not parse says "'abc' is not a number" (or "not a
// whole number"); one outside [lo, hi] says so with both ends written plainly. The description
// shown in --help is "NUMBER in [lo, hi]".
CLI::Validator number_in(double lo, double hi);
CLI::Validator integer_in(int64_t lo, int64_t hi);

// A status line on stderr while a model loads and its kernels compile ("loading ...", then
// "compiling kernel N: NAME", rewritten in place), cleared before the first output. Only when
// stderr is a terminal; env WGRT_PROGRESS=0 turns it off, WGRT_PROGRESS=1 on (also for a pipe,
// one line per step).
struct Progress {
  gpu::Device* dev = nullptr;
  bool on = false;
  bool tty = false;
  Progress() = default;
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  ~Progress();  // ends it (an error on the way out then starts on a clean line)
};
void start_progress(Progress& p, gpu::Device& dev, const std::string& what);
void end_progress(Progress& p);

// llama.cpp's spellings that CLI11 cannot declare (a short flag of several letters, which it would
// read as `-n gl`): each becomes its long form before parsing. argv is rewritten in place.
void rewrite_llamacpp_aliases(int argc, char** argv);

struct ModelFlags {
  std::string model;
  uint32_t ctx_size = 0;  // 0: model::default_ctx
  uint32_t batch_size = 64;
  bool batch_size_set = false;  // -b given
  std::string quantize = "auto";
  uint32_t group_size = 32;
  bool kv_f32 = false;
  std::string cache_type_k, cache_type_v;  // -ctk / -ctv: f32, f16 or q8_0; "": f16 (f32 with --kv-f32)
  bool allow_unused = false;
  std::string n_gpu_layers;  // -ngl N|all|auto: accepted for llama.cpp's users; every layer runs on the GPU
};

void add_model_flags(CLI::App& cmd, ModelFlags& f);
// -ctk/--cache-type-k and -ctv/--cache-type-v (f32, f16, q8_0), for add_model_flags and bench.
void add_cache_type_flags(CLI::App& cmd, std::string& k, std::string& v);
// Sets o.cache_type_k / o.cache_type_v from the flags' values ("" leaves f16_kv's).
void apply_cache_types(model::BuildOptions& o, const std::string& k, const std::string& v);
model::BuildOptions build_options(const ModelFlags& f, bool all_logits);

struct SamplingFlags {
  float temp = 0.8f;
  uint32_t top_k = 40;
  float top_p = 0.95f, min_p = 0.05f, repeat_penalty = 1.0f;
  float presence_penalty = 0.0f, frequency_penalty = 0.0f;
  uint32_t repeat_last_n = 64;
  int64_t seed = -1;  // -1: random
  std::vector<std::string> logit_bias;  // -l TOKEN_ID(+/-)BIAS, as llama.cpp spells it
};

void add_sampling_flags(CLI::App& cmd, SamplingFlags& f);
// The sampler's parameters; a random seed is drawn here when none was given. `n_vocab` checks
// the --logit-bias tokens (a bias of -inf becomes kBanBias).
llm::SamplerParams sampler_params(const SamplingFlags& f, int32_t n_vocab);
// What --logit-bias TOKEN-inf adds: finite (the samplers take finite biases), and far below any
// logit, so the token is never drawn.
inline constexpr float kBanBias = -1e30f;
// --grammar TEXT, --grammar-file FILE or --json-schema TEXT (at most one non-empty): the GBNF
// text (the file's) or the schema's, checked by compiling it; both empty when none is given.
// Throws std::invalid_argument naming the flag and the error.
struct GrammarText {
  std::string gbnf, json_schema;
};
GrammarText grammar_from_flags(const std::string& gbnf, const std::string& file, const std::string& schema);

}  // namespace wgrt::cli
