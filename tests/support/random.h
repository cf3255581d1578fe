// Deterministic test data.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace wgrt::test {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// `count` GGUF Q6_K blocks (210 bytes): random ql, qh and int8 scales, and a normal f16 d of
// either sign in [2^-7, 2^-1) so values stay moderate.
inline std::vector<uint8_t> random_q6_k_blocks(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(count * 210);
  for (size_t i = 0; i < count; ++i) {
    uint8_t* blk = b.data() + i * 210;
    for (int j = 0; j < 208; ++j) blk[j] = uint8_t(rng());
    uint16_t d = uint16_t(0x2000 + rng() % 0x1800);
    if (rng() % 2) d |= 0x8000;
    blk[208] = uint8_t(d);
    blk[209] = uint8_t(d >> 8);
  }
  return b;
}

// GGUF Q4_K (144 bytes) / Q5_K (176) blocks: random scale bytes and quants, d and dmin small
// positive halves (ggml's quantizer writes dmin >= 0 too).
inline std::vector<uint8_t> random_k_blocks(size_t count, uint32_t seed, bool five) {
  const size_t bytes = five ? 176 : 144;
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(count * bytes);
  for (size_t i = 0; i < count; ++i) {
    uint8_t* blk = b.data() + i * bytes;
    for (size_t j = 4; j < bytes; ++j) blk[j] = uint8_t(rng());
    for (int h = 0; h < 2; ++h) {
      const uint16_t v = uint16_t(0x1400 + rng() % 0x1000);  // about 1e-3 .. 2e-2
      blk[2 * h] = uint8_t(v);
      blk[2 * h + 1] = uint8_t(v >> 8);
    }
  }
  return b;
}

// GGUF Q4_1 (20 bytes), Q5_0 (22), Q5_1 (24) or IQ4_NL (18) blocks: random quants and fifth
// bits, d a normal f16 of either sign in [2^-7, 2^-3) (IQ4_NL: about 5e-4 .. 4e-3), m (Q4_1,
// Q5_1) one of either sign below 2^-1.
inline std::vector<uint8_t> random_legacy_blocks(size_t count, uint32_t seed, size_t bytes) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(count * bytes);
  for (size_t i = 0; i < count; ++i) {
    uint8_t* blk = b.data() + i * bytes;
    for (size_t j = 2; j < bytes; ++j) blk[j] = uint8_t(rng());
    // IQ4_NL (18 bytes): its grid reaches 127, so d as small as IQ4_XS's.
    uint16_t d = uint16_t(bytes == 18 ? 0x1000 + rng() % 0x0C00 : 0x2000 + rng() % 0x1000);
    if (rng() % 2) d |= 0x8000;
    blk[0] = uint8_t(d);
    blk[1] = uint8_t(d >> 8);
    if (bytes == 20 || bytes == 24) {  // Q4_1, Q5_1: m
      uint16_t m = uint16_t(rng() % 0x3800);
      if (rng() % 2) m |= 0x8000;
      blk[2] = uint8_t(m);
      blk[3] = uint8_t(m >> 8);
    }
  }
  return b;
}

// GGUF IQ4_XS blocks (136 bytes): random scales and quants, d a small positive half.
inline std::vector<uint8_t> random_iq4_xs_blocks(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> b(count * 136);
  for (size_t i = 0; i < count; ++i) {
    uint8_t* blk = b.data() + i * 136;
    for (size_t j = 2; j < 136; ++j) blk[j] = uint8_t(rng());
    const uint16_t d = uint16_t(0x1000 + rng() % 0x0C00);  // about 5e-4 .. 4e-3
    blk[0] = uint8_t(d);
    blk[1] = uint8_t(d >> 8);
  }
  return b;
}

// GGUF Q2_K (84 bytes) / Q3_K (110) blocks: random scale bytes and quants; d (and Q2_K's
// dmin) small positive halves, as ggml's quantizer writes them.
inline std::vector<uint8_t> random_q23_k_blocks(size_t count, uint32_t seed, bool q3) {
  std::mt19937 rng(seed);
  const size_t bytes = q3 ? 110 : 84;
  std::vector<uint8_t> b(count * bytes);
  for (size_t i = 0; i < count; ++i) {
    uint8_t* blk = b.data() + i * bytes;
    for (size_t j = 0; j < bytes; ++j) blk[j] = uint8_t(rng());
    for (size_t at = q3 ? 108 : 80; at < bytes; at += 2) {
      const uint16_t d = uint16_t(0x1800 + rng() % 0x0C00);  // about 2e-3 .. 1.5e-2
      blk[at] = uint8_t(d);
      blk[at + 1] = uint8_t(d >> 8);
    }
  }
  return b;
}

// Largest |a - b| relative to (1 + |b|).
inline float max_rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  float worst = a.size() == b.size() ? 0.f : 1e30f;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    float d = std::abs(a[i] - b[i]) / (1.f + std::abs(b[i]));
    if (!(d <= worst)) worst = d;  // NaN propagates as a failure
  }
  return worst;
}

}  // namespace wgrt::test
