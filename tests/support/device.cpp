#include "support/device.h"

#include <gtest/gtest.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

namespace wgrt::test {

gpu::Device& device() {
  static gpu::Device dev = gpu::create_device();
  return dev;
}

gpu::Device& default_limits_device() {
  static gpu::Device dev = gpu::create_device({.default_limits = true});
  return dev;
}

#if defined(__SANITIZE_ADDRESS__)
namespace {

// LeakSanitizer checks at exit, after this process's device is gone and the Vulkan loader has
// unloaded the driver (also whenever a test's own instance goes): what the driver still held in
// its globals then looks leaked, from a module that no longer exists, so no suppression can
// name it. The process's device, made first, keeps the driver loaded; checking once the tests
// are done, while it lives, sees the driver's pointers and still reports every allocation that
// nothing points to.
struct LeakCheckWhileDriverLoaded : testing::Environment {
  void SetUp() override {
    try {
      device();
    } catch (const std::exception&) {  // no adapter: the tests that need one fail on their own
    }
  }
  void TearDown() override { __lsan_do_leak_check(); }
};
[[maybe_unused]] testing::Environment* const kLeakCheck =
    testing::AddGlobalTestEnvironment(new LeakCheckWhileDriverLoaded);

}  // namespace
#endif

}  // namespace wgrt::test
