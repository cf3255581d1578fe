// Shared helpers for the kernel labs (bench/): timing one compute pass with GPU timestamps
// (wall clock when the device has none), medians over repeats, a markdown table, and the
// device peaks file that `wgrt_lab_peaks --out` writes and later labs read to print ratios.
#pragma once

#include <CLI/CLI.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/device.h"
#include "gpu/peaks.h"
#include "gpu/profiler.h"

namespace wgrt::lab {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// --backend / --adapter, as `wgrt info` takes them.
void add_device_flags(CLI::App& app, gpu::DeviceOptions& opts);

// "NVIDIA H200 [vulkan, discrete GPU] driver ..." for the first line of a lab's output.
std::string adapter_line(const gpu::DeviceCaps& caps);

// Today's date (UTC), YYYY-MM-DD.
std::string today();

// ---- timing -------------------------------------------------------------------------------

// Times compute passes: GPU timestamps around the pass when the device has timestamp-query,
// always the wall time from encoding to completion.
struct Timer {
  gpu::Device* dev = nullptr;
  std::optional<gpu::Profiler> prof;  // empty: no timestamps, GPU times are wall times
  bool gpu_clock() const { return prof.has_value(); }
};

Timer create_timer(gpu::Device& dev);

// One timed pass. gpu_s is the pass's timestamp duration (NaN without timestamps); wall_s runs
// from creating the encoder to the work being done (encode + submit + wait).
struct Sample {
  double gpu_s = kNaN;
  double wall_s = 0;
};

using RecordPass = std::function<void(WGPUComputePassEncoder)>;

// Encodes `record` into one compute pass of its own command buffer, submits it, waits.
Sample time_pass(Timer& timer, std::string_view label, const RecordPass& record);

struct TimeOptions {
  int warmup = 2;
  int repeats = 10;
  double spin_s = 1.0;  // seconds of back-to-back passes before the warm-up (spin_up)
};

// Keeps the GPU busy with `record` for `seconds` (passes submitted back to back, ~20 ms per
// submit) so that its clocks leave idle before a timing: the H200 idles at 345 MHz and reaches
// its 1980 MHz only after about a second of steady work, and drops back within a second of idle
// (nvidia-smi, bench/peers/profile-h200.sh's clocks.csv). A lab that builds and fills a graph
// between rows would otherwise time every kernel at a fraction of its speed.
void spin_up(Timer& timer, double seconds, const RecordPass& record);
void add_spin_flag(CLI::App& app, TimeOptions& opts);  // --spin-s

// Medians over `repeats` passes after spin_up and `warmup` untimed passes. `seconds` is the GPU time where
// the device has timestamps, else the wall time.
struct Timing {
  double seconds = 0;       // median of the chosen clock
  double min_seconds = 0;
  double max_seconds = 0;
  double wall_seconds = 0;  // median wall time (encode + submit + wait)
  double wall_min_seconds = 0;
  double wall_max_seconds = 0;
  bool gpu_clock = false;
};

Timing measure(Timer& timer, std::string_view label, const TimeOptions& opts,
               const RecordPass& record);

double median(std::vector<double> values);

// ---- output -------------------------------------------------------------------------------

// A markdown table (pastes into a docs/perf/ log as is); columns padded to line up.
struct Table {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
};
void print_table(const Table& table);

// ---- device peaks -------------------------------------------------------------------------

// What `wgrt_lab_peaks` measured on one adapter. NaN where not measured (e.g. GPU dispatch
// time on a device without timestamps).
using gpu::Peaks;
using gpu::load_peaks;
using gpu::save_peaks;


// "62.3%" of a measured peak, or "-" when either side is missing.
std::string percent_of(double achieved, double peak);

}  // namespace wgrt::lab
