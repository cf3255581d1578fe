#include "llm/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <tuple>

#include "gpu/profiler.h"
#include "llm/batch.h"

namespace wgrt::llm {
namespace {

using Clock = std::chrono::steady_clock;

struct Key {
  std::string op, route, shape;
  auto operator<=>(const Key&) const = default;
};

// "[1, 3072] <- [1, 2048]": the first output's live shape and the first input's; a node that
// writes in place (logit_adjust) has no output, only "<- [1, 128256]".
std::string shapes_of(const graph::Graph& g, const graph::Node& n) {
  std::string s = n.outputs.empty() ? std::string() : graph::to_string(graph::live_shape(g, n.outputs[0]));
  if (!n.inputs.empty()) s += (s.empty() ? "<- " : " <- ") + graph::to_string(graph::live_shape(g, n.inputs[0]));
  return s;
}

// Per kernel of the graph's active routes at its live state: count and cost.
std::map<Key, KernelProfile> kernels_of(const graph::Graph& g) {
  std::map<Key, KernelProfile> out;
  for (uint32_t i = 0; i < graph::node_count(g); ++i) {
    const graph::Node& n = graph::node_info(g, graph::NodeId{i});
    const graph::Route& r = graph::active_route_info(g, graph::NodeId{i});
    if (r.kernels.empty()) continue;
    Key k{n.op, r.name, shapes_of(g, n)};
    KernelProfile& p = out[k];
    p.op = k.op, p.route = k.route, p.shape = k.shape;
    const graph::NodeCost c = graph::node_cost(g, graph::NodeId{i});
    ++p.count;
    p.bytes += c.bytes;
    p.flops += c.flops;
  }
  return out;
}

struct CpuMark {
  graph::GraphStats stats;
  Clock::time_point t;
};
CpuMark mark(const graph::Graph& g) { return {graph::stats(g), Clock::now()}; }
void add_cpu(StepProfile& p, const graph::Graph& g, const CpuMark& m, uint32_t steps) {
  const double n = steps;
  const graph::GraphStats& now = graph::stats(g);
  p.real_s = std::chrono::duration<double>(Clock::now() - m.t).count() / n;
  p.update_s = double(now.update_ns - m.stats.update_ns) * 1e-9 / n;
  p.encode_s = double(now.encode_ns - m.stats.encode_ns) * 1e-9 / n;
  p.submit_s = double(now.submit_ns - m.stats.submit_ns) * 1e-9 / n;
  p.wait_s = double(now.wait_ns - m.stats.wait_ns) * 1e-9 / n;
  p.readback_s = double(now.readback_ns - m.stats.readback_ns) * 1e-9 / n;
  p.uniform_writes = double(now.uniform_uploads - m.stats.uniform_uploads) / n;
}

// Runs `one_step(profiler)` `steps` times with a profiler and sums the GPU time per kernel.
template <class StepFn>
void add_gpu(StepProfile& p, Session& s, uint32_t steps, const StepFn& one_step) {
  graph::Graph& g = *s.mg.graph;
  gpu::Profiler prof = gpu::create_profiler(*s.dev, graph::node_count(g));
  std::map<Key, KernelProfile> kernels;
  std::map<std::string, Key> by_label;
  for (uint32_t step = 0; step < steps; ++step) {
    one_step(&prof);
    if (step == 0) {
      kernels = kernels_of(g);
      for (uint32_t i = 0; i < graph::node_count(g); ++i) {
        const graph::NodeId id{i};
        const graph::Node& n = graph::node_info(g, id);
        by_label[graph::pass_label(g, id)] = Key{n.op, graph::active_route_info(g, id).name, shapes_of(g, n)};
      }
      p.dispatches = graph::active_dispatches(g);
    }
    for (const gpu::ProfileSample& sample : gpu::read_profile(*s.dev, prof)) {
      auto it = by_label.find(sample.label);
      if (it == by_label.end()) continue;
      kernels[it->second].gpu_s += sample.seconds / steps;
      p.profiled_gpu_s += sample.seconds / steps;
    }
  }
  for (auto& [k, v] : kernels) p.kernels.push_back(v);
  std::sort(p.kernels.begin(), p.kernels.end(),
            [](const KernelProfile& a, const KernelProfile& b) { return a.gpu_s > b.gpu_s; });
}

// `steps` greedy decode steps from `start`, pipelined and fed on the GPU as in `wgrt run` (two
// warm-up steps first; `timed` called before the timed ones); the wall time per step.
template <class OnTimed>
double run_decode(Session& s, uint32_t start, uint32_t steps, const OnTimed& timed) {
  s.n_past = start;
  graph::Snapshot step = submit_fed_step(s);
  (void)read_argmax(s, step);
  step = submit_fed_step(s);
  timed();
  const Clock::time_point t0 = Clock::now();
  for (uint32_t i = 0; i < steps; ++i) {
    graph::Snapshot ahead = submit_fed_step(s);
    (void)read_argmax(s, step);
    step = ahead;
  }
  (void)read_argmax(s, step);
  return std::chrono::duration<double>(Clock::now() - t0).count() / steps;
}

// "attn_qkv_rope.3" -> "attn_qkv_rope": a node's name without its layer.
std::string family_of(const std::string& node) {
  const size_t dot = node.rfind('.');
  if (dot == std::string::npos || dot + 1 == node.size() ||
      node.find_first_not_of("0123456789", dot + 1) != std::string::npos)
    return node;
  return node.substr(0, dot);
}

// The real decode step without each family of nodes that dispatches, in node order.
std::vector<FamilyCost> family_costs(Session& s, uint32_t start, uint32_t steps) {
  graph::Graph& g = *s.mg.graph;
  const uint32_t nodes = graph::node_count(g);
  std::vector<FamilyCost> out;
  std::vector<std::vector<uint32_t>> masks;  // per family: set_skipped_kernels' masks
  for (uint32_t i = 0; i < nodes; ++i) {
    const uint32_t dispatches = graph::active_dispatches(g, graph::NodeId{i});
    if (dispatches == 0) continue;
    const std::string name = family_of(graph::node_info(g, graph::NodeId{i}).name);
    auto it = std::find_if(out.begin(), out.end(), [&](const FamilyCost& f) { return f.name == name; });
    if (it == out.end()) {
      out.push_back({name});
      masks.emplace_back(nodes, 0u);
      it = out.end() - 1;
    }
    ++it->nodes;
    it->dispatches += dispatches;
    masks[size_t(it - out.begin())][i] = ~0u;
  }
  struct Restore {  // every kernel back in the step, also when a step throws
    graph::Graph& g;
    ~Restore() { graph::set_skipped_kernels(g, {}); }
  } restore{g};
  for (size_t f = 0; f < out.size(); ++f) {
    graph::set_skipped_kernels(g, std::move(masks[f]));
    out[f].step_s = run_decode(s, start, steps, [] {});
  }
  return out;
}

}  // namespace

StepProfile profile_decode(Session& s, uint32_t steps) {
  if (!can_feed(s)) throw std::invalid_argument("--profile needs a session without all logits (hint: drop --dump-logits)");
  graph::Graph& g = *s.mg.graph;
  const uint32_t start = s.n_past;
  if (uint64_t(start) + steps + 2 > s.mg.n_ctx)
    throw std::invalid_argument(fmt::format("--profile: {} decode steps at position {} pass the context of {} "
                                            "(hint: a larger --ctx-size)", steps + 2, start, s.mg.n_ctx));
  StepProfile p;
  p.what = fmt::format("decode at position {}", start);
  p.tokens = 1;
  p.steps = steps;
  // Unprofiled, pipelined as in `wgrt run`; then without each family of nodes, unless WGRT_SKIP_NODES
  // already leaves some out.
  CpuMark m;
  (void)run_decode(s, start, steps, [&] { m = mark(g); });
  add_cpu(p, g, m, steps);
  if (!graph::skipping_kernels(g)) p.families = family_costs(s, start, steps);
  // Profiled, one step at a time from the same position.
  s.n_past = start;
  add_gpu(p, s, steps, [&](gpu::Profiler* prof) {
    graph::ShapeInput shape{s.mg.tokens, {1}};
    const graph::SymbolInput syms[] = {{s.mg.pos, int64_t(s.n_past)}, {s.mg.feed, 1}, {s.mg.want_top_k, 0}, {s.mg.want_sample, 0}};
    graph::update(g, {&shape, 1}, syms);
    s.last = graph::execute(g, {.read = {&s.mg.argmax, 1}, .profiler = prof});
    s.n_past += 1;
    (void)read_argmax(s, s.last);
  });
  s.n_past = start;
  return p;
}

StepProfile profile_prefill(Session& s, uint32_t tokens, uint32_t steps) {
  graph::Graph& g = *s.mg.graph;
  const uint32_t start = s.n_past;
  tokens = std::min(tokens, s.mg.max_batch);
  if (tokens == 0 || uint64_t(start) + tokens > s.mg.n_ctx)
    throw std::invalid_argument(fmt::format("--profile: a prefill of {} tokens at {} does not fit the context of {}",
                                            tokens, start, s.mg.n_ctx));
  std::mt19937 rng(7);
  std::vector<int32_t> ids(tokens);
  for (int32_t& id : ids) id = int32_t(rng() % s.mg.n_vocab);
  StepProfile p;
  p.what = fmt::format("prefill of {} tokens at position {}", tokens, start);
  p.tokens = tokens;
  p.steps = steps;
  eval(s, ids, {}, Readout::Argmax);  // warm-up
  (void)read_argmax(s);
  const CpuMark m = mark(g);
  for (uint32_t i = 0; i < steps; ++i) {
    s.n_past = start;
    eval(s, ids, {}, Readout::Argmax);
    (void)read_argmax(s);
  }
  add_cpu(p, g, m, steps);
  add_gpu(p, s, steps, [&](gpu::Profiler* prof) {
    graph::ShapeInput shape{s.mg.tokens, {tokens}};
    const graph::SymbolInput syms[] = {{s.mg.pos, int64_t(start)}, {s.mg.feed, 0}, {s.mg.want_top_k, 0}, {s.mg.want_sample, 0}};
    graph::update(g, {&shape, 1}, syms);
    graph::write_tensor(g, s.mg.tokens, ids.data(), ids.size() * 4);
    s.last = graph::execute(g, {.read = {&s.mg.argmax, 1}, .profiler = prof});
    (void)read_argmax(s, s.last);
  });
  s.n_past = start;
  return p;
}

StepProfile profile_batched(Session& s, uint32_t n, uint32_t pos, uint32_t steps) {
  if (n == 0 || n > n_seqs(s) || n_seqs(s) == 1)
    throw std::invalid_argument(fmt::format("--profile: {} sequences on a session of {} (hint: --parallel)", n, n_seqs(s)));
  if (uint64_t(pos) + steps + 1 > s.mg.n_ctx)
    throw std::invalid_argument(fmt::format("--profile: {} steps at position {} pass the context of {} per sequence",
                                            steps + 1, pos, s.mg.n_ctx));
  graph::Graph& g = *s.mg.graph;
  const std::vector<uint32_t> saved = s.seq_past;
  std::vector<int32_t> next(n);
  for (uint32_t q = 0; q < n; ++q) next[q] = int32_t((q * 7919u + 11u) % s.mg.n_vocab);
  std::vector<SeqPart> parts(n);
  auto one_step = [&](gpu::Profiler* prof) {
    for (uint32_t q = 0; q < n; ++q) parts[q] = {q, {&next[q], 1}, true};
    eval_seqs(s, parts, Readout::Argmax, prof);
    for (uint32_t q = 0; q < n; ++q) next[q] = read_argmax_row(s, q);
  };
  auto restart = [&] {
    for (uint32_t q = 0; q < n; ++q) s.seq_past[q] = pos;
  };
  StepProfile p;
  p.what = fmt::format("batched decode of {} sequences at position {}", n, pos);
  p.tokens = n;
  p.steps = steps;
  restart();
  one_step(nullptr);  // warm-up
  restart();
  const CpuMark m = mark(g);
  for (uint32_t i = 0; i < steps; ++i) one_step(nullptr);
  add_cpu(p, g, m, steps);
  restart();
  add_gpu(p, s, steps, one_step);
  s.seq_past = saved;
  return p;
}

void print_profile(std::FILE* out, const StepProfile& p, const std::optional<gpu::Peaks>& peaks) {
  auto pct = [](double v, double peak) { return std::isfinite(peak) && peak > 0 ? fmt::format("{:.0f}%", 100 * v / peak) : std::string("-"); };
  fmt::print(out, "\nprofile: {} ({} tokens per step, {} steps)\n", p.what, p.tokens, p.steps);
  fmt::print(out, "| op | route | shape (out <- in) | per step | GPU us | share | GB/s | of read peak | GFLOP/s | of FMA peak |\n");
  fmt::print(out, "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  for (const KernelProfile& k : p.kernels) {
    const double gbps = k.gpu_s > 0 ? double(k.bytes) / k.gpu_s * 1e-9 : 0;
    const double gflops = k.gpu_s > 0 ? k.flops / k.gpu_s * 1e-9 : 0;
    fmt::print(out, "| {} | {} | {} | {} | {:.1f} | {:.1f}% | {:.1f} | {} | {:.1f} | {} |\n", k.op, k.route, k.shape,
               k.count, k.gpu_s * 1e6, p.profiled_gpu_s > 0 ? 100 * k.gpu_s / p.profiled_gpu_s : 0.0, gbps,
               peaks ? pct(gbps, peaks->read_gbps) : "-", gflops, peaks ? pct(gflops, peaks->fma_gflops) : "-");
  }
  fmt::print(out, "dispatches per token: {:.1f}\n", double(p.dispatches) / p.tokens);
  fmt::print(out, "GPU time per step, profiled (a pass per node): {:.3f} ms; real step, unprofiled: {:.3f} ms "
                  "({:.1f} tok/s)\n",
             p.profiled_gpu_s * 1e3, p.real_s * 1e3, p.tokens / std::max(p.real_s, 1e-12));
  fmt::print(out, "CPU per step: update {:.1f} us, encode {:.1f} us, submit {:.1f} us, wait {:.1f} us, read-back "
                  "{:.1f} us; uniform writes {:.1f}\n",
             p.update_s * 1e6, p.encode_s * 1e6, p.submit_s * 1e6, p.wait_s * 1e6, p.readback_s * 1e6,
             p.uniform_writes);
  if (!p.families.empty()) {
    fmt::print(out, "as the step runs it: the real step ({:.1f} us) without each family of nodes, {} steps each\n",
               p.real_s * 1e6, p.steps);
    fmt::print(out, "| nodes | per step | dispatches | step without them, us | their cost, us | a node, us | share |\n");
    fmt::print(out, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (const FamilyCost& f : p.families) {
      const double cost = p.real_s - f.step_s;
      fmt::print(out, "| {} | {} | {} | {:.1f} | {:.1f} | {:.2f} | {:.1f}% |\n", f.name, f.nodes, f.dispatches,
                 f.step_s * 1e6, cost * 1e6, cost / f.nodes * 1e6, 100 * cost / std::max(p.real_s, 1e-12));
    }
  }
  if (peaks)
    fmt::print(out, "peaks ({}, {}): read {:.0f} GB/s, f32 FMA {:.0f} GFLOP/s, dependent dispatch {:.2f} us GPU\n",
               peaks->adapter, peaks->date, peaks->read_gbps, peaks->fma_gflops, peaks->dispatch_gpu_us);
}

std::optional<gpu::Peaks> find_peaks(const gpu::DeviceCaps& caps, const std::string& path) {
  if (!path.empty()) return gpu::load_peaks(path);
  std::error_code ec;
  for (const char* dir : {"bench", "../bench"})
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (!name.starts_with("peaks-") || e.path().extension() != ".json") continue;
      try {
        gpu::Peaks p = gpu::load_peaks(e.path().string());
        if (p.adapter == caps.adapter.name) return p;
      } catch (const std::exception&) {
      }
    }
  fmt::print(stderr, "wgrt: no peaks file for '{}' (hint: --peaks FILE from wgrt_lab_peaks --out); the profile "
                     "shows rates without ratios\n", caps.adapter.name);
  return std::nullopt;
}

}  // namespace wgrt::llm
