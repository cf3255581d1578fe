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

Sample time_pass(Timer& timer, std::string_view label, const RecordPass& record) {
  gpu::Device& dev = *timer.dev;
  gpu::Profiler* prof = timer.prof ? &*timer.prof : nullptr;
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  auto enc = gpu::CommandEncoder::adopt(wgpuDeviceCreateCommandEncoder(dev.get(), nullptr));
  {
    gpu::ComputePass pass = gpu::begin_compute_pass(enc.get(), prof, label);
    record(pass.get());
    wgpuComputePassEncoderEnd(pass.get());
  }
  if (prof) gpu::resolve_profile(*prof, enc.get());
  auto cmd = gpu::CommandBuffer::adopt(wgpuCommandEncoderFinish(enc.get(), nullptr));
  WGPUCommandBuffer raw = cmd.get();
  wgpuQueueSubmit(dev.queue.get(), 1, &raw);
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

Timing measure(Timer& timer, std::string_view label, const TimeOptions& opts,
               const RecordPass& record) {
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

// ---- device peaks -------------------------------------------------------------------------
//
// File layout (JSON object):
//   format "wgrt-peaks", version 1, date, adapter {name, driver, backend, type}, timer, bytes,
//   read_gbps, write_gbps, copy_gbps, fma_gflops, dispatch_wall_us, dispatch_gpu_us,
//   dispatch_ro_wall_us, dispatch_ro_gpu_us (numbers, null when not measured), details {...}.

namespace {

constexpr const char* kFormat = "wgrt-peaks";
constexpr int kVersion = 1;

nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nullptr; }

struct PeaksReader {
  const std::string& path;
  const nlohmann::json& j;

  [[noreturn]] void fail(std::string_view field, std::string_view what) const {
    throw std::runtime_error(fmt::format(
        "peaks file '{}': field '{}' {} (hint: write it again with `wgrt_lab_peaks --out {}`)",
        path, field, what, path));
  }
  const nlohmann::json& at(const nlohmann::json& obj, const char* field) const {
    auto it = obj.find(field);
    if (it == obj.end()) fail(field, "is missing");
    return *it;
  }
  std::string text(const nlohmann::json& obj, const char* field) const {
    const auto& v = at(obj, field);
    if (!v.is_string()) fail(field, "is not a string");
    return v.get<std::string>();
  }
  double number(const char* field) const {
    const auto& v = at(j, field);
    if (v.is_null()) return kNaN;
    if (!v.is_number()) fail(field, "is not a number or null");
    double d = v.get<double>();
    if (!std::isfinite(d) || d < 0) fail(field, fmt::format("has the impossible value {}", d));
    return d;
  }
};

}  // namespace

void save_peaks(const std::string& path, const Peaks& p, const nlohmann::json& details) {
  nlohmann::json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["date"] = p.date;
  j["adapter"] = {{"name", p.adapter},
                  {"driver", p.driver},
                  {"backend", p.backend},
                  {"type", p.adapter_type}};
  j["timer"] = p.timer;
  j["bytes"] = p.bytes;
  j["read_gbps"] = number_or_null(p.read_gbps);
  j["write_gbps"] = number_or_null(p.write_gbps);
  j["copy_gbps"] = number_or_null(p.copy_gbps);
  j["fma_gflops"] = number_or_null(p.fma_gflops);
  j["dispatch_wall_us"] = number_or_null(p.dispatch_wall_us);
  j["dispatch_gpu_us"] = number_or_null(p.dispatch_gpu_us);
  j["dispatch_ro_wall_us"] = number_or_null(p.dispatch_ro_wall_us);
  j["dispatch_ro_gpu_us"] = number_or_null(p.dispatch_ro_gpu_us);
  j["details"] = details;
  std::ofstream out(path);
  if (!out) throw std::runtime_error(fmt::format("cannot write the peaks file '{}'", path));
  out << j.dump(2) << "\n";
  if (!out) throw std::runtime_error(fmt::format("writing the peaks file '{}' failed", path));
}

Peaks load_peaks(const std::string& path) {
  constexpr std::streamsize kMaxBytes = 1 << 20;  // a peaks file is a few KiB
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error(fmt::format(
        "cannot open the peaks file '{}' (hint: measure them with `wgrt_lab_peaks --out {}`)",
        path, path));
  std::string text(size_t(kMaxBytes) + 1, '\0');
  in.read(text.data(), kMaxBytes + 1);
  text.resize(size_t(in.gcount()));
  if (std::streamsize(text.size()) > kMaxBytes)
    throw std::runtime_error(fmt::format("peaks file '{}' is larger than {} bytes: not a peaks "
                                         "file", path, kMaxBytes));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    throw std::runtime_error(fmt::format("peaks file '{}' is not a JSON object (hint: write it "
                                         "again with `wgrt_lab_peaks --out {}`)", path, path));
  PeaksReader r{path, j};
  if (r.text(j, "format") != kFormat) r.fail("format", fmt::format("is not \"{}\"", kFormat));
  const auto& version = r.at(j, "version");
  if (!version.is_number_integer() || version.get<int>() != kVersion)
    r.fail("version", fmt::format("is {}, this build reads version {}", version.dump(), kVersion));
  Peaks p;
  p.date = r.text(j, "date");
  const auto& adapter = r.at(j, "adapter");
  if (!adapter.is_object()) r.fail("adapter", "is not an object");
  p.adapter = r.text(adapter, "name");
  p.driver = r.text(adapter, "driver");
  p.backend = r.text(adapter, "backend");
  p.adapter_type = r.text(adapter, "type");
  p.timer = r.text(j, "timer");
  const auto& bytes = r.at(j, "bytes");
  if (!bytes.is_number_unsigned()) r.fail("bytes", "is not a non-negative integer");
  p.bytes = bytes.get<uint64_t>();
  p.read_gbps = r.number("read_gbps");
  p.write_gbps = r.number("write_gbps");
  p.copy_gbps = r.number("copy_gbps");
  p.fma_gflops = r.number("fma_gflops");
  p.dispatch_wall_us = r.number("dispatch_wall_us");
  p.dispatch_gpu_us = r.number("dispatch_gpu_us");
  p.dispatch_ro_wall_us = r.number("dispatch_ro_wall_us");
  p.dispatch_ro_gpu_us = r.number("dispatch_ro_gpu_us");
  return p;
}

}  // namespace wgrt::lab
