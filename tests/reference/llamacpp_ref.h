// llama.cpp's own CPU build as an independent reference: its quantizer writes GGUF files in
// the tensor-type mix downloaded files have, ggml's dequantizers read their blocks, and its
// CPU backend evaluates a model. The libraries (@node-llama-cpp/linux-x64@3.21.1, fetched by
// tools/setup-test-data.sh into .deps/llamacpp-cpu/) are dlopened at test time; nothing of
// llama.cpp is built or linked into wgrt. The few structs the calls pass are declared in
// llamacpp_ref.cpp from that release's llama.h.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/ggml_types.h"

namespace wgrt::ref::llamacpp {

// The folder of the libraries.
std::string library_dir();

// Loads the libraries once per process. Returns "" when they are usable, else why not (the
// data is absent: a test then skips with this message).
std::string unavailable_reason();

// llama.cpp's file types (llama_ftype) for the quantizer.
enum class Ftype : int32_t {
  Q4_0 = 2, Q4_1 = 3, Q8_0 = 7, Q5_0 = 8, Q5_1 = 9, Q2_K = 10, Q3_K_M = 12, Q4_K_M = 15, Q5_K_M = 17, Q6_K = 18,
  IQ4_NL = 25, IQ4_XS = 30,
};
const char* ftype_name(Ftype f);

// llama_model_quantize(in -> out) at ftype with llama.cpp's default tensor-type choices.
// Throws std::runtime_error naming the files when it fails.
void quantize(const std::string& in, const std::string& out, Ftype ftype, int threads = 2);

// ggml's own dequantize_row_<type> over `count` elements of `blocks` (whole blocks).
// Throws std::invalid_argument for a type without one, or when the bytes do not match count.
std::vector<float> dequantize(model::GgmlType type, std::span<const uint8_t> blocks, size_t count);

// The CPU backend runs on one thread by default: ggml's workers spin while they wait, which on
// a loaded two-core machine made a 32-token greedy run take 5 s instead of 0.15 s.

// The logits of every position of `tokens` from one batch on the CPU backend
// ([tokens.size(), n_vocab] row-major), and n_vocab.
struct Logits {
  std::vector<float> rows;
  size_t n_vocab = 0;
};
Logits cpu_logits(const std::string& model_path, std::span<const int32_t> tokens, int threads = 1);

// Greedy generation on the CPU backend: the prompt in one batch, then n steps of one token,
// each the argmax of the last logits (lowest id on ties). Returns the n generated tokens.
std::vector<int32_t> cpu_greedy(const std::string& model_path, std::span<const int32_t> prompt, int n,
                                int threads = 1);

}  // namespace wgrt::ref::llamacpp
