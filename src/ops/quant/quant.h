// Group-wise quantized weight formats (q4gsw, q8) and their CPU side: pack from f32,
// dequantize, and the lossless repack of GGUF Q4_0 / Q8_0 blocks. The runtime uses these at
// load time; kernels (linear_q, embedding) read the layouts below directly.
//
// Both formats quantize a weight [N, K] row by row, one scale per (row n, group of gs along K),
// gs in {32, 64, 128}, K a multiple of gs. Two arrays, each a tensor of its own:
//
//   q4gsw  q       u32 [N, K/8]   word w of row n holds k = 8w + i in bits 4i..4i+3 (nibble i),
//                                 stored as q + 8, q in [-8, 7]
//   q8     q       u32 [N, K/4]   word w of row n holds k = 4w + i in byte i, two's complement
//                                 int8, q in [-128, 127] (pack uses [-127, 127]; GGUF may use -128)
//   both   scales  f16 [N, K/gs]  row-major, two per u32 (pack2x16float order: element 2j in the
//                                 low half of word j), the last word zero-padded when N*K/gs is odd
//
//   value(n, k) = q(n, k) * f32(scale(n, k / gs))      (exact in f32: an f16 times a small int)
//
// Scales are f16 like GGUF's, so a Q4_0/Q8_0 repack is lossless and a q4gsw gs=32 weight costs
// 4.5 bits per value. Packing from f32 picks scale = f16(absmax / 7) (q4gsw) or f16(absmax / 127)
// (q8) and rounds x / scale to nearest (ties away from zero), clamped to the range; a group whose
// scale would overflow f16 (|x| > 65504 * 7 for q4gsw, 65504 * 127 for q8) is rejected.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace wgrt::ops {

// Q6K: GGUF Q6_K blocks of 256 values, repacked to words (gemv route and embedding only):
//   q       u32 [N, K/256 * 52]  per block ql[128] | qh[64] | scales[16] bytes as in the file
//                                 (ggml: value = d * scales[j] * (6-bit q - 32))
//   scales  f16 [N, K/256]       the block's d
// 210 bytes per 256 values, the file's size; gs is 256.
enum class QuantFormat : uint8_t { Q4gsw, Q8, Q6K };

const char* quant_format_name(QuantFormat f);

struct QuantWeight {
  QuantFormat format = QuantFormat::Q4gsw;
  uint32_t n = 0, k = 0, gs = 32;
  std::vector<uint32_t> q;       // [N, K/8] (q4gsw) or [N, K/4] (q8)
  std::vector<uint32_t> scales;  // f16 [N, K/gs], two per word
};

// Values per u32 word of `q`: 8 (q4gsw) or 4 (q8); Q6K has 52 words per 256 values.
constexpr uint32_t values_per_word(QuantFormat f) { return f == QuantFormat::Q4gsw ? 8 : 4; }
constexpr uint32_t kQ6KWords = 52;
// Words of `q` per row of k values.
constexpr uint32_t quant_row_words(QuantFormat f, uint32_t k) {
  return f == QuantFormat::Q6K ? k / 256 * kQ6KWords : k / values_per_word(f);
}
// Words of `q` and of `scales` for a weight [n, k] with group size gs.
uint64_t quant_q_words(QuantFormat f, uint32_t n, uint32_t k);
uint64_t quant_scale_words(uint32_t n, uint32_t k, uint32_t gs);

// Throws std::invalid_argument unless gs is 32/64/128 (256: Q6K) and k is a positive multiple of gs.
void check_quant_shape(uint32_t n, uint32_t k, uint32_t gs, const char* what);

// f16 <-> f32 (round to nearest even; overflow gives inf), for scales and f16 tensors.
uint16_t f32_to_f16(float x);
float f16_to_f32(uint16_t h);

// w is [n, k] row-major f32.
QuantWeight quantize(QuantFormat f, std::span<const float> w, uint32_t n, uint32_t k, uint32_t gs);
std::vector<float> dequantize(const QuantWeight& w);

// GGUF block layouts (ggml), a row of k values being k/32 consecutive blocks:
//   Q4_0  18 bytes: f16 d, then 16 bytes; byte i holds element i (low nibble) and i + 16
//         (high nibble); value = (nibble - 8) * d
//   Q8_0  34 bytes: f16 d, then 32 int8; value = q * d
// Both become gs = 32 weights with scale = d, bit for bit.
QuantWeight repack_gguf_q4_0(std::span<const uint8_t> blocks, uint32_t n, uint32_t k);
QuantWeight repack_gguf_q8_0(std::span<const uint8_t> blocks, uint32_t n, uint32_t k);
//   Q6_K  210 bytes per 256: ql[128] qh[64] scales[16] f16 d -> Q6K (above), bit for bit.
QuantWeight repack_gguf_q6_k(std::span<const uint8_t> blocks, uint32_t n, uint32_t k);

// An f32 [rows, cols] matrix as f16 pairs (DType::F16 tensors), and back.
std::vector<uint32_t> pack_f16(std::span<const float> x);
std::vector<float> unpack_f16(std::span<const uint32_t> words, size_t count);

}  // namespace wgrt::ops
