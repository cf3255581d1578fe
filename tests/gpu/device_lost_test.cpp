// Faults reported, never hung: a device destroyed between steps or while work is in flight
// (wgpuDeviceDestroy, as a driver reset would) makes the next sync point throw
// DeviceLostError naming the adapter, every time; a buffer past the device's limits throws
// GpuError naming its size. Each loss test runs on a device of its own (the shared one stays
// whole for the other tests).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "gpu/pipeline.h"
#include "selftest.h"
#include "support/device.h"
#include "support/throws.h"

namespace wgrt::gpu {
namespace {

using ::testing::HasSubstr;
using test::SelftestParams;

template <class E = DeviceLostError>
std::string message_of(auto&& f) {
  return test::message_of<E>(f);
}

void expect_names_the_loss(const Device& dev, const std::string& msg) {
  EXPECT_THAT(msg, HasSubstr("device"));
  EXPECT_THAT(msg, HasSubstr(dev.caps.adapter.name));
  EXPECT_THAT(msg, HasSubstr("destroyed"));
  EXPECT_THAT(msg, HasSubstr("hint"));
}

TEST(GpuDeviceLost, DestroyedBetweenStepsThrowsAtEverySyncPointAfter) {
  Device dev = create_device();
  const Pipeline& pipe = get_pipeline(dev, make_key("gpu_selftest"));
  SelftestParams p{.n = 100, .a = 3.0f, .b = -1.0f};
  auto x = test::selftest_input(p.n);
  ASSERT_EQ(test::run_selftest(dev, pipe, p, x), test::selftest_cpu(p, x));  // a working step
  EXPECT_FALSE(is_lost(dev));

  wgpuDeviceDestroy(dev.get());
  EXPECT_TRUE(is_lost(dev));
  expect_names_the_loss(dev, message_of([&] { check(dev); }));
  // Still lost: the error is not cleared like a validation error.
  message_of([&] { check(dev); });
  message_of([&] { wait_idle(dev); });
  // The next step fails at its first creation or at its read-back, never hangs.
  expect_names_the_loss(dev, message_of([&] { test::run_selftest(dev, pipe, p, x); }));
  std::string msg = message_of([&] { create_buffer(dev, 64, kStorageUsage, "after loss"); });
  EXPECT_THAT(msg, HasSubstr("creating buffer 'after loss'"));
  message_of([&] { get_pipeline(dev, make_key("gpu_selftest", "main", {{"SCALE", 2.0}})); });
}

TEST(GpuDeviceLost, DestroyedAfterSubmitBeforeReadBackThrowsAtTheReadBack) {
  Device dev = create_device();
  const Pipeline& pipe = get_pipeline(dev, make_key("gpu_selftest"));
  SelftestParams p{.n = 4096, .a = 0.5f, .b = 2.0f};
  auto x = test::selftest_input(p.n);
  test::SelftestJob job = test::make_selftest_job(dev, pipe, p, x);
  const uint64_t bytes = uint64_t(p.n) * sizeof(float);
  Buffer staging = create_buffer(dev, bytes, kReadbackUsage, "staging");
  auto enc = CommandEncoder::adopt(wgpuDeviceCreateCommandEncoder(dev.get(), nullptr));
  test::encode_selftest(enc.get(), pipe, job);
  wgpuCommandEncoderCopyBufferToBuffer(enc.get(), job.y.get(), 0, staging.get(), 0, bytes);
  auto cmd = CommandBuffer::adopt(wgpuCommandEncoderFinish(enc.get(), nullptr));
  WGPUCommandBuffer raw = cmd.get();
  wgpuQueueSubmit(dev.queue.get(), 1, &raw);
  MapRequest r;
  map_read_begin(dev, staging.get(), bytes, r);

  wgpuDeviceDestroy(dev.get());  // the step is in flight, its mapping pending
  std::vector<float> y(p.n);
  expect_names_the_loss(dev, message_of([&] { map_read_end(dev, staging.get(), r, y.data(), bytes); }));
  EXPECT_FALSE(r.pending);
}

TEST(GpuDeviceLost, ABufferPastTheDeviceLimitNamesItsSize) {
  Device& dev = test::device();
  ASSERT_NO_THROW(check(dev));
  const uint64_t too_big = align_up(dev.caps.limits.maxBufferSize + 4096, 4);  // as create_buffer rounds it
  std::string msg = message_of<GpuError>([&] { create_buffer(dev, too_big, kStorageUsage, "huge"); });
  EXPECT_THAT(msg, HasSubstr("creating buffer 'huge'"));
  EXPECT_THAT(msg, HasSubstr(std::to_string(too_big)));
  // A validation error, not a loss: the device still works.
  EXPECT_NO_THROW(check(dev));
  EXPECT_FALSE(is_lost(dev));
  SelftestParams p{.n = 33, .a = 1.0f, .b = 1.0f};
  auto x = test::selftest_input(p.n);
  EXPECT_EQ(test::run_selftest(dev, get_pipeline(dev, make_key("gpu_selftest")), p, x), test::selftest_cpu(p, x));
}

}  // namespace
}  // namespace wgrt::gpu
