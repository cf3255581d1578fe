// Device creation: DeviceCaps describe the adapter and device that were actually created.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>

#include "gpu/device.h"
#include "support/device.h"

namespace wgrt::gpu {
namespace {

bool adapter_offers(const DeviceCaps& caps, WGPUFeatureName f) {
  return std::find(caps.adapter_features.begin(), caps.adapter_features.end(), f) !=
         caps.adapter_features.end();
}

TEST(GpuDevice, CreatedWithAdapterDescription) {
  Device& dev = test::device();
  ASSERT_NE(dev.get(), nullptr);
  ASSERT_NE(dev.queue.get(), nullptr);
  ASSERT_NE(dev.pipelines, nullptr);
  const AdapterDesc& a = dev.caps.adapter;
  EXPECT_FALSE(a.name.empty());
  EXPECT_NE(a.backend, WGPUBackendType_Undefined);
  EXPECT_STRNE(backend_name(a.backend), "undefined");
  // The adapter list (a fresh instance) offers the adapter the device was made on.
  auto adapters = list_adapters({});
  ASSERT_FALSE(adapters.empty());
  EXPECT_TRUE(std::any_of(adapters.begin(), adapters.end(), [&](const AdapterDesc& d) {
    return d.name == a.name && d.backend == a.backend;
  })) << a.name;
}

TEST(GpuDevice, LimitsAreTheDevicesAndNonZero) {
  Device& dev = test::device();
  const WGPULimits& l = dev.caps.limits;
  for (uint32_t v : {l.maxBindGroups, l.maxBindingsPerBindGroup, l.maxStorageBuffersPerShaderStage,
                     l.maxUniformBuffersPerShaderStage, l.minUniformBufferOffsetAlignment,
                     l.minStorageBufferOffsetAlignment, l.maxComputeWorkgroupStorageSize,
                     l.maxComputeInvocationsPerWorkgroup, l.maxComputeWorkgroupSizeX,
                     l.maxComputeWorkgroupSizeY, l.maxComputeWorkgroupSizeZ,
                     l.maxComputeWorkgroupsPerDimension}) {
    EXPECT_GT(v, 0u);
    EXPECT_NE(v, WGPU_LIMIT_U32_UNDEFINED);
  }
  for (uint64_t v : {l.maxUniformBufferBindingSize, l.maxStorageBufferBindingSize, l.maxBufferSize}) {
    EXPECT_GT(v, 0u);
    EXPECT_NE(v, WGPU_LIMIT_U64_UNDEFINED);
  }
  // WebGPU's guaranteed minimums (a zeroed or shifted struct would fail these).
  EXPECT_GE(l.maxComputeInvocationsPerWorkgroup, 256u);
  EXPECT_GE(l.maxComputeWorkgroupSizeX, 256u);
  EXPECT_GE(l.maxComputeWorkgroupsPerDimension, 65535u);
  EXPECT_GE(l.maxStorageBufferBindingSize, 128ull << 20);
  EXPECT_GE(l.maxBufferSize, 256ull << 20);
  EXPECT_GE(l.maxBindGroups, 4u);
  EXPECT_TRUE(std::has_single_bit(l.minStorageBufferOffsetAlignment));
  EXPECT_TRUE(std::has_single_bit(l.minUniformBufferOffsetAlignment));
  EXPECT_LE(l.maxStorageBufferBindingSize, l.maxBufferSize);

  // caps.limits are what the device reports now, not just what was asked for.
  WGPULimits now{};
  ASSERT_EQ(wgpuDeviceGetLimits(dev.get(), &now), WGPUStatus_Success);
  EXPECT_EQ(now.maxBufferSize, l.maxBufferSize);
  EXPECT_EQ(now.maxStorageBufferBindingSize, l.maxStorageBufferBindingSize);
  EXPECT_EQ(now.maxComputeInvocationsPerWorkgroup, l.maxComputeInvocationsPerWorkgroup);
  EXPECT_EQ(now.maxComputeWorkgroupStorageSize, l.maxComputeWorkgroupStorageSize);
  EXPECT_EQ(now.minStorageBufferOffsetAlignment, l.minStorageBufferOffsetAlignment);
  EXPECT_EQ(now.maxImmediateSize, l.maxImmediateSize);  // the last member
}

// DeviceOptions::default_limits (WGRT_LIMITS=default) gets the WebGPU specification's default
// limits, whatever the adapter could give.
TEST(GpuDevice, DefaultLimitsAreTheSpecDefaults) {
  const WGPULimits& l = test::default_limits_device().caps.limits;
  EXPECT_EQ(l.maxComputeWorkgroupStorageSize, 16384u);
  EXPECT_EQ(l.maxComputeInvocationsPerWorkgroup, 256u);
  EXPECT_EQ(l.maxComputeWorkgroupSizeX, 256u);
  EXPECT_EQ(l.maxComputeWorkgroupsPerDimension, 65535u);
  EXPECT_EQ(l.maxStorageBufferBindingSize, 128ull << 20);
  EXPECT_EQ(l.maxBufferSize, 256ull << 20);
  EXPECT_EQ(l.maxStorageBuffersPerShaderStage, 8u);
}

TEST(GpuDevice, FeaturesAgreeWithTheDevice) {
  Device& dev = test::device();
  const DeviceCaps& caps = dev.caps;
  EXPECT_FALSE(caps.adapter_features.empty());
  const std::pair<WGPUFeatureName, bool> flags[] = {
      {WGPUFeatureName_ShaderF16, caps.shader_f16},
      {WGPUFeatureName_Subgroups, caps.subgroups},
      {WGPUFeatureName_TimestampQuery, caps.timestamp_query}};
  for (auto [feature, flag] : flags) {
    SCOPED_TRACE(feature_name(feature));
    EXPECT_EQ(flag, wgpuDeviceHasFeature(dev.get(), feature) != 0);
    // wgrt enables each of these whenever the adapter offers it.
    EXPECT_EQ(flag, adapter_offers(caps, feature));
    EXPECT_EQ(flag, wgpuAdapterHasFeature(dev.adapter.get(), feature) != 0);
  }
  if (caps.subgroups) {
    EXPECT_GT(caps.subgroup_min_size, 0u);
    EXPECT_LE(caps.subgroup_min_size, caps.subgroup_max_size);
    EXPECT_TRUE(std::has_single_bit(caps.subgroup_min_size));
  }
  EXPECT_EQ(feature_name(WGPUFeatureName_TimestampQuery), "timestamp-query");
}

// The ABI of the futures' callbacks, as the library really calls them: status first, both
// userdata pointers intact (a wrong callback signature moves them into other arguments).
TEST(GpuDevice, CallbacksReceiveStatusAndUserdata) {
  Device& dev = test::device();
  int token1 = 0, token2 = 0;  // distinct addresses for userdata2
  struct Seen {
    int calls = 0;
    uint32_t status = 0;
    void* u1 = nullptr;
    void* u2 = nullptr;
  };

  Seen work;
  WGPUQueueWorkDoneCallbackInfo done{};
  done.mode = WGPUCallbackMode_WaitAnyOnly;
  done.callback = [](WGPUQueueWorkDoneStatus s, WGPUStringView, void* u1, void* u2) {
    Seen* out = static_cast<Seen*>(u1);
    ++out->calls;
    out->status = uint32_t(s);
    out->u1 = u1;
    out->u2 = u2;
  };
  done.userdata1 = &work;
  done.userdata2 = &token2;
  wait(dev, wgpuQueueOnSubmittedWorkDone(dev.queue.get(), done));
  EXPECT_EQ(work.calls, 1);
  EXPECT_EQ(work.status, uint32_t(WGPUQueueWorkDoneStatus_Success));
  EXPECT_EQ(work.u1, static_cast<void*>(&work));
  EXPECT_EQ(work.u2, static_cast<void*>(&token2));

  Seen popped;
  wgpuDevicePushErrorScope(dev.get(), WGPUErrorFilter_Validation);
  WGPUPopErrorScopeCallbackInfo pop{};
  pop.mode = WGPUCallbackMode_WaitAnyOnly;
  pop.callback = [](WGPUPopErrorScopeStatus s, WGPUErrorType type, WGPUStringView, void* u1,
                    void* u2) {
    Seen* out = static_cast<Seen*>(u1);
    ++out->calls;
    out->status = uint32_t(s) << 8 | uint32_t(type);
    out->u1 = u1;
    out->u2 = u2;
  };
  pop.userdata1 = &popped;
  pop.userdata2 = &token1;
  wait(dev, wgpuDevicePopErrorScope(dev.get(), pop));
  EXPECT_EQ(popped.calls, 1);
  EXPECT_EQ(popped.status, uint32_t(WGPUPopErrorScopeStatus_Success) << 8 | WGPUErrorType_NoError);
  EXPECT_EQ(popped.u1, static_cast<void*>(&popped));
  EXPECT_EQ(popped.u2, static_cast<void*>(&token1));

  // And the sync points built on them.
  EXPECT_NO_THROW(wait_idle(dev));
  EXPECT_NO_THROW(check(dev));
}

TEST(GpuDevice, BadOptionsAreRejectedWithHints) {
  EXPECT_THROW(create_device({.backend = "no-such-backend"}), GpuError);
  try {
    create_device({.adapter_index = 1000});
    FAIL() << "adapter index 1000 accepted";
  } catch (const GpuError& e) {
    EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace wgrt::gpu
