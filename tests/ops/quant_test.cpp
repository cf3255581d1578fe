// The quantized weight formats on the CPU (src/ops/quant) against the independent reference
// dequantizer (tests/reference/quant_ref): f16 conversion, pack/unpack round trips, GGUF
// Q4_0/Q8_0, K-quant and Q4_1/Q5_0/Q5_1 repacks bit for bit, and the errors for shapes and values the formats cannot hold.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

#include "gpu/pipeline.h"
#include "ops/quant/quant.h"
#include "reference/quant_ref.h"
#include "support/random.h"

namespace wgrt::ops {
namespace {

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

std::vector<float> ref_dequant(const QuantWeight& w) {
  return w.format == QuantFormat::Q4gsw ? ref::dequant_q4gsw(w.q, w.scales, w.n, w.k, w.gs)
                                        : ref::dequant_q8(w.q, w.scales, w.n, w.k, w.gs);
}

TEST(QuantF16, EveryHalfDecodesAsTheReference) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float a = f16_to_f32(uint16_t(h)), b = ref::half_to_float(uint16_t(h));
    if (std::isnan(b)) {
      ASSERT_TRUE(std::isnan(a)) << h;
      continue;
    }
    ASSERT_EQ(std::bit_cast<uint32_t>(a), std::bit_cast<uint32_t>(b)) << "half " << h;
    ASSERT_EQ(f32_to_f16(a), h) << "round trip of half " << h;
  }
}

TEST(QuantF16, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(f32_to_f16(65504.f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65520.f), 0x7C00);              // half-way past the largest: inf
  EXPECT_EQ(f32_to_f16(1.0f + 1.0f / 2048), 0x3C00);   // tie, to even
  EXPECT_EQ(f32_to_f16(1.0f + 3.0f / 2048), 0x3C02);   // tie, to even (up)
  EXPECT_EQ(f32_to_f16(std::ldexp(1.f, -24)), 0x0001); // smallest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.f, -26)), 0x0000);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xC000);
}

struct RoundTrip {
  QuantFormat f;
  uint32_t n, k, gs;
};

TEST(QuantPack, RoundTripsWithinHalfAStep) {
  for (RoundTrip c : {RoundTrip{QuantFormat::Q4gsw, 7, 96, 32}, {QuantFormat::Q4gsw, 37, 448, 64},
                      {QuantFormat::Q4gsw, 3, 640, 128}, {QuantFormat::Q8, 7, 96, 32},
                      {QuantFormat::Q8, 37, 448, 64}, {QuantFormat::Q8, 3, 640, 128}}) {
    SCOPED_TRACE(testing::Message() << quant_format_name(c.f) << " " << c.n << "x" << c.k << " gs " << c.gs);
    for (float mag : {1e-2f, 1.f, 3e4f}) {
      auto w = test::random_floats(size_t(c.n) * c.k, c.n * c.k, -mag, mag);
      w[5] = 0.f;
      QuantWeight q = quantize(c.f, w, c.n, c.k, c.gs);
      ASSERT_EQ(q.q.size(), quant_q_words(c.f, c.n, c.k));
      ASSERT_EQ(q.scales.size(), quant_scale_words(c.f, c.n, c.k, c.gs));
      std::vector<float> deq = dequantize(q);
      ASSERT_TRUE(bits_equal(deq, ref_dequant(q))) << "runtime and reference dequantizers differ";
      const uint32_t groups = c.k / c.gs;
      for (uint32_t r = 0; r < c.n; ++r)
        for (uint32_t i = 0; i < c.k; ++i) {
          size_t s = size_t(r) * groups + i / c.gs;
          float scale = ref::half_to_float(uint16_t(q.scales[s / 2] >> (16 * (s % 2))));
          size_t e = size_t(r) * c.k + i;
          ASSERT_LE(std::fabs(deq[e] - w[e]), 0.5f * scale * (1 + 1e-5f)) << "at " << r << "," << i;
        }
      // Packing the dequantized values again reproduces the packed words exactly.
      QuantWeight again = quantize(c.f, deq, c.n, c.k, c.gs);
      EXPECT_EQ(again.q, q.q);
      EXPECT_EQ(again.scales, q.scales);
    }
  }
}

TEST(QuantPack, KnownLayout) {
  // A q4gsw row: 0.5 * (-8..7), then 0.5 * (7..-8), scale 0.5; check where the nibbles go.
  std::vector<float> w(32);
  for (int i = 0; i < 16; ++i) {
    w[i] = 0.5f * float(i - 8);
    w[16 + i] = 0.5f * float(7 - i);
  }
  w[0] = w[31] = -3.5f;  // absmax 3.5 -> scale 0.5 exactly
  QuantWeight q = quantize(QuantFormat::Q4gsw, w, 1, 32, 32);
  EXPECT_EQ(q.scales[0] & 0xFFFF, 0x3800u);  // f16 0.5
  // k = 0: -3.5/0.5 = -7 -> nibble 1; k = 1: -7*0.5/0.5 = -7 -> 1; k = 8: 0 -> 8
  EXPECT_EQ(q.q[0] & 0xF, 1u);
  EXPECT_EQ((q.q[1] >> 0) & 0xF, 8u);         // k = 8
  EXPECT_EQ((q.q[1] >> 28) & 0xF, 15u);       // k = 15: +7
  EXPECT_EQ((q.q[2] >> 0) & 0xF, 15u);        // k = 16: +7
  QuantWeight q8 = quantize(QuantFormat::Q8, std::vector<float>(32, -1.0f), 1, 32, 32);
  EXPECT_EQ(q8.q[0], 0x81818181u);  // -127 in every byte
}

std::vector<uint8_t> random_blocks(size_t count, size_t bsize, uint32_t seed) {
  std::vector<uint8_t> blocks(count * bsize);
  std::mt19937 rng(seed);
  for (size_t b = 0; b < count; ++b) {
    uint16_t d = uint16_t(0x0400 + rng() % 0x7400);  // any normal, finite half
    if (rng() % 2) d |= 0x8000;
    blocks[b * bsize] = uint8_t(d);
    blocks[b * bsize + 1] = uint8_t(d >> 8);
    for (size_t i = 2; i < bsize; ++i) blocks[b * bsize + i] = uint8_t(rng());
  }
  return blocks;
}

TEST(QuantGguf, Q4_0RepackIsBitExact) {
  for (auto [n, k] : {std::pair{1u, 32u}, {7u, 96u}, {37u, 640u}}) {
    auto blocks = random_blocks(size_t(n) * k / 32, 18, n + k);
    QuantWeight w = repack_gguf_q4_0(blocks, n, k);
    EXPECT_EQ(w.gs, 32u);
    auto want = ref::dequant_gguf_q4_0(blocks, size_t(n) * k);
    EXPECT_TRUE(bits_equal(ref::dequant_q4gsw(w.q, w.scales, n, k, 32), want)) << n << "x" << k;
    EXPECT_TRUE(bits_equal(dequantize(w), want));
  }
  // One hand-made block: d = 2, byte i = (i) | (15 - i) << 4.
  std::vector<uint8_t> blk = {0x00, 0x40};
  for (int i = 0; i < 16; ++i) blk.push_back(uint8_t(i | ((15 - i) << 4)));
  auto v = dequantize(repack_gguf_q4_0(blk, 1, 32));
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(v[i], 2.0f * float(i - 8));
    EXPECT_EQ(v[16 + i], 2.0f * float(7 - i));
  }
  EXPECT_THROW(repack_gguf_q4_0(blk, 1, 64), std::invalid_argument);
}

TEST(QuantGguf, Q8_0RepackIsBitExact) {
  for (auto [n, k] : {std::pair{1u, 32u}, {7u, 96u}, {37u, 640u}}) {
    auto blocks = random_blocks(size_t(n) * k / 32, 34, n * k);
    QuantWeight w = repack_gguf_q8_0(blocks, n, k);
    auto want = ref::dequant_gguf_q8_0(blocks, size_t(n) * k);
    EXPECT_TRUE(bits_equal(ref::dequant_q8(w.q, w.scales, n, k, 32), want)) << n << "x" << k;
    EXPECT_TRUE(bits_equal(dequantize(w), want));
  }
  std::vector<uint8_t> blk = {0x00, 0x3C, 0x80, 0x7F};  // d = 1; -128, 127, then zeros
  blk.resize(34, 0);
  auto v = dequantize(repack_gguf_q8_0(blk, 1, 32));
  EXPECT_EQ(v[0], -128.f);
  EXPECT_EQ(v[1], 127.f);
  EXPECT_EQ(v[2], 0.f);
}

// The K-quants: the repacked words read back (runtime dequantizer) bit for bit as the reference
// reads the file's blocks, for several rows of several blocks (the scale regions span rows).
TEST(QuantGguf, KQuantRepacksAreBitExact) {
  for (auto [n, k] : {std::pair{1u, 256u}, {3u, 512u}, {7u, 768u}}) {
    SCOPED_TRACE(testing::Message() << n << "x" << k);
    const size_t blocks = size_t(n) * k / 256;
    auto q4 = test::random_k_blocks(blocks, n + k, false);
    QuantWeight w4 = repack_gguf_q4_k(q4, n, k);
    EXPECT_EQ(w4.q.size() * 4 + w4.scales.size() * 4, quant_bytes(QuantFormat::Q4K, n, k, 32));
    EXPECT_TRUE(bits_equal(dequantize(w4), ref::dequant_gguf_q4_k(q4, size_t(n) * k)));
    auto q5 = test::random_k_blocks(blocks, 2 * n + k, true);
    EXPECT_TRUE(bits_equal(dequantize(repack_gguf_q5_k(q5, n, k)), ref::dequant_gguf_q5_k(q5, size_t(n) * k)));
    auto q6 = test::random_q6_k_blocks(blocks, 3 * n + k);
    EXPECT_TRUE(bits_equal(dequantize(repack_gguf_q6_k(q6, n, k)), ref::dequant_gguf_q6_k(q6, size_t(n) * k)));
  }
}

// Q2_K / Q3_K: the repacked planes read back bit for bit as the reference reads the blocks,
// at 84 bytes per 256 values (Q2_K, the file's) and 114 (Q3_K, the file's 110: 1.036x).
TEST(QuantGguf, Q2KQ3KRepacksAreBitExact) {
  for (auto [n, k] : {std::pair{1u, 256u}, {3u, 512u}, {7u, 768u}}) {
    SCOPED_TRACE(testing::Message() << n << "x" << k);
    const size_t blocks = size_t(n) * k / 256;
    auto q2 = test::random_q23_k_blocks(blocks, n + k, false);
    QuantWeight w2 = repack_gguf_q2_k(q2, n, k);
    EXPECT_EQ(w2.q.size() * 4 + w2.scales.size() * 4, quant_bytes(QuantFormat::Q2K, n, k, 256));
    EXPECT_EQ(quant_bytes(QuantFormat::Q2K, n, k, 256), q2.size());
    EXPECT_TRUE(bits_equal(dequantize(w2), ref::dequant_gguf_q2_k(q2, size_t(n) * k)));
    auto q3 = test::random_q23_k_blocks(blocks, 2 * n + k, true);
    QuantWeight w3 = repack_gguf_q3_k(q3, n, k);
    EXPECT_EQ(w3.q.size() * 4 + w3.scales.size() * 4, quant_bytes(QuantFormat::Q3K, n, k, 256));
    // 114 bytes per block, the last f16 d's word half-empty when the blocks are odd.
    EXPECT_EQ(quant_bytes(QuantFormat::Q3K, n, k, 256), blocks * 114 + blocks % 2 * 2);
    EXPECT_TRUE(bits_equal(dequantize(w3), ref::dequant_gguf_q3_k(q3, size_t(n) * k)));
  }
  EXPECT_THROW(repack_gguf_q2_k(std::vector<uint8_t>(84), 1, 512), std::invalid_argument);
  EXPECT_THROW(repack_gguf_q3_k(std::vector<uint8_t>(110), 1, 128), std::invalid_argument);
}

TEST(QuantGguf, Q2KQ3KKnownBlocks) {
  // Q2_K, d = 1, dmin = 0.5: sub-block 9 (elements 144..159) scale 5 min 3; element 145 =
  // 128 + 0 * 32 + 17: bits 0..1 of qs[32 + 17] = 2; element 0: q 0 with sub-block 0's min 0.
  std::vector<uint8_t> b2(84, 0);
  b2[9] = 0x35;
  b2[16 + 32 + 17] = 0x02;
  b2[81] = 0x3C;
  b2[83] = 0x38;
  auto v2 = dequantize(repack_gguf_q2_k(b2, 1, 256));
  EXPECT_EQ(v2[145], 5.f * 2 - 0.5f * 3);
  EXPECT_EQ(v2[144], -0.5f * 3);
  EXPECT_EQ(v2[0], 0.f);
  // Q3_K, d = 1: sub-block 13 (elements 208..223) 6-bit scale 0x2B (low nibble 11 in the high
  // half of scales[5], top bits 10 at bits 6..7 of scales[9]) -> 0x2B - 32 = 11. Element 209 =
  // 128 + 2 * 32 + 17: q2 = bits 4..5 of qs[32 + 17] = 3 with its high bit (bit 6 of hmask[17])
  // set -> 3; element 210 has q2 0 and its high bit clear -> -4 (the clear bit subtracts 4).
  std::vector<uint8_t> b3(110, 0);
  b3[96 + 5] = 0xB0;
  b3[96 + 9] = 0x80;
  b3[32 + 32 + 17] = 0x30;
  b3[17] = 0x40;
  b3[109] = 0x3C;
  auto v3 = dequantize(repack_gguf_q3_k(b3, 1, 256));
  EXPECT_EQ(v3[209], 11.f * 3);
  EXPECT_EQ(v3[210], 11.f * -4);
  EXPECT_EQ(v3[0], -32.f * -4);
}

TEST(QuantGguf, KQuantSizesStayNearTheFile) {
  // Bytes on the GPU over the file's bytes, for a 2048 x 8192 matrix: within 1.05x.
  const uint32_t n = 2048, k = 8192;
  const double blocks = double(n) * k / 256;
  EXPECT_LE(double(quant_bytes(QuantFormat::Q4K, n, k, 32)) / (blocks * 144), 1.03);
  EXPECT_LE(double(quant_bytes(QuantFormat::Q5K, n, k, 32)) / (blocks * 176), 1.03);
  EXPECT_LE(double(quant_bytes(QuantFormat::Q6K, n, k, 256)) / (blocks * 210), 1.001);
  EXPECT_LE(double(quant_bytes(QuantFormat::Q2K, n, k, 256)) / (blocks * 84), 1.0);
  EXPECT_LE(double(quant_bytes(QuantFormat::Q3K, n, k, 256)) / (blocks * 110), 1.05);
}

TEST(QuantGguf, KQuantKnownBlock) {
  // One Q4_K block: d = 1, dmin = 0.5; sub-block 0 scale 3 min 2, sub-block 5 scale 17 (low
  // nibble 1 in byte 9, top bits 01 in byte 1) min 33 (high nibble 1 in byte 9, top bits 10
  // in byte 5); element 0 = nibble 7, element 32 + 64 * 2 + 1 (sub-block 5) = high nibble 9.
  std::vector<uint8_t> b(144, 0);
  b[1] = 0x3C;  // d = 1
  b[3] = 0x38;  // dmin = 0.5
  b[4 + 0] = 3;
  b[4 + 4] = 2;
  b[4 + 1] = 0x40;  // scale of sub-block 5: top bits 01
  b[4 + 5] = 0x80;  // min of sub-block 5: top bits 10
  b[4 + 9] = 0x11;
  b[16 + 0] = 7;
  b[16 + 64 + 1] = 0x90;
  auto v = dequantize(repack_gguf_q4_k(b, 1, 256));
  EXPECT_EQ(v[0], 3.f * 7 - 0.5f * 2);
  EXPECT_EQ(v[1], -0.5f * 2);
  EXPECT_EQ(v[161], 17.f * 9 - 0.5f * 33);
}

// Q4_1, Q5_0, Q5_1, IQ4_NL: the repacked words read back (runtime dequantizer) bit for bit as
// the reference reads the file's blocks; K = 32 times an odd number pads the fifth-bit words.
struct LegacyFormat {
  QuantFormat format;
  size_t bytes;
  QuantWeight (*repack)(std::span<const uint8_t>, uint32_t, uint32_t);
  std::vector<float> (*ref)(const std::vector<uint8_t>&, size_t);
};
const LegacyFormat kLegacy[] = {{QuantFormat::Q41, 20, repack_gguf_q4_1, ref::dequant_gguf_q4_1},
                                {QuantFormat::Q50, 22, repack_gguf_q5_0, ref::dequant_gguf_q5_0},
                                {QuantFormat::Q51, 24, repack_gguf_q5_1, ref::dequant_gguf_q5_1},
                                {QuantFormat::IQ4NL, 18, repack_gguf_iq4_nl, ref::dequant_gguf_iq4_nl}};

TEST(QuantGguf, LegacyBlockRepacksAreBitExact) {
  for (const LegacyFormat& lf : kLegacy)
    for (auto [n, k] : {std::pair{1u, 32u}, {3u, 96u}, {7u, 480u}, {5u, 1024u}}) {
      SCOPED_TRACE(testing::Message() << quant_format_name(lf.format) << " " << n << "x" << k);
      auto blocks = test::random_legacy_blocks(size_t(n) * k / 32, n * k + uint32_t(lf.bytes), lf.bytes);
      QuantWeight w = lf.repack(blocks, n, k);
      EXPECT_EQ(w.format, lf.format);
      EXPECT_EQ(w.q.size() * 4 + w.scales.size() * 4, quant_bytes(lf.format, n, k, 32));
      EXPECT_TRUE(bits_equal(dequantize(w), lf.ref(blocks, size_t(n) * k)));
      EXPECT_TRUE(bits_equal(dequantize(repack_gguf_blocks(lf.format, blocks, n, k)), lf.ref(blocks, size_t(n) * k)));
      EXPECT_THROW(lf.repack(blocks, n, k + 32), std::invalid_argument);
    }
}

TEST(QuantGguf, LegacyBlockSizesMatchTheFile) {
  // Rows of whole 128-value runs take the file's bytes exactly; K = 96 (3 blocks) pads one
  // fifth-bit word per row.
  for (const LegacyFormat& lf : kLegacy) {
    EXPECT_EQ(quant_bytes(lf.format, 2048, 8192, 32), uint64_t(2048) * 8192 / 32 * lf.bytes);
    const uint64_t pad = has_fifth_bits(lf.format) ? 4 : 0;
    EXPECT_EQ(quant_bytes(lf.format, 10, 96, 32), 10 * (3 * lf.bytes + pad));
  }
}

// IQ4_XS: the repack read back bit for bit as the reference reads the blocks, at the file's size.
// The kernels' grid (the WGSL part iq4_grid) is quant.h's, value for value.
TEST(QuantGguf, TheKernelsIq4GridIsKIq4Values) {
  const std::string wgsl(gpu::kernel_source("iq4_grid"));
  const size_t open = wgsl.find("array<f32, 16>(");
  ASSERT_NE(open, std::string::npos);
  std::istringstream in(wgsl.substr(open + std::string("array<f32, 16>(").size()));
  for (int i = 0; i < 16; ++i) {
    float v = 0;
    char sep = 0;
    ASSERT_TRUE(in >> v >> sep) << "value " << i;
    EXPECT_EQ(v, float(kIq4Values[i])) << "value " << i;
    EXPECT_EQ(sep, i < 15 ? ',' : ')') << "after value " << i;
  }
}

TEST(QuantGguf, Iq4XsRepackIsBitExact) {
  for (auto [n, k] : {std::pair{1u, 256u}, {3u, 512u}, {7u, 768u}}) {
    SCOPED_TRACE(testing::Message() << n << "x" << k);
    auto blocks = test::random_iq4_xs_blocks(size_t(n) * k / 256, n + 5 * k);
    QuantWeight w = repack_gguf_iq4_xs(blocks, n, k);
    EXPECT_EQ(quant_bytes(QuantFormat::IQ4XS, n, k, 32), blocks.size());
    EXPECT_EQ(w.q.size() * 4 + w.scales.size() * 4, blocks.size());
    EXPECT_TRUE(bits_equal(dequantize(w), ref::dequant_gguf_iq4_xs(blocks, size_t(n) * k)));
  }
  // One block: d = 1, sub-block 3's scale 0x25 (low nibble 5 in the high half of scales_l[1],
  // top bits 10 at bits 6..7 of scales_h): element 96 + 17 = high nibble 15 of qs[48 + 1].
  std::vector<uint8_t> b(136, 0);
  b[1] = 0x3C;
  b[2] = 0x80;
  b[4 + 1] = 0x50;
  b[8 + 48 + 1] = 0xF0;
  auto v = dequantize(repack_gguf_iq4_xs(b, 1, 256));
  EXPECT_EQ(v[113], float(0x25 - 32) * 113.f);
  EXPECT_EQ(v[96], float(0x25 - 32) * -127.f);
  EXPECT_EQ(v[0], -32.f * -127.f);
  EXPECT_THROW(repack_gguf_iq4_xs(b, 1, 512), std::invalid_argument);
}

TEST(QuantGguf, LegacyKnownBlocks) {
  // Q5_0, d = 1: element 0 = nibble 3 with its fifth bit (19 - 16), element 16 = high nibble 0
  // without it (-16), element 31 = high nibble 15 with bit 31 (31 - 16).
  std::vector<uint8_t> b(22, 0);
  b[1] = 0x3C;
  b[2] = 0x01;  // bit 0
  b[5] = 0x80;  // bit 31
  b[6 + 0] = 0x03;
  b[6 + 15] = 0xF0;
  auto v = dequantize(repack_gguf_q5_0(b, 1, 32));
  EXPECT_EQ(v[0], 3.f);
  EXPECT_EQ(v[16], -16.f);
  EXPECT_EQ(v[31], 15.f);
  EXPECT_EQ(v[1], -16.f);
  // Q4_1, d = 0.5, m = -2: element 1 = low nibble 9 (2.5), element 17 = high nibble 4 (0).
  std::vector<uint8_t> c(20, 0);
  c[1] = 0x38;
  c[3] = 0xC0;
  c[4 + 1] = 0x49;
  auto u = dequantize(repack_gguf_q4_1(c, 1, 32));
  EXPECT_EQ(u[1], 2.5f);
  EXPECT_EQ(u[17], 0.f);
  EXPECT_EQ(u[0], -2.f);
  // IQ4_NL, d = -0.5: element 2 = low nibble 0 (grid -127), element 18 = high nibble 15 (113),
  // element 0 = nibble 8 (1).
  std::vector<uint8_t> e(18, 0);
  e[1] = 0xB8;
  e[2 + 0] = 0x08;
  e[2 + 2] = 0xF0;
  auto z = dequantize(repack_gguf_iq4_nl(e, 1, 32));
  EXPECT_EQ(z[2], 63.5f);
  EXPECT_EQ(z[18], -56.5f);
  EXPECT_EQ(z[0], -0.5f);
  EXPECT_THROW(quantize(QuantFormat::Q51, std::vector<float>(32, 0.f), 1, 32, 32), std::invalid_argument);
}

TEST(QuantPack, RejectsWhatTheFormatCannotHold) {
  std::vector<float> w(96, 1.f);
  EXPECT_THROW(quantize(QuantFormat::Q4gsw, w, 1, 96, 48), std::invalid_argument);  // group size
  EXPECT_THROW(quantize(QuantFormat::Q4gsw, w, 2, 48, 32), std::invalid_argument);  // K % gs
  EXPECT_THROW(quantize(QuantFormat::Q4gsw, w, 2, 96, 32), std::invalid_argument);  // size
  w[3] = 1e6f;  // scale 1e6 / 7 > 65504
  EXPECT_THROW(quantize(QuantFormat::Q4gsw, w, 1, 96, 32), std::invalid_argument);
  EXPECT_NO_THROW(quantize(QuantFormat::Q8, w, 1, 96, 32));  // 1e6 / 127 fits
  w[3] = NAN;
  EXPECT_THROW(quantize(QuantFormat::Q8, w, 1, 96, 32), std::invalid_argument);
}

}  // namespace
}  // namespace wgrt::ops
