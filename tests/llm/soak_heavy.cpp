// Soak on a real GPU (heavy): 1,000 generations on one session of wgrt's demo model, random
// prompts and sampling parameters, up to 64 tokens each (soak.h says what is checked).
#include <filesystem>

#include "llm/soak.h"

namespace wgrt::test {
namespace {

TEST(SoakHeavy, AThousandGenerationsStayFlat) {
  model::BuildOptions o;
  o.n_ctx = 256;
  o.max_batch = 64;
  // The checkout it was built from, else the working directory's (a GPU machine's copy).
  std::string model = WGRT_SOURCE_DIR "/models/wgrt-demo-q8_0.gguf";
  if (!std::filesystem::exists(model)) model = "models/wgrt-demo-q8_0.gguf";
  llm::Session s = llm::open_session(device(), model, o);
  soak(s, 1000, 50, 64);
}

}  // namespace
}  // namespace wgrt::test
