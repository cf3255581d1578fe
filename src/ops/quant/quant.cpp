#include "ops/quant/quant.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace wgrt::ops {

const char* quant_format_name(QuantFormat f) {
  switch (f) {
    case QuantFormat::Q4gsw: return "q4gsw";
    case QuantFormat::Q8: return "q8";
    case QuantFormat::Q6K: return "q6k";
    case QuantFormat::Q4K: return "q4k";
    case QuantFormat::Q5K: return "q5k";
    case QuantFormat::Q41: return "q4_1";
    case QuantFormat::Q50: return "q5_0";
    case QuantFormat::Q51: return "q5_1";
    case QuantFormat::IQ4XS: return "iq4_xs";
    case QuantFormat::Q2K: return "q2k";
    case QuantFormat::Q3K: return "q3k";
    case QuantFormat::IQ4NL: return "iq4_nl";
  }
  return "?";
}

uint64_t quant_q_words(QuantFormat f, uint32_t n, uint32_t k) { return uint64_t(n) * quant_row_words(f, k); }
uint64_t quant_scale_words(QuantFormat f, uint32_t n, uint32_t k, uint32_t gs) {
  if (has_kq_scales(f)) return kq_scale_words(n, k);
  if (has_dm_scales(f)) return uint64_t(n) * (k / 32);
  if (f == QuantFormat::IQ4XS) return uint64_t(n) * (k / 256) * 2;
  if (f == QuantFormat::Q2K) return uint64_t(n) * (k / 256);
  return (uint64_t(n) * (k / gs) + 1) / 2;
}

void check_quant_shape(uint32_t n, uint32_t k, uint32_t gs, const char* what) {
  if (gs != 32 && gs != 64 && gs != 128 && gs != 256)
    throw std::invalid_argument(fmt::format("{}: group size {} (hint: use 32, 64 or 128)", what, gs));
  if (n == 0 || k == 0 || k % gs != 0)
    throw std::invalid_argument(
        fmt::format("{}: weight [{}, {}] needs K a positive multiple of the group size {}", what, n, k, gs));
}

void check_format_shape(QuantFormat f, uint32_t n, uint32_t k, uint32_t gs, const char* what) {
  if (from_gguf_blocks(f) && !is_k_quant(f)) {  // Q41, Q50, Q51, IQ4NL: GGUF's 32-value blocks
    if (gs != 32) throw std::invalid_argument(fmt::format("{}: a {} weight takes group size 32 (not {})", what,
                                                          quant_format_name(f), gs));
    check_quant_shape(n, k, gs, what);
    return;
  }
  const uint32_t want = has_block_d(f) ? 256 : is_k_quant(f) ? 32 : 0;
  if (want && gs != want)
    throw std::invalid_argument(fmt::format("{}: a {} weight takes group size {} (not {})", what,
                                            quant_format_name(f), want, gs));
  if (want && (k == 0 || k % 256 != 0 || n == 0))
    throw std::invalid_argument(fmt::format("{}: a {} weight [{}, {}] needs N > 0 and K a positive multiple of 256 "
                                            "(its super-blocks)", what, quant_format_name(f), n, k));
  if (!want) check_quant_shape(n, k, gs, what);
}

uint16_t f32_to_f16(float x) {
  uint32_t b = std::bit_cast<uint32_t>(x);
  uint32_t sign = (b >> 16) & 0x8000u;
  uint32_t exp = (b >> 23) & 0xFFu;
  uint32_t man = b & 0x7FFFFFu;
  if (exp == 0xFF) return uint16_t(sign | 0x7C00u | (man ? 0x200u : 0u));  // inf / nan
  int e = int(exp) - 127 + 15;
  if (e >= 31) return uint16_t(sign | 0x7C00u);
  if (e <= 0) {  // subnormal half (or zero)
    if (e < -10) return uint16_t(sign);
    man |= 0x800000u;
    uint32_t shift = uint32_t(14 - e);
    uint32_t h = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return uint16_t(sign | h);
  }
  uint32_t h = (uint32_t(e) << 10) | (man >> 13);
  uint32_t rem = man & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent: fine
  return uint16_t(sign | h);
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t man = h & 0x3FFu;
  if (exp == 0) {
    float v = std::ldexp(float(man), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7F800000u | (man << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (man << 13));
}

namespace {

uint16_t get_half(const std::vector<uint32_t>& words, uint64_t i) {
  return uint16_t(words[i / 2] >> (16 * (i % 2)));
}
void set_half(std::vector<uint32_t>& words, uint64_t i, uint16_t h) {
  words[i / 2] |= uint32_t(h) << (16 * (i % 2));
}

QuantWeight empty_weight(QuantFormat f, uint32_t n, uint32_t k, uint32_t gs) {
  QuantWeight w{f, n, k, gs, {}, {}};
  w.q.assign(quant_q_words(f, n, k), 0);
  w.scales.assign(quant_scale_words(f, n, k, gs), 0);
  return w;
}

void set_q(QuantWeight& w, uint64_t idx, int q) {  // idx = n * k + k
  if (w.format == QuantFormat::Q4gsw)
    w.q[idx / 8] |= uint32_t(q + 8) << (4 * (idx % 8));
  else
    w.q[idx / 4] |= uint32_t(uint8_t(int8_t(q))) << (8 * (idx % 4));
}

int get_q(const QuantWeight& w, uint64_t idx) {
  if (w.format == QuantFormat::Q4gsw) return int((w.q[idx / 8] >> (4 * (idx % 8))) & 0xFu) - 8;
  return int(int8_t(uint8_t(w.q[idx / 4] >> (8 * (idx % 4)))));
}

}  // namespace

QuantWeight quantize(QuantFormat f, std::span<const float> w, uint32_t n, uint32_t k, uint32_t gs) {
  if (from_gguf_blocks(f))
    throw std::invalid_argument(fmt::format("quantize: {} weights come from GGUF files only (hint: q4gsw or q8)",
                                            quant_format_name(f)));
  check_quant_shape(n, k, gs, "quantize");
  if (w.size() != uint64_t(n) * k)
    throw std::invalid_argument(fmt::format("quantize: {} values for a [{}, {}] weight", w.size(), n, k));
  const int qmax = f == QuantFormat::Q4gsw ? 7 : 127;
  const int qmin = f == QuantFormat::Q4gsw ? -8 : -127;
  QuantWeight out = empty_weight(f, n, k, gs);
  const uint32_t groups = k / gs;
  for (uint32_t r = 0; r < n; ++r)
    for (uint32_t g = 0; g < groups; ++g) {
      const float* x = w.data() + uint64_t(r) * k + uint64_t(g) * gs;
      float amax = 0;
      for (uint32_t i = 0; i < gs; ++i) {
        if (!std::isfinite(x[i]))
          throw std::invalid_argument(fmt::format("quantize: non-finite value at [{}, {}]", r, g * gs + i));
        amax = std::max(amax, std::fabs(x[i]));
      }
      uint16_t sh = f32_to_f16(amax / float(qmax));
      float scale = f16_to_f32(sh);
      if (std::isinf(scale))
        throw std::invalid_argument(fmt::format(
            "quantize {}: row {} group {} has |x| = {}, past what an f16 scale covers",
            quant_format_name(f), r, g, amax));
      set_half(out.scales, uint64_t(r) * groups + g, sh);
      for (uint32_t i = 0; i < gs; ++i) {
        int q = scale > 0 ? int(std::lround(x[i] / scale)) : 0;
        set_q(out, uint64_t(r) * k + uint64_t(g) * gs + i, std::clamp(q, qmin, qmax));
      }
    }
  return out;
}

namespace {

// ggml's Q6_K arithmetic on a repacked block (52 words) and its d.
void dequant_q6k_block(const uint32_t* words, float d, float* y) {
  const auto* b = reinterpret_cast<const uint8_t*>(words);
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  for (int half = 0; half < 2; ++half, ql += 64, qh += 32, sc += 8, y += 128)
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      y[l] = d * sc[is] * float(int((ql[l] & 0xf) | ((qh[l] >> 0) & 3) << 4) - 32);
      y[l + 32] = d * sc[is + 2] * float(int((ql[l + 32] & 0xf) | ((qh[l] >> 2) & 3) << 4) - 32);
      y[l + 64] = d * sc[is + 4] * float(int((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32);
      y[l + 96] = d * sc[is + 6] * float(int((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32);
    }
}

// Q4K/Q5K arithmetic (quant.h), value by value: d * scale * q - dmin * min, in f32 like ggml
// (d * scale and dmin * min are exact, so the one rounding is the subtraction's).
std::vector<float> dequantize_kq(const QuantWeight& w) {
  const uint64_t blocks = uint64_t(w.n) * (w.k / 256), b_off = kq_region_b(w.n, w.k);
  const uint32_t rw = quant_row_words(w.format, w.k);
  std::vector<float> out(uint64_t(w.n) * w.k);
  for (uint64_t b = 0; b < blocks; ++b) {
    const uint32_t dm = w.scales[b];
    const float d = f16_to_f32(uint16_t(dm)), dmin = f16_to_f32(uint16_t(dm >> 16));
    const uint64_t row = b / (w.k / 256), col0 = (b % (w.k / 256)) * 256;
    for (uint32_t e = 0; e < 256; ++e) {
      const uint32_t j = e / 32;
      const uint32_t sc = (w.scales[b_off + b * 4 + j / 4] >> (8 * (j % 4))) & 0xFFu;
      const uint32_t mn = (w.scales[b_off + b * 4 + 2 + j / 4] >> (8 * (j % 4))) & 0xFFu;
      const uint64_t c = col0 + e;
      uint32_t q = (w.q[row * rw + c / 8] >> (4 * (c % 8))) & 0xFu;
      if (w.format == QuantFormat::Q5K) q |= ((w.q[row * rw + w.k / 8 + c / 32] >> (c % 32)) & 1u) << 4;
      out[row * w.k + c] = d * float(sc) * float(q) - dmin * float(mn);
    }
  }
  return out;
}

// Q41/Q50/Q51/IQ4NL arithmetic (quant.h), in f32 like ggml: d * q is exact, so the one rounding
// is the min's addition.
std::vector<float> dequantize_legacy(const QuantWeight& w) {
  const uint32_t rw = quant_row_words(w.format, w.k), groups = w.k / 32;
  const bool five = has_fifth_bits(w.format), dm = has_dm_scales(w.format);
  std::vector<float> out(uint64_t(w.n) * w.k);
  for (uint64_t row = 0; row < w.n; ++row)
    for (uint32_t c = 0; c < w.k; ++c) {
      uint32_t q = (w.q[row * rw + c / 8] >> (4 * (c % 8))) & 0xFu;
      if (five) q |= ((w.q[row * rw + w.k / 8 + c / 32] >> (c % 32)) & 1u) << 4;
      const uint64_t g = row * groups + c / 32;
      float& y = out[row * w.k + c];
      if (dm)
        y = f16_to_f32(uint16_t(w.scales[g])) * float(q) + f16_to_f32(uint16_t(w.scales[g] >> 16));
      else if (w.format == QuantFormat::IQ4NL)
        y = f16_to_f32(get_half(w.scales, g)) * float(kIq4Values[q]);
      else
        y = f16_to_f32(get_half(w.scales, g)) * float(int(q) - 16);
    }
  return out;
}

// IQ4XS (quant.h): d * (ls - 32) * kIq4Values[i], exact in f32 (11 + 6 + 7 bits of mantissa).
std::vector<float> dequantize_iq4xs(const QuantWeight& w) {
  const uint32_t rw = quant_row_words(w.format, w.k), per_row = w.k / 256;
  std::vector<float> out(uint64_t(w.n) * w.k);
  for (uint64_t row = 0; row < w.n; ++row)
    for (uint32_t c = 0; c < w.k; ++c) {
      const uint64_t b = row * per_row + c / 256;
      const uint32_t w0 = w.scales[2 * b], w1 = w.scales[2 * b + 1], j = (c % 256) / 32;
      const int ls = int(((w1 >> (4 * j)) & 15u) | ((w0 >> (16 + 2 * j)) & 3u) << 4);
      const uint32_t i = (w.q[row * rw + c / 8] >> (4 * (c % 8))) & 0xFu;
      out[row * w.k + c] = f16_to_f32(uint16_t(w0)) * float(ls - 32) * float(kIq4Values[i]);
    }
  return out;
}

// Q2K / Q3K (quant.h), value by value in f32 like ggml: Q2K's d * scale * q and dmin * min are
// exact, so the one rounding is the subtraction's; Q3K's d * scale * (q - 4) is exact.
std::vector<float> dequantize_q23k(const QuantWeight& w) {
  const bool q3 = w.format == QuantFormat::Q3K;
  const uint32_t bw = q3 ? kQ3KWords : kQ2KWords;
  std::vector<float> out(uint64_t(w.n) * w.k);
  for (uint64_t b = 0; b < uint64_t(w.n) * (w.k / 256); ++b) {
    const uint32_t* q = w.q.data() + b * bw;
    const auto* sub = reinterpret_cast<const uint8_t*>(q + (q3 ? 24 : 16));
    for (uint32_t e = 0; e < 256; ++e) {
      const uint32_t wi = e / 16, s = (e % 16) / 4, byte = e % 4;
      uint32_t v = (q[wi] >> (8 * byte + 2 * s)) & 3u;
      float& y = out[b * 256 + e];
      if (q3) {
        v |= ((q[16 + wi / 2] >> (8 * byte + 4 * (wi % 2) + s)) & 1u) << 2;
        y = f16_to_f32(get_half(w.scales, b)) * float(int8_t(sub[e / 16])) * float(int(v) - 4);
      } else {
        const float d = f16_to_f32(uint16_t(w.scales[b])), dmin = f16_to_f32(uint16_t(w.scales[b] >> 16));
        y = d * float(sub[e / 16] & 15u) * float(v) - dmin * float(sub[e / 16] >> 4);
      }
    }
  }
  return out;
}

}  // namespace

std::vector<float> dequantize(const QuantWeight& w) {
  check_format_shape(w.format, w.n, w.k, w.gs, "dequantize");
  if (from_gguf_blocks(w.format) && !is_k_quant(w.format)) {
    if (w.q.size() != quant_q_words(w.format, w.n, w.k) || w.scales.size() != quant_scale_words(w.format, w.n, w.k, 32))
      throw std::invalid_argument(fmt::format("dequantize: {} array sizes do not match the shape",
                                              quant_format_name(w.format)));
    return dequantize_legacy(w);
  }
  if (w.format == QuantFormat::IQ4XS) {
    if (w.q.size() != quant_q_words(w.format, w.n, w.k) || w.scales.size() != quant_scale_words(w.format, w.n, w.k, 32))
      throw std::invalid_argument("dequantize: IQ4XS array sizes do not match the shape");
    return dequantize_iq4xs(w);
  }
  if (w.format == QuantFormat::Q2K || w.format == QuantFormat::Q3K) {
    if (w.q.size() != quant_q_words(w.format, w.n, w.k) || w.scales.size() != quant_scale_words(w.format, w.n, w.k, 256))
      throw std::invalid_argument(fmt::format("dequantize: {} array sizes do not match the shape",
                                              quant_format_name(w.format)));
    return dequantize_q23k(w);
  }
  if (has_kq_scales(w.format)) {
    if (w.q.size() != quant_q_words(w.format, w.n, w.k) || w.scales.size() != kq_scale_words(w.n, w.k))
      throw std::invalid_argument("dequantize: Q4K/Q5K array sizes do not match the shape");
    return dequantize_kq(w);
  }
  if (w.format == QuantFormat::Q6K) {
    if (w.gs != 256 || w.q.size() != quant_q_words(w.format, w.n, w.k) ||
        w.scales.size() != quant_scale_words(w.format, w.n, w.k, 256))
      throw std::invalid_argument("dequantize: Q6K array sizes do not match the shape");
    std::vector<float> out(uint64_t(w.n) * w.k);
    for (uint64_t b = 0; b < uint64_t(w.n) * (w.k / 256); ++b)
      dequant_q6k_block(w.q.data() + b * kQ6KWords, f16_to_f32(get_half(w.scales, b)), out.data() + b * 256);
    return out;
  }
  if (w.q.size() != quant_q_words(w.format, w.n, w.k) || w.scales.size() != quant_scale_words(w.format, w.n, w.k, w.gs))
    throw std::invalid_argument("dequantize: array sizes do not match the shape");
  const uint32_t groups = w.k / w.gs;
  std::vector<float> out(uint64_t(w.n) * w.k);
  for (uint32_t r = 0; r < w.n; ++r)
    for (uint32_t c = 0; c < w.k; ++c) {
      float scale = f16_to_f32(get_half(w.scales, uint64_t(r) * groups + c / w.gs));
      uint64_t idx = uint64_t(r) * w.k + c;
      out[idx] = float(get_q(w, idx)) * scale;
    }
  return out;
}

namespace {

void check_gguf(std::span<const uint8_t> blocks, uint32_t n, uint32_t k, uint32_t block_bytes,
                const char* what) {
  if (n == 0 || k == 0 || k % 32 != 0)
    throw std::invalid_argument(fmt::format("{}: a [{}, {}] tensor needs K a multiple of 32", what, n, k));
  uint64_t want = uint64_t(n) * (k / 32) * block_bytes;
  if (blocks.size() != want)
    throw std::invalid_argument(fmt::format("{}: {} bytes for [{}, {}] (expected {})", what,
                                            blocks.size(), n, k, want));
}

}  // namespace

QuantWeight repack_gguf_q4_0(std::span<const uint8_t> blocks, uint32_t n, uint32_t k) {
  check_gguf(blocks, n, k, 18, "repack Q4_0");
  QuantWeight out = empty_weight(QuantFormat::Q4gsw, n, k, 32);
  const uint64_t nblocks = uint64_t(n) * (k / 32);
  for (uint64_t b = 0; b < nblocks; ++b) {
    const uint8_t* blk = blocks.data() + b * 18;
    set_half(out.scales, b, uint16_t(blk[0] | (blk[1] << 8)));
    // Block b covers k = 32b' .. of its row; the q words of consecutive blocks are consecutive.
    uint32_t* words = out.q.data() + b * 4;
    for (uint32_t i = 0; i < 16; ++i) {
      uint32_t lo = blk[2 + i] & 0xFu, hi = blk[2 + i] >> 4;
      words[i / 8] |= lo << (4 * (i % 8));                 // element i
      words[(i + 16) / 8] |= hi << (4 * ((i + 16) % 8));   // element i + 16
    }
  }
  return out;
}

QuantWeight repack_gguf_q8_0(std::span<const uint8_t> blocks, uint32_t n, uint32_t k) {
  check_gguf(blocks, n, k, 34, "repack Q8_0");
  QuantWeight out = empty_weight(QuantFormat::Q8, n, k, 32);
  const uint64_t nblocks = uint64_t(n) * (k / 32);
  for (uint64_t b = 0; b < nblocks; ++b) {
    const uint8_t* blk = blocks.data() + b * 34;
    set_half(out.scales, b, uint16_t(blk[0] | (blk[1] << 8)));
    uint32_t* words = out.q.data() + b * 8;
    for (uint32_t i = 0; i < 32; ++i) words[i / 4] |= uint32_t(blk[2 + i]) << (8 * (i % 4));
  }
  return out;
}

std::vector<uint32_t> pack_f16(std::span<const float> x) {
  std::vector<uint32_t> out((x.size() + 1) / 2, 0);
  for (size_t i = 0; i < x.size(); ++i) set_half(out, i, f32_to_f16(x[i]));
  return out;
}

std::vector<float> unpack_f16(std::span<const uint32_t> words, size_t count) {
  if (words.size() * 2 < count) throw std::invalid_argument("unpack_f16: too few words");
  std::vector<float> out(count);
  for (size_t i = 0; i < count; ++i) out[i] = f16_to_f32(uint16_t(words[i / 2] >> (16 * (i % 2))));
  return out;
}

QuantWeight repack_gguf_q6_k(std::span<const uint8_t> blocks, uint32_t n, uint32_t k) {
  if (n == 0 || k == 0 || k % 256 != 0)
    throw std::invalid_argument(fmt::format("Q6_K: a [{}, {}] tensor needs K a multiple of 256", n, k));
  const uint64_t nb = uint64_t(n) * (k / 256);
  if (blocks.size() != nb * 210)
    throw std::invalid_argument(fmt::format("Q6_K: {} bytes for [{}, {}] (expected {})", blocks.size(), n, k, nb * 210));
  QuantWeight out{.format = QuantFormat::Q6K, .n = n, .k = k, .gs = 256};
  out.q.resize(nb * kQ6KWords);
  out.scales.assign(quant_scale_words(QuantFormat::Q6K, n, k, 256), 0);
  for (uint64_t b = 0; b < nb; ++b) {
    const uint8_t* src = blocks.data() + b * 210;
    std::memcpy(out.q.data() + b * kQ6KWords, src, kQ6KWords * 4);  // ql, qh, scales
    uint16_t d;
    std::memcpy(&d, src + 208, 2);
    set_half(out.scales, b, d);
  }
  return out;
}

namespace {

// Q4_K and Q5_K share d, dmin and the 12 bytes of 6-bit scales and mins (sub-block j < 4: low 6
// bits of bytes j and j + 4; j >= 4: low nibbles of byte j + 4 over the top 2 bits of byte
// j - 4 (scale), high nibbles of byte j + 4 over the top 2 bits of byte j (min)).
void repack_kq_scales(const uint8_t* src, uint64_t b, QuantWeight& out, uint64_t b_off) {
  out.scales[b] = uint32_t(src[0] | src[1] << 8) | uint32_t(src[2] | src[3] << 8) << 16;
  const uint8_t* s = src + 4;
  for (uint32_t j = 0; j < 8; ++j) {
    uint32_t sc, m;
    if (j < 4) {
      sc = s[j] & 63u;
      m = s[j + 4] & 63u;
    } else {
      sc = (s[j + 4] & 0xFu) | ((s[j - 4] >> 6) << 4);
      m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
    out.scales[b_off + b * 4 + j / 4] |= sc << (8 * (j % 4));
    out.scales[b_off + b * 4 + 2 + j / 4] |= m << (8 * (j % 4));
  }
}

QuantWeight repack_kq(std::span<const uint8_t> blocks, uint32_t n, uint32_t k, QuantFormat f) {
  const bool q5 = f == QuantFormat::Q5K;
  const uint32_t bytes = q5 ? 176 : 144;
  const char* what = q5 ? "Q5_K" : "Q4_K";
  if (n == 0 || k == 0 || k % 256 != 0)
    throw std::invalid_argument(fmt::format("{}: a [{}, {}] tensor needs K a multiple of 256", what, n, k));
  const uint64_t per_row = k / 256, nb = uint64_t(n) * per_row;
  if (blocks.size() != nb * bytes)
    throw std::invalid_argument(fmt::format("{}: {} bytes for [{}, {}] (expected {})", what, blocks.size(), n, k,
                                            nb * bytes));
  QuantWeight out = empty_weight(f, n, k, 32);
  const uint64_t b_off = kq_region_b(n, k);
  const uint32_t rw = quant_row_words(f, k);
  for (uint64_t b = 0; b < nb; ++b) {
    const uint8_t* src = blocks.data() + b * bytes;
    repack_kq_scales(src, b, out, b_off);
    const uint8_t* qh = src + 16;
    const uint8_t* qs = src + (q5 ? 48 : 16);
    const uint64_t row = b / per_row, col0 = (b % per_row) * 256;
    uint32_t* nib = out.q.data() + row * rw + col0 / 8;
    uint32_t* hi = out.q.data() + row * rw + k / 8 + col0 / 32;
    for (uint32_t c = 0; c < 4; ++c)
      for (uint32_t l = 0; l < 32; ++l) {
        const uint32_t e0 = 64 * c + l, e1 = e0 + 32;
        const uint8_t byte = qs[32 * c + l];
        nib[e0 / 8] |= uint32_t(byte & 0xFu) << (4 * (e0 % 8));
        nib[e1 / 8] |= uint32_t(byte >> 4) << (4 * (e1 % 8));
        if (q5) {
          hi[e0 / 32] |= uint32_t((qh[l] >> (2 * c)) & 1u) << (e0 % 32);
          hi[e1 / 32] |= uint32_t((qh[l] >> (2 * c + 1)) & 1u) << (e1 % 32);
        }
      }
  }
  return out;
}

}  // namespace

QuantWeight repack_gguf_q4_k(std::span<const uint8_t> blocks, uint32_t n, uint32_t k) {
  return repack_kq(blocks, n, k, QuantFormat::Q4K);
}

QuantWeight repack_gguf_q5_k(std::span<const uint8_t> blocks, uint32_t n, uint32_t k) {
  return repack_kq(blocks, n, k, QuantFormat::Q5K);
}

namespace {

// Q4_1, Q5_0, Q5_1, IQ4_NL: per block the header (d, then m for Q4_1/Q5_1), the fifth bits
// (Q5_x), the 16 bytes of nibbles in Q4_0's order.
QuantWeight repack_legacy(std::span<const uint8_t> blocks, uint32_t n, uint32_t k, QuantFormat f) {
  const bool five = has_fifth_bits(f), dm = has_dm_scales(f);
  const uint32_t head = dm ? 4 : 2, bytes = head + (five ? 4 : 0) + 16;
  const char* what = f == QuantFormat::Q41   ? "repack Q4_1"
                     : f == QuantFormat::Q50 ? "repack Q5_0"
                     : f == QuantFormat::Q51 ? "repack Q5_1"
                                             : "repack IQ4_NL";
  check_gguf(blocks, n, k, bytes, what);
  QuantWeight out = empty_weight(f, n, k, 32);
  const uint32_t per_row = k / 32, rw = quant_row_words(f, k);
  for (uint64_t b = 0; b < uint64_t(n) * per_row; ++b) {
    const uint8_t* blk = blocks.data() + b * bytes;
    const uint16_t d = uint16_t(blk[0] | blk[1] << 8);
    if (dm)
      out.scales[b] = d | uint32_t(blk[2] | blk[3] << 8) << 16;
    else
      set_half(out.scales, b, d);
    const uint64_t row = b / per_row, col0 = (b % per_row) * 32;
    uint32_t* words = out.q.data() + row * rw + col0 / 8;
    const uint8_t* qs = blk + head + (five ? 4 : 0);
    for (uint32_t i = 0; i < 16; ++i) {
      words[i / 8] |= uint32_t(qs[i] & 0xFu) << (4 * (i % 8));
      words[(i + 16) / 8] |= uint32_t(qs[i] >> 4) << (4 * ((i + 16) % 8));
    }
    if (five) {
      const uint8_t* qh = blk + head;
      out.q[row * rw + k / 8 + col0 / 32] = uint32_t(qh[0] | qh[1] << 8 | qh[2] << 16) | uint32_t(qh[3]) << 24;
    }
  }
  return out;
}

}  // namespace

QuantWeight repack_gguf_q4_1(std::span<const uint8_t> blocks, uint32_t n, uint32_t k) {
  return repack_legacy(blocks, n, k, QuantFormat::Q41);
}

QuantWeight repack_gguf_q5_0(std::span<const uint8_t> blocks, uint32_t n, uint32_t k) {
  return repack_legacy(blocks, n, k, QuantFormat::Q50);
}

QuantWeight repack_gguf_q5_1(std::span<const uint8_t> blocks, uint32_t n, uint32_t k) {
  return repack_legacy(blocks, n, k, QuantFormat::Q51);
}

QuantWeight repack_gguf_iq4_nl(std::span<const uint8_t> blocks, uint32_t n, uint32_t k) {
  return repack_legacy(blocks, n, k, QuantFormat::IQ4NL);
}

QuantWeight repack_gguf_iq4_xs(std::span<const uint8_t> blocks, uint32_t n, uint32_t k) {
  if (n == 0 || k == 0 || k % 256 != 0)
    throw std::invalid_argument(fmt::format("IQ4_XS: a [{}, {}] tensor needs K a multiple of 256", n, k));
  const uint64_t per_row = k / 256, nb = uint64_t(n) * per_row;
  if (blocks.size() != nb * 136)
    throw std::invalid_argument(fmt::format("IQ4_XS: {} bytes for [{}, {}] (expected {})", blocks.size(), n, k,
                                            nb * 136));
  QuantWeight out = empty_weight(QuantFormat::IQ4XS, n, k, 32);
  for (uint64_t b = 0; b < nb; ++b) {
    const uint8_t* src = blocks.data() + b * 136;
    std::memcpy(&out.scales[2 * b], src, 8);  // d, scales_h, scales_l: little-endian words
    const uint8_t* qs = src + 8;
    uint32_t* words = out.q.data() + (b / per_row) * (k / 8) + (b % per_row) * 32;
    for (uint32_t j = 0; j < 8; ++j)
      for (uint32_t l = 0; l < 16; ++l) {
        const uint32_t e0 = 32 * j + l, e1 = e0 + 16;
        words[e0 / 8] |= uint32_t(qs[16 * j + l] & 0xFu) << (4 * (e0 % 8));
        words[e1 / 8] |= uint32_t(qs[16 * j + l] >> 4) << (4 * (e1 % 8));
      }
  }
  return out;
}

namespace {

// Element e of a 256-value block into the 2-bit planes (quant.h): word e / 16, byte e % 4,
// bits 2 ((e % 16) / 4).
void set_plane(uint32_t* words, uint32_t e, uint32_t q2) {
  words[e / 16] |= q2 << (8 * (e % 4) + 2 * ((e % 16) / 4));
}

QuantWeight repack_q23k(std::span<const uint8_t> blocks, uint32_t n, uint32_t k, QuantFormat f) {
  const bool q3 = f == QuantFormat::Q3K;
  const uint32_t bytes = q3 ? 110 : 84, bw = q3 ? kQ3KWords : kQ2KWords;
  const char* what = q3 ? "Q3_K" : "Q2_K";
  if (n == 0 || k == 0 || k % 256 != 0)
    throw std::invalid_argument(fmt::format("{}: a [{}, {}] tensor needs K a multiple of 256", what, n, k));
  const uint64_t nb = uint64_t(n) * (k / 256);
  if (blocks.size() != nb * bytes)
    throw std::invalid_argument(fmt::format("{}: {} bytes for [{}, {}] (expected {})", what, blocks.size(), n, k,
                                            nb * bytes));
  QuantWeight out = empty_weight(f, n, k, 256);
  for (uint64_t b = 0; b < nb; ++b) {
    const uint8_t* src = blocks.data() + b * bytes;
    uint32_t* words = out.q.data() + b * bw;
    const uint8_t* qs = src + (q3 ? 32 : 16);
    for (uint32_t e = 0; e < 256; ++e) {
      const uint32_t h = e / 128, j = (e % 128) / 32, l = e % 32;
      set_plane(words, e, (qs[32 * h + l] >> (2 * j)) & 3u);
      if (q3) {
        const uint32_t hbit = (src[l] >> (4 * h + j)) & 1u;
        words[16 + e / 32] |= hbit << (8 * (e % 4) + 4 * ((e / 16) % 2) + (e % 16) / 4);
      }
    }
    if (q3) {
      const uint8_t* sc = src + 96;
      for (uint32_t i = 0; i < 16; ++i) {
        const uint32_t s6 = ((sc[i % 8] >> (4 * (i / 8))) & 15u) | ((sc[8 + i % 4] >> (2 * (i / 4))) & 3u) << 4;
        words[24 + i / 4] |= uint32_t(uint8_t(int8_t(int(s6) - 32))) << (8 * (i % 4));
      }
      set_half(out.scales, b, uint16_t(src[108] | src[109] << 8));
    } else {
      std::memcpy(words + 16, src, 16);  // scales[16]: little-endian words
      out.scales[b] = uint32_t(src[80] | src[81] << 8) | uint32_t(src[82] | src[83] << 8) << 16;
    }
  }
  return out;
}

}  // namespace

QuantWeight repack_gguf_q2_k(std::span<const uint8_t> blocks, uint32_t n, uint32_t k) {
  return repack_q23k(blocks, n, k, QuantFormat::Q2K);
}

QuantWeight repack_gguf_q3_k(std::span<const uint8_t> blocks, uint32_t n, uint32_t k) {
  return repack_q23k(blocks, n, k, QuantFormat::Q3K);
}

QuantWeight repack_gguf_blocks(QuantFormat f, std::span<const uint8_t> blocks, uint32_t n, uint32_t k) {
  switch (f) {
    case QuantFormat::Q4gsw: return repack_gguf_q4_0(blocks, n, k);
    case QuantFormat::Q8: return repack_gguf_q8_0(blocks, n, k);
    case QuantFormat::Q6K: return repack_gguf_q6_k(blocks, n, k);
    case QuantFormat::Q4K: return repack_gguf_q4_k(blocks, n, k);
    case QuantFormat::Q5K: return repack_gguf_q5_k(blocks, n, k);
    case QuantFormat::Q41: return repack_gguf_q4_1(blocks, n, k);
    case QuantFormat::Q50: return repack_gguf_q5_0(blocks, n, k);
    case QuantFormat::Q51: return repack_gguf_q5_1(blocks, n, k);
    case QuantFormat::IQ4XS: return repack_gguf_iq4_xs(blocks, n, k);
    case QuantFormat::Q2K: return repack_gguf_q2_k(blocks, n, k);
    case QuantFormat::Q3K: return repack_gguf_q3_k(blocks, n, k);
    case QuantFormat::IQ4NL: return repack_gguf_iq4_nl(blocks, n, k);
  }
  throw std::invalid_argument("repack_gguf_blocks: unknown format");
}

}  // namespace wgrt::ops
