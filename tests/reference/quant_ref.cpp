#include "reference/quant_ref.h"

#include <cmath>

namespace wgrt::ref {

float half_to_float(uint16_t h) {
  int sign = (h >> 15) & 1;
  int exponent = (h >> 10) & 31;
  int fraction = h & 1023;
  double v;
  if (exponent == 0)
    v = std::ldexp(double(fraction), -24);
  else if (exponent == 31)
    v = fraction ? NAN : INFINITY;
  else
    v = std::ldexp(1.0 + fraction / 1024.0, exponent - 15);
  return float(sign ? -v : v);
}

namespace {
float scale_of(const std::vector<uint32_t>& scales, size_t i) {
  uint32_t word = scales.at(i / 2);
  return half_to_float(uint16_t(i % 2 == 0 ? word & 0xFFFF : word >> 16));
}
}  // namespace

std::vector<float> dequant_q4gsw(const std::vector<uint32_t>& q, const std::vector<uint32_t>& scales,
                                 uint32_t n, uint32_t k, uint32_t gs) {
  std::vector<float> out;
  for (uint32_t row = 0; row < n; ++row)
    for (uint32_t col = 0; col < k; ++col) {
      uint32_t word = q.at((size_t(row) * k + col) / 8);
      int nibble = int((word >> (4 * (col % 8))) & 15);
      out.push_back(float(nibble - 8) * scale_of(scales, size_t(row) * (k / gs) + col / gs));
    }
  return out;
}

std::vector<float> dequant_q8(const std::vector<uint32_t>& q, const std::vector<uint32_t>& scales,
                              uint32_t n, uint32_t k, uint32_t gs) {
  std::vector<float> out;
  for (uint32_t row = 0; row < n; ++row)
    for (uint32_t col = 0; col < k; ++col) {
      uint32_t word = q.at((size_t(row) * k + col) / 4);
      int byte = int((word >> (8 * (col % 4))) & 255);
      int value = byte >= 128 ? byte - 256 : byte;
      out.push_back(float(value) * scale_of(scales, size_t(row) * (k / gs) + col / gs));
    }
  return out;
}

std::vector<float> dequant_gguf_q4_0(const std::vector<uint8_t>& blocks, size_t count) {
  std::vector<float> out(count);
  for (size_t b = 0; b < count / 32; ++b) {
    const uint8_t* blk = &blocks.at(b * 18);
    float d = half_to_float(uint16_t(blk[0] + 256 * blk[1]));
    for (int i = 0; i < 16; ++i) {
      out[b * 32 + i] = float((blk[2 + i] & 15) - 8) * d;
      out[b * 32 + i + 16] = float((blk[2 + i] >> 4) - 8) * d;
    }
  }
  return out;
}

std::vector<float> dequant_gguf_q8_0(const std::vector<uint8_t>& blocks, size_t count) {
  std::vector<float> out(count);
  for (size_t b = 0; b < count / 32; ++b) {
    const uint8_t* blk = &blocks.at(b * 34);
    float d = half_to_float(uint16_t(blk[0] + 256 * blk[1]));
    for (int i = 0; i < 32; ++i) out[b * 32 + i] = float(int8_t(blk[2 + i])) * d;
  }
  return out;
}

std::vector<float> dequant_gguf_q6_k(const std::vector<uint8_t>& blocks, size_t count) {
  std::vector<float> out(count);
  for (size_t e = 0; e < count; ++e) {
    const uint8_t* b = blocks.data() + (e / 256) * 210;
    const size_t i = e % 256, h = i / 128, t = (i / 32) % 4, l = i % 32;
    const unsigned lo = (b[64 * h + 32 * (t % 2) + l] >> (t >= 2 ? 4 : 0)) & 15u;
    const unsigned hi = (b[128 + 32 * h + l] >> (2 * t)) & 3u;
    const int scale = int8_t(b[192 + 8 * h + 2 * t + l / 16]);
    const float d = half_to_float(uint16_t(b[208] | (b[209] << 8)));
    out[e] = d * float(scale) * float(int(lo | (hi << 4)) - 32);
  }
  return out;
}

namespace {

std::vector<float> dequant_gguf_k(const std::vector<uint8_t>& blocks, size_t count, bool five) {
  const size_t bytes = five ? 176 : 144;
  std::vector<float> out(count);
  for (size_t e = 0; e < count; ++e) {
    const uint8_t* b = &blocks.at((e / 256) * bytes);
    const size_t i = e % 256, c = i / 64, u = (i / 32) % 2, l = i % 32, j = 2 * c + u;
    const uint8_t* sb = b + 4;
    unsigned scale, min;
    if (j < 4) {
      scale = sb[j] & 63u;
      min = sb[j + 4] & 63u;
    } else {
      scale = (sb[j + 4] & 15u) | unsigned(sb[j - 4] >> 6) << 4;
      min = unsigned(sb[j + 4] >> 4) | unsigned(sb[j] >> 6) << 4;
    }
    const uint8_t* qs = b + (five ? 48 : 16);
    unsigned q = (qs[32 * c + l] >> (4 * u)) & 15u;
    if (five) q += 16u * ((b[16 + l] >> (2 * c + u)) & 1u);
    const float d = half_to_float(uint16_t(b[0] | (b[1] << 8)));
    const float dmin = half_to_float(uint16_t(b[2] | (b[3] << 8)));
    out[e] = d * float(scale) * float(q) - dmin * float(min);
  }
  return out;
}

}  // namespace

std::vector<float> dequant_gguf_q4_k(const std::vector<uint8_t>& blocks, size_t count) {
  return dequant_gguf_k(blocks, count, false);
}

std::vector<float> dequant_gguf_q5_k(const std::vector<uint8_t>& blocks, size_t count) {
  return dequant_gguf_k(blocks, count, true);
}

namespace {

// Element i (0..31) of a 32-value block: its nibble from qs (byte i % 16, high half for i >= 16)
// and, where the block has them, its fifth bit from qh (byte i / 8, bit i % 8).
int legacy_q(const uint8_t* qs, const uint8_t* qh, int i) {
  int q = i < 16 ? qs[i] % 16 : qs[i - 16] / 16;
  if (qh) q += 16 * ((qh[i / 8] >> (i % 8)) & 1);
  return q;
}

std::vector<float> dequant_legacy(const std::vector<uint8_t>& blocks, size_t count, bool has_min, bool five) {
  const size_t bytes = 2 + (has_min ? 2 : 0) + (five ? 4 : 0) + 16;
  std::vector<float> out(count);
  for (size_t b = 0; b < count / 32; ++b) {
    const uint8_t* blk = &blocks.at(b * bytes);
    const float d = half_to_float(uint16_t(blk[0] + 256 * blk[1]));
    const float m = has_min ? half_to_float(uint16_t(blk[2] + 256 * blk[3])) : 0.f;
    const uint8_t* qh = five ? blk + (has_min ? 4 : 2) : nullptr;
    const uint8_t* qs = blk + bytes - 16;
    for (int i = 0; i < 32; ++i) {
      const int q = legacy_q(qs, qh, i);
      out[b * 32 + i] = has_min ? float(q) * d + m : float(q - 16) * d;
    }
  }
  return out;
}

}  // namespace

std::vector<float> dequant_gguf_q4_1(const std::vector<uint8_t>& blocks, size_t count) {
  return dequant_legacy(blocks, count, true, false);
}
std::vector<float> dequant_gguf_q5_0(const std::vector<uint8_t>& blocks, size_t count) {
  return dequant_legacy(blocks, count, false, true);
}
std::vector<float> dequant_gguf_q5_1(const std::vector<uint8_t>& blocks, size_t count) {
  return dequant_legacy(blocks, count, true, true);
}

namespace {
const float kIq4Grid[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
}  // namespace

std::vector<float> dequant_gguf_iq4_xs(const std::vector<uint8_t>& blocks, size_t count) {
  std::vector<float> out(count);
  for (size_t e = 0; e < count; ++e) {
    const uint8_t* blk = &blocks.at(e / 256 * 136);
    const size_t j = e % 256 / 32, l = e % 32;
    const float d = half_to_float(uint16_t(blk[0] + 256 * blk[1]));
    const unsigned scales_h = blk[2] + 256u * blk[3];
    const int ls = int((blk[4 + j / 2] >> (4 * (j % 2))) % 16 + 16 * ((scales_h >> (2 * j)) % 4));
    const uint8_t byte = blk[8 + 16 * j + l % 16];
    const int nib = l < 16 ? byte % 16 : byte / 16;
    out[e] = d * float(ls - 32) * kIq4Grid[nib];
  }
  return out;
}

std::vector<float> dequant_gguf_iq4_nl(const std::vector<uint8_t>& blocks, size_t count) {
  std::vector<float> out(count);
  for (size_t b = 0; b < count / 32; ++b) {
    const uint8_t* blk = &blocks.at(b * 18);
    const float d = half_to_float(uint16_t(blk[0] + 256 * blk[1]));
    for (int i = 0; i < 32; ++i) out[b * 32 + i] = d * kIq4Grid[legacy_q(blk + 2, nullptr, i)];
  }
  return out;
}

std::vector<float> dequant_gguf_q2_k(const std::vector<uint8_t>& blocks, size_t count) {
  std::vector<float> out(count);
  for (size_t e = 0; e < count; ++e) {
    const uint8_t* blk = &blocks.at(e / 256 * 84);
    const size_t i = e % 256, half = i / 128, shift = 2 * ((i % 128) / 32), l = i % 32;
    const unsigned q = (blk[16 + 32 * half + l] >> shift) % 4;
    const unsigned sc = blk[i / 16] % 16, mn = blk[i / 16] / 16;
    const float d = half_to_float(uint16_t(blk[80] + 256 * blk[81]));
    const float dmin = half_to_float(uint16_t(blk[82] + 256 * blk[83]));
    out[e] = d * float(sc) * float(q) - dmin * float(mn);
  }
  return out;
}

std::vector<float> dequant_gguf_q3_k(const std::vector<uint8_t>& blocks, size_t count) {
  std::vector<float> out(count);
  for (size_t e = 0; e < count; ++e) {
    const uint8_t* blk = &blocks.at(e / 256 * 110);
    const size_t i = e % 256, half = i / 128, j = (i % 128) / 32, l = i % 32, s = i / 16;
    const int lo = (blk[32 + 32 * half + l] >> (2 * j)) % 4;
    const bool high = (blk[l] >> (4 * half + j)) % 2;
    const int scale = int((blk[96 + s % 8] >> (s < 8 ? 0 : 4)) % 16 + 16 * ((blk[104 + s % 4] >> (2 * (s / 4))) % 4));
    const float d = half_to_float(uint16_t(blk[108] + 256 * blk[109]));
    out[e] = d * float(scale - 32) * float(high ? lo : lo - 4);
  }
  return out;
}

}  // namespace wgrt::ref
