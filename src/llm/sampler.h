// Token sampling over candidate logits: repetition penalty → top-k → top-p → min-p →
// temperature → draw (greedy when the temperature is 0). Candidates come from the GPU's
// top-k (or all logits when a penalty must see every token).
#pragma once

#include <cstdint>
#include <deque>
#include <random>
#include <span>
#include <vector>

namespace wgrt::llm {

struct SamplerParams {
  float temperature = 0.8f;  // 0: greedy
  uint32_t top_k = 40;       // 0: all candidates
  float top_p = 0.95f;       // 1: off
  float min_p = 0.05f;       // 0: off
  float repeat_penalty = 1.0f;  // 1: off
  uint32_t repeat_last_n = 64;
  uint64_t seed = 0;
};

struct Candidate {
  int32_t id;
  float logit;
};

struct Sampler {
  SamplerParams params;
  std::mt19937_64 rng;
  std::deque<int32_t> recent;  // the last repeat_last_n tokens, for the penalty
};

Sampler make_sampler(const SamplerParams& p);
// Whether sampling needs every logit (a repetition penalty can lift a token into the top-k).
bool needs_all_logits(const SamplerParams& p);
// Picks a token from `cands` (reordered in place). Records it for the penalty.
int32_t sample(Sampler& s, std::vector<Candidate>& cands);

// The draw, in steps the GPU's sample_pick mirrors (ops/sampling/sampling.h): a uniform
// u in [0, 1) from the sampler's generator (32 bits, as the GPU gets it), and the index u picks
// among weights: the first i whose running sum passes u * sum(w).
uint32_t next_draw(Sampler& s);
size_t pick_index(std::span<const double> w, uint32_t draw);
void accept_token(Sampler& s, int32_t id);

}  // namespace wgrt::llm
