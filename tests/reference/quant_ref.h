// Reference dequantizers for the quantized weight formats, written from the format
// descriptions (ops/quant/quant.h, GGUF's Q4_0/Q8_0) without sharing code with src/ops/quant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace wgrt::ref {

// IEEE half -> float, by the formula (sign, exponent, fraction).
float half_to_float(uint16_t h);

// q4gsw: q [n, k/8] u32, scales f16 [n, k/gs] (two per u32, low half first).
std::vector<float> dequant_q4gsw(const std::vector<uint32_t>& q, const std::vector<uint32_t>& scales,
                                 uint32_t n, uint32_t k, uint32_t gs);
// q8: q [n, k/4] u32 (int8 bytes), scales as above.
std::vector<float> dequant_q8(const std::vector<uint32_t>& q, const std::vector<uint32_t>& scales,
                              uint32_t n, uint32_t k, uint32_t gs);

// GGUF blocks of 32: Q4_0 (f16 d, 16 bytes: byte i = element i low nibble, i + 16 high),
// Q8_0 (f16 d, 32 int8).
std::vector<float> dequant_gguf_q4_0(const std::vector<uint8_t>& blocks, size_t count);
std::vector<float> dequant_gguf_q8_0(const std::vector<uint8_t>& blocks, size_t count);
// GGUF Q6_K, 210 bytes per 256 elements: element e = 128 h + 32 t + l (h < 2, t < 4, l < 32) has
// low 4 bits from byte 64 h + 32 (t % 2) + l of ql[128] (low nibble for t < 2, high for t >= 2),
// high 2 bits from bits 2t..2t+1 of byte 32 h + l of qh[64], int8 scale scales[8 h + 2 t + l / 16]
// (bytes 192..207), f16 d (bytes 208..209): value = d * scale * (q - 32).
std::vector<float> dequant_gguf_q6_k(const std::vector<uint8_t>& blocks, size_t count);
// GGUF Q4_K (144 bytes per 256) and Q5_K (176): f16 d, f16 dmin, 12 bytes holding 8 6-bit
// (scale, min) pairs, then (Q5_K) qh[32], then qs[128]. Element e = 64 c + 32 u + l (c < 4,
// u < 2, l < 32) of the block is nibble u of qs[32 c + l], plus (Q5_K) 16 times bit 2c + u of
// qh[l]; sub-block j = 2c + u: value = d * scale_j * q - dmin * min_j. Pair j < 4: scale =
// bytes[j] & 63, min = bytes[j + 4] & 63; j >= 4: scale = (bytes[j + 4] & 15) | (bytes[j - 4] >> 6) << 4,
// min = (bytes[j + 4] >> 4) | (bytes[j] >> 6) << 4.
std::vector<float> dequant_gguf_q4_k(const std::vector<uint8_t>& blocks, size_t count);
std::vector<float> dequant_gguf_q5_k(const std::vector<uint8_t>& blocks, size_t count);
// GGUF blocks of 32 with a min or a fifth bit: Q4_1 (20 bytes: f16 d, f16 m, qs[16] as Q4_0's;
// value = d * q + m), Q5_0 (22: f16 d, qh[4], qs[16]; the fifth bit of element i is bit i % 8
// of qh[i / 8]; value = d * (q - 16)), Q5_1 (24: f16 d, f16 m, qh[4], qs[16]; d * q + m).
std::vector<float> dequant_gguf_q4_1(const std::vector<uint8_t>& blocks, size_t count);
std::vector<float> dequant_gguf_q5_0(const std::vector<uint8_t>& blocks, size_t count);
std::vector<float> dequant_gguf_q5_1(const std::vector<uint8_t>& blocks, size_t count);
// GGUF Q2_K (84 bytes per 256) and Q3_K (110) blocks, element by element.
std::vector<float> dequant_gguf_q2_k(const std::vector<uint8_t>& blocks, size_t count);
std::vector<float> dequant_gguf_q3_k(const std::vector<uint8_t>& blocks, size_t count);
// GGUF IQ4_XS, 136 bytes per 256: f16 d, u16 scales_h, scales_l[4], qs[128]. Sub-block j (32
// values) has scale ls = (scales_l[j / 2] >> 4 (j % 2)) & 15 | ((scales_h >> 2j) & 3) << 4;
// its element l < 16 is the low nibble of qs[16 j + l], l >= 16 the high nibble of
// qs[16 j + l - 16]; value = d * (ls - 32) * grid[nibble], grid = {-127, -104, -83, -65, -49,
// -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113} (ggml's kvalues_iq4nl).
std::vector<float> dequant_gguf_iq4_xs(const std::vector<uint8_t>& blocks, size_t count);
// GGUF IQ4_NL, 18 bytes per 32: f16 d, qs[16] as Q4_0's; value = d * grid[nibble], the grid above.
std::vector<float> dequant_gguf_iq4_nl(const std::vector<uint8_t>& blocks, size_t count);

}  // namespace wgrt::ref
