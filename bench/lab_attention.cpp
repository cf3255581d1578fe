// wgrt_lab_attention: SDPA over the KV cache at llama-3-8B-like head counts (32 query heads,
// 8 KV heads; --kv-heads 4: Qwen3-30B-A3B's), head dim 64/128, f32 and f16 caches, contexts
// 128..8192.
//
//   wgrt_lab_attention [--peaks bench/peaks-h200.json] [--repeats 10] [--inner 4] [--kv-heads 8,4]
//                      [--contexts 128,1024,4096,8192] [--head-dims 64,128] [--caches f32,f16]
//                      [--routes decode,prefill] [--decode-kernels best,vec,sg,split]
//                      [--max-chunks 0,32,64] [--xq off,on]
//
// decode (flash-decoding, n_tokens 1 at pos = ctx - 1): one graph holds `layers` attention
// nodes, each over its own caches, so a timed pass reads more KV than the L2 holds (as a real
// decode step across layers does); time per call = pass time / layers. GB/s = KV bytes read
// (2 x n_kv_heads x ctx x head_dim x element size) / time, against the measured read peak.
// prefill (n_tokens = min(512, ctx) ending at ctx): GFLOP/s = 4 x head_dim x n_heads x
// (keys attended, summed over tokens) / time, against the measured f32 FMA peak.
// Before a row is timed, layer 0's output for the last token, at the first and the last query
// head, is checked against softmax(q K^T / sqrt(head_dim)) V computed on the CPU from the same
// caches (the "check" column). --xq on: decode with AttentionDesc::xq_out (the output also
// written quantized ahead for the output projection, the kernels' _xq entry points); layer 0's
// xq row is checked against its output's quantization in blocks of 16 too.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "lab.h"
#include "ops/attention/attention.h"
#include "ops/kv_cache/kv_cache.h"
#include "ops/quant/quant.h"

namespace wgrt {
namespace {

using namespace graph;

struct Options {
  std::string peaks = "bench/peaks-h200.json";
  lab::TimeOptions time;
  int inner = 4;
  std::vector<uint32_t> max_chunks = {0};
  std::vector<uint32_t> contexts = {128, 1024, 4096, 8192};
  std::vector<uint32_t> head_dims = {64, 128};
  std::vector<uint32_t> kv_heads = {8};
  std::vector<std::string> caches = {"f32", "f16"};
  std::vector<std::string> routes = {"decode", "prefill"};
  std::vector<std::string> kernels = {"best"};
  std::vector<std::string> xq = {"off"};
  gpu::DeviceOptions device;
};

constexpr uint32_t kHeads = 32;

std::vector<uint32_t> random_words(size_t n, uint32_t seed, bool f16) {
  std::mt19937 rng(seed);
  std::vector<uint32_t> w(n);
  // f32 values in [-1, 1), or pairs of halves in [-1, 1): sign, exponent 0..14, mantissa.
  for (auto& x : w) {
    if (f16) {
      auto half = [&] { return uint32_t((rng() & 0x8000u) | ((rng() % 15u) << 10) | (rng() & 0x3ffu)); };
      x = half() | (half() << 16);
    } else {
      float f = std::uniform_real_distribution<float>(-1.f, 1.f)(rng);
      std::memcpy(&x, &f, 4);
    }
  }
  return w;
}

// Element i of a cache row-major [n_kv_heads, ctx, head_dim]: f32 words or f16 pairs.
float cache_at(const std::vector<uint32_t>& w, size_t i, bool f16) {
  if (f16) return ops::f16_to_f32(uint16_t(w[i / 2] >> (16 * (i % 2))));
  float f;
  std::memcpy(&f, &w[i], 4);
  return f;
}

// Layer 0's output for token `t` (at position pos + t, causal) and query head h against the
// CPU: within 1e-4 of the output's scale.
std::string check_head(const std::vector<float>& got, const std::vector<float>& qv, const std::vector<uint32_t>& kc,
                       const std::vector<uint32_t>& vc, bool f16, uint32_t hd, uint32_t ctx, uint32_t pos, uint32_t t,
                       uint32_t h, uint32_t n_kv) {
  const uint32_t kvh = h / (kHeads / n_kv), keys = pos + t + 1;
  const float* qr = &qv[(size_t(t) * kHeads + h) * hd];
  std::vector<double> score(keys);
  double mx = -1e300;
  for (uint32_t j = 0; j < keys; ++j) {
    double d = 0;
    for (uint32_t e = 0; e < hd; ++e) d += double(qr[e]) * cache_at(kc, (size_t(kvh) * ctx + j) * hd + e, f16);
    score[j] = d / std::sqrt(double(hd));
    mx = std::max(mx, score[j]);
  }
  double sum = 0;
  for (double& sc : score) sum += (sc = std::exp(sc - mx));
  for (uint32_t e = 0; e < hd; ++e) {
    double want = 0, mass = 0;
    for (uint32_t j = 0; j < keys; ++j) {
      const double v = cache_at(vc, (size_t(kvh) * ctx + j) * hd + e, f16);
      want += score[j] / sum * v;
      mass += score[j] / sum * std::fabs(v);
    }
    const double v = got[(size_t(t) * kHeads + h) * hd + e];
    if (!(std::fabs(v - want) <= 1e-4 * (mass + 1e-3)))
      return fmt::format("MISMATCH head {} dim {}: {} vs {}", h, e, v, want);
  }
  return "ok";
}

// Layer 0's xq row (xq_row.wgsl) against its output: each block's scale within 1e-6 of its
// magnitude / 127 and each int8 within one step of the output's value over that scale.
std::string check_xq(const std::vector<uint32_t>& words, const std::vector<float>& out) {
  const size_t k = out.size();
  for (size_t b = 0; b < k / 16; ++b) {
    float amax = 0, scale;
    for (size_t i = 16 * b; i < 16 * b + 16; ++i) amax = std::max(amax, std::fabs(out[i]));
    std::memcpy(&scale, &words[k / 2 + 2 * b], 4);
    if (!(std::fabs(scale - amax / 127) <= 1e-6f * amax)) return fmt::format("XQ MISMATCH block {} scale", b);
    for (size_t i = 16 * b; i < 16 * b + 16; ++i) {
      const int8_t v = int8_t(uint8_t(words[i / 4] >> (8 * (i % 4))));
      if (!(std::fabs(v * scale - out[i]) <= 1.01f * scale)) return fmt::format("XQ MISMATCH value {}", i);
    }
  }
  return "ok";
}

ops::DecodeKernel kernel_of(const std::string& k) {
  if (k == "vec") return ops::DecodeKernel::vec;
  if (k == "sg") return ops::DecodeKernel::sg;
  if (k == "split") return ops::DecodeKernel::split;
  return ops::DecodeKernel::best;
}

struct Lab {
  gpu::Device& dev;
  lab::Timer timer;
  Options opts;
  lab::Peaks peaks;
  lab::Table table{{"route", "kernel", "cache", "head dim", "kv heads", "ctx", "tokens", "chunks", "layers", "µs / call",
                    "GB/s (KV)", "% of read peak", "GFLOP/s", "% of FMA peak", "check"},
                   {}};

  void run(bool decode, bool f16, uint32_t hd, uint32_t n_kv, uint32_t ctx, ops::DecodeKernel want,
           uint32_t max_chunks, bool xq) {
    const uint32_t n_tokens = decode ? 1 : std::min<uint32_t>(512, ctx);
    const uint32_t pos = ctx - n_tokens;
    const double elem = f16 ? 2 : 4;
    const double kv_bytes = 2.0 * n_kv * ctx * hd * elem;
    uint32_t layers = decode ? uint32_t(std::clamp(256e6 / kv_bytes, 1.0, 64.0)) : 1;
    Graph g(dev);
    SymbolId ps = add_symbol(g, {.name = "pos", .lo = 0, .hi = ctx - 1});
    TensorId q = add_input(g, {.name = "q", .max_shape = {n_tokens, kHeads * hd}});
    std::vector<TensorId> caches;
    TensorId out0{};
    for (uint32_t l = 0; l < layers; ++l) {
      DType dt = f16 ? DType::F16 : DType::F32;
      TensorId kc = ops::add_kv_cache(g, fmt::format("k.{}", l), dt, n_kv, ctx, hd);
      TensorId vc = ops::add_kv_cache(g, fmt::format("v.{}", l), dt, n_kv, ctx, hd);
      caches.push_back(kc);
      caches.push_back(vc);
      TensorId o = ops::add_attention(g, {.name = fmt::format("attn.{}", l), .q = q, .k_cache = kc, .v_cache = vc,
                                          .pos = ps, .n_heads = kHeads, .decode_max_chunks = max_chunks,
                                          .decode_kernel = want, .xq_out = xq});
      if (l == 0) out0 = o;
    }
    mark_output(g, out0);
    if (xq) mark_output(g, ops::attention_xq(g, "attn.0"));
    build(g);
    std::vector<uint32_t> k0, v0;  // layer 0's caches, for the check
    for (size_t i = 0; i < caches.size(); ++i) {
      std::vector<uint32_t> w = random_words(tensor_info(g, caches[i]).bytes / 4, uint32_t(i), f16);
      write_tensor<uint32_t>(g, caches[i], w);
      if (i == 0) k0 = w;
      if (i == 1) v0 = std::move(w);
    }
    std::vector<float> qv(size_t(n_tokens) * kHeads * hd);
    std::mt19937 rng(7);
    for (auto& x : qv) x = std::uniform_real_distribution<float>(-2.f, 2.f)(rng);
    write_tensor<float>(g, q, qv);
    SymbolInput si{ps, pos};
    update(g, {}, {&si, 1});
    execute(g);
    const std::vector<float> got = read_output<float>(g, out0);
    std::string check = check_head(got, qv, k0, v0, f16, hd, ctx, pos, n_tokens - 1, 0, n_kv);
    if (check == "ok") check = check_head(got, qv, k0, v0, f16, hd, ctx, pos, n_tokens - 1, kHeads - 1, n_kv);
    if (check == "ok" && xq) check = check_xq(read_output<uint32_t>(g, ops::attention_xq(g, "attn.0")), got);
    int inner = decode ? 1 : opts.inner;
    lab::Timing t = lab::measure(timer, "attention", opts.time, [&](WGPUComputePassEncoder pass) {
      for (int i = 0; i < inner; ++i) encode(g, pass);
    });
    double per_call = t.seconds / (double(layers) * inner);
    NodeId n0 = find_node(g, "attn.0");
    std::string chunks = decode ? fmt::format("{}", active_plan(g, n0).grids[0].x) : "-";
    double keys = double(n_tokens) * pos + double(n_tokens) * (n_tokens + 1) / 2;  // causal
    double flops = 4.0 * hd * kHeads * keys;
    double gbps = kv_bytes / per_call / 1e9;
    double gflops = flops / per_call / 1e9;
    const ops::AttentionVariants var = ops::attention_variants(dev.caps.limits, "attn", hd, kHeads / n_kv, f16,
                                                               gpu::subgroup_lanes(dev.caps), want);
    const std::string kernel = decode ? std::string(ops::decode_kernel_name(var.decode_kernel)) + (xq ? " + xq" : "")
                                      : fmt::format("{} ({} rows)", ops::prefill_entry(var), var.prefill_rows);
    table.rows.push_back({decode ? "decode" : "prefill", kernel,
                          f16 ? "f16" : "f32", fmt::format("{}", hd), fmt::format("{}", n_kv),
                          fmt::format("{}", ctx), fmt::format("{}", n_tokens), chunks,
                          fmt::format("{}", layers), fmt::format("{:.2f}", per_call * 1e6),
                          decode ? fmt::format("{:.0f}", gbps) : "-",
                          decode ? lab::percent_of(gbps, peaks.read_gbps) : "-",
                          fmt::format("{:.0f}", gflops),
                          decode ? "-" : lab::percent_of(gflops, peaks.fma_gflops), check});
  }
};

}  // namespace
}  // namespace wgrt

int main(int argc, char** argv) {
  using namespace wgrt;
  Options opts;
  CLI::App app{"wgrt_lab_attention: flash-decoding and prefill attention timings"};
  app.add_option("--peaks", opts.peaks, "device peaks JSON (wgrt_lab_peaks --out)");
  app.add_option("--repeats", opts.time.repeats, "timed passes per measurement (median)");
  lab::add_spin_flag(app, opts.time);
  app.add_option("--inner", opts.inner, "prefill calls per timed pass");
  app.add_option("--max-chunks", opts.max_chunks, "comma list of flash-decoding split caps (0: the op's default)")
      ->delimiter(',');
  app.add_option("--caches", opts.caches, "comma list of cache dtypes (f32, f16)")
      ->delimiter(',')->check(CLI::IsMember({"f32", "f16"}));
  app.add_option("--routes", opts.routes, "comma list of routes (decode, prefill)")
      ->delimiter(',')->check(CLI::IsMember({"decode", "prefill"}));
  app.add_option("--decode-kernels", opts.kernels, "comma list of flash-decoding kernels (best, vec, sg, split)")
      ->delimiter(',')->check(CLI::IsMember({"best", "vec", "sg", "split"}));
  app.add_option("--xq", opts.xq, "comma list: decode without (off) and with (on) the output quantized ahead")
      ->delimiter(',')->check(CLI::IsMember({"off", "on"}));
  app.add_option("--contexts", opts.contexts, "comma list of contexts")->delimiter(',')->check(CLI::Range(1u, 1u << 20));
  app.add_option("--head-dims", opts.head_dims, "comma list of head dims (multiples of 8, 16..256)")->delimiter(',');
  app.add_option("--kv-heads", opts.kv_heads, "comma list of KV head counts (divisors of 32, GQA up to 8)")
      ->delimiter(',')->check(CLI::IsMember({1u, 2u, 4u, 8u, 16u, 32u}));
  lab::add_device_flags(app, opts.device);
  CLI11_PARSE(app, argc, argv);
  try {
    gpu::Device dev = gpu::create_device(opts.device);
    Lab lab{dev, lab::create_timer(dev), opts, lab::load_peaks(opts.peaks)};
    fmt::print("{}\npeaks: read {:.0f} GB/s, f32 FMA {:.0f} GFLOP/s ({}, {})\n\n", lab::adapter_line(dev.caps),
               lab.peaks.read_gbps, lab.peaks.fma_gflops, lab.peaks.adapter, lab.peaks.date);
    for (const std::string& route : opts.routes)
      for (const std::string& cache : opts.caches)
        for (uint32_t hd : opts.head_dims)
          for (uint32_t n_kv : opts.kv_heads)
            for (uint32_t ctx : opts.contexts) {
              const bool decode = route == "decode";
              for (const std::string& k : decode ? opts.kernels : std::vector<std::string>{"best"})
                for (uint32_t mc : decode ? opts.max_chunks : std::vector<uint32_t>{0})
                  for (const std::string& xq : decode ? opts.xq : std::vector<std::string>{"off"})
                    lab.run(decode, cache == "f16", hd, n_kv, ctx, kernel_of(k), mc, xq == "on");
            }
    lab::print_table(lab.table);
    for (const auto& row : lab.table.rows)
      if (row.back() != "ok") return 1;  // a row whose results did not check out
  } catch (const std::exception& e) {
    fmt::print(stderr, "wgrt_lab_attention: {}\n", e.what());
    return 1;
  }
  return 0;
}
