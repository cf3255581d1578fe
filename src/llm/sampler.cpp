#include "llm/sampler.h"

#include "grammar/token_index.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <unordered_map>

namespace wgrt::llm {

Sampler make_sampler(const SamplerParams& p) {
  if (p.temperature < 0 || p.top_p <= 0 || p.top_p > 1 || p.min_p < 0 || p.min_p > 1 || p.repeat_penalty <= 0 ||
      !std::isfinite(p.presence_penalty) || !std::isfinite(p.frequency_penalty))
    throw std::invalid_argument("sampler: temperature >= 0, top-p in (0, 1], min-p in [0, 1], repeat penalty > 0, "
                                "finite presence and frequency penalties");
  for (size_t i = 0; i < p.logit_bias.size(); ++i) {
    if (p.logit_bias[i].first < 0 || !std::isfinite(p.logit_bias[i].second))
      throw std::invalid_argument(fmt::format("sampler: logit bias {} (token {}) needs a token id >= 0 and a finite "
                                              "value", i, p.logit_bias[i].first));
    for (size_t j = 0; j < i; ++j)
      if (p.logit_bias[j].first == p.logit_bias[i].first)
        throw std::invalid_argument(fmt::format("sampler: token {} has two logit biases", p.logit_bias[i].first));
  }
  return Sampler{p, std::mt19937_64(p.seed), {}};
}

bool has_penalties(const SamplerParams& p) {
  return p.repeat_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
}

bool needs_all_logits(const SamplerParams& p) {
  return has_penalties(p) || !p.logit_bias.empty() || p.grammar != nullptr;
}

std::vector<Candidate> adjusted_logits(const Sampler& s, const std::function<float(int32_t)>& logit) {
  const SamplerParams& p = s.params;
  std::map<int32_t, uint32_t> counts;  // ordered: the result does not depend on hashing
  if (has_penalties(p))
    for (int32_t id : s.recent) ++counts[id];
  std::map<int32_t, float> out;
  for (const auto& [id, c] : counts) {
    float l = logit(id);
    // A positive logit times the reciprocal rather than divided: the GPU's logit_adjust computes
    // the same product (a WGSL division may be 2.5 ulp off), so the two paths agree bit for bit.
    if (p.repeat_penalty != 1.0f) l = l > 0 ? l * (1.0f / p.repeat_penalty) : l * p.repeat_penalty;
    out[id] = l - p.presence_penalty - p.frequency_penalty * float(c);
  }
  for (const auto& [id, bias] : p.logit_bias) {
    auto it = out.find(id);
    out[id] = (it == out.end() ? logit(id) : it->second) + bias;
  }
  std::vector<Candidate> v;
  v.reserve(out.size());
  for (const auto& [id, l] : out) v.push_back({id, l});
  return v;
}

void adjust_logits(const Sampler& s, std::span<float> row) {
  const auto at = [&](int32_t id) {
    if (size_t(id) >= row.size())
      throw std::invalid_argument(fmt::format("sampler: token {} is outside the vocabulary of {}", id, row.size()));
    return row[size_t(id)];
  };
  for (const Candidate& c : adjusted_logits(s, at)) row[size_t(c.id)] = c.logit;
}

std::vector<AdjustEntry> adjust_entries(const Sampler& s) {
  const SamplerParams& p = s.params;
  std::map<int32_t, AdjustEntry> out;
  if (has_penalties(p))
    for (int32_t id : s.recent) {
      AdjustEntry& e = out.try_emplace(id, AdjustEntry{id, 0, 0.0f, 0.0f}).first->second;
      ++e.count;
    }
  // adjusted_logits subtracts p.frequency_penalty * float(c) as one float product: the same here.
  for (auto& [id, e] : out) e.freq_sub = p.frequency_penalty * float(e.count);
  for (const auto& [id, bias] : p.logit_bias)
    out.try_emplace(id, AdjustEntry{id, 0, 0.0f, 0.0f}).first->second.bias = bias;
  std::vector<AdjustEntry> v;
  v.reserve(out.size());
  for (const auto& [id, e] : out) v.push_back(e);
  return v;
}

void update_allow(Sampler& s) {
  if (!s.params.grammar) {
    s.allow.clear();
    return;
  }
  if (!s.constraint) throw std::logic_error("sample: a grammar without the model's token index (llm/constrain.h)");
  s.allow.resize(grammar::mask_words(s.constraint->index->n_vocab()));
  grammar::allowed_mask(*s.constraint, s.allow);
}

void accept_token(Sampler& s, int32_t id) {
  if (s.params.repeat_last_n == 0) return;
  s.recent.push_back(id);
  while (s.recent.size() > s.params.repeat_last_n) s.recent.pop_front();
}

namespace {

// Keeps the candidates the grammar allows (the mask staged with the GPU's adjustment, or the
// state's now). Returns an end token to pick when the grammar is complete and no candidate is
// left (-1 otherwise).
int32_t apply_grammar(Sampler& s, std::vector<Candidate>& c, bool staged) {
  if (!staged) update_allow(s);
  const grammar::Constraint& g = *s.constraint;
  std::erase_if(c, [&](const Candidate& x) {
    return x.id < 0 || size_t(x.id) >= g.index->n_vocab() || !grammar::mask_bit(s.allow, size_t(x.id));
  });
  if (!c.empty()) return -1;
  if (grammar::is_complete(g.m.state) && !g.index->end_ids.empty()) return g.index->end_ids.front();
  throw std::runtime_error("the grammar allows none of the step's candidate tokens (hint: a grammar the "
                           "model's vocabulary can spell)");
}

// The pick without a grammar: bias and penalties, top-k, top-p, min-p, temperature, draw.
int32_t sample_unconstrained(Sampler& s, std::vector<Candidate>& c, bool adjusted) {
  const SamplerParams& p = s.params;
  if (needs_all_logits(p) && !adjusted) {
    // Candidates hold every token (the whole row, id = index) or the best few: an adjusted token
    // missing from them stays out.
    bool row = true;
    for (size_t i = 0; i < c.size() && row; ++i) row = c[i].id == int32_t(i);
    std::unordered_map<int32_t, size_t> at;
    if (!row)
      for (size_t i = 0; i < c.size(); ++i) at.emplace(c[i].id, i);
    const auto index = [&](int32_t id) -> size_t {
      if (row) return size_t(id) < c.size() ? size_t(id) : c.size();
      auto it = at.find(id);
      return it == at.end() ? c.size() : it->second;
    };
    const auto logit = [&](int32_t id) {
      const size_t i = index(id);
      return i < c.size() ? c[i].logit : std::numeric_limits<float>::quiet_NaN();
    };
    for (const Candidate& a : adjusted_logits(s, logit))
      if (const size_t i = index(a.id); i < c.size()) c[i].logit = a.logit;
  }
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

}  // namespace

int32_t sample(Sampler& s, std::vector<Candidate>& c) {
  if (c.empty()) throw std::invalid_argument("sample: no candidates");
  const bool adjusted = s.gpu_adjusted;
  s.gpu_adjusted = false;
  if (!s.params.grammar) return sample_unconstrained(s, c, adjusted);
  int32_t id = apply_grammar(s, c, adjusted);
  if (id < 0) {
    id = sample_unconstrained(s, c, adjusted);
  } else {
    accept_token(s, id);
  }
  if (!grammar::accept_token(*s.constraint, id))
    throw std::logic_error(fmt::format("sample: the grammar refused token {}, which its mask allowed", id));
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
