// wgrt_lab_peaks: what the current adapter can do, measured through WebGPU: memory bandwidth
// (read, write, copy over one large buffer), f32 FMA rate, and the cost of one trivial
// dispatch inside a compute pass. Later labs print their kernels against these peaks
// (`--out peaks.json` here, lab::load_peaks there).
//
//   wgrt_lab_peaks [--bytes 1GiB] [--repeats 10] [--out peaks.json] [--backend vulkan]
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "gpu/buffer.h"
#include "gpu/pipeline.h"
#include "lab.h"

namespace wgrt {
namespace {

// Mirrors `struct Params` in peaks.wgsl.
struct PeaksParams {
  uint32_t n = 0;      // vec4 elements in each buffer
  uint32_t iters = 0;  // fma_rate: loop turns per thread
  float seed = 0;      // write_bw: pattern step; fma_rate: multiplier
  uint32_t pad = 0;
};
static_assert(sizeof(PeaksParams) == 16 && alignof(PeaksParams) == 4);

constexpr uint64_t kVec4 = 16;
constexpr uint64_t kGiB = uint64_t(1) << 30;
constexpr uint64_t kMiB = uint64_t(1) << 20;
constexpr float kFillStep = 1.0f / 1024.0f;  // fill values 1 + (i mod 1024)/1024: exact in f32

struct Options {
  uint64_t bytes = 0;  // 0: auto
  lab::TimeOptions time;
  uint32_t dispatches = 1000;
  double fma_target_ms = 10;
  std::string out;
  gpu::DeviceOptions device;
};

// One memory-kernel variant: workgroup size, loads in flight per thread, and the grid, given
// as how many vec4 each thread handles in all (the kernels are grid-stride).
struct MemVariant {
  uint32_t wg;
  uint32_t unroll;
  uint32_t per_thread;
};

struct Lab {
  gpu::Device& dev;
  lab::Timer timer;
  lab::TimeOptions time;
  uint64_t n = 0;  // vec4 elements per buffer
  gpu::Buffer src, dst, params;
  lab::Table variants{{"measure", "variant", "median ms", "min ms", "max ms", "result"}, {}};
  nlohmann::json details = nlohmann::json::array();
};

std::string ms(double s) { return fmt::format("{:.4f}", s * 1e3); }

void set_params(Lab& lab, uint32_t iters, float seed) {
  PeaksParams p{uint32_t(lab.n), iters, seed, 0};
  gpu::upload(lab.dev, lab.params.get(), 0, &p, sizeof p);
}

// unroll 0: the entry point has no UNROLL constant; pass only the constants it uses.
const gpu::Pipeline& pipeline(Lab& lab, const char* entry, uint32_t wg, uint32_t unroll = 0) {
  std::vector<gpu::OverrideConstant> constants = {{"WG", double(wg)}};
  if (unroll) constants.push_back({"UNROLL", double(unroll)});
  return gpu::get_pipeline(lab.dev, gpu::make_key("peaks", entry, std::move(constants)));
}

// Binding numbers as peaks.wgsl declares them; each entry point's layout holds only the
// bindings it uses.
gpu::BindGroup bind(Lab& lab, const gpu::Pipeline& p, WGPUBuffer src, WGPUBuffer dst,
                    bool params, std::string_view label) {
  std::vector<gpu::BufferBinding> entries;
  if (src) entries.push_back({0, src});
  if (dst) entries.push_back({1, dst});
  if (params) entries.push_back({2, lab.params.get()});
  return gpu::create_bind_group(lab.dev, p.layout.get(), entries, label);
}

uint32_t workgroups(const Lab& lab, uint32_t wg, uint64_t threads_wanted) {
  uint64_t max_wg = lab.dev.caps.limits.maxComputeWorkgroupsPerDimension;
  uint64_t by_n = std::max<uint64_t>(1, lab.n / wg);  // the read kernel writes one vec4 a thread
  uint64_t want = std::max<uint64_t>(1, (threads_wanted + wg - 1) / wg);
  return uint32_t(std::min({want, by_n, max_wg}));
}

bool fits(const Lab& lab, uint32_t wg) {
  const auto& l = lab.dev.caps.limits;
  return wg <= l.maxComputeInvocationsPerWorkgroup && wg <= l.maxComputeWorkgroupSizeX &&
         wg <= lab.n;
}

void record_row(Lab& lab, const std::string& measure, const std::string& variant,
                const lab::Timing& t, double value, const char* unit) {
  lab.variants.rows.push_back({measure, variant, ms(t.seconds), ms(t.min_seconds),
                               ms(t.max_seconds), fmt::format("{:.1f} {}", value, unit)});
  lab.details.push_back({{"measure", measure},
                         {"variant", variant},
                         {"median_s", t.seconds},
                         {"min_s", t.min_seconds},
                         {"max_s", t.max_seconds},
                         {"wall_median_s", t.wall_seconds},
                         {"value", value},
                         {"unit", unit}});
}

// Best GB/s over the variants of one memory kernel. `moved` is bytes per run.
double best_bandwidth(Lab& lab, const char* measure, const char* entry,
                      const std::vector<MemVariant>& list, WGPUBuffer src, WGPUBuffer dst,
                      uint64_t moved) {
  double best = 0;
  for (const MemVariant& v : list) {
    if (!fits(lab, v.wg)) continue;
    const gpu::Pipeline& p = pipeline(lab, entry, v.wg, v.unroll);  // unroll 0: none
    gpu::BindGroup bg = bind(lab, p, src, dst, true, entry);
    uint32_t groups = workgroups(lab, v.wg, (lab.n + v.per_thread - 1) / v.per_thread);
    lab::Timing t = lab::measure(lab.timer, entry, lab.time, [&](WGPUComputePassEncoder pass) {
      wgpuComputePassEncoderSetPipeline(pass, p.pipeline.get());
      wgpuComputePassEncoderSetBindGroup(pass, 0, bg.get(), 0, nullptr);
      wgpuComputePassEncoderDispatchWorkgroups(pass, groups, 1, 1);
    });
    double gbps = double(moved) / t.seconds * 1e-9;
    best = std::max(best, gbps);
    record_row(lab, measure,
               v.unroll ? fmt::format("wg {} unroll {} grid {}x{}", v.wg, v.unroll, groups, v.wg)
                         : fmt::format("wg {} grid {}x{}", v.wg, groups, v.wg), t, gbps,
               "GB/s");
  }
  return best;
}

// Fills `buf` with the pattern the checks expect (never zeros: they flatter and hide bugs).
void fill(Lab& lab, WGPUBuffer buf) {
  set_params(lab, 0, kFillStep);
  const gpu::Pipeline& p = pipeline(lab, "write_bw", 256);
  gpu::BindGroup bg = bind(lab, p, nullptr, buf, true, "fill");
  lab::time_pass(lab.timer, "fill", [&](WGPUComputePassEncoder pass) {
    wgpuComputePassEncoderSetPipeline(pass, p.pipeline.get());
    wgpuComputePassEncoderSetBindGroup(pass, 0, bg.get(), 0, nullptr);
    wgpuComputePassEncoderDispatchWorkgroups(pass, workgroups(lab, 256, lab.n / 4), 1, 1);
  });
}

float pattern(uint64_t i, int lane) { return float(i & 1023) * kFillStep + 1.0f + 0.25f * lane; }

// The copy reproduced the pattern at the start and the end of the buffer.
void check_copy(Lab& lab) {
  uint64_t count = std::min<uint64_t>(lab.n, 4096);
  for (uint64_t start : {uint64_t(0), lab.n - count}) {
    auto got = gpu::read_buffer<float>(lab.dev, lab.dst.get(), 4 * count, start * kVec4);
    for (uint64_t i = 0; i < count; ++i)
      for (int l = 0; l < 4; ++l)
        if (got[4 * i + l] != pattern(start + i, l))
          throw gpu::GpuError(fmt::format("copy check: element {} lane {} is {}, expected {}",
                                          start + i, l, got[4 * i + l], pattern(start + i, l)));
  }
}

// Thread 0 of the read kernel summed src[0], src[stride], src[2*stride], ...
void check_read(Lab& lab, uint32_t threads) {
  auto got = gpu::read_buffer<float>(lab.dev, lab.dst.get(), 4);
  for (int l = 0; l < 4; ++l) {
    double want = 0;
    for (uint64_t i = 0; i < lab.n; i += threads) want += pattern(i, l);
    if (std::abs(got[size_t(l)] - want) > 1e-5 * std::abs(want) + 1e-6)
      throw gpu::GpuError(fmt::format("read check: thread 0 lane {} summed {}, expected {}", l,
                                      got[size_t(l)], want));
  }
}

// GB/s for read, write and copy; the best variant of each.
void measure_memory(Lab& lab, lab::Peaks& peaks) {
  uint64_t bytes = lab.n * kVec4;
  fill(lab, lab.src.get());
  // Grids from "a few loads per thread" to "many per thread", a couple of workgroup sizes.
  const std::vector<MemVariant> read_list = {{256, 1, 4},  {256, 4, 16},  {256, 8, 32},
                                             {128, 4, 16}, {512, 4, 16},  {1024, 4, 16},
                                             {256, 4, 64}, {1024, 8, 64}};
  set_params(lab, 0, kFillStep);
  peaks.read_gbps = best_bandwidth(lab, "read", "read_bw", read_list, lab.src.get(),
                                   lab.dst.get(), bytes);
  {
    const MemVariant& last = read_list.back();
    if (fits(lab, last.wg))
      check_read(lab, last.wg * workgroups(lab, last.wg, (lab.n + last.per_thread - 1) /
                                                             last.per_thread));
  }
  // Copy before write, so the copy check sees data that only the copy can have written.
  const std::vector<MemVariant> copy_list = {{256, 1, 4}, {256, 4, 16}, {1024, 4, 16},
                                             {256, 8, 32}};
  peaks.copy_gbps =
      best_bandwidth(lab, "copy", "copy_bw", copy_list, lab.src.get(), lab.dst.get(), 2 * bytes);
  check_copy(lab);
  const std::vector<MemVariant> write_list = {{256, 0, 4}, {256, 0, 16}, {1024, 0, 16}};
  peaks.write_gbps =
      best_bandwidth(lab, "write", "write_bw", write_list, nullptr, lab.dst.get(), bytes);
}

// f32 FMA: 128 flops per thread per loop turn (see fma_rate). The loop count is grown until
// one dispatch runs about fma_target_ms, so launch cost stays out of the figure.
void measure_fma(Lab& lab, const Options& opts, lab::Peaks& peaks) {
  constexpr double kFlopsPerTurn = 128;
  set_params(lab, 0, 0.999f);
  double best = 0;
  for (uint32_t wg : {64u, 256u, 1024u}) {
    if (!fits(lab, wg)) continue;
    const gpu::Pipeline& p = pipeline(lab, "fma_rate", wg);
    gpu::BindGroup bg = bind(lab, p, nullptr, lab.dst.get(), true, "fma_rate");
    uint32_t groups = std::min<uint32_t>(lab.dev.caps.limits.maxComputeWorkgroupsPerDimension,
                                         uint32_t(262144 / wg));
    auto record = [&](WGPUComputePassEncoder pass) {
      wgpuComputePassEncoderSetPipeline(pass, p.pipeline.get());
      wgpuComputePassEncoderSetBindGroup(pass, 0, bg.get(), 0, nullptr);
      wgpuComputePassEncoderDispatchWorkgroups(pass, groups, 1, 1);
    };
    auto once = [&] {
      lab::Sample s = lab::time_pass(lab.timer, "fma calibrate", record);
      return lab.timer.gpu_clock() ? s.gpu_s : s.wall_s;
    };
    double target = opts.fma_target_ms * 1e-3;
    uint32_t iters = 16;
    set_params(lab, iters, 0.999f);
    once();  // first run compiles and warms up
    for (double t = once(); t < 0.5 * target && iters < (1u << 22); t = once()) {
      double grow = std::clamp(target / std::max(t, 1e-9), 2.0, 16.0);
      iters = uint32_t(std::min(double(1u << 22), iters * grow));
      set_params(lab, iters, 0.999f);
    }
    lab::Timing t = lab::measure(lab.timer, "fma_rate", lab.time, record);
    double flops = double(groups) * wg * iters * kFlopsPerTurn;
    double gflops = flops / t.seconds * 1e-9;
    best = std::max(best, gflops);
    record_row(lab, "fma f32", fmt::format("wg {} grid {}x{} iters {}", wg, groups, wg, iters), t,
               gflops, "GFLOP/s");
  }
  peaks.fma_gflops = best;
}

// `count` one-workgroup dispatches back to back in one pass. Wall: encode + submit + wait,
// over count; GPU: the pass's timestamps, over count.
void measure_dispatch(Lab& lab, const Options& opts, lab::Peaks& peaks) {
  const uint32_t count = std::max<uint32_t>(1, opts.dispatches);
  struct Kind {
    const char* entry;
    const char* variant;
    double* wall_us;
    double* gpu_us;
  };
  const Kind kinds[] = {
      {"tiny", "read_write binding (barrier between dispatches)", &peaks.dispatch_wall_us,
       &peaks.dispatch_gpu_us},
      {"tiny_ro", "read-only binding (no barrier)", &peaks.dispatch_ro_wall_us,
       &peaks.dispatch_ro_gpu_us}};
  for (const Kind& k : kinds) {
    const gpu::Pipeline& p = pipeline(lab, k.entry, 64);
    bool ro = std::string_view(k.entry) == "tiny_ro";
    gpu::BindGroup bg = bind(lab, p, ro ? lab.src.get() : nullptr, ro ? nullptr : lab.dst.get(),
                             false, k.entry);
    lab::Timing t = lab::measure(lab.timer, k.entry, lab.time, [&](WGPUComputePassEncoder pass) {
      wgpuComputePassEncoderSetPipeline(pass, p.pipeline.get());
      wgpuComputePassEncoderSetBindGroup(pass, 0, bg.get(), 0, nullptr);
      for (uint32_t i = 0; i < count; ++i) wgpuComputePassEncoderDispatchWorkgroups(pass, 1, 1, 1);
    });
    *k.wall_us = t.wall_seconds / count * 1e6;
    if (t.gpu_clock) *k.gpu_us = t.seconds / count * 1e6;
    std::string variant = fmt::format("{} x{}", k.variant, count);
    record_row(lab, "dispatch (wall)", variant,
               lab::Timing{.seconds = t.wall_seconds,
                           .min_seconds = t.wall_min_seconds,
                           .max_seconds = t.wall_max_seconds,
                           .wall_seconds = t.wall_seconds},
               *k.wall_us, "us each");
    if (t.gpu_clock) record_row(lab, "dispatch (gpu)", variant, t, *k.gpu_us, "us each");
  }
}

uint64_t choose_bytes(const gpu::DeviceCaps& caps, uint64_t asked) {
  uint64_t cap = std::min<uint64_t>(caps.limits.maxStorageBufferBindingSize,
                                    caps.limits.maxBufferSize);
  // The kernels index vec4 with u32 and step past the end by up to one grid: 2^30 vec4 keeps
  // every index in range.
  cap = std::min<uint64_t>(cap, uint64_t(1) << 34);
  if (asked == 0) {
    // 1 GiB dwarfs any cache; a CPU adapter gets 32 MiB so the lab runs in seconds.
    asked = caps.adapter.type == WGPUAdapterType_CPU ? 32 * kMiB : kGiB;
    asked = std::min(asked, cap);
  } else if (asked > cap) {
    throw std::runtime_error(fmt::format(
        "--bytes {} is over this adapter's limit of {} bytes per storage binding/buffer (hint: "
        "pass --bytes {} or less)", asked, cap, cap));
  }
  uint64_t whole = asked / (kVec4 * 1024) * (kVec4 * 1024);  // whole 1024-vec4 blocks
  if (whole == 0)
    throw std::runtime_error(fmt::format("--bytes {} is too small (hint: at least {})", asked,
                                         kVec4 * 1024));
  return whole;
}

int run(const Options& opts) {
  gpu::Device dev = gpu::create_device(opts.device);
  fmt::print("adapter: {}\n", lab::adapter_line(dev.caps));

  Lab lab{dev, lab::create_timer(dev), opts.time};
  uint64_t bytes = choose_bytes(dev.caps, opts.bytes);
  lab.n = bytes / kVec4;
  fmt::print("buffer: {:.1f} MiB of vec4<f32>, warm-up {}, repeats {} (median), clock: {}\n",
             double(bytes) / double(kMiB), opts.time.warmup, opts.time.repeats,
             lab.timer.gpu_clock() ? "GPU timestamps" : "wall");
  lab.src = gpu::create_buffer(dev, bytes, gpu::kStorageUsage, "peaks src");
  lab.dst = gpu::create_buffer(dev, bytes, gpu::kStorageUsage, "peaks dst");
  lab.params = gpu::create_buffer(dev, sizeof(PeaksParams), gpu::kUniformUsage, "peaks params");

  lab::Peaks peaks;
  peaks.adapter = dev.caps.adapter.name;
  peaks.driver = dev.caps.adapter.driver;
  peaks.backend = gpu::backend_name(dev.caps.adapter.backend);
  peaks.adapter_type = gpu::adapter_type_name(dev.caps.adapter.type);
  peaks.date = lab::today();
  peaks.timer = lab.timer.gpu_clock() ? "gpu-timestamps" : "wall-clock";
  peaks.bytes = bytes;

  measure_memory(lab, peaks);
  measure_fma(lab, opts, peaks);
  measure_dispatch(lab, opts, peaks);

  fmt::print("\n");
  lab::print_table(lab.variants);
  auto num = [](double v, const char* f) {
    return std::isfinite(v) ? fmt::format(fmt::runtime(f), v) : std::string("-");
  };
  lab::Table summary{{"peak", "value"}, {}};
  summary.rows = {
      {"read", num(peaks.read_gbps, "{:.1f} GB/s")},
      {"write", num(peaks.write_gbps, "{:.1f} GB/s")},
      {"copy (read + write)", num(peaks.copy_gbps, "{:.1f} GB/s")},
      {"f32 FMA", num(peaks.fma_gflops, "{:.1f} GFLOP/s")},
      {"dispatch, wall (encode+submit+wait)", num(peaks.dispatch_wall_us, "{:.2f} us")},
      {"dispatch, GPU (pass timestamps)", num(peaks.dispatch_gpu_us, "{:.2f} us")},
      {"dispatch no barrier, wall", num(peaks.dispatch_ro_wall_us, "{:.2f} us")},
      {"dispatch no barrier, GPU", num(peaks.dispatch_ro_gpu_us, "{:.2f} us")},
  };
  fmt::print("\n{} ({}), {}\n", peaks.adapter, peaks.backend, peaks.date);
  lab::print_table(summary);

  if (!opts.out.empty()) {
    nlohmann::json details;
    details["variants"] = lab.details;
    details["warmup"] = opts.time.warmup;
    details["repeats"] = opts.time.repeats;
    details["dispatches"] = opts.dispatches;
    lab::save_peaks(opts.out, peaks, details);
    fmt::print("wrote {}\n", opts.out);
  }
  return 0;
}

}  // namespace
}  // namespace wgrt

int main(int argc, char** argv) {
  using namespace wgrt;
  Options opts;
  CLI::App app{"wgrt_lab_peaks: measure the adapter's memory bandwidth, f32 FMA rate and "
               "dispatch cost through WebGPU", "wgrt_lab_peaks"};
  app.add_option("--bytes", opts.bytes,
                 "buffer size for the bandwidth kernels, e.g. 1GiB (default: 1 GiB on GPUs, "
                 "32 MiB on CPU adapters, within the adapter's limits)")
      ->transform(CLI::AsSizeValue(false));
  app.add_option("--repeats", opts.time.repeats, "timed runs per measurement (median reported)")
      ->check(CLI::Range(1, 10000));
  lab::add_spin_flag(app, opts.time);
  app.add_option("--warmup", opts.time.warmup, "untimed runs before each measurement")
      ->check(CLI::Range(0, 1000));
  app.add_option("--dispatches", opts.dispatches, "trivial dispatches in the timed pass")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--fma-ms", opts.fma_target_ms, "target duration of one FMA dispatch, ms")
      ->check(CLI::Range(0.1, 10000.0));
  app.add_option("--out", opts.out, "write the peaks as JSON to this file (lab::load_peaks)");
  lab::add_device_flags(app, opts.device);
  CLI11_PARSE(app, argc, argv);
  try {
    return run(opts);
  } catch (const std::exception& e) {
    fmt::print(stderr, "wgrt_lab_peaks: error: {}\n", e.what());
    return 1;
  }
}
