#include "model/ggml_quantize.h"

#include "ops/quant/quant.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace wgrt::model {
namespace {

void put16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v);
  p[1] = uint8_t(v >> 8);
}

int nearest(float v) { return int(std::lround(v)); }

void q8_0_block(const float* x, uint8_t* b) {
  float amax = 0;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  float d = amax / 127.f;
  uint16_t dh = f32_to_f16(d);
  float dq = f16_to_f32(dh);
  float id = dq != 0 ? 1.f / dq : 0.f;
  put16(b, dh);
  for (int i = 0; i < 32; ++i) b[2 + i] = uint8_t(int8_t(std::clamp(nearest(x[i] * id), -128, 127)));
}

void q4_0_block(const float* x, uint8_t* b) {
  // The value of largest magnitude maps to -8, so the full [-8, 7] range is used.
  float max = 0, amax = 0;
  for (int i = 0; i < 32; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  float d = max / -8.f;
  uint16_t dh = f32_to_f16(d);
  float dq = f16_to_f32(dh);
  float id = dq != 0 ? 1.f / dq : 0.f;
  put16(b, dh);
  for (int i = 0; i < 16; ++i) {
    int lo = std::clamp(nearest(x[i] * id) + 8, 0, 15);
    int hi = std::clamp(nearest(x[i + 16] * id) + 8, 0, 15);
    b[2 + i] = uint8_t(lo | hi << 4);
  }
}

// Q4_1 (bits 4) and Q5_1 (bits 5): x ≈ d·q + m over the block's range, q ∈ [0, 2^bits − 1].
void q_min_block(const float* x, uint8_t* b, int bits) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < 32; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
  const int qmax = (1 << bits) - 1;
  const uint16_t dh = f32_to_f16((hi - lo) / float(qmax)), mh = f32_to_f16(lo);
  const float d = f16_to_f32(dh), m = f16_to_f32(mh);
  const float id = d != 0 ? 1.f / d : 0.f;
  put16(b, dh);
  put16(b + 2, mh);
  uint8_t* qs = b + (bits == 5 ? 8 : 4);
  uint32_t qh = 0;
  for (int i = 0; i < 16; ++i) {
    const int lo_q = std::clamp(nearest((x[i] - m) * id), 0, qmax);
    const int hi_q = std::clamp(nearest((x[i + 16] - m) * id), 0, qmax);
    qs[i] = uint8_t((lo_q & 0xf) | (hi_q & 0xf) << 4);
    qh |= uint32_t(lo_q >> 4) << i | uint32_t(hi_q >> 4) << (i + 16);
  }
  if (bits == 5)
    for (int j = 0; j < 4; ++j) b[4 + j] = uint8_t(qh >> (8 * j));
}

// Q5_0: x ≈ d·(q − 16), q ∈ [0, 31]; the value of largest magnitude maps to −16 as in Q4_0.
void q5_0_block(const float* x, uint8_t* b) {
  float max = 0, amax = 0;
  for (int i = 0; i < 32; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  const uint16_t dh = f32_to_f16(max / -16.f);
  const float dq = f16_to_f32(dh);
  const float id = dq != 0 ? 1.f / dq : 0.f;
  put16(b, dh);
  uint32_t qh = 0;
  for (int i = 0; i < 16; ++i) {
    const int lo = std::clamp(nearest(x[i] * id) + 16, 0, 31);
    const int hi = std::clamp(nearest(x[i + 16] * id) + 16, 0, 31);
    b[6 + i] = uint8_t((lo & 0xf) | (hi & 0xf) << 4);
    qh |= uint32_t(lo >> 4) << i | uint32_t(hi >> 4) << (i + 16);
  }
  for (int j = 0; j < 4; ++j) b[2 + j] = uint8_t(qh >> (8 * j));
}

// The grid points nearest x[l] / s of 32 values, as nibbles in Q4_0's order into qs[16]
// (which must be zero): element l < 16 in the low nibble of qs[l], l + 16 in the high one.
void iq4_nibbles(const float* x, float s, uint8_t* qs) {
  const int8_t* grid = ops::kIq4Values;
  for (int l = 0; l < 32; ++l) {
    int best = 0;
    for (int i = 1; i < 16; ++i)
      if (std::fabs(s * grid[i] - x[l]) < std::fabs(s * grid[best] - x[l])) best = i;
    qs[l % 16] |= uint8_t(best << (l < 16 ? 0 : 4));
  }
}

// The scale that maps the value of largest magnitude of 32 onto the grid's end of its sign (-127).
float iq4_scale(const float* x) {
  float max = 0;
  for (int l = 0; l < 32; ++l)
    if (std::fabs(x[l]) > std::fabs(max)) max = x[l];
  return max / -127.f;
}

// IQ4_NL: a block of 32, x ≈ d·grid[q] with ggml's 16-value grid; d = iq4_scale in f16.
void iq4_nl_block(const float* x, uint8_t* b) {
  const uint16_t dh = f32_to_f16(iq4_scale(x));
  std::memset(b, 0, 18);
  put16(b, dh);
  iq4_nibbles(x, f16_to_f32(dh), b + 2);
}

// IQ4_XS: 8 sub-blocks of 32, x ≈ d·(ls − 32)·grid[q], a 6-bit ls. Each sub-block's scale is
// iq4_scale; d holds the largest of them over 32 steps; q is the grid point nearest x / scale.
void iq4_xs_block(const float* x, uint8_t* b) {
  float sub[8];
  for (int j = 0; j < 8; ++j) sub[j] = iq4_scale(x + 32 * j);
  float amax = 0;
  for (float s : sub) amax = std::max(amax, std::fabs(s));
  const uint16_t dh = f32_to_f16(amax / 32.f);
  const float d = f16_to_f32(dh);
  std::memset(b, 0, 136);
  put16(b, dh);
  uint16_t scales_h = 0;
  for (int j = 0; j < 8; ++j) {
    const int ls = d > 0 ? std::clamp(nearest(sub[j] / d) + 32, 0, 63) : 32;
    b[4 + j / 2] |= uint8_t((ls & 0xf) << (4 * (j % 2)));
    scales_h |= uint16_t((ls >> 4) << (2 * j));
    iq4_nibbles(x + 32 * j, d * float(ls - 32), b + 8 + 16 * j);
  }
  put16(b + 2, scales_h);
}

// Q4_K: 8 sub-blocks of 32, x ≈ d·sc·q − dmin·m with q ∈ [0, 15], 6-bit sc and m.
void q4_k_block(const float* x, uint8_t* b) {
  float scale[8], min[8];
  for (int j = 0; j < 8; ++j) {
    float lo = 0, hi = 0;  // the range always includes 0 so m >= 0
    for (int l = 0; l < 32; ++l) {
      lo = std::min(lo, x[32 * j + l]);
      hi = std::max(hi, x[32 * j + l]);
    }
    scale[j] = (hi - lo) / 15.f;
    min[j] = -lo;
  }
  float max_scale = *std::max_element(scale, scale + 8), max_min = *std::max_element(min, min + 8);
  uint16_t dh = f32_to_f16(max_scale / 63.f), dminh = f32_to_f16(max_min / 63.f);
  float d = f16_to_f32(dh), dmin = f16_to_f32(dminh);
  uint8_t sc[8], m[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = uint8_t(d > 0 ? std::clamp(nearest(scale[j] / d), 0, 63) : 0);
    m[j] = uint8_t(dmin > 0 ? std::clamp(nearest(min[j] / dmin), 0, 63) : 0);
  }
  put16(b, dh);
  put16(b + 2, dminh);
  uint8_t* s = b + 4;
  for (int j = 0; j < 4; ++j) {
    s[j] = uint8_t((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    s[j + 4] = uint8_t((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    s[j + 8] = uint8_t((sc[j + 4] & 0xf) | ((m[j + 4] & 0xf) << 4));
  }
  uint8_t* q = b + 16;
  for (int chunk = 0; chunk < 4; ++chunk) {
    int j0 = 2 * chunk, j1 = 2 * chunk + 1;
    float d0 = d * sc[j0], d1 = d * sc[j1], m0 = dmin * m[j0], m1 = dmin * m[j1];
    for (int l = 0; l < 32; ++l) {
      int a = d0 > 0 ? std::clamp(nearest((x[32 * j0 + l] + m0) / d0), 0, 15) : 0;
      int c = d1 > 0 ? std::clamp(nearest((x[32 * j1 + l] + m1) / d1), 0, 15) : 0;
      q[32 * chunk + l] = uint8_t(a | c << 4);
    }
  }
}

// Q6_K: 16 sub-blocks of 16, x ≈ d·scale·(q − 32) with q ∈ [0, 63], int8 scales.
void q6_k_block(const float* x, uint8_t* b) {
  float sub[16];
  for (int j = 0; j < 16; ++j) {
    float amax = 0;
    for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(x[16 * j + l]));
    sub[j] = amax / 31.f;
  }
  float max_sub = *std::max_element(sub, sub + 16);
  uint16_t dh = f32_to_f16(max_sub / 127.f);
  float d = f16_to_f32(dh);
  int8_t scales[16];
  for (int j = 0; j < 16; ++j) scales[j] = int8_t(d > 0 ? std::clamp(nearest(sub[j] / d), -128, 127) : 0);
  uint8_t q[256];
  for (int i = 0; i < 256; ++i) {
    float s = d * scales[i / 16];
    q[i] = uint8_t(s > 0 ? std::clamp(nearest(x[i] / s) + 32, 0, 63) : 32);
  }
  uint8_t* ql = b;
  uint8_t* qh = b + 128;
  std::memset(b, 0, 210);
  for (int half = 0; half < 2; ++half) {
    const uint8_t* qq = q + 128 * half;
    for (int l = 0; l < 32; ++l) {
      ql[l] = uint8_t((qq[l] & 0xf) | (qq[l + 64] & 0xf) << 4);
      ql[l + 32] = uint8_t((qq[l + 32] & 0xf) | (qq[l + 96] & 0xf) << 4);
      qh[l] = uint8_t((qq[l] >> 4) | (qq[l + 32] >> 4) << 2 | (qq[l + 64] >> 4) << 4 | (qq[l + 96] >> 4) << 6);
    }
    ql += 64;
    qh += 32;
  }
  std::memcpy(b + 192, scales, 16);
  put16(b + 208, dh);
}

}  // namespace

std::vector<uint8_t> quantize(GgmlType type, std::span<const float> x) {
  const GgmlTypeInfo* info = ggml_type_info(uint32_t(type));
  if (!info || x.size() % info->block_elems)
    throw std::invalid_argument(fmt::format("quantize: {} values do not fill whole {} blocks", x.size(),
                                            ggml_type_name(uint32_t(type))));
  size_t blocks = x.size() / info->block_elems;
  std::vector<uint8_t> out(blocks * info->block_bytes);
  for (size_t i = 0; i < blocks; ++i) {
    const float* xb = x.data() + i * info->block_elems;
    uint8_t* b = out.data() + i * info->block_bytes;
    switch (type) {
      case GgmlType::F32: std::memcpy(b, xb, 4); break;
      case GgmlType::F16: put16(b, f32_to_f16(*xb)); break;
      case GgmlType::BF16: {
        uint32_t bits = std::bit_cast<uint32_t>(*xb);
        put16(b, uint16_t((bits + 0x7fff + ((bits >> 16) & 1)) >> 16));  // round to nearest even
        break;
      }
      case GgmlType::Q8_0: q8_0_block(xb, b); break;
      case GgmlType::Q4_0: q4_0_block(xb, b); break;
      case GgmlType::Q4_1: q_min_block(xb, b, 4); break;
      case GgmlType::Q5_0: q5_0_block(xb, b); break;
      case GgmlType::Q5_1: q_min_block(xb, b, 5); break;
      case GgmlType::Q4_K: q4_k_block(xb, b); break;
      case GgmlType::Q6_K: q6_k_block(xb, b); break;
      case GgmlType::IQ4_NL: iq4_nl_block(xb, b); break;
      case GgmlType::IQ4_XS: iq4_xs_block(xb, b); break;
      default:
        throw std::invalid_argument(fmt::format("quantize: wgrt does not write {}", info->name));
    }
  }
  return out;
}

}  // namespace wgrt::model
