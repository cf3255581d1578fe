// The error model: creation errors throw GpuError with Dawn's message at once; errors outside
// any scope surface at the next sync point; the device stays usable after either.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "gpu/pipeline.h"
#include "selftest.h"
#include "support/device.h"

namespace wgrt::gpu {
namespace {

using ::testing::HasSubstr;
using test::SelftestParams;

// The device still computes correctly (the embedded kernel against the CPU).
void expect_device_usable(Device& dev) {
  EXPECT_NO_THROW(check(dev));
  SelftestParams p{.n = 77, .a = -2.0f, .b = 0.5f};
  auto x = test::selftest_input(p.n);
  auto y = test::run_selftest(dev, get_pipeline(dev, make_key("gpu_selftest")), p, x);
  EXPECT_EQ(y, test::selftest_cpu(p, x));
  EXPECT_NO_THROW(wait_idle(dev));
}

std::string message_of(auto&& f) {
  try {
    f();
  } catch (const GpuError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no GpuError thrown";
  return {};
}

TEST(GpuErrors, WgslCompileErrorCarriesDawnsMessage) {
  Device& dev = test::device();
  ASSERT_NO_THROW(check(dev));
  constexpr std::string_view bad = R"(
@group(0) @binding(0) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(1)
fn main() {
  y[0] = undeclared_thing_wgrt;
}
)";
  std::string msg = message_of([&] { compile_wgsl(dev, "bad kernel", bad); });
  EXPECT_THAT(msg, HasSubstr("compiling WGSL 'bad kernel'"));  // wgrt's context
  EXPECT_THAT(msg, HasSubstr("undeclared_thing_wgrt"));        // Dawn's text
  EXPECT_THAT(msg, HasSubstr("error"));
  // The error was caught by the scope, not left for the next sync point.
  EXPECT_NO_THROW(check(dev));
  expect_device_usable(dev);
}

TEST(GpuErrors, UnknownOverrideConstantIsAPipelineError) {
  Device& dev = test::device();
  ASSERT_NO_THROW(check(dev));
  size_t before = dev.pipelines->pipelines.size();
  std::string msg = message_of(
      [&] { get_pipeline(dev, make_key("gpu_selftest", "main", {{"NO_SUCH_CONSTANT", 1.0}})); });
  EXPECT_THAT(msg, HasSubstr("creating pipeline"));
  EXPECT_THAT(msg, HasSubstr("NO_SUCH_CONSTANT"));
  EXPECT_EQ(dev.pipelines->pipelines.size(), before);  // nothing half-made is cached
  expect_device_usable(dev);
}

TEST(GpuErrors, InvalidBindGroupCarriesDawnsMessage) {
  Device& dev = test::device();
  ASSERT_NO_THROW(check(dev));
  const Pipeline& pipe = get_pipeline(dev, make_key("gpu_selftest"));
  Buffer uniform = create_buffer(dev, 16, kUniformUsage, "params");
  Buffer storage = create_buffer(dev, 64, kStorageUsage, "storage");
  // A uniform-only buffer where the layout wants storage, and binding 2 missing.
  const BufferBinding wrong[] = {{.binding = 0, .buffer = uniform.get()},
                                 {.binding = 1, .buffer = uniform.get()}};
  std::string msg = message_of([&] { create_bind_group(dev, pipe.layout.get(), wrong, "bad group"); });
  EXPECT_THAT(msg, HasSubstr("creating bind group 'bad group'"));
  // Dawn's own text follows wgrt's prefix.
  std::string dawn = msg.substr(std::min(msg.size(), msg.find("': ") + 3));
  EXPECT_FALSE(dawn.empty()) << msg;
  EXPECT_THAT(dawn, ::testing::AnyOf(HasSubstr("binding"), HasSubstr("Binding"))) << msg;
  EXPECT_NO_THROW(check(dev));

  // The same layout with the right buffers still works.
  Buffer storage2 = create_buffer(dev, 64, kStorageUsage, "storage 2");
  const BufferBinding right[] = {{.binding = 0, .buffer = uniform.get()},
                                 {.binding = 1, .buffer = storage.get()},
                                 {.binding = 2, .buffer = storage2.get()}};
  EXPECT_NO_THROW(create_bind_group(dev, pipe.layout.get(), right, "good group"));
  expect_device_usable(dev);
}

TEST(GpuErrors, UncapturedErrorIsRaisedAtTheNextSyncPointThenCleared) {
  Device& dev = test::device();
  ASSERT_NO_THROW(check(dev));
  Buffer small = create_buffer(dev, 16, kStorageUsage, "small");
  const float values[8] = {};
  // 32 bytes into a 16-byte buffer, outside any error scope: nothing throws yet.
  EXPECT_NO_THROW(wgpuQueueWriteBuffer(dev.queue.get(), small.get(), 0, values, sizeof(values)));
  std::string msg = message_of([&] { check(dev); });
  EXPECT_THAT(msg, HasSubstr("validation"));
  EXPECT_THAT(msg, HasSubstr("small"));  // Dawn names the buffer by its label
  // Raised once, then cleared.
  EXPECT_NO_THROW(check(dev));

  // Two errors before a sync point: the first is reported and the rest are counted.
  wgpuQueueWriteBuffer(dev.queue.get(), small.get(), 0, values, sizeof(values));
  wgpuQueueWriteBuffer(dev.queue.get(), small.get(), 8, values, sizeof(values));
  msg = message_of([&] { wait_idle(dev); });
  EXPECT_THAT(msg, HasSubstr("(and 1 more)"));
  EXPECT_NO_THROW(check(dev));
  expect_device_usable(dev);
}

}  // namespace
}  // namespace wgrt::gpu
