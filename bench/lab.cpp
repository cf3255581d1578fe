#include "lab.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <stdexcept>

#include "gpu/handles.h"

namespace wgrt::lab {

void add_device_flags(CLI::App& app, gpu::DeviceOptions& opts) {
  app.add_option("--backend", opts.backend, "WebGPU backend: vulkan, metal, d3d12, opengl, ...")
      ->check(CLI::IsMember({"vulkan", "metal", "d3d12", "d3d11", "opengl", "opengles", "null"}));
  app.add_option("--adapter", opts.adapter_index,
                 "adapter index from `wgrt info` (default: env WGRT_ADAPTER, else the best GPU)")
      ->check(CLI::NonNegativeNumber);
}

std::string adapter_line(const gpu::DeviceCaps& caps) {
  const auto& a = caps.adapter;
  return fmt::format("{} [{}, {}] driver: {}; timestamps {}", a.name, gpu::backend_name(a.backend),
                     gpu::adapter_type_name(a.type), a.driver.empty() ? "-" : a.driver,
                     caps.timestamp_query ? "yes" : "no (wall clock)");
}

std::string today() {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &utc);
  return buf;
}

// ---- timing -------------------------------------------------------------------------------

Timer create_timer(gpu::Device& dev) {
  Timer t;
  t.dev = &dev;
  if (dev.caps.timestamp_query) t.prof = gpu::create_profiler(dev, 1);
  return t;
}

namespace {
// `passes` compute passes of `record` in one command buffer, submitted; prof (when given) times
// the first.
void submit_passes(gpu::Device& dev, gpu::Profiler* prof, std::string_view label, int passes,
                   const RecordPass& record) {
  auto enc = gpu::CommandEncoder::adopt(wgpuDeviceCreateCommandEncoder(dev.get(), nullptr));
  for (int i = 0; i < passes; ++i) {
    gpu::ComputePass pass = gpu::begin_compute_pass(enc.get(), i == 0 ? prof : nullptr, label);
    record(pass.get());
    wgpuComputePassEncoderEnd(pass.get());
  }
  if (prof) gpu::resolve_profile(*prof, enc.get());
  auto cmd = gpu::CommandBuffer::adopt(wgpuCommandEncoderFinish(enc.get(), nullptr));
  WGPUCommandBuffer raw = cmd.get();
  wgpuQueueSubmit(dev.queue.get(), 1, &raw);
}
}  // namespace

Sample time_pass(Timer& timer, std::string_view label, const RecordPass& record) {
  gpu::Device& dev = *timer.dev;
  gpu::Profiler* prof = timer.prof ? &*timer.prof : nullptr;
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  submit_passes(dev, prof, label, 1, record);
  Sample s;
  if (prof) {
    // Mapping the timestamps waits for the whole command buffer.
    auto samples = gpu::read_profile(dev, *prof);
    if (samples.size() != 1)
      throw gpu::GpuError(fmt::format("timing '{}': expected 1 timed pass, got {}", label,
                                      samples.size()));
    s.gpu_s = samples[0].seconds;
  } else {
    gpu::wait_idle(dev);
  }
  s.wall_s = std::chrono::duration<double>(clock::now() - t0).count();
  return s;
}

double median(std::vector<double> values) {
  if (values.empty()) return kNaN;
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

void spin_up(Timer& timer, double seconds, const RecordPass& record) {
  using clock = std::chrono::steady_clock;
  gpu::Device& dev = *timer.dev;
  const auto t0 = clock::now();
  int passes = 1;
  while (std::chrono::duration<double>(clock::now() - t0).count() < seconds) {
    const auto s0 = clock::now();
    submit_passes(dev, nullptr, "spin", passes, record);
    gpu::wait_idle(dev);
    if (std::chrono::duration<double>(clock::now() - s0).count() < 0.02 && passes < 4096) passes *= 2;
  }
}

void add_spin_flag(CLI::App& app, TimeOptions& opts) {
  app.add_option("--spin-s", opts.spin_s, "seconds of back-to-back passes before each timing (the GPU's clocks leave idle)")
      ->check(CLI::Range(0.0, 60.0));
}

Timing measure(Timer& timer, std::string_view label, const TimeOptions& opts,
               const RecordPass& record) {
  spin_up(timer, opts.spin_s, record);
  for (int i = 0; i < opts.warmup; ++i) time_pass(timer, label, record);
  std::vector<double> chosen, wall;
  for (int i = 0; i < std::max(1, opts.repeats); ++i) {
    Sample s = time_pass(timer, label, record);
    chosen.push_back(timer.gpu_clock() ? s.gpu_s : s.wall_s);
    wall.push_back(s.wall_s);
  }
  Timing t;
  t.seconds = median(chosen);
  t.min_seconds = *std::min_element(chosen.begin(), chosen.end());
  t.max_seconds = *std::max_element(chosen.begin(), chosen.end());
  t.wall_seconds = median(wall);
  t.wall_min_seconds = *std::min_element(wall.begin(), wall.end());
  t.wall_max_seconds = *std::max_element(wall.begin(), wall.end());
  t.gpu_clock = timer.gpu_clock();
  return t;
}

// ---- output -------------------------------------------------------------------------------

void print_table(const Table& table) {
  std::vector<size_t> width(table.columns.size(), 3);
  for (size_t c = 0; c < table.columns.size(); ++c)
    width[c] = std::max(width[c], table.columns[c].size());
  for (const auto& row : table.rows)
    for (size_t c = 0; c < row.size() && c < width.size(); ++c)
      width[c] = std::max(width[c], row[c].size());
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out = "|";
    for (size_t c = 0; c < width.size(); ++c)
      out += fmt::format(" {:<{}} |", c < cells.size() ? cells[c] : "", width[c]);
    fmt::print("{}\n", out);
  };
  line(table.columns);
  std::string rule = "|";
  for (size_t w : width) rule += std::string(w + 2, '-') + "|";
  fmt::print("{}\n", rule);
  for (const auto& row : table.rows) line(row);
}

std::string percent_of(double achieved, double peak) {
  if (!std::isfinite(achieved) || !std::isfinite(peak) || peak <= 0) return "-";
  return fmt::format("{:.1f}%", 100.0 * achieved / peak);
}

}  // namespace wgrt::lab
