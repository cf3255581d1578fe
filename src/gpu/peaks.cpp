#include "gpu/peaks.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <stdexcept>

namespace wgrt::gpu {

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
    if (v.is_null()) return std::numeric_limits<double>::quiet_NaN();
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

}  // namespace wgrt::gpu
