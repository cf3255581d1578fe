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

// The K-quants, GGUF's blocks of 256 values kept at (about) their size, repacked losslessly
// to word-aligned layouts every linear_q route and the embedding read directly:
//   Q6K   q       u32 [N, K/256 * 52]  per block ql[128] | qh[64] | scales[16] bytes as in the
//                                       file (ggml: value = d * scales[j] * (6-bit q - 32))
//         scales  f16 [N, K/256]       the block's d; gs is 256. 210 bytes per 256 values.
//   Q4K   q       u32 [N, K/8]         word w of row n holds k = 8w + i in nibble i (q in 0..15)
//         scales  u32 [kq_scale_words] region A: one word per block (row-major over (n, block)),
//                                       f16 d in the low half, f16 dmin in the high half; padded
//                                       to a multiple of 4 words, then region B: four words per
//                                       block, sub-block j's 6-bit scale in byte j of words 0..1
//                                       and its 6-bit min in byte j of words 2..3
//         value = d * scale[j] * q - dmin * min[j],  j = (k % 256) / 32 (the sub-block; gs 32)
//         148 bytes per 256 values (the file: 144, its 6-bit fields packed into 12 bytes)
//   Q5K   q       u32 [N, K/8 + K/32]  per row the K/8 nibble words as Q4K (the low 4 bits),
//                                       then K/32 words of fifth bits: bit i of word c is k = 32c + i
//         scales  as Q4K;  value = d * scale[j] * (nibble + 16 * bit) - dmin * min[j]
//         180 bytes per 256 values (the file: 176)
// GGUF's 32-value blocks with a min or a fifth bit, repacked the same way (gs 32, K a multiple
// of 32):
//   Q41   q       u32 [N, K/8]         nibbles as Q4K
//         scales  u32 [N, K/32]        per group f16 d in the low half, f16 m in the high half
//         value = d * q + m            20 bytes per 32 values (the file: 20)
//   Q50   q       u32 [N, K/8 + h]     nibbles as Q4K, then h fifth-bit words as Q5K, h = K/32
//                                       rounded up to a multiple of 4 (rows stay whole vec4s)
//         scales  f16 [N, K/32]        d, two per word as q4gsw's
//         value = d * (q - 16)         22 bytes per 32 values (the file: 22), + h - K/32 words a row
//   Q51   q as Q50, scales as Q41;  value = d * q + m   24 bytes per 32 values (the file: 24)
//   IQ4NL q as Q41 (each nibble an index i into kIq4Values), scales as Q50's
//         value = d * kIq4Values[i]   18 bytes per 32 values (the file: 18)
// GGUF IQ4_XS, 256-value blocks of 8 sub-blocks of 32 (gs 32, K a multiple of 256):
//   IQ4XS q       u32 [N, K/8]         nibbles as Q4K, each an index i into kIq4Values
//         scales  u32 [N, K/256 * 2]   per block the file's header: word 0 = f16 d | scales_h << 16,
//                                       word 1 = scales_l[4]; sub-block j's 6-bit scale is
//                                       ls = (word 1 >> 4j) & 15 | ((word 0 >> (16 + 2j)) & 3) << 4
//         value = d * (ls - 32) * kIq4Values[i]   136 bytes per 256 values (the file: 136)
// GGUF Q2_K and Q3_K, 256-value blocks of 16 sub-blocks of 16 (gs 256: one d per block; K a
// multiple of 256). Both keep 2-bit planes in 16 words per block: word w holds elements
// 16w + 4s + b (s, b in 0..3) in bits 8b + 2s .. 8b + 2s + 1, so (word >> 2s) & 0x03030303 is
// elements 16w + 4s .. 16w + 4s + 3 as bytes, and a vec4 of words is 64 consecutive values.
//   Q2K   q       u32 [N, K/256 * 20]  per block the 16 plane words, then the file's scales[16]
//                                       as 4 words: byte j (sub-block j, elements 16j..16j+15)
//                                       = scale | min << 4
//         scales  u32 [N, K/256]       f16 d in the low half, f16 dmin in the high half
//         value = d * scale[j] * q - dmin * min[j]   84 bytes per 256 values (the file: 84)
//   Q3K   q       u32 [N, K/256 * 28]  per block the 16 plane words (q's low 2 bits), 8 words
//                                       of third bits (element 16w + 4s + b: bit 8b + 4 (w % 2)
//                                       + s of word 16 + w / 2), then 4 words of 16 int8
//                                       scales (the file's 6-bit scale - 32), byte j sub-block j
//         scales  f16 [N, K/256]       the block's d, two per word as q4gsw's
//         value = d * scale[j] * (q - 4), q in 0..7 (the file's high bit clear: q - 4 < 0)
//         114 bytes per 256 values (the file: 110, its scales packed into 12 bytes)
enum class QuantFormat : uint8_t { Q4gsw, Q8, Q6K, Q4K, Q5K, Q41, Q50, Q51, IQ4XS, Q2K, Q3K, IQ4NL };
// IQ4_NL's and IQ4_XS's 16 values (ggml's non-linear 4-bit grid), indexed by the stored nibble.
constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

const char* quant_format_name(QuantFormat f);
// The K-quants: 256-value blocks, linear_q's int8-activation routes use groups of 32.
constexpr bool is_k_quant(QuantFormat f) {
  return f == QuantFormat::Q6K || f == QuantFormat::Q4K || f == QuantFormat::Q5K || f == QuantFormat::IQ4XS ||
         f == QuantFormat::Q2K || f == QuantFormat::Q3K;
}
// The K-quants with one d per 256 values (gs 256) and per-16 sub-block scales inside q.
constexpr bool has_block_d(QuantFormat f) {
  return f == QuantFormat::Q6K || f == QuantFormat::Q2K || f == QuantFormat::Q3K;
}
// Formats that come from a GGUF file's blocks only (repacked; wgrt has no quantizer for them).
constexpr bool from_gguf_blocks(QuantFormat f) {
  return is_k_quant(f) || f == QuantFormat::Q41 || f == QuantFormat::Q50 || f == QuantFormat::Q51 ||
         f == QuantFormat::IQ4NL;
}
// Nibbles that index kIq4Values (the grid) instead of being the integer.
constexpr bool has_iq4_grid(QuantFormat f) { return f == QuantFormat::IQ4XS || f == QuantFormat::IQ4NL; }
// The groups the int8-activation routes quantize x in: 32 for the K-quants (their sub-blocks),
// else the weight's own group size.
constexpr uint32_t activation_group(QuantFormat f, uint32_t gs) { return is_k_quant(f) ? 32 : gs; }
// Q4K and Q5K: scales are u32 words in region A + region B above.
constexpr bool has_kq_scales(QuantFormat f) { return f == QuantFormat::Q4K || f == QuantFormat::Q5K; }
// Q41 and Q51: one (d, m) word per group.
constexpr bool has_dm_scales(QuantFormat f) { return f == QuantFormat::Q41 || f == QuantFormat::Q51; }
// Scales as u32 words (the two above and IQ4XS's block headers), not f16 pairs.
constexpr bool has_word_scales(QuantFormat f) {
  return has_kq_scales(f) || has_dm_scales(f) || f == QuantFormat::IQ4XS || f == QuantFormat::Q2K;
}
// q is unsigned with value = scale * q - min per group (the int8 gemm subtracts min * sum(x)).
constexpr bool is_affine(QuantFormat f) { return has_kq_scales(f) || has_dm_scales(f) || f == QuantFormat::Q50; }
// Nibble words followed by fifth-bit words in each row.
constexpr bool has_fifth_bits(QuantFormat f) {
  return f == QuantFormat::Q5K || f == QuantFormat::Q50 || f == QuantFormat::Q51;
}

struct QuantWeight {
  QuantFormat format = QuantFormat::Q4gsw;
  uint32_t n = 0, k = 0, gs = 32;
  std::vector<uint32_t> q;       // [N, quant_row_words]
  std::vector<uint32_t> scales;  // f16 [N, K/gs], two per word; Q4K/Q5K: kq_scale_words; Q41/Q51: [N, K/32]
};

// Values per u32 word of `q`: 8 (q4gsw, Q4K, Q41 and the fifth-bit formats' nibbles) or 4 (q8);
// Q6K has 52 words per 256 values.
constexpr uint32_t values_per_word(QuantFormat f) { return f == QuantFormat::Q8 ? 4 : 8; }
constexpr uint32_t kQ6KWords = 52, kQ2KWords = 20, kQ3KWords = 28;
// Words of `q` per row of k values (the fifth-bit words padded to a multiple of 4: a no-op for Q5K).
constexpr uint32_t quant_row_words(QuantFormat f, uint32_t k) {
  return f == QuantFormat::Q6K   ? k / 256 * kQ6KWords
         : f == QuantFormat::Q2K ? k / 256 * kQ2KWords
         : f == QuantFormat::Q3K ? k / 256 * kQ3KWords
         : has_fifth_bits(f)     ? k / 8 + (k / 32 + 3) / 4 * 4
                                 : k / values_per_word(f);
}
// Q4K/Q5K scale words for a weight [n, k]: region A padded to 4 words, then region B.
constexpr uint64_t kq_region_b(uint32_t n, uint32_t k) { return (uint64_t(n) * (k / 256) + 3) / 4 * 4; }
constexpr uint64_t kq_scale_words(uint32_t n, uint32_t k) { return kq_region_b(n, k) + uint64_t(n) * (k / 256) * 4; }
// Words of `q` and of `scales` for a weight [n, k] with group size gs.
uint64_t quant_q_words(QuantFormat f, uint32_t n, uint32_t k);
uint64_t quant_scale_words(QuantFormat f, uint32_t n, uint32_t k, uint32_t gs);
// Bytes the weight takes on the GPU (q and scales).
inline uint64_t quant_bytes(QuantFormat f, uint32_t n, uint32_t k, uint32_t gs) {
  return (quant_q_words(f, n, k) + quant_scale_words(f, n, k, gs)) * 4;
}

// Throws std::invalid_argument unless gs is 32/64/128 (256: Q6K, Q2K, Q3K) and k is a positive multiple of gs.
// (Q4K/Q5K: gs 32, k a multiple of 256; Q41/Q50/Q51: gs 32; checked by check_format_shape.)
void check_quant_shape(uint32_t n, uint32_t k, uint32_t gs, const char* what);
void check_format_shape(QuantFormat f, uint32_t n, uint32_t k, uint32_t gs, const char* what);

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
//   Q4_K  144 bytes per 256: f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, qs[128]: the
//         32-byte run c holds elements 64c + l (low nibbles) and 64c + 32 + l (high) -> Q4K
//   Q5_K  176 bytes per 256: d, dmin, 12 scale bytes, qh[32], qs[128] as Q4_K; the fifth bit
//         of 64c + l is bit 2c of qh[l], of 64c + 32 + l bit 2c + 1 -> Q5K
QuantWeight repack_gguf_q6_k(std::span<const uint8_t> blocks, uint32_t n, uint32_t k);
QuantWeight repack_gguf_q4_k(std::span<const uint8_t> blocks, uint32_t n, uint32_t k);
QuantWeight repack_gguf_q5_k(std::span<const uint8_t> blocks, uint32_t n, uint32_t k);
//   Q4_1  20 bytes per 32: f16 d, f16 m, qs[16] in Q4_0's nibble order -> Q41
//   Q5_0  22 bytes per 32: f16 d, qh[4] (bit e of the little-endian u32 is element e's fifth
//         bit), qs[16] as Q4_0 -> Q50
//   Q5_1  24 bytes per 32: f16 d, f16 m, qh[4], qs[16] -> Q51
QuantWeight repack_gguf_q4_1(std::span<const uint8_t> blocks, uint32_t n, uint32_t k);
QuantWeight repack_gguf_q5_0(std::span<const uint8_t> blocks, uint32_t n, uint32_t k);
QuantWeight repack_gguf_q5_1(std::span<const uint8_t> blocks, uint32_t n, uint32_t k);
//   IQ4_NL 18 bytes per 32: f16 d, qs[16] in Q4_0's nibble order -> IQ4NL
QuantWeight repack_gguf_iq4_nl(std::span<const uint8_t> blocks, uint32_t n, uint32_t k);
//   IQ4_XS 136 bytes per 256: f16 d, u16 scales_h, scales_l[4], qs[128]: the 16-byte run j holds
//         sub-block j, byte l its elements l (low nibble) and l + 16 (high) -> IQ4XS
QuantWeight repack_gguf_iq4_xs(std::span<const uint8_t> blocks, uint32_t n, uint32_t k);
//   Q2_K  84 bytes per 256: scales[16] (scale | min << 4), qs[64], f16 d, f16 dmin; element
//         128h + 32j + l (l < 32) is bits 2j..2j+1 of qs[32h + l], in sub-block (128h + 32j + l) / 16;
//         value = d * (scales[i] & 15) * q - dmin * (scales[i] >> 4) -> Q2K
//   Q3_K  110 bytes per 256: hmask[32], qs[64] as Q2_K's, scales[12], f16 d; element
//         128h + 32j + l's high bit is bit 4h + j of hmask[l]; sub-block i's 6-bit scale is
//         (scales[i % 8] >> 4 (i / 8)) & 15 | ((scales[8 + i % 4] >> 2 (i / 4)) & 3) << 4;
//         value = d * (scale - 32) * (q2 - (high bit ? 0 : 4)) -> Q3K
QuantWeight repack_gguf_q2_k(std::span<const uint8_t> blocks, uint32_t n, uint32_t k);
QuantWeight repack_gguf_q3_k(std::span<const uint8_t> blocks, uint32_t n, uint32_t k);
// The repack of a GGUF tensor's blocks into format f (a from_gguf_blocks format).
QuantWeight repack_gguf_blocks(QuantFormat f, std::span<const uint8_t> blocks, uint32_t n, uint32_t k);

// An f32 [rows, cols] matrix as f16 pairs (DType::F16 tensors), and back.
std::vector<uint32_t> pack_f16(std::span<const float> x);
std::vector<float> unpack_f16(std::span<const uint32_t> words, size_t count);

}  // namespace wgrt::ops
