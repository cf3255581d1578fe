// GGML tensor types as stored in GGUF files: block sizes, byte sizes, and dequantization to
// f32 on the CPU (for loading and for references).
//
// Block layouts (bytes, little endian; f16 = IEEE half):
//   Q4_0  32 elems, 18 B: f16 d | u8 qs[16]      x[i] = (lo nibble of qs[i] - 8) d,
//                                                  x[i+16] = (hi nibble of qs[i] - 8) d
//   Q4_1  32 elems, 20 B: f16 d | f16 m | qs[16]  x = q d + m (same nibble order)
//   Q5_0  32 elems, 22 B: f16 d | u8 qh[4] | qs[16]   x = (q - 16) d, q = nibble | bit e of qh << 4
//   Q5_1  32 elems, 24 B: f16 d | f16 m | qh[4] | qs[16]   x = q d + m
//   Q8_0  32 elems, 34 B: f16 d | i8 qs[32]        x[i] = qs[i] d
//   Q4_K 256 elems, 144 B: f16 d | f16 dmin | u8 scales[12] | u8 qs[128]
//         8 sub-blocks of 32 with 6-bit scale sc and 6-bit min m packed in scales[12];
//         x = d sc q - dmin m, q a nibble; each 32 bytes of qs hold 64 elements
//         (low nibbles: first 32, high nibbles: next 32).
//   Q5_K 256 elems, 176 B: f16 d | f16 dmin | scales[12] | u8 qh[32] | u8 qs[128]
//         as Q4_K with a fifth bit per element from qh.
//   Q6_K 256 elems, 210 B: u8 ql[128] | u8 qh[64] | i8 scales[16] | f16 d
//         x = d scale (q - 32), q 6 bits (4 from ql, 2 from qh), 16 sub-blocks of 16.
//   IQ4_NL 32 elems, 18 B: f16 d | u8 qs[16]     x = d grid[q], q a nibble in Q4_0's order,
//         grid ggml's 16 non-linear values (ops/quant/quant.h kIq4Values).
//   IQ4_XS 256 elems, 136 B: f16 d | u16 scales_h | u8 scales_l[4] | u8 qs[128]
//         8 sub-blocks of 32, 6-bit scale ls (low 4 bits from scales_l, high 2 from scales_h);
//         x = d (ls - 32) grid[q], q a nibble (16 bytes per sub-block, as Q4_0's order),
//         grid ggml's 16 non-linear values (ops/quant/quant.h kIq4Values).
//   Q2_K 256 elems, 84 B: u8 scales[16] | u8 qs[64] | f16 d | f16 dmin
//         16 sub-blocks of 16, scales[i] = sc | m << 4; x = d sc q - dmin m, q 2 bits: element
//         128h + 32j + l is bits 2j of qs[32h + l].
//   Q3_K 256 elems, 110 B: u8 hmask[32] | u8 qs[64] | u8 scales[12] | f16 d
//         x = d (s - 32) (q - 4 * !hbit), q 2 bits as Q2_K's, hbit bit 4h + j of hmask[l];
//         16 6-bit s: low 4 bits from scales[i % 8] (nibble i / 8), high 2 from scales[8 + i % 4].
//   BF16  2 B: the high half of an f32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace wgrt::model {

enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, IQ4_NL = 20, IQ4_XS = 23, BF16 = 30,
};

struct GgmlTypeInfo {
  const char* name;
  uint32_t block_elems;  // elements per block (1 for plain types)
  uint32_t block_bytes;
  bool supported;        // wgrt loads it
};

// Info for a raw type value; nullptr when the value names no known type.
const GgmlTypeInfo* ggml_type_info(uint32_t type);
std::string ggml_type_name(uint32_t type);  // "Q4_K", or "type 99"

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);  // round to nearest even
float bf16_to_f32(uint16_t h);

// Dequantizes `n` elements (a multiple of the block size) from `src`.
void dequantize(GgmlType type, const uint8_t* src, float* dst, size_t n);

}  // namespace wgrt::model
