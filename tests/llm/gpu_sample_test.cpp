// Sampled batched decode on the GPU (llm/batch.h eval_seqs / submit_fed_seqs with samples):
// each row draws from its own top-k with its own parameters, and a pipelined run (picks read
// a step late, tokens fed where the GPU left them) gives the tokens the host's sampler picks
// step by step from the same draws.
#include <gtest/gtest.h>

#include <vector>

#include "llm/batch.h"
#include "llm/session.h"
#include "support/device.h"

namespace wgrt::llm {
namespace {

model::BuildOptions options() {
  model::BuildOptions o;
  o.n_ctx = 48;
  o.max_batch = 16;
  o.n_seqs = 3;
  return o;
}

std::vector<Sampler> samplers() {
  std::vector<Sampler> v;
  v.push_back(make_sampler({.temperature = 0.9f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f, .seed = 1}));
  v.push_back(make_sampler({.temperature = 0.0f, .seed = 2}));  // greedy among sampled rows: the top-1
  v.push_back(make_sampler({.temperature = 1.4f, .top_k = 8, .top_p = 1.0f, .min_p = 0.0f, .seed = 3}));
  return v;
}

const std::vector<std::vector<int32_t>> kPrompts = {{256, 72, 105}, {256, 84, 104, 101}, {256, 65}};

// Prefills the prompts, then n picks per sequence.
std::vector<std::vector<int32_t>> run(Session& s, bool gpu, int n) {
  for (uint32_t q = 0; q < 3; ++q) reset_seq(s, q);
  std::vector<Sampler> sp = samplers();
  std::vector<SeqPart> parts;
  for (uint32_t q = 0; q < 3; ++q) parts.push_back({q, kPrompts[q], true});
  std::vector<std::vector<int32_t>> out(3);
  const std::vector<uint32_t> seqs = {0, 1, 2};
  if (!gpu) {
    eval_seqs(s, parts, Readout::All);
    for (int i = 0; i < n; ++i) {
      std::vector<int32_t> next(3);
      for (uint32_t q = 0; q < 3; ++q) out[q].push_back(next[q] = pick_next_row(s, sp[q], q));
      if (i + 1 == n) break;
      for (uint32_t q = 0; q < 3; ++q) parts[q] = {q, {&next[q], 1}, true};
      eval_seqs(s, parts, Readout::All);
    }
    return out;
  }
  auto draws = [&] {
    std::vector<GpuSample> g;
    for (Sampler& x : sp) g.push_back(next_gpu_sample(x));
    return g;
  };
  eval_seqs(s, parts, Readout::Argmax, nullptr, false, draws());
  graph::Snapshot snap = s.last;
  for (int i = 0; i < n; ++i) {
    graph::Snapshot ahead;
    const bool more = i + 1 < n;
    if (more) ahead = submit_fed_seqs(s, seqs, draws());  // in flight while `snap` is read
    for (uint32_t q = 0; q < 3; ++q) {
      out[q].push_back(read_argmax_row(s, snap, q));
      accept_token(sp[q], out[q].back());
    }
    snap = ahead;
  }
  return out;
}

TEST(GpuSample, PipelinedBatchMatchesTheHostSampler) {
  Session s = open_session(test::device(), kRandomModel, options());
  const auto host = run(s, false, 12), gpu = run(s, true, 12);
  EXPECT_EQ(gpu, host);
}

TEST(GpuSample, RejectsBadSamples) {
  Session s = open_session(test::device(), kRandomModel, options());
  std::vector<SeqPart> parts = {{0, kPrompts[0], true}, {1, kPrompts[1], true}};
  const GpuSample one{1, 1.0f, 1.0f, 0.0f, 4};
  EXPECT_THROW(eval_seqs(s, parts, Readout::Argmax, nullptr, false, std::vector<GpuSample>{one}),
               std::invalid_argument);  // a sample per readout row
  const GpuSample big{1, 1.0f, 1.0f, 0.0f, s.mg.top_k + 1};
  EXPECT_THROW(eval_seqs(s, parts, Readout::Argmax, nullptr, false, std::vector<GpuSample>{one, big}),
               std::invalid_argument);
  EXPECT_EQ(seq_pos(s, 0), 0u);  // nothing ran
}

}  // namespace
}  // namespace wgrt::llm
