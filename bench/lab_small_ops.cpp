// wgrt_lab_small_ops: the memory-bound LLM ops (rms_norm, rope, silu_mul, argmax, top-k,
// logsumexp) at
// llama shapes, each as a one-op graph: time per call and achieved GB/s against the device's
// measured read bandwidth (the peaks JSON that wgrt_lab_peaks writes).
//
//   wgrt_lab_small_ops [--peaks bench/peaks-h200.json] [--repeats 10] [--inner 20]
//
// A timed pass holds `inner` back-to-back calls of the op (each with its barrier, as in a
// real graph); time per call = pass time / inner. Bytes = what the op must read + write once.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "lab.h"
#include "ops/norm/norm.h"
#include "ops/rope/rope.h"
#include "ops/sampling/sampling.h"
#include "ops/silu_mul/silu_mul.h"

namespace wgrt {
namespace {

using namespace graph;

struct Options {
  std::string peaks = "bench/peaks-h200.json";
  lab::TimeOptions time;
  int inner = 20;
  gpu::DeviceOptions device;
};

std::vector<float> random_values(size_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

struct Lab {
  gpu::Device& dev;
  lab::Timer timer;
  Options opts;
  lab::Peaks peaks;
  lab::Table table{{"op", "shape", "µs / call", "GB/s", "% of read peak", "check"}, {}};

  void time(const std::string& op, const std::string& shape, Graph& g, double bytes, const std::string& check) {
    lab::Timing t = lab::measure(timer, op, opts.time, [&](WGPUComputePassEncoder pass) {
      for (int i = 0; i < opts.inner; ++i) encode(g, pass);
    });
    double per_call = t.seconds / opts.inner;
    double gbps = bytes / per_call / 1e9;
    table.rows.push_back({op, shape, fmt::format("{:.2f}", per_call * 1e6), fmt::format("{:.0f}", gbps),
                          lab::percent_of(gbps, peaks.read_gbps), check});
  }
};

void rms_norm_rows(Lab& lab, uint32_t n, uint32_t dim) {
  Graph g(lab.dev);
  TensorId x = add_input(g, {.name = "x", .max_shape = {n, dim}});
  TensorId w = add_weight(g, {.name = "w", .shape = {dim}});
  TensorId y = ops::add_rms_norm(g, {.name = "y", .x = x, .weight = w});
  mark_output(g, y);
  build(g);
  auto xv = random_values(size_t(n) * dim, 1, -2, 2);
  auto wv = random_values(dim, 2, 0.5f, 1.5f);
  write_tensor<float>(g, x, xv);
  write_tensor<float>(g, w, wv);
  execute(g);
  auto got = read_output<float>(g, y);
  double ssq = 0;
  for (uint32_t i = 0; i < dim; ++i) ssq += double(xv[i]) * xv[i];
  double want = xv[dim - 1] / std::sqrt(ssq / dim + 1e-5) * wv[dim - 1];
  std::string check = std::abs(got[dim - 1] - want) < 1e-4 * (1 + std::abs(want)) ? "ok" : "MISMATCH";
  lab.time("rms_norm", fmt::format("[{}, {}]", n, dim), g, 8.0 * n * dim + 4.0 * dim, check);
}

void rope_rows(Lab& lab, uint32_t n, uint32_t n_heads, uint32_t head_dim, ops::RopeLayout layout) {
  Graph g(lab.dev);
  TensorId x = add_input(g, {.name = "x", .max_shape = {n, n_heads * head_dim}});
  SymbolId pos = add_symbol(g, {.name = "pos", .lo = 0, .hi = 131072});
  ops::RopeFreqs f{.n_rot = head_dim, .theta = 500000, .llama3 = ops::Llama3RopeScaling{}};
  TensorId freqs = ops::add_rope_freqs(g, "freqs", head_dim);
  TensorId y = ops::add_rope(g, {.name = "y", .x = x, .freqs = freqs, .pos = pos, .head_dim = head_dim, .layout = layout});
  mark_output(g, y);
  build(g);
  write_tensor<uint32_t>(g, freqs, ops::rope_freq_table(f));
  auto xv = random_values(size_t(n) * n_heads * head_dim, 3, -2, 2);
  write_tensor<float>(g, x, xv);
  SymbolInput sv{pos, 4096};
  update(g, {}, {&sv, 1});
  execute(g);
  // Pair 0 of row 0 turns by 4096 rad (inv_freq[0] = 1, unscaled).
  auto got = read_output<float>(g, y);
  size_t b = layout == ops::RopeLayout::Neox ? head_dim / 2 : 1;
  double want = xv[0] * std::cos(4096.0) - xv[b] * std::sin(4096.0);
  std::string check = std::abs(got[0] - want) < 1e-4 ? "ok" : "MISMATCH";
  lab.time(layout == ops::RopeLayout::Neox ? "rope neox" : "rope normal",
           fmt::format("[{}, {}x{}]", n, n_heads, head_dim), g, 8.0 * n * n_heads * head_dim, check);
}

void silu_mul_rows(Lab& lab, uint32_t n, uint32_t ff, bool fused) {
  Graph g(lab.dev);
  TensorId gate = add_input(g, {.name = "gate", .max_shape = {n, fused ? 2 * ff : ff}});
  std::optional<TensorId> up;
  if (!fused) up = add_input(g, {.name = "up", .max_shape = {n, ff}});
  TensorId out = ops::add_silu_mul(g, {.name = "out", .gate = gate, .up = up});
  mark_output(g, out);
  build(g);
  auto gv = random_values(size_t(n) * (fused ? 2 * ff : ff), 4, -4, 4);
  write_tensor<float>(g, gate, gv);
  std::vector<float> uv;
  if (!fused) write_tensor<float>(g, *up, uv = random_values(size_t(n) * ff, 5, -4, 4));
  execute(g);
  auto got = read_output<float>(g, out);
  double gl = gv[0], ul = fused ? gv[ff] : uv[0];
  double want = gl / (1 + std::exp(-gl)) * ul;
  std::string check = std::abs(got[0] - want) < 1e-4 * (1 + std::abs(want)) ? "ok" : "MISMATCH";
  lab.time(fused ? "silu_mul fused" : "silu_mul", fmt::format("[{}, {}]", n, ff), g, 12.0 * n * ff, check);
}

void sampling_rows(Lab& lab, uint32_t n, uint32_t vocab, uint32_t k) {
  std::string op = k == 0 ? "argmax" : fmt::format("top-k {}", k);
  if (4.0 * n * vocab > double(lab.dev.caps.limits.maxStorageBufferBindingSize)) {
    lab.table.rows.push_back({op, fmt::format("[{}, {}]", n, vocab), "-", "-", "-", "past binding limit"});
    return;
  }
  Graph g(lab.dev);
  TensorId l = add_input(g, {.name = "logits", .max_shape = {n, vocab}});
  TensorId idx;
  ops::TopKOutputs t;
  if (k == 0) {
    idx = ops::add_argmax(g, {.name = "argmax", .logits = l});
  } else {
    t = ops::add_top_k(g, {.name = "topk", .logits = l, .k = k});
    idx = t.indices;
  }
  mark_output(g, idx);
  build(g);
  auto lv = random_values(size_t(n) * vocab, 6, -30, 30);
  write_tensor<float>(g, l, lv);
  execute(g);
  auto got = read_output<uint32_t>(g, idx);
  uint32_t best = 0;  // row 0's argmax, which is also its top-1
  for (uint32_t i = 1; i < vocab; ++i)
    if (lv[i] > lv[best]) best = i;
  std::string check = got[0] == best ? "ok" : "MISMATCH";
  lab.time(op, fmt::format("[{}, {}]", n, vocab), g, 4.0 * n * vocab, check);
}

// The log-softmax normalizer (log-probabilities), validated on row 0 against a double sum.
void logsumexp_rows(Lab& lab, uint32_t n, uint32_t vocab) {
  if (4.0 * n * vocab > double(lab.dev.caps.limits.maxStorageBufferBindingSize)) {
    lab.table.rows.push_back({"logsumexp", fmt::format("[{}, {}]", n, vocab), "-", "-", "-", "past binding limit"});
    return;
  }
  Graph g(lab.dev);
  TensorId l = add_input(g, {.name = "logits", .max_shape = {n, vocab}});
  SymbolId on = add_symbol(g, {.name = "on", .lo = 0, .hi = 1});
  TensorId out = ops::add_logsumexp(g, {.name = "lse", .logits = l, .enable = on});
  mark_output(g, out);
  build(g);
  SymbolInput yes{on, 1};
  update(g, {}, {&yes, 1});
  auto lv = random_values(size_t(n) * vocab, 7, -30, 30);
  write_tensor<float>(g, l, lv);
  execute(g);
  const float got = read_output<float>(g, out)[0];
  double m = lv[0], sum = 0;
  for (uint32_t i = 1; i < vocab; ++i) m = std::max(m, double(lv[i]));
  for (uint32_t i = 0; i < vocab; ++i) sum += std::exp(double(lv[i]) - m);
  const double want = m + std::log(sum);
  std::string check = std::abs(got - want) < 1e-5 * (1 + std::abs(want)) ? "ok" : "MISMATCH";
  lab.time("logsumexp", fmt::format("[{}, {}]", n, vocab), g, 4.0 * n * vocab, check);
}

int run(const Options& opts) {
  gpu::Device dev = gpu::create_device(opts.device);
  Lab bench{dev, lab::create_timer(dev), opts, lab::load_peaks(opts.peaks)};
  fmt::print("{}\n", lab::adapter_line(dev.caps));
  fmt::print("peaks: {} ({} {}), read {:.1f} GB/s; timer {}; {} calls per pass, median of {}\n\n",
             opts.peaks, bench.peaks.adapter, bench.peaks.date, bench.peaks.read_gbps,
             bench.timer.gpu_clock() ? "gpu-timestamps" : "wall-clock", opts.inner, opts.time.repeats);
  for (uint32_t n : {1u, 512u}) {
    for (uint32_t dim : {2048u, 4096u}) rms_norm_rows(bench, n, dim);
    rope_rows(bench, n, 16, 128, ops::RopeLayout::Normal);
    rope_rows(bench, n, 32, 128, ops::RopeLayout::Normal);
    rope_rows(bench, n, 32, 128, ops::RopeLayout::Neox);
    rope_rows(bench, n, 8, 128, ops::RopeLayout::Normal);
    for (uint32_t ff : {8192u, 14336u}) silu_mul_rows(bench, n, ff, false);
    silu_mul_rows(bench, n, 14336, true);
    sampling_rows(bench, n, 128256, 0);
    sampling_rows(bench, n, 128256, 64);
    sampling_rows(bench, n, 128256, 128);
    logsumexp_rows(bench, n, 128256);
  }
  lab::print_table(bench.table);
  return 0;
}

}  // namespace
}  // namespace wgrt

int main(int argc, char** argv) {
  using namespace wgrt;
  Options opts;
  CLI::App app{"wgrt_lab_small_ops: rms_norm, rope, silu_mul, argmax, top-k and logsumexp at LLM shapes, "
               "against the device's measured read bandwidth", "wgrt_lab_small_ops"};
  app.add_option("--peaks", opts.peaks, "device peaks JSON (wgrt_lab_peaks --out)");
  app.add_option("--repeats", opts.time.repeats, "timed passes per case (median reported)")
      ->check(CLI::Range(1, 10000));
  lab::add_spin_flag(app, opts.time);
  app.add_option("--warmup", opts.time.warmup, "untimed passes before each case")->check(CLI::Range(0, 1000));
  app.add_option("--inner", opts.inner, "calls of the op per timed pass")->check(CLI::Range(1, 10000));
  lab::add_device_flags(app, opts.device);
  CLI11_PARSE(app, argc, argv);
  try {
    return run(opts);
  } catch (const std::exception& e) {
    fmt::print(stderr, "wgrt_lab_small_ops: error: {}\n", e.what());
    return 1;
  }
}
