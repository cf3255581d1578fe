// One WebGPU device per test process, created on first use (device creation costs far
// more than a test on lavapipe).
#pragma once

#include "gpu/device.h"

namespace wgrt::test {

gpu::Device& device();

}  // namespace wgrt::test
