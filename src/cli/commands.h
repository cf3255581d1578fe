// The wgrt subcommands. Each registers its flags on the CLI11 app and returns the function
// that runs it after parsing.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

#include "gpu/device.h"

namespace wgrt::cli {

using Run = std::function<int()>;

// Flags every device-using command shares: --backend, --adapter.
void add_device_flags(CLI::App& cmd, gpu::DeviceOptions& opts);

Run add_info(CLI::App& app, gpu::DeviceOptions& dev_opts);
Run add_run(CLI::App& app, gpu::DeviceOptions& dev_opts);
Run add_tokenize(CLI::App& app);
Run add_perplexity(CLI::App& app, gpu::DeviceOptions& dev_opts);
Run add_bench(CLI::App& app, gpu::DeviceOptions& dev_opts);
Run add_template(CLI::App& app);
Run add_chat(CLI::App& app, gpu::DeviceOptions& dev_opts);
Run add_serve(CLI::App& app, gpu::DeviceOptions& dev_opts);

}  // namespace wgrt::cli
