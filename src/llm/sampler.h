// Token sampling over candidate logits: logit bias and penalties → top-k → top-p → min-p →
// temperature → draw (greedy when the temperature is 0). Candidates come from the GPU's
// top-k. A bias, a penalty or a grammar can lift a token into the top-k (or allow only tokens
// outside it): the GPU applies them to the logits first (ops/sampling/logit_adjust.h, staged by
// llm/batch.h stage_adjust), or, where it cannot, the sampler reads the whole row and applies
// them here.
//
// Penalties look at the last repeat_last_n tokens (the prompt's included), each token with its
// count c there: the repeat penalty divides a positive logit by repeat_penalty (as a product
// with its f32 reciprocal, which the GPU computes exactly alike) and multiplies a negative one
// (llama.cpp's rule), then presence and frequency subtract
// presence_penalty * [c > 0] + frequency_penalty * c (OpenAI's rule). logit_bias adds its value
// to its token's logit (-100 bans it in practice, +100 all but forces it).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace wgrt::grammar {
struct Grammar;
struct Constraint;
}  // namespace wgrt::grammar

namespace wgrt::llm {

struct SamplerParams {
  float temperature = 0.8f;  // 0: greedy
  uint32_t top_k = 40;       // 0: all candidates
  float top_p = 0.95f;       // 1: off
  float min_p = 0.05f;       // 0: off
  float repeat_penalty = 1.0f;  // 1: off
  float presence_penalty = 0.0f;   // 0: off
  float frequency_penalty = 0.0f;  // 0: off
  uint32_t repeat_last_n = 64;
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token, added to its logit), ids distinct
  uint64_t seed = 0;
  // Constrained output (response_format, grammar): only tokens the grammar allows are drawn.
  // The sampler needs the model's token index for it (llm/constrain.h attaches it).
  std::shared_ptr<const grammar::Grammar> grammar;
};

struct Candidate {
  int32_t id;
  float logit;
};

struct Sampler {
  SamplerParams params;
  std::mt19937_64 rng;
  std::deque<int32_t> recent;  // the last repeat_last_n tokens, for the penalty
  std::shared_ptr<grammar::Constraint> constraint;  // params.grammar's state; null without one
  std::vector<uint32_t> allow;  // the step's allowed tokens, a bit each (grammar/token_index.h)
  // The step's logits were adjusted on the GPU by this sampler's entries and `allow` (set by
  // stage_adjust, cleared by the pick): the pick reads the top-k and applies nothing again.
  bool gpu_adjusted = false;
};

Sampler make_sampler(const SamplerParams& p);
// Whether sampling needs every logit (a bias or a penalty can lift a token into the top-k; a
// grammar can allow only tokens outside it).
bool needs_all_logits(const SamplerParams& p);
// The bias and penalties, as (token, adjusted logit) for the tokens they touch: `logit(id)`
// gives a token's logit before.
std::vector<Candidate> adjusted_logits(const Sampler& s, const std::function<float(int32_t)>& logit);
// Applies them to a whole row of logits (ids are indices), in place.
void adjust_logits(const Sampler& s, std::span<float> row);
// The same as one entry per touched token, ids ascending, for the GPU's logit_adjust
// (ops/sampling/logit_adjust.h): the token's count in the penalty window (0: bias only), its
// bias (0 if none) and frequency_penalty * count, rounded here as adjusted_logits rounds it.
struct AdjustEntry {
  int32_t id;
  uint32_t count;
  float bias;
  float freq_sub;
};
std::vector<AdjustEntry> adjust_entries(const Sampler& s);
bool has_penalties(const SamplerParams& p);
// With a grammar: the tokens it allows now, into s.allow (a bit each, n_vocab bits); without
// one, s.allow is cleared.
void update_allow(Sampler& s);
// Picks a token from `cands` (reordered in place). Records it for the penalty. With a grammar,
// first drops the candidates it does not allow (std::runtime_error when none is left and the
// grammar is not complete) and advances its state by the pick. With s.gpu_adjusted the
// candidates are already adjusted: neither bias nor penalty is applied again, and the grammar
// filter uses the mask staged with them (s.allow); the flag is cleared.
int32_t sample(Sampler& s, std::vector<Candidate>& cands);

// The draw, in steps the GPU's sample_pick mirrors (ops/sampling/sampling.h): a uniform
// u in [0, 1) from the sampler's generator (32 bits, as the GPU gets it), and the index u picks
// among weights: the first i whose running sum passes u * sum(w).
uint32_t next_draw(Sampler& s);
size_t pick_index(std::span<const double> w, uint32_t draw);
void accept_token(Sampler& s, int32_t id);

}  // namespace wgrt::llm
