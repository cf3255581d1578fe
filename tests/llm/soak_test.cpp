// Soak (CI-sized): 200 generations on one session of the built-in random-weight model, random
// prompts and sampling parameters, on the CPU driver (soak.h says what is checked).
#include "llm/soak.h"

namespace wgrt::test {
namespace {

TEST(Soak, TwoHundredGenerationsStayFlat) {
  model::BuildOptions o;
  o.n_ctx = 128;
  o.max_batch = 16;
  llm::Session s = llm::open_session(device(), llm::kRandomModel, o);
  soak(s, 200, 20, 8);
}

}  // namespace
}  // namespace wgrt::test
