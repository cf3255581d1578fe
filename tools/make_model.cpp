// wgrt_make_model: writes a random-weight model of a known shape as GGUF, with wgrt's own
// writer, for benchmarks and demos (nothing is downloaded).
//   wgrt_make_model --preset llama-3.2-1b --type q4_0 -o /tmp/llama-1b-q4_0.gguf
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "model/gguf_writer.h"
#include "model/random_model.h"

int main(int argc, char** argv) {
  using namespace wgrt::model;
  CLI::App app{"write a random-weight model as GGUF", "wgrt_make_model"};
  std::string preset = "tiny", type = "q4_0", out;
  uint32_t seed = 1;
  app.add_option("--preset", preset, "tiny, llama-3.2-1b, llama-3.1-8b, qwen2.5-0.5b");
  app.add_option("--type", type, "matrix type: f32, f16, q8_0, q4_0, q4_k, q6_k")
      ->check(CLI::IsMember({"f32", "f16", "q8_0", "q4_0", "q4_k", "q6_k"}));
  app.add_option("--seed", seed, "random seed");
  app.add_option("-o,--out", out, "output .gguf")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    RandomModelSpec s = preset_model_spec(preset);
    s.seed = seed;
    const std::pair<const char*, GgmlType> types[] = {{"f32", GgmlType::F32}, {"f16", GgmlType::F16},
                                                      {"q8_0", GgmlType::Q8_0}, {"q4_0", GgmlType::Q4_0},
                                                      {"q4_k", GgmlType::Q4_K}, {"q6_k", GgmlType::Q6_K}};
    for (auto [n, t] : types)
      if (type == n) s.matrix_type = t;
    s.embd_type = s.matrix_type == GgmlType::F32 ? GgmlType::F32 : GgmlType::Q8_0;
    gguf_write_file(make_random_model(s), out);
    fmt::print("wrote {} ({} random weights, {})\n", out, preset, type);
  } catch (const std::exception& e) {
    fmt::print(stderr, "wgrt_make_model: {}\n", e.what());
    return 1;
  }
  return 0;
}
