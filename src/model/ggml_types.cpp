#include "model/ggml_types.h"

#include "ops/quant/quant.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <stdexcept>

namespace wgrt::model {

const GgmlTypeInfo* ggml_type_info(uint32_t type) {
  static const GgmlTypeInfo f32{"F32", 1, 4, true}, f16{"F16", 1, 2, true},
      bf16{"BF16", 1, 2, true}, q4_0{"Q4_0", 32, 18, true}, q4_1{"Q4_1", 32, 20, true},
      q5_0{"Q5_0", 32, 22, true}, q5_1{"Q5_1", 32, 24, true}, q8_0{"Q8_0", 32, 34, true},
      q8_1{"Q8_1", 32, 36, false}, q2_k{"Q2_K", 256, 84, true}, q3_k{"Q3_K", 256, 110, true},
      q4_k{"Q4_K", 256, 144, true}, q5_k{"Q5_K", 256, 176, true}, q6_k{"Q6_K", 256, 210, true},
      q8_k{"Q8_K", 256, 292, false}, iq4_nl{"IQ4_NL", 32, 18, true}, iq4_xs{"IQ4_XS", 256, 136, true};
  switch (GgmlType(type)) {
    case GgmlType::F32: return &f32;
    case GgmlType::F16: return &f16;
    case GgmlType::BF16: return &bf16;
    case GgmlType::Q4_0: return &q4_0;
    case GgmlType::Q4_1: return &q4_1;
    case GgmlType::Q5_0: return &q5_0;
    case GgmlType::Q5_1: return &q5_1;
    case GgmlType::Q8_0: return &q8_0;
    case GgmlType::Q8_1: return &q8_1;
    case GgmlType::Q2_K: return &q2_k;
    case GgmlType::Q3_K: return &q3_k;
    case GgmlType::Q4_K: return &q4_k;
    case GgmlType::Q5_K: return &q5_k;
    case GgmlType::Q6_K: return &q6_k;
    case GgmlType::Q8_K: return &q8_k;
    case GgmlType::IQ4_NL: return &iq4_nl;
    case GgmlType::IQ4_XS: return &iq4_xs;
  }
  return nullptr;
}

std::string ggml_type_name(uint32_t type) {
  const GgmlTypeInfo* info = ggml_type_info(type);
  return info ? info->name : fmt::format("type {}", type);
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      bits = sign | uint32_t(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000 | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  return std::bit_cast<float>(bits);
}

uint16_t f32_to_f16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t abs = x & 0x7fffffff;
  if (abs >= 0x7f800000) return uint16_t(sign | 0x7c00 | (abs > 0x7f800000 ? 0x200 : 0));
  if (abs >= 0x477ff000) return uint16_t(sign | 0x7c00);  // rounds past the largest half
  if (abs < 0x38800000) {  // subnormal half (or zero)
    if (abs < 0x33000000) return uint16_t(sign);
    uint32_t e = abs >> 23;
    uint32_t m = (abs & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - e;  // 14 + (113 - e)
    uint32_t half = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return uint16_t(sign | half);
  }
  uint32_t half = ((abs >> 13) - ((127 - 15) << 10));
  uint32_t rem = abs & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;
  return uint16_t(sign | half);
}

float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

namespace {

uint16_t rd16(const uint8_t* p) { return uint16_t(p[0] | p[1] << 8); }

// The 6-bit scale and min of sub-block j (0..7) from Q4_K/Q5_K's 12 packed bytes.
void k_scale_min(int j, const uint8_t* s, uint8_t& sc, uint8_t& m) {
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = uint8_t((s[j + 4] & 0xf) | ((s[j - 4] >> 6) << 4));
    m = uint8_t((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

void dequant_q4_0(const uint8_t* b, float* y) {
  float d = f16_to_f32(rd16(b));
  for (int i = 0; i < 16; ++i) {
    y[i] = float((b[2 + i] & 0xf) - 8) * d;
    y[i + 16] = float((b[2 + i] >> 4) - 8) * d;
  }
}

void dequant_q4_1(const uint8_t* b, float* y) {
  float d = f16_to_f32(rd16(b)), m = f16_to_f32(rd16(b + 2));
  for (int i = 0; i < 16; ++i) {
    y[i] = float(b[4 + i] & 0xf) * d + m;
    y[i + 16] = float(b[4 + i] >> 4) * d + m;
  }
}

// Q5_0 (with_min false) and Q5_1: the fifth bit of element e is bit e of qh, a little-endian u32.
void dequant_q5(const uint8_t* b, float* y, bool with_min) {
  const float d = f16_to_f32(rd16(b)), m = with_min ? f16_to_f32(rd16(b + 2)) : 0.f;
  const uint8_t* qh = b + (with_min ? 4 : 2);
  const uint8_t* qs = qh + 4;
  const uint32_t h = uint32_t(qh[0] | qh[1] << 8 | qh[2] << 16) | uint32_t(qh[3]) << 24;
  for (int i = 0; i < 16; ++i) {
    const int q0 = (qs[i] & 0xf) | int((h >> i) & 1) << 4, q1 = (qs[i] >> 4) | int((h >> (i + 16)) & 1) << 4;
    y[i] = with_min ? float(q0) * d + m : float(q0 - 16) * d;
    y[i + 16] = with_min ? float(q1) * d + m : float(q1 - 16) * d;
  }
}

void dequant_q8_0(const uint8_t* b, float* y) {
  float d = f16_to_f32(rd16(b));
  for (int i = 0; i < 32; ++i) y[i] = float(int8_t(b[2 + i])) * d;
}

void dequant_q4_k(const uint8_t* b, float* y) {
  float d = f16_to_f32(rd16(b)), dmin = f16_to_f32(rd16(b + 2));
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  for (int chunk = 0; chunk < 4; ++chunk) {  // 64 elements from 32 bytes
    uint8_t sc0, m0, sc1, m1;
    k_scale_min(2 * chunk, scales, sc0, m0);
    k_scale_min(2 * chunk + 1, scales, sc1, m1);
    for (int l = 0; l < 32; ++l) y[l] = d * sc0 * float(q[l] & 0xf) - dmin * m0;
    for (int l = 0; l < 32; ++l) y[32 + l] = d * sc1 * float(q[l] >> 4) - dmin * m1;
    q += 32;
    y += 64;
  }
}

void dequant_q5_k(const uint8_t* b, float* y) {
  float d = f16_to_f32(rd16(b)), dmin = f16_to_f32(rd16(b + 2));
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* q = b + 48;
  uint8_t bit_lo = 1, bit_hi = 2;
  for (int chunk = 0; chunk < 4; ++chunk) {
    uint8_t sc0, m0, sc1, m1;
    k_scale_min(2 * chunk, scales, sc0, m0);
    k_scale_min(2 * chunk + 1, scales, sc1, m1);
    for (int l = 0; l < 32; ++l)
      y[l] = d * sc0 * float((q[l] & 0xf) + ((qh[l] & bit_lo) ? 16 : 0)) - dmin * m0;
    for (int l = 0; l < 32; ++l)
      y[32 + l] = d * sc1 * float((q[l] >> 4) + ((qh[l] & bit_hi) ? 16 : 0)) - dmin * m1;
    q += 32;
    y += 64;
    bit_lo = uint8_t(bit_lo << 2);
    bit_hi = uint8_t(bit_hi << 2);
  }
}

void dequant_iq4_nl(const uint8_t* b, float* y) {
  const float d = f16_to_f32(rd16(b));
  for (int l = 0; l < 16; ++l) {
    y[l] = d * float(ops::kIq4Values[b[2 + l] & 0xf]);
    y[l + 16] = d * float(ops::kIq4Values[b[2 + l] >> 4]);
  }
}

void dequant_iq4_xs(const uint8_t* b, float* y) {
  const int8_t* grid = ops::kIq4Values;
  const float d = f16_to_f32(rd16(b));
  const uint16_t scales_h = rd16(b + 2);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 8; ++j, qs += 16, y += 32) {
    const int ls = ((b[4 + j / 2] >> (4 * (j % 2))) & 0xf) | ((scales_h >> (2 * j)) & 3) << 4;
    const float dl = d * float(ls - 32);
    for (int l = 0; l < 16; ++l) {
      y[l] = dl * float(grid[qs[l] & 0xf]);
      y[l + 16] = dl * float(grid[qs[l] >> 4]);
    }
  }
}

// Q2_K: element 128h + 32j + l is bits 2j of qs[32h + l], sub-block (32j + l) / 16 of half h.
void dequant_q2_k(const uint8_t* b, float* y) {
  const uint8_t* sc = b;
  const uint8_t* qs = b + 16;
  const float d = f16_to_f32(rd16(b + 80)), dmin = f16_to_f32(rd16(b + 82));
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, j = (e % 128) / 32, l = e % 32, s = e / 16;
    const int q = (qs[32 * h + l] >> (2 * j)) & 3;
    y[e] = d * float(sc[s] & 0xf) * float(q) - dmin * float(sc[s] >> 4);
  }
}

// Q3_K: as Q2_K's qs with a high bit per element (bit 4h + j of hmask[l]; clear: q - 4), and
// 16 6-bit scales packed in 12 bytes, stored as scale + 32.
void dequant_q3_k(const uint8_t* b, float* y) {
  const uint8_t* hm = b;
  const uint8_t* qs = b + 32;
  const uint8_t* sc = b + 96;
  const float d = f16_to_f32(rd16(b + 108));
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, j = (e % 128) / 32, l = e % 32, s = e / 16;
    const int s6 = ((sc[s % 8] >> (4 * (s / 8))) & 0xf) | ((sc[8 + s % 4] >> (2 * (s / 4))) & 3) << 4;
    const int q = ((qs[32 * h + l] >> (2 * j)) & 3) - (((hm[l] >> (4 * h + j)) & 1) ? 0 : 4);
    y[e] = d * float(s6 - 32) * float(q);
  }
}

void dequant_q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  float d = f16_to_f32(rd16(b + 208));
  for (int half = 0; half < 2; ++half) {  // 128 elements each
    for (int l = 0; l < 32; ++l) {
      int is = l / 16;
      int q1 = int((ql[l] & 0xf) | ((qh[l] >> 0) & 3) << 4) - 32;
      int q2 = int((ql[l + 32] & 0xf) | ((qh[l] >> 2) & 3) << 4) - 32;
      int q3 = int((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
      int q4 = int((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
      y[l] = d * sc[is] * float(q1);
      y[l + 32] = d * sc[is + 2] * float(q2);
      y[l + 64] = d * sc[is + 4] * float(q3);
      y[l + 96] = d * sc[is + 6] * float(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

}  // namespace

void dequantize(GgmlType type, const uint8_t* src, float* dst, size_t n) {
  const GgmlTypeInfo* info = ggml_type_info(uint32_t(type));
  if (!info || !info->supported)
    throw std::invalid_argument(fmt::format("dequantize: {} is not supported", ggml_type_name(uint32_t(type))));
  if (n % info->block_elems)
    throw std::invalid_argument(fmt::format("dequantize: {} elements is not a whole number of {} "
                                            "blocks", n, info->name));
  size_t blocks = n / info->block_elems;
  for (size_t i = 0; i < blocks; ++i) {
    const uint8_t* b = src + i * info->block_bytes;
    float* y = dst + i * info->block_elems;
    switch (type) {
      case GgmlType::F32: std::memcpy(y, b, 4); break;
      case GgmlType::F16: *y = f16_to_f32(rd16(b)); break;
      case GgmlType::BF16: *y = bf16_to_f32(rd16(b)); break;
      case GgmlType::Q4_0: dequant_q4_0(b, y); break;
      case GgmlType::Q4_1: dequant_q4_1(b, y); break;
      case GgmlType::Q5_0: dequant_q5(b, y, false); break;
      case GgmlType::Q5_1: dequant_q5(b, y, true); break;
      case GgmlType::Q8_0: dequant_q8_0(b, y); break;
      case GgmlType::Q4_K: dequant_q4_k(b, y); break;
      case GgmlType::Q5_K: dequant_q5_k(b, y); break;
      case GgmlType::Q6_K: dequant_q6_k(b, y); break;
      case GgmlType::Q2_K: dequant_q2_k(b, y); break;
      case GgmlType::Q3_K: dequant_q3_k(b, y); break;
      case GgmlType::IQ4_NL: dequant_iq4_nl(b, y); break;
      case GgmlType::IQ4_XS: dequant_iq4_xs(b, y); break;
      default: break;  // unreachable: unsupported types throw above
    }
  }
}

}  // namespace wgrt::model
