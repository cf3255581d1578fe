// A device lost under a session (wgpuDeviceDestroy, as a driver reset would): between steps,
// with a pipelined step in flight, and inside the generate loop, the next sync point throws
// gpu::DeviceLostError naming the device, never hangs. Each test makes its own device and
// session of the built-in random-weight model (the shared device stays whole).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "llm/generate.h"
#include "llm/session.h"

namespace wgrt::llm {
namespace {

using ::testing::HasSubstr;

model::BuildOptions small() {
  model::BuildOptions o;
  o.n_ctx = 64;
  o.max_batch = 8;
  return o;
}

void expect_lost(auto&& f, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << what << ": nothing thrown";
  } catch (const gpu::DeviceLostError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("destroyed")) << what;
    EXPECT_THAT(std::string(e.what()), HasSubstr("hint")) << what;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": not a DeviceLostError: " << e.what();
  }
}

TEST(SessionDeviceLost, BetweenStepsTheNextStepThrows) {
  gpu::Device dev = gpu::create_device();
  Session s = open_session(dev, kRandomModel, small());
  const std::vector<int32_t> prompt = {1, 72, 101, 108, 108, 111};
  eval(s, prompt, {}, Readout::Argmax);
  const int32_t first = read_argmax(s);
  EXPECT_GE(first, 0);

  wgpuDeviceDestroy(dev.get());
  expect_lost([&] {
    eval(s, std::vector<int32_t>{first}, {}, Readout::Argmax);
    read_argmax(s);
  }, "the step after the loss");
  expect_lost([&] { eval(s, std::vector<int32_t>{first}, {}, Readout::Argmax); }, "and the one after");
}

TEST(SessionDeviceLost, APipelinedStepInFlightThrowsAtItsReadBack) {
  gpu::Device dev = gpu::create_device();
  Session s = open_session(dev, kRandomModel, small());
  ASSERT_TRUE(can_feed(s));
  eval(s, std::vector<int32_t>{1, 84, 104, 101}, {}, Readout::Argmax);
  const graph::Snapshot a = submit_fed_step(s);
  EXPECT_GE(read_argmax(s, a), 0);
  const graph::Snapshot b = submit_fed_step(s);  // submitted, not read
  wgpuDeviceDestroy(dev.get());
  expect_lost([&] { read_argmax(s, b); }, "the read-back of the step in flight");
}

TEST(SessionDeviceLost, TheGenerateLoopThrowsInsteadOfHanging) {
  gpu::Device dev = gpu::create_device();
  Session s = open_session(dev, kRandomModel, small());
  GenerateOptions o;
  o.prompt = "In the beginning";
  o.n_predict = 40;
  o.sampling.temperature = 0;
  size_t pieces = 0;
  expect_lost([&] {
    generate(s, o, [&](std::string_view) {
      if (++pieces == 3) wgpuDeviceDestroy(dev.get());
    });
  }, "generate");
  EXPECT_GE(pieces, 3u);
}

}  // namespace
}  // namespace wgrt::llm
