#include "llm/sampler.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace wgrt::llm {

Sampler make_sampler(const SamplerParams& p) {
  if (p.temperature < 0 || p.top_p <= 0 || p.top_p > 1 || p.min_p < 0 || p.min_p > 1 || p.repeat_penalty <= 0)
    throw std::invalid_argument("sampler: temperature >= 0, top-p in (0, 1], min-p in [0, 1], repeat penalty > 0");
  return Sampler{p, std::mt19937_64(p.seed), {}};
}

bool needs_all_logits(const SamplerParams& p) { return p.repeat_penalty != 1.0f; }

void accept_token(Sampler& s, int32_t id) {
  if (s.params.repeat_last_n == 0) return;
  s.recent.push_back(id);
  while (s.recent.size() > s.params.repeat_last_n) s.recent.pop_front();
}

int32_t sample(Sampler& s, std::vector<Candidate>& c) {
  if (c.empty()) throw std::invalid_argument("sample: no candidates");
  const SamplerParams& p = s.params;
  if (p.repeat_penalty != 1.0f)
    for (auto& x : c)
      if (std::find(s.recent.begin(), s.recent.end(), x.id) != s.recent.end())
        x.logit = x.logit > 0 ? x.logit / p.repeat_penalty : x.logit * p.repeat_penalty;
  // Highest first; ties by lower id so results do not depend on the candidates' order.
  auto by_logit = [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };
  if (p.temperature == 0) {
    int32_t id = std::min_element(c.begin(), c.end(), by_logit)->id;
    accept_token(s, id);
    return id;
  }
  size_t k = p.top_k == 0 ? c.size() : std::min<size_t>(p.top_k, c.size());
  std::partial_sort(c.begin(), c.begin() + long(k), c.end(), by_logit);
  c.resize(k);
  // Softmax at temperature 1 for the top-p and min-p cuts, as probabilities of the model.
  std::vector<double> prob(c.size());
  double sum = 0;
  for (size_t i = 0; i < c.size(); ++i) sum += prob[i] = std::exp(double(c[i].logit) - c[0].logit);
  size_t keep = c.size();
  double cum = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    cum += prob[i] / sum;
    if (cum >= p.top_p) {
      keep = i + 1;
      break;
    }
  }
  for (size_t i = 1; i < keep; ++i)
    if (prob[i] / prob[0] < p.min_p) {
      keep = i;
      break;
    }
  c.resize(keep);
  std::vector<double> w(keep);
  for (size_t i = 0; i < keep; ++i) w[i] = std::exp((double(c[i].logit) - c[0].logit) / p.temperature);
  int32_t id = c[pick_index(w, next_draw(s))].id;
  accept_token(s, id);
  return id;
}

uint32_t next_draw(Sampler& s) { return uint32_t(s.rng() >> 32); }

size_t pick_index(std::span<const double> w, uint32_t draw) {
  double total = 0;
  for (double x : w) total += x;
  const double target = double(draw) / 4294967296.0 * total;
  double cum = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    cum += w[i];
    if (cum > target) return i;
  }
  return w.empty() ? 0 : w.size() - 1;
}

}  // namespace wgrt::llm
