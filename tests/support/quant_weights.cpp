#include "support/quant_weights.h"

#include "reference/quant_ref.h"
#include "support/random.h"

namespace wgrt::test {

std::pair<ops::QuantWeight, std::vector<float>> random_quant_weight(ops::QuantFormat f, uint32_t n, uint32_t k,
                                                                    uint32_t gs, uint32_t seed) {
  using ops::QuantFormat;
  const size_t blocks = size_t(n) * k / 256, count = size_t(n) * k;
  switch (f) {
    case QuantFormat::Q41: {
      auto b = random_legacy_blocks(count / 32, seed, 20);
      return {ops::repack_gguf_q4_1(b, n, k), ref::dequant_gguf_q4_1(b, count)};
    }
    case QuantFormat::Q50: {
      auto b = random_legacy_blocks(count / 32, seed, 22);
      return {ops::repack_gguf_q5_0(b, n, k), ref::dequant_gguf_q5_0(b, count)};
    }
    case QuantFormat::Q51: {
      auto b = random_legacy_blocks(count / 32, seed, 24);
      return {ops::repack_gguf_q5_1(b, n, k), ref::dequant_gguf_q5_1(b, count)};
    }
    case QuantFormat::IQ4NL: {
      auto b = random_legacy_blocks(count / 32, seed, 18);
      return {ops::repack_gguf_iq4_nl(b, n, k), ref::dequant_gguf_iq4_nl(b, count)};
    }
    case QuantFormat::IQ4XS: {
      auto b = random_iq4_xs_blocks(blocks, seed);
      return {ops::repack_gguf_iq4_xs(b, n, k), ref::dequant_gguf_iq4_xs(b, count)};
    }
    case QuantFormat::Q4K: {
      auto b = random_k_blocks(blocks, seed, false);
      return {ops::repack_gguf_q4_k(b, n, k), ref::dequant_gguf_q4_k(b, count)};
    }
    case QuantFormat::Q5K: {
      auto b = random_k_blocks(blocks, seed, true);
      return {ops::repack_gguf_q5_k(b, n, k), ref::dequant_gguf_q5_k(b, count)};
    }
    case QuantFormat::Q2K: {
      auto b = random_q23_k_blocks(blocks, seed, false);
      return {ops::repack_gguf_q2_k(b, n, k), ref::dequant_gguf_q2_k(b, count)};
    }
    case QuantFormat::Q3K: {
      auto b = random_q23_k_blocks(blocks, seed, true);
      return {ops::repack_gguf_q3_k(b, n, k), ref::dequant_gguf_q3_k(b, count)};
    }
    case QuantFormat::Q6K: {
      auto b = random_q6_k_blocks(blocks, seed);
      return {ops::repack_gguf_q6_k(b, n, k), ref::dequant_gguf_q6_k(b, count)};
    }
    case QuantFormat::Q4gsw:
    case QuantFormat::Q8: break;
  }
  ops::QuantWeight w = ops::quantize(f, random_floats(count, seed, -1.f, 1.f), n, k, gs);
  std::vector<float> d = f == QuantFormat::Q4gsw ? ref::dequant_q4gsw(w.q, w.scales, w.n, w.k, w.gs)
                                                 : ref::dequant_q8(w.q, w.scales, w.n, w.k, w.gs);
  return {std::move(w), std::move(d)};
}

}  // namespace wgrt::test
