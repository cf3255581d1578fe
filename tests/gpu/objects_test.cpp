// The object counter: every handle wgrt creates is counted while alive and uncounted when
// dropped, so tests elsewhere can prove "nothing created per step" and "nothing leaked".
#include <gtest/gtest.h>

#include <vector>

#include "gpu/buffer.h"
#include "gpu/pipeline.h"
#include "selftest.h"
#include "support/device.h"

namespace wgrt::gpu {
namespace {

TEST(GpuObjects, BuffersAreCountedWhileAliveAndReleased) {
  Device& dev = test::device();
  const ObjectCounts start = object_counts();
  {
    std::vector<Buffer> buffers;
    for (int i = 0; i < 5; ++i)
      buffers.push_back(create_buffer(dev, 64 * (i + 1), kStorageUsage, "counted"));
    ObjectCounts during = object_counts();
    EXPECT_EQ(during.alive_of(ObjectKind::Buffer), start.alive_of(ObjectKind::Buffer) + 5);
    EXPECT_EQ(during.created_of(ObjectKind::Buffer), start.created_of(ObjectKind::Buffer) + 5);
    EXPECT_EQ(during.alive_total(), start.alive_total() + 5);

    // Moving hands the reference over; it neither creates nor releases.
    Buffer moved = std::move(buffers[0]);
    EXPECT_FALSE(buffers[0]);
    buffers[1] = std::move(moved);  // releases what buffers[1] held
    EXPECT_EQ(object_counts().alive_of(ObjectKind::Buffer), start.alive_of(ObjectKind::Buffer) + 4);
    buffers[2].reset();
    buffers[2].reset();  // a second reset is a no-op
    EXPECT_EQ(object_counts().alive_of(ObjectKind::Buffer), start.alive_of(ObjectKind::Buffer) + 3);
  }
  ObjectCounts end = object_counts();
  EXPECT_EQ(end.alive_of(ObjectKind::Buffer), start.alive_of(ObjectKind::Buffer));
  EXPECT_EQ(end.created_of(ObjectKind::Buffer), start.created_of(ObjectKind::Buffer) + 5);
  EXPECT_EQ(end.alive_total(), start.alive_total());
}

TEST(GpuObjects, AKernelRunReleasesEverythingItMade) {
  Device& dev = test::device();
  const Pipeline& pipe = get_pipeline(dev, make_key("gpu_selftest"));  // cached: stays alive
  const ObjectCounts start = object_counts();
  test::SelftestParams p{.n = 10, .a = 1.0f, .b = 2.0f};
  auto x = test::selftest_input(p.n);
  test::run_selftest(dev, pipe, p, x);
  ObjectCounts end = object_counts();
  for (size_t k = 0; k < size_t(ObjectKind::Count); ++k) {
    SCOPED_TRACE(object_kind_name(ObjectKind(k)));
    EXPECT_EQ(end.alive[k], start.alive[k]);
  }
  // It made buffers, a bind group, an encoder, a pass and a command buffer, but no pipeline.
  EXPECT_GE(end.created_of(ObjectKind::Buffer) - start.created_of(ObjectKind::Buffer), 4);
  EXPECT_EQ(end.created_of(ObjectKind::BindGroup) - start.created_of(ObjectKind::BindGroup), 1);
  EXPECT_EQ(end.created_of(ObjectKind::ComputePassEncoder) -
                start.created_of(ObjectKind::ComputePassEncoder), 1);
  EXPECT_EQ(end.created_of(ObjectKind::ComputePipeline), start.created_of(ObjectKind::ComputePipeline));
  EXPECT_EQ(end.created_of(ObjectKind::ShaderModule), start.created_of(ObjectKind::ShaderModule));
}

TEST(GpuObjects, KindNamesAreDistinct) {
  for (size_t i = 0; i < size_t(ObjectKind::Count); ++i)
    for (size_t j = i + 1; j < size_t(ObjectKind::Count); ++j)
      EXPECT_STRNE(object_kind_name(ObjectKind(i)), object_kind_name(ObjectKind(j)));
  EXPECT_STREQ(object_kind_name(ObjectKind::Buffer), "buffer");
}

}  // namespace
}  // namespace wgrt::gpu
