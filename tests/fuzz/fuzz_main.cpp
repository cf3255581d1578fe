// libFuzzer entry point; WGRT_FUZZ_TARGET names the body in fuzz_targets.h (one executable each).
#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  wgrt::fuzz::WGRT_FUZZ_TARGET(std::span<const uint8_t>(data, size));
  return 0;
}
