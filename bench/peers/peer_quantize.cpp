// peer_quantize: writes a GGUF file with llama.cpp's own quantizer (its tensor-type mix: e.g.
// Q6_K output, Q6_K attn_v/ffn_down in some layers for Q4_K_M), from an F16 or F32 GGUF, so
// wgrt and llama.cpp are measured on files as people download them.
//   peer_quantize IN.gguf OUT.gguf TYPE [threads]   (TYPE: kTypes below, e.g. q4_0, q4_k_m)
// Built by bench/peers/setup.sh with g++ against the release's llama.h; not part of wgrt.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "llama.h"

// The file types it writes (none needs an importance matrix).
constexpr struct {
  const char* name;
  llama_ftype ftype;
} kTypes[] = {{"q8_0", LLAMA_FTYPE_MOSTLY_Q8_0},     {"q6_k", LLAMA_FTYPE_MOSTLY_Q6_K},
              {"q5_k_m", LLAMA_FTYPE_MOSTLY_Q5_K_M}, {"q4_k_m", LLAMA_FTYPE_MOSTLY_Q4_K_M},
              {"q4_0", LLAMA_FTYPE_MOSTLY_Q4_0},     {"iq4_xs", LLAMA_FTYPE_MOSTLY_IQ4_XS},
              {"iq4_nl", LLAMA_FTYPE_MOSTLY_IQ4_NL}, {"q3_k_m", LLAMA_FTYPE_MOSTLY_Q3_K_M},
              {"q2_k", LLAMA_FTYPE_MOSTLY_Q2_K}};

int main(int argc, char** argv) {
  std::string names;
  for (const auto& t : kTypes) names += std::string(names.empty() ? "" : "|") + t.name;
  if (argc < 4 || argc > 5) {
    std::fprintf(stderr, "peer_quantize: needs IN.gguf OUT.gguf %s [threads]\nhint: peer_quantize "
                         "l1b-f16.gguf l1b-q4_0.gguf q4_0\n", names.c_str());
    return 2;
  }
  const std::string type = argv[3];
  llama_model_quantize_params q = llama_model_quantize_default_params();
  bool known = false;
  for (const auto& t : kTypes)
    if (type == t.name) q.ftype = t.ftype, known = true;
  if (!known) {
    std::fprintf(stderr, "peer_quantize: type '%s' is none of %s\n", type.c_str(), names.c_str());
    return 2;
  }
  q.nthread = argc == 5 ? std::atoi(argv[4]) : int(sysconf(_SC_NPROCESSORS_ONLN));
  if (!std::getenv("PEER_VERBOSE"))
    llama_log_set([](ggml_log_level level, const char* text, void*) {
      if (level >= GGML_LOG_LEVEL_WARN) std::fputs(text, stderr);
    }, nullptr);
  llama_backend_init();
  const auto t0 = std::chrono::steady_clock::now();
  if (uint32_t rc = llama_model_quantize(argv[1], argv[2], &q); rc != 0) {
    std::fprintf(stderr, "peer_quantize: llama_model_quantize(%s -> %s, %s) failed with %u\n", argv[1], argv[2],
                 type.c_str(), rc);
    return 1;
  }
  std::printf("peer_quantize: %s -> %s (%s, %s) in %.1f s on %d threads\n", argv[1], argv[2], type.c_str(),
              llama_ftype_name(q.ftype),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), q.nthread);
  llama_backend_free();
  return 0;
}
