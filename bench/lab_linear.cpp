// wgrt_lab_linear: the quantized linear (every linear_q format) per route, timed on the GPU, with ratios to
// the device's measured peaks: GB/s against the read bandwidth (weights + x + y bytes), and
// GFLOP/s (2 M N K) against the f32 FMA peak.
//
//   wgrt_lab_linear [--peaks bench/peaks-h200.json] [--formats q4,q8,q4k,q6k] [--m 1,4,16,128,512]
//                   [--shapes 2048x2048,4096x4096] [--gs 32] [--gemv-int8 0,1] [--rotate-mb 256]
//                   [--repeats 10] [--xq]
//
// Formats by linear_q's names (q4 is q4gsw); the K-quants and q4_1 / q5_x take their own group
// size (q6k 256, the others 32), --gs is q4gsw's and q8's. --gemv-int8 times the gemv with f32
// (0) and int8 (1) activations (LinearQDesc::gemv_int8; -1 the device's choice). --xq gives x
// as the decode step does to its gate|up, down, q|k|v (past the first layer) and output head
// (the output projection stages its x, attention's output): written by a producer
// gemv (a q4gsw weight [K, 256], run once, untimed) with its output quantized ahead (xq_out),
// which the timed gemvs read at one row (xq_in, linear_q_takes_xq) instead of staging x.
//
// Shapes are K x N (the weight is [N, K]). Each timed pass runs C copies of the layer, each with
// its own weights, C chosen so the copies together pass --rotate-mb (the H200's L2 is 50 MB):
// a call never finds its weights in cache, as in a model's forward pass. Two timings per row:
//   chain  the graph's own bind groups: every copy writes the output it wrote in the last pass,
//          so Dawn puts a storage barrier (wait for the previous dispatch) before each one, as
//          between the dependent kernels of a decode step. Time per call = pass time / C.
//   indep  the same kernels and weights, but each pass binds outputs never used before (made
//          and zero-filled by a queue write before the pass; Dawn tracks usage per buffer and
//          needs no compute-to-compute barrier for them), so dispatches may overlap: the
//          kernels' throughput. --indep-init lazy leaves the new outputs to Dawn's lazy clear.
// GB/s and % read BW are given for both; GFLOP/s and % FMA peak from the faster of the two (the
// gemm's split K writes and reads a scratch that indep binds fresh, and there its pass ran up to
// 5x longer on the H200 than the chain's, which reuses the graph's buffers as a model does).
// --resident: every copy reads copy 0's weights, so a pass of C dispatches (C still from
// --rotate-mb) finds them in L2 where they fit: the bound on what reading weights ahead could
// give the chain (a single copy's pass would time its own start too).
// Before a row is timed, its results are checked: copy
// 0's output for 64 columns spread over N against f32 math on the dequantized weight (see
// check_columns); the "check" column says ok or where it failed.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <sstream>
#include <utility>

#include "gpu/buffer.h"
#include "gpu/pipeline.h"
#include "graph/graph.h"
#include "lab.h"
#include "ops/linear_q/linear_q.h"

namespace wgrt {
namespace {

struct Options {
  std::string peaks = "bench/peaks-h200.json";
  std::vector<std::string> formats = {"q4", "q8"};
  std::vector<uint32_t> ms = {1, 4, 16, 128, 512};
  std::vector<std::string> shapes = {"2048x2048",  "2048x512",   "2048x8192",  "8192x2048",
                                     "2048x128256", "4096x4096", "4096x1024", "4096x14336",
                                     "14336x4096", "4096x128256"};
  uint32_t gs = 32;
  std::vector<int> gemv_int8 = {-1};
  double rotate_mb = 256;
  int max_copies = 64;
  std::string indep_init = "write";  // "write" (queue write of zeros) or "lazy" (Dawn clears)
  bool xq = false;                   // x from a producer that quantizes it ahead (see the header)
  bool resident = false;             // every copy reads copy 0's weights (see the header)
  lab::TimeOptions time;
  gpu::DeviceOptions device;
};

// The pass of `nodes` at the graph's live shapes, each timed pass binding fresh output buffers
// (see the header): median seconds per pass over --repeats, after the warm-up passes.
double measure_independent(graph::Graph& g, lab::Timer& timer, const std::vector<graph::NodeId>& nodes,
                           const Options& o, const std::string& label) {
  gpu::Device& dev = graph::device(g);
  std::vector<double> samples;
  lab::spin_up(timer, o.time.spin_s, [&](WGPUComputePassEncoder pass) { graph::encode(g, pass); });
  for (int rep = 0; rep < o.time.warmup + o.time.repeats; ++rep) {
    std::vector<gpu::Buffer> fresh;
    std::vector<graph::BufferOverride> outs;
    for (graph::NodeId id : nodes)
      for (graph::TensorId t : graph::node_info(g, id).outputs) {
        const graph::Tensor& info = graph::tensor_info(g, t);
        uint64_t bytes = graph::dtype_bytes(info.dtype, info.max_shape);
        fresh.push_back(gpu::create_buffer(dev, bytes, gpu::kStorageUsage, "indep out"));
        if (o.indep_init == "write") {
          std::vector<uint8_t> zeros(size_t((bytes + 3) / 4 * 4), 0);
          gpu::upload(dev, fresh.back().get(), 0, zeros.data(), zeros.size());
        }
        outs.push_back({t, fresh.back().get()});
      }
    const graph::ReboundNodes rebound = graph::rebind(g, nodes, outs);
    gpu::wait_idle(dev);  // the zero fills done before the timed pass
    auto record = [&](WGPUComputePassEncoder pass) { graph::encode(g, pass, rebound); };
    lab::Sample sm = lab::time_pass(timer, label + " indep", record);
    if (rep >= o.time.warmup) samples.push_back(timer.gpu_clock() ? sm.gpu_s : sm.wall_s);
  }
  return lab::median(samples);
}

// Copy 0's output y at M rows against f32 math on the dequantized weight wd, for 64 columns
// spread over N: within 1e-5 of sum |x w|, plus, where the route may take int8 activations (the
// gemm; the gemv where gemv_takes_int8), the exact bound of rounding each activation to its
// group's int8 grid: absmax(x in the group) / 254 times sum |w| over the group.
// With x_out (--xq) x is what that producer wrote in the same pass, read back into xv.
std::string check_columns(graph::Graph& g, graph::TensorId y, std::vector<float>& xv, const std::vector<float>& wd,
                          uint32_t m, uint32_t k, uint32_t n, uint32_t act_gs, bool int8,
                          std::optional<graph::TensorId> x_out = std::nullopt) {
  graph::execute(g);
  const std::vector<float> got = graph::read_output<float>(g, y);
  if (x_out) xv = graph::read_output<float>(g, *x_out);
  for (uint32_t r = 0; r < m; ++r)
    for (uint32_t c = 0; c < 64; ++c) {
      const uint32_t j = uint32_t(uint64_t(c) * (n - 1) / 63);
      const float* xr = &xv[size_t(r) * k];
      const float* wr = &wd[size_t(j) * k];
      double want = 0, mass = 0, act = 0;
      for (uint32_t g0 = 0; g0 < k; g0 += act_gs) {
        double amax = 0, wsum = 0;
        for (uint32_t i = g0; i < g0 + act_gs; ++i) {
          want += double(xr[i]) * wr[i];
          mass += std::fabs(double(xr[i]) * wr[i]);
          amax = std::max(amax, std::fabs(double(xr[i])));
          wsum += std::fabs(double(wr[i]));
        }
        act += amax / 254 * wsum;
      }
      const double v = got[size_t(r) * n + j], tol = 1e-5 * mass + (int8 ? 1.01 * act : 0) + 1e-6;
      if (!(std::fabs(v - want) <= tol))
        return fmt::format("MISMATCH at ({}, {}): {} vs {} (tolerance {:.3g})", r, j, v, want, tol);
    }
  return "ok";
}

// One layer shape at every M: a graph of C copies, x at the largest M.
void run_shape(gpu::Device& dev, lab::Timer& timer, const lab::Peaks& peaks, const Options& o,
               ops::QuantFormat f, int int8, uint32_t k, uint32_t n, lab::Table& table) {
  const uint32_t gs = ops::has_block_d(f) ? 256 : ops::from_gguf_blocks(f) ? 32 : o.gs;
  const uint64_t wbytes = ops::quant_q_words(f, n, k) * 4 + ops::quant_scale_words(f, n, k, gs) * 4;
  const int copies = int(std::clamp<double>(std::ceil(o.rotate_mb * 1e6 / double(wbytes)), 1, o.max_copies));
  const uint32_t max_m = *std::max_element(o.ms.begin(), o.ms.end());
  graph::Graph g(dev);
  constexpr uint32_t kProducerK = 256;
  graph::TensorId x = graph::add_input(g, {.name = "x", .max_shape = {max_m, o.xq ? kProducerK : k}, .dynamic_dims = 1});
  graph::TensorId xin = x;  // the copies' x
  std::optional<graph::TensorId> x_xq;
  std::optional<ops::QuantTensors> producer;
  if (o.xq) {
    producer = ops::add_quant_weight(g, "prod.w", ops::QuantFormat::Q4gsw, k, kProducerK, 32);
    xin = ops::add_linear_q(g, {.name = "prod", .format = ops::QuantFormat::Q4gsw, .gs = 32, .x = x, .q = producer->q,
                                .scales = producer->scales, .gemv_int8 = 1, .xq_out = true});
    x_xq = ops::linear_q_xq(g, "prod");
    graph::mark_output(g, xin);
  }
  std::vector<ops::QuantTensors> weights;
  std::vector<graph::NodeId> nodes;
  graph::TensorId y0{};
  for (int c = 0; c < copies; ++c) {
    std::string name = fmt::format("lin.{}", c);
    if (c == 0 || !o.resident) weights.push_back(ops::add_quant_weight(g, name + ".w", f, n, k, gs));
    graph::TensorId y = ops::add_linear_q(g, {.name = name, .format = f, .gs = gs, .x = xin, .q = weights.back().q,
                                              .scales = weights.back().scales, .gemv_int8 = int8, .xq_in = x_xq});
    if (c == 0) y0 = y;
    nodes.push_back(graph::find_node(g, name));
  }
  graph::mark_output(g, y0);
  graph::build(g);
  // Random words; scales are f16 values in [2^-8, 2^-6): timing does not depend on them.
  std::mt19937 rng(1);
  auto random_words = [&](ops::QuantFormat wf, uint32_t wn, uint32_t wk, uint32_t wgs) {
    std::pair<std::vector<uint32_t>, std::vector<uint32_t>> w{ops::quant_q_words(wf, wn, wk),
                                                              ops::quant_scale_words(wf, wn, wk, wgs)};
    for (auto& v : w.first) v = rng();
    for (auto& v : w.second) v = (0x1C00u + rng() % 0x0800u) | ((0x1C00u + rng() % 0x0800u) << 16);
    return w;
  };
  const auto [q, s] = random_words(f, n, k, gs);
  for (const auto& w : weights) {
    graph::write_tensor<uint32_t>(g, w.q, q);
    graph::write_tensor<uint32_t>(g, w.scales, s);
  }
  if (producer) {
    const auto [pq, ps] = random_words(ops::QuantFormat::Q4gsw, k, kProducerK, 32);
    graph::write_tensor<uint32_t>(g, producer->q, pq);
    graph::write_tensor<uint32_t>(g, producer->scales, ps);
  }
  const uint32_t xk = o.xq ? kProducerK : k;
  std::vector<float> xv(size_t(max_m) * xk);
  for (auto& v : xv) v = float(int(rng() % 2001) - 1000) / 1000.f;
  graph::write_tensor<float>(g, x, xv);
  const std::vector<float> wd = ops::dequantize({.format = f, .n = n, .k = k, .gs = gs, .q = q, .scales = s});

  for (uint32_t m : o.ms) {
    graph::ShapeInput shape{x, {m, xk}};
    graph::update(g, {&shape, 1});
    const std::string route = graph::active_route_info(g, nodes[0]).name;
    const bool act_int8 = m > 1 || ops::gemv_takes_int8(graph::device_caps(g), int8);
    std::vector<float> xm = xv;  // x of the copies (with --xq: read back from the producer)
    const std::string check = check_columns(g, y0, xm, wd, m, k, n, m == 1 ? 32 : ops::activation_group(f, gs), act_int8,
                                            producer ? std::optional(xin) : std::nullopt);
    auto record = [&](WGPUComputePassEncoder pass) { graph::encode(g, pass, nodes); };
    const bool reads_xq = o.xq && m == 1 && ops::linear_q_takes_xq(graph::device_caps(g), f, int8);
    const char* xname = m > 1 ? "-" : reads_xq ? "xq" : int8 == 1 ? "i8" : int8 == 0 ? "f32" : "auto";  // the gemv's x
    std::string label = fmt::format("{} {}x{} m{} x {}", ops::quant_format_name(f), k, n, m, xname);
    lab::Timing t = lab::measure(timer, label, o.time, record);
    double indep_s = measure_independent(g, timer, nodes, o, label);
    double per_call = t.seconds / copies, indep_call = indep_s / copies;
    double bytes = double(wbytes) + 4.0 * m * (double(k) + n);
    double gbps = bytes / per_call / 1e9, indep_gbps = bytes / indep_call / 1e9;
    double gflops = 2.0 * m * double(n) * k / std::min(indep_call, per_call) / 1e9;
    table.rows.push_back({ops::quant_format_name(f), xname, std::to_string(m), std::to_string(k),
                          std::to_string(n), route, std::to_string(copies) + (o.resident ? " (one weight)" : ""),
                          fmt::format("{:.2f}", indep_call * 1e6), fmt::format("{:.0f}", indep_gbps),
                          lab::percent_of(indep_gbps, peaks.read_gbps),
                          fmt::format("{:.2f}", per_call * 1e6), fmt::format("{:.0f}", gbps),
                          lab::percent_of(gbps, peaks.read_gbps), fmt::format("{:.0f}", gflops),
                          lab::percent_of(gflops, peaks.fma_gflops), check});
    fmt::print(stderr, "  {}: indep {:.2f} us, chain {:.2f} us, check {}\n", label, indep_call * 1e6, per_call * 1e6,
               check);
  }
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

ops::QuantFormat parse_format(const std::string& s) {
  using F = ops::QuantFormat;
  for (F f : {F::Q4gsw, F::Q8, F::Q2K, F::Q3K, F::Q6K, F::Q4K, F::Q5K, F::Q41, F::Q50, F::Q51, F::IQ4NL, F::IQ4XS})
    if (s == ops::quant_format_name(f) || (s == "q4" && f == F::Q4gsw)) return f;
  throw std::invalid_argument(fmt::format("--formats: unknown format '{}' (hint: q4, q8, q2k, q3k, q4k, q5k, q6k, q4_1, "
                                          "q5_0, q5_1, iq4_nl, iq4_xs)", s));
}

int run(int argc, char** argv) {
  Options o;
  CLI::App app{"wgrt_lab_linear: quantized linear layers against the device peaks"};
  lab::add_device_flags(app, o.device);
  app.add_option("--peaks", o.peaks, "device peaks JSON (wgrt_lab_peaks --out)");
  std::string formats = "q4,q8", shapes, ms;
  app.add_option("--formats", formats,
                 "comma list of q4 (q4gsw), q8, q2k, q3k, q4k, q5k, q6k, q4_1, q5_0, q5_1, iq4_nl, iq4_xs");
  std::string int8s;
  app.add_option("--gemv-int8", int8s, "comma list of the gemv's activations: 0 f32, 1 int8, -1 the device's");
  app.add_option("--shapes", shapes, "comma list of KxN (default: the Llama set)");
  app.add_option("--m", ms, "comma list of M (n_tokens)");
  app.add_option("--gs", o.gs, "group size")->check(CLI::IsMember({32, 64, 128}));
  app.add_option("--rotate-mb", o.rotate_mb, "weights per pass, MB, to defeat the cache");
  app.add_option("--max-copies", o.max_copies, "most layer copies per pass");
  app.add_option("--repeats", o.time.repeats, "timed passes (median)");
  lab::add_spin_flag(app, o.time);
  app.add_flag("--resident", o.resident, "every copy reads the first copy's weights (L2-resident where they fit)");
  app.add_flag("--xq", o.xq, "x from a producer gemv that quantizes it ahead (the decode step's gemvs)");
  app.add_option("--indep-init", o.indep_init, "fresh outputs of the indep timing: write or lazy")
      ->check(CLI::IsMember({"write", "lazy"}));
  CLI11_PARSE(app, argc, argv);
  o.formats = split(formats);
  if (!shapes.empty()) o.shapes = split(shapes);
  if (!int8s.empty()) {
    o.gemv_int8.clear();
    for (const auto& v : split(int8s)) o.gemv_int8.push_back(std::stoi(v));
  }
  if (!ms.empty()) {
    o.ms.clear();
    for (const auto& v : split(ms)) o.ms.push_back(uint32_t(std::stoul(v)));
  }

  gpu::Device dev = gpu::create_device(o.device);
  fmt::print("{}\n", lab::adapter_line(dev.caps));
  lab::Peaks peaks = lab::load_peaks(o.peaks);
  fmt::print("peaks ({}, {}): read {:.0f} GB/s, f32 FMA {:.0f} GFLOP/s; gs {}\n\n", peaks.adapter,
             peaks.date, peaks.read_gbps, peaks.fma_gflops, o.gs);
  lab::Timer timer = lab::create_timer(dev);
  lab::Table table{{"fmt", "x", "M", "K", "N", "route", "copies", "indep us", "indep GB/s", "indep % BW",
                    "chain us", "chain GB/s", "chain % BW", "GFLOP/s", "% FMA peak", "check"},
                   {}};
  for (const auto& fs : o.formats) {
    const ops::QuantFormat f = parse_format(fs);
    for (const auto& sh : o.shapes) {
      auto xpos = sh.find('x');
      uint32_t k = uint32_t(std::stoul(sh.substr(0, xpos))), n = uint32_t(std::stoul(sh.substr(xpos + 1)));
      for (int int8 : o.gemv_int8) run_shape(dev, timer, peaks, o, f, int8, k, n, table);
    }
  }
  fmt::print("\n");
  lab::print_table(table);
  for (const auto& row : table.rows)
    if (row.back() != "ok") return 1;  // a row whose results did not check out
  return 0;
}

}  // namespace
}  // namespace wgrt

int main(int argc, char** argv) {
  try {
    return wgrt::run(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "wgrt_lab_linear: {}\n", e.what());
    return 1;
  }
}
