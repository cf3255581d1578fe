// One WebGPU device per test process, created on first use (device creation costs far
// more than a test on lavapipe).
#pragma once

#include "gpu/device.h"

namespace wgrt::test {

gpu::Device& device();
// A second device on the same adapter with WebGPU's default limits (16 KiB of workgroup
// storage, ...): ops built on it must pick their small variants. Created on first use.
gpu::Device& default_limits_device();

}  // namespace wgrt::test
