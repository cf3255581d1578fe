#include "reference/sampling_ref.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace wgrt::ref {
namespace {
float rank_value(float v) { return std::isnan(v) ? -std::numeric_limits<float>::infinity() : v; }
}  // namespace

std::vector<uint32_t> argmax_rows(const std::vector<float>& logits, uint32_t n_vocab) {
  std::vector<uint32_t> out;
  for (size_t base = 0; base < logits.size(); base += n_vocab) {
    uint32_t best = 0;
    for (uint32_t i = 1; i < n_vocab; ++i)
      if (rank_value(logits[base + i]) > rank_value(logits[base + best])) best = i;
    out.push_back(best);
  }
  return out;
}

TopKRef top_k_rows(const std::vector<float>& logits, uint32_t n_vocab, uint32_t k) {
  TopKRef r;
  std::vector<uint32_t> order(n_vocab);
  for (size_t base = 0; base < logits.size(); base += n_vocab) {
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      return rank_value(logits[base + a]) > rank_value(logits[base + b]);
    });
    for (uint32_t i = 0; i < k; ++i) {
      r.indices.push_back(order[i]);
      float v = rank_value(logits[base + order[i]]);
      r.values.push_back(v == 0.f ? 0.f : v);
    }
  }
  return r;
}

std::vector<float> logsumexp_rows(const std::vector<float>& logits, uint32_t n_vocab) {
  std::vector<float> out(logits.size() / n_vocab);
  for (size_t r = 0; r < out.size(); ++r) {
    double m = -std::numeric_limits<double>::infinity();
    for (uint32_t i = 0; i < n_vocab; ++i)
      if (!std::isnan(logits[r * n_vocab + i])) m = std::max(m, double(logits[r * n_vocab + i]));
    if (m == -std::numeric_limits<double>::infinity()) {
      out[r] = -std::numeric_limits<float>::infinity();
      continue;
    }
    double sum = 0;
    for (uint32_t i = 0; i < n_vocab; ++i) {
      const float v = logits[r * n_vocab + i];
      if (!std::isnan(v)) sum += std::exp(double(v) - m);
    }
    out[r] = float(m + std::log(sum));
  }
  return out;
}

uint32_t sample_pick(const std::vector<float>& v, uint32_t k, float temperature, float top_p, float min_p,
                     uint32_t draw, double* margin) {
  std::vector<double> prob(k);
  double sum = 0;
  for (uint32_t i = 0; i < k; ++i) sum += prob[i] = std::exp(double(v[i]) - v[0]);
  uint32_t keep = k;
  double mass = 0;
  for (uint32_t i = 0; i < k; ++i) {
    mass += prob[i] / sum;
    if (mass >= top_p) {
      keep = i + 1;
      break;
    }
  }
  for (uint32_t i = 1; i < keep; ++i)
    if (prob[i] < min_p) {
      keep = i;
      break;
    }
  std::vector<double> w(keep);
  double total = 0;
  for (uint32_t i = 0; i < keep; ++i) total += w[i] = std::exp((double(v[i]) - v[0]) / temperature);
  const double goal = double(draw) / 4294967296.0 * total;
  double run = 0, nearest = 1e300;
  uint32_t chosen = keep - 1;
  bool found = false;
  for (uint32_t i = 0; i < keep; ++i) {
    run += w[i];
    nearest = std::min(nearest, std::fabs(run - goal));
    if (!found && run > goal) chosen = i, found = true;
  }
  if (margin) *margin = nearest / total;
  return chosen;
}

}  // namespace wgrt::ref
