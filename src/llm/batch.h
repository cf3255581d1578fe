// Several sequences on one graph (continuous batching): a session built with
// BuildOptions::n_seqs > 1 gives each sequence its own KV region of n_ctx positions, and one
// step carries the tokens of several of them, prefill chunks and single decode tokens mixed
// (model/transformer.h). A session of one sequence takes the same calls for sequence 0, one
// part per step.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "llm/sampler.h"
#include "llm/session.h"

namespace wgrt::llm {

// The tokens one sequence contributes to a step, at its next positions; `output`: the step's
// readout has a row for its last token.
struct SeqPart {
  uint32_t seq = 0;
  std::span<const int32_t> tokens;
  bool output = true;
};

uint32_t n_seqs(const Session& s);
uint32_t seq_pos(const Session& s, uint32_t seq);  // positions of the sequence's KV region in use
void reset_seq(Session& s, uint32_t seq);          // forget it (its region is overwritten from 0)
// Keeps the sequence's first n positions (n <= seq_pos), whose K/V stay valid: the next step
// writes from position n (a prompt cache's reused prefix).
void truncate_seq(Session& s, uint32_t seq, uint32_t n);

// Runs one step of `parts` (distinct sequences, at most max_batch tokens in all), advancing each
// sequence's position. The readout (s.last) has one row per part with `output`, in part order.
// Throws std::invalid_argument, with nothing run, naming the part and what is wrong: an unknown
// or repeated sequence, no tokens, too many tokens, a sequence past its context, an id outside
// the vocabulary. `profiler`: a timestamp pair around each node (llm/profile.h).
// `logprobs`: the step also reads back what pick_next_row's log-probabilities need.
// `samples`: one per readout row, the row's token sampled on the GPU (next_gpu_sample) into
// next_token, where read_argmax_row finds it and a fed step embeds it.
void eval_seqs(Session& s, std::span<const SeqPart> parts, Readout readout, gpu::Profiler* profiler = nullptr,
               bool logprobs = false, std::span<const GpuSample> samples = {});

// Pipelined greedy batched decode: a step of one token for each of `seqs`, where token r is the
// argmax of row r of the previous step's readout, embedded where the GPU left it (the State
// next_token), encoded and submitted without waiting: the host reads the previous step's picks
// while this one runs (read_argmax_row with that step's snapshot), a step late. seqs[r] must be
// the sequence of the previous step's readout row r (a prefix of its rows: a sequence at the end
// may leave), each with a position left in its context. Reads back the argmax only; advances
// each sequence's position by one. Throws std::invalid_argument, with nothing run, naming what is
// wrong. A sequence whose previous pick ends it had a token too many in this step: truncate_seq
// takes it back out.
// `samples`: one per sequence, its token sampled on the GPU instead of the argmax (sampled
// decode pipelines as greedy does).
graph::Snapshot submit_fed_seqs(Session& s, std::span<const uint32_t> seqs, std::span<const GpuSample> samples = {});
bool can_feed_seqs(const Session& s);  // the batched graph has the GPU-fed route
// The GPU's pick of the next token for this sampler, drawing from its generator as llm::sample
// would: sampled (can_sample_on_gpu), or greedy as a top-1 (k = 1: the argmax, no draw) for a
// greedy row of a step whose other rows sample. Only for samplers picked on the GPU.
GpuSample next_gpu_sample(Sampler& s);

// The readout rows' picks, row `row` of the latest step (read_argmax / read_top_k / pick_next
// take the last row), or of the step that gave `snap` (waits for that step only).
int32_t read_argmax_row(Session& s, size_t row);
int32_t read_argmax_row(Session& s, const graph::Snapshot& snap, size_t row);
std::vector<Candidate> read_top_k_row(Session& s, size_t row);
// A picked token's log-probability and those of the most likely tokens, best first. They are the
// model's: the log-softmax of the step's logits at temperature 1, before bias and penalties
// (the normalizer from the GPU, logprob_norm; the logits from the top-k, or from the whole row
// when the sampler read it).
struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0;
};
struct PickLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;  // n_top entries (at most the graph's top_k)
};
// With `lp`, the step must have been run with logprobs (eval_seqs); `n_top` <= s.mg.top_k.
int32_t pick_next_row(Session& s, Sampler& sampler, size_t row, PickLogprobs* lp = nullptr, uint32_t n_top = 0);

// Bias, penalties and grammar on the GPU (ops/sampling/logit_adjust.h): stage_adjust writes
// the adjustment of each readout row of the next step (rows[r] for row r; null: none) and turns
// the adjustment on for that step (eval, eval_seqs: their last chunk); each staged sampler's
// pick then reads the top-k (Readout::TopK) instead of the whole row. Returns false, staging
// nothing, when a row's sampler cannot be served so (can_adjust_on_gpu): then read the logits
// (step_readout) and let the CPU adjust them.
bool stage_adjust(Session& s, std::span<Sampler* const> rows);
// Whether the GPU can adjust for this sampler: it needs an adjustment, the graph keeps one
// logits row per sequence (not all_logits), the entries fit ops::kLogitAdjustMaxEntries, a
// sampled pick's top_k is within the graph's top-k, and a grammar's vocabulary fits the model's.
// The CPU path stays for the rest (a top_k of 0 or past the graph's, a penalty window of more
// distinct tokens than the bound, all_logits sessions) and for log-probabilities, which are the
// model's, before any adjustment.
bool can_adjust_on_gpu(const Session& s, const Sampler& sampler);

// The Readout a step must ask for to serve several samplers at once.
Readout merge_readouts(std::span<const Readout> r);

}  // namespace wgrt::llm
