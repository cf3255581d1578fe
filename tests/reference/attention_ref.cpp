#include "reference/attention_ref.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace wgrt::ref {

namespace {
std::vector<TokenRow> one_sequence(uint32_t n_tokens, uint32_t pos) {
  std::vector<TokenRow> rows(n_tokens);
  for (uint32_t i = 0; i < n_tokens; ++i) rows[i] = {pos + i, 0};
  return rows;
}
}  // namespace

void kv_write(std::vector<float>& cache, const KvShape& s, const std::vector<float>& k,
              uint32_t n_tokens, uint32_t pos) {
  kv_write_rows(cache, s, k, one_sequence(n_tokens, pos));
}

void kv_write_rows(std::vector<float>& cache, const KvShape& s, const std::vector<float>& k,
                   const std::vector<TokenRow>& rows) {
  for (uint32_t i = 0; i < rows.size(); ++i)
    for (uint32_t h = 0; h < s.n_kv_heads; ++h)
      for (uint32_t d = 0; d < s.head_dim; ++d)
        cache[(size_t(h) * s.n_ctx + rows[i].base + rows[i].pos) * s.head_dim + d] =
            k[(size_t(i) * s.n_kv_heads + h) * s.head_dim + d];
}

std::vector<float> attention(const std::vector<float>& q, const std::vector<float>& k_cache,
                             const std::vector<float>& v_cache, const KvShape& s,
                             uint32_t n_tokens, uint32_t n_heads, uint32_t pos, float scale,
                             uint32_t window, float softcap) {
  return attention_rows(q, k_cache, v_cache, s, one_sequence(n_tokens, pos), n_heads, scale, window, softcap);
}

std::vector<float> attention_rows(const std::vector<float>& q, const std::vector<float>& k_cache,
                                  const std::vector<float>& v_cache, const KvShape& s,
                                  const std::vector<TokenRow>& rows, uint32_t n_heads, float scale,
                                  uint32_t window, float softcap) {
  const uint32_t hd = s.head_dim, group = n_heads / s.n_kv_heads;
  const uint32_t n_tokens = uint32_t(rows.size());
  std::vector<float> out(size_t(n_tokens) * n_heads * hd);
  std::vector<double> score, acc(hd);
  for (uint32_t i = 0; i < n_tokens; ++i) {
    const uint32_t n_keys = rows[i].pos + 1;
    const uint32_t first = window && n_keys > window ? n_keys - window : 0;  // the sliding window's first key
    score.assign(n_keys, 0.0);
    for (uint32_t h = 0; h < n_heads; ++h) {
      const float* qi = &q[(size_t(i) * n_heads + h) * hd];
      const size_t base = (size_t(h / group) * s.n_ctx + rows[i].base) * hd;
      double mx = -std::numeric_limits<double>::infinity();
      for (uint32_t j = first; j < n_keys; ++j) {
        double dot = 0;
        for (uint32_t d = 0; d < hd; ++d) dot += double(qi[d]) * k_cache[base + size_t(j) * hd + d];
        score[j] = dot * scale;
        if (softcap > 0) score[j] = softcap * std::tanh(score[j] / softcap);
        mx = std::max(mx, score[j]);
      }
      double sum = 0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (uint32_t j = first; j < n_keys; ++j) {
        double p = std::exp(score[j] - mx);
        sum += p;
        for (uint32_t d = 0; d < hd; ++d) acc[d] += p * v_cache[base + size_t(j) * hd + d];
      }
      for (uint32_t d = 0; d < hd; ++d) out[(size_t(i) * n_heads + h) * hd + d] = float(acc[d] / sum);
    }
  }
  return out;
}

std::vector<float> softmax(const std::vector<float>& x, uint32_t rows, uint32_t n) {
  std::vector<float> y(x.size());
  for (uint32_t r = 0; r < rows; ++r) {
    const float* xr = &x[size_t(r) * n];
    double mx = -std::numeric_limits<double>::infinity();
    for (uint32_t i = 0; i < n; ++i) mx = std::max(mx, double(xr[i]));
    double sum = 0;
    for (uint32_t i = 0; i < n; ++i) sum += std::exp(double(xr[i]) - mx);
    for (uint32_t i = 0; i < n; ++i) y[size_t(r) * n + i] = float(std::exp(double(xr[i]) - mx) / sum);
  }
  return y;
}

uint16_t f32_to_f16(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  const uint32_t sign = (b >> 16) & 0x8000u;
  const uint32_t abs = b & 0x7fffffffu;
  if (abs >= 0x7f800000u) return uint16_t(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds past 65504: inf
  if (abs < 0x38800000u) {  // subnormal half (or zero)
    float f;
    std::memcpy(&f, &abs, 4);
    return uint16_t(sign | uint32_t(std::nearbyint(double(f) * 16777216.0)));  // units of 2^-24
  }
  uint32_t mant = abs & 0x7fffffu;
  uint32_t exp = (abs >> 23) - 112;  // rebias 127 -> 15
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // nearest, ties to even
  return uint16_t(sign | h);
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  float mag;
  if (exp == 0) mag = std::ldexp(float(mant), -24);
  else if (exp == 31) mag = mant ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else mag = std::ldexp(float(mant | 0x400u), int(exp) - 25);
  uint32_t b;
  std::memcpy(&b, &mag, 4);
  b |= sign;
  std::memcpy(&mag, &b, 4);
  return mag;
}

}  // namespace wgrt::ref
