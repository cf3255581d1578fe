// wgrt_make_model: writes a random-weight model of a known shape as GGUF, with wgrt's own
// writer, for benchmarks and demos (nothing is downloaded). Rows are drawn and quantized on
// every core straight into the mapped file, so an 8B model in F16 (16 GB) takes seconds, not
// minutes.
//   wgrt_make_model --preset llama-3.2-1b --type q4_0 -o /tmp/llama-1b-q4_0.gguf
//   wgrt_make_model --preset llama-3.1-8b --type f16 -o /tmp/llama-8b-f16.gguf
//       --vocab-from .deps/llama-vocab/models/ggml-vocab-llama-bpe.gguf
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <thread>

#include "model/gguf.h"
#include "model/random_model.h"

int main(int argc, char** argv) {
  using namespace wgrt::model;
  CLI::App app{"write a random-weight model as GGUF", "wgrt_make_model"};
  std::string preset = "tiny", type = "q4_0", embd_type, vocab_from, out;
  uint32_t seed = 1;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  // The types model::quantize writes, by their lower-case GGUF names.
  const std::pair<const char*, GgmlType> types[] = {
      {"f32", GgmlType::F32},   {"f16", GgmlType::F16},   {"bf16", GgmlType::BF16},     {"q8_0", GgmlType::Q8_0},
      {"q4_0", GgmlType::Q4_0}, {"q4_1", GgmlType::Q4_1}, {"q5_0", GgmlType::Q5_0},     {"q5_1", GgmlType::Q5_1},
      {"q4_k", GgmlType::Q4_K}, {"q6_k", GgmlType::Q6_K}, {"iq4_nl", GgmlType::IQ4_NL}, {"iq4_xs", GgmlType::IQ4_XS}};
  std::vector<std::string> type_names;
  for (auto [n, t] : types) type_names.push_back(n);
  app.add_option("--preset", preset, "tiny, llama-3.2-1b, llama-3.1-8b, qwen2.5-0.5b, phi-3-mini-128k, gemma-3-1b, gemma-2-2b, "
                                "qwen3-30b-a3b, qwen1.5-moe-a2.7b, qwen2moe-tiny");
  app.add_option("--type", type, "matrix type: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q6_k, iq4_nl, iq4_xs")
      ->check(CLI::IsMember(type_names));
  app.add_option("--embd-type", embd_type, "token_embd and output type (default: f32 and f16 as --type, else q8_0)")
      ->check(CLI::IsMember(type_names));
  app.add_option("--vocab-from", vocab_from, "copy the tokenizer of this GGUF (e.g. a vocab-only file); the preset's "
                                             "vocabulary size pads it with unused tokens");
  app.add_option("--threads", threads, "threads drawing and quantizing rows")->check(CLI::Range(1u, 1024u));
  app.add_option("--seed", seed, "random seed");
  app.add_option("-o,--out", out, "output .gguf")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    const auto t0 = std::chrono::steady_clock::now();
    RandomModelSpec s = preset_model_spec(preset);
    s.seed = seed;
    if (embd_type.empty()) embd_type = type == "f32" || type == "f16" ? type : "q8_0";
    for (auto [n, t] : types) {
      if (type == n) s.matrix_type = t;
      if (embd_type == n) s.embd_type = t;
    }
    std::optional<GgufFile> vocab;
    if (!vocab_from.empty()) {
      vocab = open_gguf(vocab_from);
      s.vocab_from = &*vocab;
    }
    write_random_model(s, out, threads);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print("wrote {} ({} random weights, {} matrices, {} embeddings, {:.1f} MiB) in {:.1f} s\n", out, preset, type,
               embd_type, std::filesystem::file_size(out) / 1048576.0, secs);
  } catch (const std::exception& e) {
    fmt::print(stderr, "wgrt_make_model: {}\n", e.what());
    return 1;
  }
  return 0;
}
