// `--profile` for `wgrt run` and `wgrt bench`: where a step's time goes.
//
// GPU: steps run once more with a timestamp pair around each node (a compute pass per node),
// summed per kernel (op, route, shapes): time, count per step, bytes moved and FLOPs (the
// nodes' NodeCost) against the device peaks. A pass per node inflates short kernels, so decode
// also times real steps with each family of nodes left out: what each costs as the step runs
// it. CPU: the same steps unprofiled, split into update / encode / submit / wait / read-back
// (graph::GraphStats), with the real step time next to the profiled GPU total, so the cost of
// profiling is visible.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "gpu/peaks.h"
#include "llm/session.h"

namespace wgrt::llm {

struct KernelProfile {
  std::string op, route, shape;
  uint32_t count = 0;   // nodes per step
  double gpu_s = 0;     // per step, all of them
  uint64_t bytes = 0;   // per step
  double flops = 0;     // per step
};

// A family of nodes (a node and its copies in the other layers: "attn.0" .. "attn.15" are
// "attn") and the real step without their dispatches: what they cost as the step runs them.
struct FamilyCost {
  std::string name;
  uint32_t nodes = 0;       // per step
  uint32_t dispatches = 0;  // per step
  double step_s = 0;        // the real step without them
};

struct StepProfile {
  std::string what;          // "decode at 512" / "prefill 512 at 0"
  uint32_t tokens = 0;       // per step
  uint32_t steps = 0;        // measured
  uint32_t dispatches = 0;   // per step
  double profiled_gpu_s = 0; // per step: the kernels' sum, a pass each
  double real_s = 0;         // per step, unprofiled wall time
  double update_s = 0, encode_s = 0, submit_s = 0, wait_s = 0, readback_s = 0;  // per step
  double uniform_writes = 0;  // per step: queue writes of uniform blocks (the symbol block included)
  std::vector<KernelProfile> kernels;  // slowest first
  std::vector<FamilyCost> families;    // decode: node order; real_s minus step_s is their cost
};

// Greedy decode steps at the session's position, fed on the GPU like `wgrt run` (the session's
// last step must have run the output head), then the same steps once per family of nodes with
// that family left out (graph::set_skipped_kernels; the cache rows those steps write are past
// n_past, so the session's results are unchanged). Restores n_past afterwards.
StepProfile profile_decode(Session& s, uint32_t steps);
// One prefill of `tokens` random ids at position n_past. Restores n_past afterwards.
StepProfile profile_prefill(Session& s, uint32_t tokens, uint32_t steps);

// Steps of one decode token for each of sequences 0 .. n - 1 of a batched session (BuildOptions::
// n_seqs), each at position `pos`, fed their argmax read back as `wgrt serve` steps its slots.
// Restores the sequences' positions afterwards.
StepProfile profile_batched(Session& s, uint32_t n, uint32_t pos, uint32_t steps);

// The report; ratios against `peaks` when given (read bandwidth, f32 FMA).
void print_profile(std::FILE* out, const StepProfile& p, const std::optional<gpu::Peaks>& peaks);

// bench/peaks-*.json for this adapter, or `path` when given; nullopt (with a note on stderr)
// when none matches.
std::optional<gpu::Peaks> find_peaks(const gpu::DeviceCaps& caps, const std::string& path);

}  // namespace wgrt::llm
