// Inside wgrt only (not installed): a C API handle over a device and session that the caller
// built. `wgrt run` generates through the C API on one, its session built with the graph,
// device and quantization flags that wgrt_model_params does not carry.
#pragma once

#include <memory>
#include <string>

#include "gpu/device.h"
#include "llm/session.h"
#include "wgrt/wgrt.h"

namespace wgrt::api {

// The handle owns both (free it with wgrt_model_free); `path` as given to open_session ("" for
// the demo model).
wgrt_model* adopt(std::unique_ptr<gpu::Device> dev, llm::Session session, std::string path);
llm::Session& session_of(wgrt_model* model);

}  // namespace wgrt::api
