#include "cli/flags.h"

#include "gpu/pipeline.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "support/knobs.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <regex>
#include <cstdio>
#include <cstring>
#include <optional>
#include <memory>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>
#include <limits>
#include <random>
#include <string_view>
#include <system_error>

namespace wgrt::cli {

namespace {

template <class T>
bool parse_whole(std::string_view s, T& v) {
  if (s.starts_with('+')) s.remove_prefix(1);
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

}  // namespace

CLI::Validator number_in(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& in) -> std::string {
        double v = 0;
        if (!parse_whole(in, v)) return fmt::format("'{}' is not a number", in);
        if (!(v >= lo && v <= hi)) return fmt::format("{} is out of range: from {} to {}", in, lo, hi);
        return "";
      },
      fmt::format("NUMBER in [{}, {}]", lo, hi));
}

CLI::Validator integer_in(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& in) -> std::string {
        int64_t v = 0;
        double d = 0;
        if (!parse_whole(in, v)) {
          if (parse_whole(in, d)) return fmt::format("'{}' is not a whole number", in);
          return fmt::format("'{}' is not a number", in);
        }
        if (v < lo || v > hi) return fmt::format("{} is out of range: from {} to {}", in, lo, hi);
        return "";
      },
      fmt::format("INTEGER in [{}, {}]", lo, hi));
}

namespace {
const knobs::Choice kProgress{"WGRT_PROGRESS", "auto|0|1", "auto",
                              "the loading and compiling line on stderr (auto: when stderr is a terminal)"};
}  // namespace

void start_progress(Progress& p, gpu::Device& dev, const std::string& what) {
  p.dev = &dev;
  p.tty = isatty(STDERR_FILENO);
  const std::string want = kProgress.get();
  p.on = want == "auto" ? p.tty : want == "1";
  if (!p.on) return;
  const char* end = p.tty ? "" : "\n";
  fmt::print(stderr, "{}wgrt: loading {}{}", p.tty ? "\r\033[K" : "", what, end);
  std::fflush(stderr);
  dev.pipelines->on_create = [tty = p.tty, n = std::make_shared<int>(0)](const std::string& label) {
    const std::string name = label.substr(0, label.find(' '));
    fmt::print(stderr, "{}wgrt: compiling kernel {}: {}{}", tty ? "\r\033[K" : "", ++*n, name, tty ? "" : "\n");
    std::fflush(stderr);
  };
}

Progress::~Progress() { end_progress(*this); }

void end_progress(Progress& p) {
  if (!p.on) return;
  p.dev->pipelines->on_create = nullptr;
  if (p.tty) fmt::print(stderr, "\r\033[K");
  std::fflush(stderr);
  p.on = false;
}

void rewrite_llamacpp_aliases(int argc, char** argv) {
  static char ngl[] = "--n-gpu-layers", ctk[] = "--cache-type-k", ctv[] = "--cache-type-v";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) break;
    if (std::strcmp(argv[i], "-ngl") == 0) argv[i] = ngl;
    if (std::strcmp(argv[i], "-ctk") == 0) argv[i] = ctk;
    if (std::strcmp(argv[i], "-ctv") == 0) argv[i] = ctv;
  }
}

namespace {

std::optional<graph::DType> parse_cache_type(const std::string& s) {
  if (s == "f32") return graph::DType::F32;
  if (s == "f16") return graph::DType::F16;
  if (s == "q8_0") return graph::DType::Q8_0;
  return std::nullopt;
}

CLI::Validator cache_type() {
  return CLI::Validator(
      [](std::string& in) -> std::string {
        if (parse_cache_type(in)) return "";
        return fmt::format("'{}' is not a KV cache type (choices: f32, f16, q8_0)", in);
      },
      "f32|f16|q8_0");
}

}  // namespace

void add_cache_type_flags(CLI::App& cmd, std::string& k, std::string& v) {
  cmd.add_option("--cache-type-k", k, "the K cache's type, -ctk: f16, q8_0 (int8 blocks of 32, 53% of f16's bytes) "
                                      "or f32 (default f16; f32 with --kv-f32)")
      ->check(cache_type());
  cmd.add_option("--cache-type-v", v, "the V cache's type, -ctv: f16, q8_0 or f32 (default f16; f32 with --kv-f32)")
      ->check(cache_type());
}

void apply_cache_types(model::BuildOptions& o, const std::string& k, const std::string& v) {
  if (!k.empty()) o.cache_type_k = parse_cache_type(k);
  if (!v.empty()) o.cache_type_v = parse_cache_type(v);
}

void add_model_flags(CLI::App& cmd, ModelFlags& f) {
  cmd.add_option("-m,--model", f.model, "a .gguf file or a Hugging Face model directory (default: wgrt's demo "
                                        "model, share/wgrt/wgrt-demo-q8_0.gguf of wgrt's install (models/ in the "
                                        "sources); builtin:random: random weights)");
  cmd.add_option("-c,--ctx-size", f.ctx_size,
                 fmt::format("context size in tokens (default: the model's trained context, at most {})",
                             model::kDefaultMaxCtx))
      ->check(integer_in(1, 1 << 20))
      ->default_str("");  // 0 stands for the model's own, which the description says
  cmd.add_option("-b,--batch-size", f.batch_size, "prompt tokens per step")
      ->check(integer_in(1, 8192))
      ->each([&f](const std::string&) { f.batch_size_set = true; });
  cmd.add_option("--quantize", f.quantize, "weights on the GPU: q4gsw, q8, none, or auto (GGUF: as stored; "
                                           "Hugging Face: q4gsw)")
      ->check(CLI::IsMember({"auto", "q4gsw", "q8", "none"}));
  cmd.add_option("--group-size", f.group_size, "quantization group size")->check(CLI::IsMember({32u, 64u, 128u}));
  cmd.add_flag("--kv-f32", f.kv_f32, "keep the KV cache in f32 (default f16)");
  add_cache_type_flags(cmd, f.cache_type_k, f.cache_type_v);
  cmd.add_flag("--allow-unused-tensors", f.allow_unused,
               "run a file with tensors the architecture does not read (a warning instead of an error)");
  cmd.add_option("--n-gpu-layers", f.n_gpu_layers, "accepted for llama.cpp's -ngl N: wgrt runs every layer on "
                                                   "the GPU, whatever N")
      ->check(CLI::Validator(
          [](std::string& in) -> std::string {
            int64_t n = 0;
            if (in == "all" || in == "auto" || (parse_whole(in, n) && n >= -1)) return "";
            return fmt::format("'{}' is not a layer count (hint: a number, 'all' or 'auto')", in);
          },
          "N|all|auto"))
      ->each([](const std::string& n) {
        static bool said = false;
        if (!said) std::fprintf(stderr, "wgrt: -ngl %s: wgrt runs every layer on the GPU (the count is not used)\n",
                                n.c_str());
        said = true;
      });
}

model::BuildOptions build_options(const ModelFlags& f, bool all_logits) {
  model::BuildOptions o;
  o.n_ctx = f.ctx_size;
  o.max_batch = f.batch_size;
  o.f16_kv = !f.kv_f32;
  apply_cache_types(o, f.cache_type_k, f.cache_type_v);
  o.all_logits = all_logits;
  o.load.group_size = f.group_size;
  o.load.allow_unused = f.allow_unused;
  o.load.quantize = model::parse_weight_format(f.quantize);
  if (o.load.quantize == model::WeightFormat::Auto && std::filesystem::is_directory(f.model))
    o.load.quantize = model::WeightFormat::Q4gsw;
  return o;
}

void add_sampling_flags(CLI::App& cmd, SamplingFlags& f) {
  cmd.add_option("--temp", f.temp, "temperature (0: greedy)")->check(number_in(0, 100));
  cmd.add_option("--top-k", f.top_k, "top-k candidates (0: all)")->check(integer_in(0, 1 << 20));
  cmd.add_option("--top-p", f.top_p, "nucleus sampling mass")->check(number_in(0.0001, 1));
  cmd.add_option("--min-p", f.min_p, "drop tokens below this share of the best")->check(number_in(0, 1));
  cmd.add_option("--repeat-penalty", f.repeat_penalty,
                 "divide recent tokens' positive logits by this, multiply negative ones (1: off)")
      ->check(number_in(0.01, 100));
  cmd.add_option("--presence-penalty", f.presence_penalty,
                 "subtract this from the logit of each token among the recent ones (0: off)")
      ->check(number_in(-2, 2));
  cmd.add_option("--frequency-penalty", f.frequency_penalty,
                 "subtract this times its count among the recent ones from a token's logit (0: off)")
      ->check(number_in(-2, 2));
  cmd.add_option("--repeat-last-n", f.repeat_last_n, "the recent tokens the penalties look at (prompt included)")
      ->check(integer_in(0, 1 << 20));
  cmd.add_option("--seed", f.seed, "sampling seed (-1: random)")
      ->check(integer_in(-1, std::numeric_limits<int64_t>::max()));
  cmd.add_option("-l,--logit-bias", f.logit_bias,
                 "TOKEN_ID(+/-)BIAS added to a token's logit, e.g. 15043+1 or 15043-inf (never drawn); repeatable")
      ->default_str("");
}

namespace {

// One --logit-bias value, "15043+1.5" or "2-inf"; its token checked against the vocabulary.
std::pair<int32_t, float> parse_logit_bias(const std::string& v, int32_t n_vocab) {
  static const std::regex form(R"(^([0-9]+)([+-])(inf|[0-9]*\.?[0-9]+([eE][+-]?[0-9]+)?)$)");
  std::smatch m;
  if (!std::regex_match(v, m, form))
    throw std::invalid_argument(fmt::format("--logit-bias '{}' is not TOKEN_ID(+/-)BIAS (hint: 15043+1, 15043-0.5 or "
                                            "15043-inf; `wgrt tokenize --json TEXT` gives token ids)", v));
  const int64_t token = m[1].str().size() > 9 ? int64_t(n_vocab) : std::stoll(m[1].str());
  if (token >= n_vocab)
    throw std::invalid_argument(fmt::format("--logit-bias '{}': token {} is outside the model's vocabulary of {}", v,
                                            m[1].str(), n_vocab));
  const bool minus = m[2] == "-";
  const float bias = m[3] == "inf" ? (minus ? kBanBias : -kBanBias) : (minus ? -1.f : 1.f) * std::stof(m[3].str());
  if (!std::isfinite(bias))
    throw std::invalid_argument(fmt::format("--logit-bias '{}': the bias is past a float (hint: inf, or a smaller "
                                            "number)", v));
  return {int32_t(token), bias};
}

}  // namespace

llm::SamplerParams sampler_params(const SamplingFlags& f, int32_t n_vocab) {
  uint64_t seed = f.seed >= 0 ? uint64_t(f.seed) : std::random_device{}();
  llm::SamplerParams p{.temperature = f.temp, .top_k = f.top_k, .top_p = f.top_p, .min_p = f.min_p,
                       .repeat_penalty = f.repeat_penalty, .presence_penalty = f.presence_penalty,
                       .frequency_penalty = f.frequency_penalty, .repeat_last_n = f.repeat_last_n, .seed = seed};
  for (const std::string& v : f.logit_bias) {
    const auto [token, bias] = parse_logit_bias(v, n_vocab);
    auto same = std::find_if(p.logit_bias.begin(), p.logit_bias.end(), [&](const auto& b) { return b.first == token; });
    if (same != p.logit_bias.end()) same->second = std::max(kBanBias, same->second + bias);  // repeated: they add
    else p.logit_bias.emplace_back(token, bias);
  }
  return p;
}

GrammarText grammar_from_flags(const std::string& gbnf, const std::string& file, const std::string& schema) {
  GrammarText out{.gbnf = gbnf, .json_schema = schema};
  std::string flag = !file.empty() ? "--grammar-file" : !schema.empty() ? "--json-schema" : "--grammar";
  try {
    if (!file.empty()) {
      std::ifstream in(file, std::ios::binary);
      if (!in) throw std::invalid_argument(fmt::format("{}: cannot open (hint: check the path)", file));
      std::ostringstream ss;
      ss << in.rdbuf();
      out.gbnf = ss.str();
      if (out.gbnf.empty()) throw std::invalid_argument(fmt::format("{}: the file is empty", file));
    }
    std::string text = out.gbnf;
    if (!out.json_schema.empty()) {
      const auto parsed = nlohmann::ordered_json::parse(out.json_schema, nullptr, false);
      if (parsed.is_discarded()) throw std::invalid_argument("not valid JSON");
      text = grammar::json_schema_to_gbnf(parsed);
    }
    if (!text.empty()) grammar::parse_gbnf(text);  // its errors name the flag here
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("{}: {}", flag, e.what()));
  }
  return out;
}

}  // namespace wgrt::cli
