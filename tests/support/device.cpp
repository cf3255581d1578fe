#include "support/device.h"

namespace wgrt::test {

gpu::Device& device() {
  static gpu::Device dev = gpu::create_device();
  return dev;
}

}  // namespace wgrt::test
