// The timestamp profiler: one sample per timed pass, in order, under its label.
#include <gtest/gtest.h>

#include "gpu/profiler.h"
#include "selftest.h"
#include "support/device.h"

namespace wgrt::gpu {
namespace {

TEST(GpuProfiler, TwoTimedPassesGiveTwoLabelledSamples) {
  Device& dev = test::device();
  if (!dev.caps.timestamp_query) GTEST_SKIP() << dev.caps.adapter.name << " has no timestamp-query";
  const Pipeline& pipe = get_pipeline(dev, make_key("gpu_selftest"));
  test::SelftestParams p{.n = 4099, .a = 0.5f, .b = 1.0f};
  auto x = test::selftest_input(p.n);
  test::SelftestJob job = test::make_selftest_job(dev, pipe, p, x);

  Profiler prof = create_profiler(dev, 2);
  for (int round = 0; round < 2; ++round) {  // read_profile resets for the next submit
    SCOPED_TRACE(round);
    auto enc = test::make_encoder(dev);
    test::encode_selftest(enc.get(), pipe, job, &prof, "first pass");
    test::encode_selftest(enc.get(), pipe, job, nullptr, "untimed pass");
    test::encode_selftest(enc.get(), pipe, job, &prof, "second pass");
    EXPECT_EQ(prof.labels.size(), 2u);
    resolve_profile(prof, enc.get());
    test::submit(dev, enc);
    std::vector<ProfileSample> samples = read_profile(dev, prof);
    ASSERT_EQ(samples.size(), 2u);
    EXPECT_EQ(samples[0].label, "first pass");
    EXPECT_EQ(samples[1].label, "second pass");
    for (const auto& s : samples) {
      EXPECT_GE(s.seconds, 0.0) << s.label;
      EXPECT_LT(s.seconds, 10.0) << s.label;  // ticks are nanoseconds, not garbage
    }
    EXPECT_TRUE(prof.labels.empty());
  }
  // The timed work computed what it should.
  EXPECT_EQ(read_buffer<float>(dev, job.y.get(), p.n), test::selftest_cpu(p, x));

  // A third timed pass does not fit a profiler sized for two.
  auto enc = test::make_encoder(dev);
  test::encode_selftest(enc.get(), pipe, job, &prof, "a");
  test::encode_selftest(enc.get(), pipe, job, &prof, "b");
  EXPECT_THROW(test::encode_selftest(enc.get(), pipe, job, &prof, "c"), GpuError);
  prof.labels.clear();
  check(dev);
}

TEST(GpuProfiler, RefusedWithoutTimestampQuery) {
  Device& dev = test::device();
  if (dev.caps.timestamp_query) {
    EXPECT_NO_THROW(create_profiler(dev, 1));
    return;
  }
  EXPECT_THROW(create_profiler(dev, 1), GpuError);
}

}  // namespace
}  // namespace wgrt::gpu
