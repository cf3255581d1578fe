// Buffers: upload then read back is bit-exact, for sizes around the 4-byte copy granule and
// one larger than a MiB that is not a multiple of any power of two beyond 1.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <limits>
#include <vector>

#include "gpu/buffer.h"
#include "support/device.h"

namespace wgrt::gpu {
namespace {

// Bit patterns a float round trip must keep: signed zeros, subnormals, infinities, NaN
// payloads, then a counter so every element differs.
std::vector<uint32_t> patterns(size_t n) {
  static constexpr uint32_t special[] = {0x3F800000u, 0x80000000u, 0x00000001u, 0x807FFFFFu,
                                         0x7F800000u, 0xFF800000u, 0x7FC00001u, 0xFFBADBADu,
                                         0x00000000u, 0x7F7FFFFFu};
  std::vector<uint32_t> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = i < std::size(special) ? special[i] : uint32_t(i * 2654435761u);
  return v;
}

class GpuBuffer : public ::testing::TestWithParam<size_t> {};

TEST_P(GpuBuffer, RoundTripIsBitExact) {
  Device& dev = test::device();
  const size_t n = GetParam();
  std::vector<uint32_t> bits = patterns(n);
  std::vector<float> values(n);
  std::memcpy(values.data(), bits.data(), n * sizeof(float));

  Buffer buf = create_buffer(dev, n * sizeof(float), kStorageUsage, "round trip");
  ASSERT_TRUE(buf);
  EXPECT_EQ(wgpuBufferGetSize(buf.get()), n * sizeof(float));
  upload(dev, buf.get(), std::span<const float>(values));
  std::vector<float> back = read_buffer<float>(dev, buf.get(), n);
  ASSERT_EQ(back.size(), n);
  std::vector<uint32_t> back_bits(n);
  std::memcpy(back_bits.data(), back.data(), n * sizeof(float));
  size_t first_diff = n;
  for (size_t i = 0; i < n && first_diff == n; ++i)
    if (back_bits[i] != bits[i]) first_diff = i;
  EXPECT_EQ(first_diff, n) << "first differing element " << first_diff << ": wrote 0x" << std::hex
                           << bits[first_diff] << ", read 0x" << back_bits[first_diff];

  // A read from an offset sees the same words.
  if (n > 2) {
    auto tail = read_buffer<uint32_t>(dev, buf.get(), 2, (n - 2) * sizeof(float));
    EXPECT_EQ(tail[0], bits[n - 2]);
    EXPECT_EQ(tail[1], bits[n - 1]);
  }
  check(dev);
}

INSTANTIATE_TEST_SUITE_P(Sizes, GpuBuffer, ::testing::Values(size_t(1), size_t(3), size_t(1048583)),
                         [](const auto& param_info) { return "n" + std::to_string(param_info.param); });

TEST(GpuBufferBytes, UnalignedUploadPadsTheTailWordWithZeros) {
  Device& dev = test::device();
  Buffer buf = create_buffer(dev, 7, kStorageUsage, "unaligned");
  EXPECT_EQ(wgpuBufferGetSize(buf.get()), 8u);  // rounded up to whole words
  const uint32_t ones[2] = {0xFFFFFFFFu, 0xFFFFFFFFu};
  upload(dev, buf.get(), 0, ones, sizeof(ones));
  const uint8_t data[5] = {1, 2, 3, 4, 5};
  upload(dev, buf.get(), 0, data, sizeof(data));
  uint8_t back[8] = {};
  read_buffer(dev, buf.get(), 0, sizeof(back), back);
  const uint8_t want[8] = {1, 2, 3, 4, 5, 0, 0, 0};
  EXPECT_EQ(std::memcmp(back, want, 8), 0);
  uint8_t three[3] = {};
  read_buffer(dev, buf.get(), 0, sizeof(three), three);  // odd read size
  EXPECT_EQ(three[0], 1);
  EXPECT_EQ(three[2], 3);
}

}  // namespace
}  // namespace wgrt::gpu
