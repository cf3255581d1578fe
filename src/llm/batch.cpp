#include "llm/batch.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <stdexcept>

#include "grammar/token_index.h"
#include "llm/generate.h"
#include "ops/sampling/logit_adjust.h"
#include "ops/sampling/sampling.h"

namespace wgrt::llm {

namespace {
constexpr uint32_t kNoSeq = ~0u;  // Session::last_seqs: a row nobody asked for
}  // namespace

uint32_t n_seqs(const Session& s) { return s.mg.n_seqs; }

uint32_t seq_pos(const Session& s, uint32_t seq) {
  if (seq >= n_seqs(s))
    throw std::invalid_argument(fmt::format("sequence {} of a session of {}", seq, n_seqs(s)));
  return n_seqs(s) == 1 ? s.n_past : s.seq_past[seq];
}

void reset_seq(Session& s, uint32_t seq) { truncate_seq(s, seq, 0); }

void truncate_seq(Session& s, uint32_t seq, uint32_t n) {
  const uint32_t pos = seq_pos(s, seq);
  if (n > pos)
    throw std::invalid_argument(fmt::format("sequence {} holds {} positions: it cannot keep {}", seq, pos, n));
  if (n_seqs(s) == 1)
    s.n_past = n;
  else
    s.seq_past[seq] = n;
}

namespace {

void check_parts(const Session& s, std::span<const SeqPart> parts) {
  const model::ModelGraph& mg = s.mg;
  if (parts.empty()) throw std::invalid_argument("a step of no sequences");
  size_t total = 0;
  std::vector<bool> seen(mg.n_seqs, false);
  for (size_t i = 0; i < parts.size(); ++i) {
    const SeqPart& p = parts[i];
    if (p.seq >= mg.n_seqs)
      throw std::invalid_argument(fmt::format("step part {}: sequence {} of a session of {} (hint: --parallel)", i,
                                              p.seq, mg.n_seqs));
    if (seen[p.seq]) throw std::invalid_argument(fmt::format("step part {}: sequence {} appears twice", i, p.seq));
    seen[p.seq] = true;
    if (p.tokens.empty()) throw std::invalid_argument(fmt::format("step part {}: no tokens", i));
    if (uint64_t(seq_pos(s, p.seq)) + p.tokens.size() > mg.n_ctx)
      throw std::invalid_argument(fmt::format(
          "step part {}: {} tokens at position {} pass sequence {}'s context of {} (hint: a larger --ctx-size)", i,
          p.tokens.size(), seq_pos(s, p.seq), p.seq, mg.n_ctx));
    for (size_t j = 0; j < p.tokens.size(); ++j)
      if (p.tokens[j] < 0 || uint32_t(p.tokens[j]) >= mg.n_vocab)
        throw std::invalid_argument(fmt::format("step part {}: token {} at index {} is outside the vocabulary of {}",
                                                i, p.tokens[j], j, mg.n_vocab));
    total += p.tokens.size();
  }
  if (total > mg.max_batch)
    throw std::invalid_argument(fmt::format("a step of {} tokens, past the batch of {} (hint: smaller prefill chunks)",
                                            total, mg.max_batch));
}

}  // namespace

GpuSample next_gpu_sample(Sampler& s) {
  const SamplerParams& p = s.params;
  if (p.temperature == 0) return GpuSample{0, 1.0f, 1.0f, 0.0f, 1};
  return GpuSample{next_draw(s), p.temperature, p.top_p, p.min_p, p.top_k};
}

namespace {

void write_picks(Session& s, std::span<const GpuSample> samples) {
  std::vector<ops::PickParams> pp;
  for (const GpuSample& x : samples) pp.push_back({x.draw, x.temperature, x.top_p, x.min_p, x.k, 0, 0, 0});
  graph::write_tensor<ops::PickParams>(*s.mg.graph, s.mg.pick, pp);
}

void check_samples(const Session& s, std::span<const GpuSample> samples, size_t rows) {
  if (samples.empty()) return;
  if (s.mg.all_logits) throw std::logic_error("GPU sampling needs a session without all_logits");
  if (samples.size() != rows)
    throw std::invalid_argument(fmt::format("{} GPU samples for a step of {} readout rows", samples.size(), rows));
  for (size_t r = 0; r < samples.size(); ++r)
    if (samples[r].k == 0 || samples[r].k > s.mg.top_k || !(samples[r].temperature > 0))
      throw std::invalid_argument(fmt::format("GPU sample {}: k {} outside [1, {}] or a temperature not above 0", r,
                                              samples[r].k, s.mg.top_k));
}

}  // namespace

void eval_seqs(Session& s, std::span<const SeqPart> parts, Readout readout, gpu::Profiler* profiler,
               bool logprobs, std::span<const GpuSample> samples) {
  check_parts(s, parts);
  size_t n_out = 0;
  for (const SeqPart& p : parts) n_out += p.output ? 1 : 0;
  check_samples(s, samples, n_out);
  const model::ModelGraph& mg = s.mg;
  if (mg.n_seqs == 1) {
    if (profiler) throw std::invalid_argument("eval_seqs: a profiled step needs a batched session");
    eval(s, parts[0].tokens, {}, readout, samples.empty() ? nullptr : &samples[0], logprobs);
    s.last_seqs.assign(1, parts[0].seq);
    return;
  }
  // Tokens in part order; each its (position, first cache row); the output rows.
  std::vector<int32_t> tokens;
  std::vector<uint32_t> rows, out;
  uint32_t max_keys = 0;
  for (const SeqPart& p : parts) {
    const uint32_t pos0 = s.seq_past[p.seq];
    for (size_t j = 0; j < p.tokens.size(); ++j) {
      tokens.push_back(p.tokens[j]);
      rows.push_back(pos0 + uint32_t(j));
      rows.push_back(p.seq * mg.n_ctx);
    }
    max_keys = std::max<uint32_t>(max_keys, pos0 + uint32_t(p.tokens.size()));
    if (p.output) out.push_back(uint32_t(tokens.size() - 1));
  }
  if (out.empty()) out.push_back(uint32_t(tokens.size() - 1));  // the head needs a row; nobody reads it
  const uint32_t n = uint32_t(tokens.size());
  graph::Graph& g = *mg.graph;
  const graph::ShapeInput shapes[] = {{mg.tokens, {n}}, {mg.kv_rows, {n, 2}}, {mg.out_rows, {uint32_t(out.size())}}};
  const int64_t pick = samples.empty() ? 0 : 1;
  const int64_t top_k = readout == Readout::All || readout == Readout::TopK || logprobs || pick ? 1 : 0;
  const graph::SymbolInput syms[] = {{mg.pos, 0}, {mg.feed, 0}, {mg.want_top_k, top_k}, {mg.want_sample, pick},
                                     {mg.max_keys, int64_t(max_keys)}, {mg.want_logprobs, logprobs ? 1 : 0},
                                     {mg.adjust.enable, s.adjust_next ? 1 : 0}};
  s.adjust_next = false;
  graph::update(g, shapes, syms);
  graph::write_tensor(g, mg.tokens, tokens.data(), tokens.size() * sizeof(int32_t));
  graph::write_tensor(g, mg.kv_rows, rows.data(), rows.size() * sizeof(uint32_t));
  graph::write_tensor(g, mg.out_rows, out.data(), out.size() * sizeof(uint32_t));
  if (pick) write_picks(s, samples);
  ReadoutBuffer buf;
  s.last = graph::execute(g, {.read = readout_tensors(mg, readout, buf, logprobs), .profiler = profiler});
  s.last_rows = out.size();
  s.last_seqs.clear();
  for (const SeqPart& p : parts)
    if (p.output) s.last_seqs.push_back(p.seq);
  if (s.last_seqs.empty()) s.last_seqs.push_back(kNoSeq);
  for (const SeqPart& p : parts) s.seq_past[p.seq] += uint32_t(p.tokens.size());
}

bool can_feed_seqs(const Session& s) { return !s.mg.all_logits; }

graph::Snapshot submit_fed_seqs(Session& s, std::span<const uint32_t> seqs, std::span<const GpuSample> samples) {
  const model::ModelGraph& mg = s.mg;
  if (!can_feed_seqs(s)) throw std::logic_error("submit_fed_seqs: the session was built with all_logits");
  if (seqs.empty()) throw std::invalid_argument("a fed step of no sequences");
  check_samples(s, samples, seqs.size());
  if (mg.n_seqs == 1) {  // the single-sequence graph's own fed step
    if (seqs.size() != 1 || seqs[0] != 0)
      throw std::invalid_argument(fmt::format("a fed step of {} sequences on a graph of one", seqs.size()));
    graph::Snapshot snap = submit_fed_step(s, samples.empty() ? nullptr : &samples[0]);
    s.last_seqs.assign(1, 0);
    return snap;
  }
  if (seqs.size() > s.last_seqs.size())
    throw std::invalid_argument(fmt::format("a fed step of {} sequences after a readout of {} rows", seqs.size(),
                                            s.last_seqs.size()));
  std::vector<uint32_t> rows(2 * seqs.size()), out(seqs.size());
  uint32_t max_keys = 0;
  for (size_t r = 0; r < seqs.size(); ++r) {
    if (seqs[r] != s.last_seqs[r])
      throw std::invalid_argument(fmt::format("fed step part {}: sequence {}, but row {} of the previous readout is {}",
                                              r, seqs[r], r,
                                              s.last_seqs[r] == kNoSeq ? "nobody's" : fmt::format("sequence {}'s",
                                                                                                   s.last_seqs[r])));
    const uint32_t pos = s.seq_past[seqs[r]];
    if (pos >= mg.n_ctx)
      throw std::invalid_argument(fmt::format("fed step part {}: a token at position {} passes sequence {}'s context "
                                              "of {} (hint: a larger --ctx-size)", r, pos, seqs[r], mg.n_ctx));
    rows[2 * r] = pos;
    rows[2 * r + 1] = seqs[r] * mg.n_ctx;
    out[r] = uint32_t(r);
    max_keys = std::max(max_keys, pos + 1);
  }
  const uint32_t n = uint32_t(seqs.size());
  graph::Graph& g = *mg.graph;
  const graph::ShapeInput shapes[] = {{mg.tokens, {n}}, {mg.kv_rows, {n, 2}}, {mg.out_rows, {n}}};
  const int64_t pick = samples.empty() ? 0 : 1;
  const graph::SymbolInput syms[] = {{mg.pos, 0}, {mg.feed, 1}, {mg.want_top_k, pick}, {mg.want_sample, pick},
                                     {mg.max_keys, int64_t(max_keys)}, {mg.want_logprobs, 0}, {mg.adjust.enable, 0}};
  graph::update(g, shapes, syms);
  graph::write_tensor(g, mg.kv_rows, rows.data(), rows.size() * sizeof(uint32_t));
  graph::write_tensor(g, mg.out_rows, out.data(), out.size() * sizeof(uint32_t));
  if (pick) write_picks(s, samples);
  s.last = graph::execute(g, {.read = {&mg.argmax, 1}});
  s.last_rows = n;
  s.last_seqs.assign(seqs.begin(), seqs.end());
  for (uint32_t q : seqs) s.seq_past[q] += 1;
  return s.last;
}

namespace {

// Row `row` of output `t` of the latest step, `count` values: only that row is copied out.
template <class T>
std::vector<T> read_row(Session& s, graph::TensorId t, size_t row, size_t count) {
  graph::Graph& g = *s.mg.graph;
  const size_t rows = size_t(graph::snapshot_bytes(g, s.last, t)) / (count * sizeof(T));
  if (row >= rows) throw std::out_of_range(fmt::format("readout row {} of {}", row, rows));
  std::vector<T> v(count);
  graph::read_output(g, s.last, t, v.data(), count * sizeof(T), row * count * sizeof(T));
  return v;
}

}  // namespace

int32_t read_argmax_row(Session& s, size_t row) { return read_argmax_row(s, s.last, row); }

int32_t read_argmax_row(Session& s, const graph::Snapshot& snap, size_t row) {
  graph::Graph& g = *s.mg.graph;
  // The State next_token has a row per sequence: the latest step's live rows bound it; an
  // earlier step's, its size.
  const size_t rows = snap.serial == s.last.serial
                          ? s.last_rows
                          : size_t(graph::snapshot_bytes(g, snap, s.mg.argmax)) / sizeof(uint32_t);
  if (row >= rows) throw std::out_of_range(fmt::format("readout row {} of {}", row, rows));
  uint32_t id = 0;
  graph::read_output(g, snap, s.mg.argmax, &id, sizeof id, row * sizeof id);
  return int32_t(id);
}

std::vector<Candidate> read_top_k_row(Session& s, size_t row) {
  const size_t k = s.mg.top_k;
  std::vector<uint32_t> ids = read_row<uint32_t>(s, s.mg.top_ids, row, k);
  std::vector<float> vals = read_row<float>(s, s.mg.top_logits, row, k);
  std::vector<Candidate> c(k);
  for (size_t i = 0; i < k; ++i) c[i] = {int32_t(ids[i]), vals[i]};
  return c;
}

namespace {

// The picked token's log-probability and the n_top best: the top-k's logits (or the whole row's,
// `row_logits`, when the sampler read it) minus the GPU's normalizer.
void fill_logprobs(Session& s, size_t row, int32_t id, const std::vector<float>* row_logits, uint32_t n_top,
                   PickLogprobs& lp) {
  if (n_top > s.mg.top_k)
    throw std::invalid_argument(fmt::format("{} log-probability alternatives, more than the graph's top-k of {}", n_top,
                                            s.mg.top_k));
  const float norm = read_row<float>(s, s.mg.logprob_norm, row, 1)[0];
  const std::vector<Candidate> top = read_top_k_row(s, row);
  lp.top.clear();
  for (uint32_t i = 0; i < n_top; ++i) lp.top.push_back({top[i].id, top[i].logit - norm});
  lp.chosen = {id, -std::numeric_limits<float>::infinity()};
  if (row_logits) {
    lp.chosen.logprob = (*row_logits)[size_t(id)] - norm;
    return;
  }
  for (const Candidate& c : top)
    if (c.id == id) {
      lp.chosen.logprob = c.logit - norm;
      return;
    }
  // Picks without the whole row come from the top-k (argmax, or a draw among its candidates).
  throw std::logic_error(fmt::format("pick_next_row: token {} is not among the step's top-k", id));
}

}  // namespace

bool can_adjust_on_gpu(const Session& s, const Sampler& sampler) {
  const SamplerParams& p = sampler.params;
  if (!needs_all_logits(p) || s.mg.all_logits) return false;
  if (p.temperature != 0 && (p.top_k == 0 || p.top_k > s.mg.top_k)) return false;
  if (p.grammar && (!sampler.constraint || sampler.constraint->index->n_vocab() > s.mg.n_vocab)) return false;
  return adjust_entries(sampler).size() <= ops::kLogitAdjustMaxEntries;
}

bool stage_adjust(Session& s, std::span<Sampler* const> rows) {
  const ops::LogitAdjust& a = s.mg.adjust;
  if (rows.size() > a.max_rows)
    throw std::invalid_argument(fmt::format("stage_adjust: {} rows, past the graph's {}", rows.size(), a.max_rows));
  for (const Sampler* sp : rows)
    if (sp && !can_adjust_on_gpu(s, *sp)) return false;
  const size_t words = (a.n_vocab + 31) / 32;
  std::vector<ops::LogitAdjustRow> heads(rows.size(), ops::LogitAdjustRow{0, 0, 1.0f, 0.0f, 1.0f, 0, 0, 0});
  std::vector<ops::LogitAdjustEntry> entries;
  std::vector<uint32_t> allow;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (!rows[r]) continue;
    Sampler& sp = *rows[r];
    const std::vector<AdjustEntry> e = adjust_entries(sp);
    heads[r] = {uint32_t(e.size()), sp.params.grammar ? 1u : 0u, sp.params.repeat_penalty, sp.params.presence_penalty,
                1.0f / sp.params.repeat_penalty, 0, 0, 0};
    entries.resize((r + 1) * ops::kLogitAdjustMaxEntries);
    for (size_t i = 0; i < e.size(); ++i)
      entries[r * ops::kLogitAdjustMaxEntries + i] = {uint32_t(e[i].id), e[i].count, e[i].bias, e[i].freq_sub};
    if (sp.params.grammar) {
      update_allow(sp);  // tokens past the grammar's vocabulary stay disallowed (zero bits)
      allow.resize((r + 1) * words);
      std::copy(sp.allow.begin(), sp.allow.end(), allow.begin() + long(r * words));
    }
    sp.gpu_adjusted = true;
  }
  graph::Graph& g = *s.mg.graph;
  graph::write_tensor<ops::LogitAdjustRow>(g, a.rows, heads);
  // Only the rows' used prefix is written: a row's count bounds what the kernel reads.
  if (!entries.empty()) graph::write_tensor<ops::LogitAdjustEntry>(g, a.entries, entries);
  if (!allow.empty()) graph::write_tensor<uint32_t>(g, a.allow, allow);
  s.adjust_next = true;
  return true;
}

int32_t pick_next_row(Session& s, Sampler& sampler, size_t row, PickLogprobs* lp, uint32_t n_top) {
  if (sampler.gpu_adjusted) {
    // The step's logits were adjusted on the GPU: its top-k holds the candidates (stage_adjust).
    if (lp) throw std::logic_error("pick_next_row: log-probabilities of a step adjusted on the GPU (they are the "
                                   "model's, before adjustment: stage_adjust is for steps without them)");
    std::vector<Candidate> cands = read_top_k_row(s, row);
    return sample(sampler, cands);
  }
  if (sampler.params.temperature == 0 && !needs_all_logits(sampler.params)) {
    int32_t id = read_argmax_row(s, row);
    accept_token(sampler, id);
    if (lp) fill_logprobs(s, row, id, nullptr, n_top, *lp);
    return id;
  }
  std::vector<Candidate> cands;
  std::vector<float> logits;
  const bool whole = needs_all_logits(sampler.params) || sampler.params.top_k == 0 || sampler.params.top_k > s.mg.top_k;
  if (whole) {
    const size_t v = s.mg.n_vocab;
    logits = read_row<float>(s, s.mg.logits, row, v);
    cands.resize(v);
    for (size_t i = 0; i < v; ++i) cands[i] = {int32_t(i), logits[i]};
  } else {
    cands = read_top_k_row(s, row);
  }
  const int32_t id = sample(sampler, cands);
  if (lp) fill_logprobs(s, row, id, whole ? &logits : nullptr, n_top, *lp);
  return id;
}

Readout merge_readouts(std::span<const Readout> r) {
  bool argmax = false, top_k = false, logits = false;
  for (Readout x : r) {
    argmax |= x == Readout::All || x == Readout::Argmax;
    top_k |= x == Readout::All || x == Readout::TopK;
    logits |= x == Readout::All || x == Readout::Logits;
  }
  if (int(argmax) + int(top_k) + int(logits) != 1) return Readout::All;
  return argmax ? Readout::Argmax : top_k ? Readout::TopK : Readout::Logits;
}

}  // namespace wgrt::llm
