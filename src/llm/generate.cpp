#include "llm/generate.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <optional>
#include <stdexcept>

#include "graph/check.h"
#include "llm/batch.h"
#include "llm/constrain.h"

namespace wgrt::llm {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

bool is_end_token(const Session& s, int32_t id) { return is_end_token(s.tok.vocab, id); }

// What a decode step must read back for this sampler.
Readout step_readout(const Session& s, const SamplerParams& p) {
  if (p.temperature == 0 && !needs_all_logits(p)) return Readout::Argmax;
  if (needs_all_logits(p) || p.top_k == 0 || p.top_k > s.mg.top_k) return Readout::Logits;
  return Readout::TopK;
}

int32_t pick_next(Session& s, Sampler& sampler) {
  return pick_next_row(s, sampler, s.last_rows - 1);
}

GenerateStats generate(Session& s, const GenerateOptions& o, const std::function<void(std::string_view)>& on_text) {
  const std::vector<int32_t> prompt =
      tokenizer::tokenize(s.tok, o.prompt, /*add_special=*/true, /*parse_special=*/true);
  return generate_tokens(s, prompt, o, [&](std::string_view text, int32_t) {
    if (!text.empty()) on_text(text);
    return true;
  });
}

GenerateStats generate_tokens(Session& s, std::span<const int32_t> prompt, const GenerateOptions& o,
                              const TokenSink& sink) {
  GenerateStats st;
  if (prompt.empty())
    throw std::invalid_argument("the prompt is empty after tokenization (hint: give -p some text)");
  if (prompt.size() > s.mg.n_ctx - s.n_past)
    throw std::invalid_argument(fmt::format("the prompt has {} tokens, past the context of {} (hint: a larger "
                                            "--ctx-size or a shorter prompt)", prompt.size(), s.mg.n_ctx - s.n_past));
  std::vector<int32_t>* const kv = o.kv_tokens;
  WGRT_CHECK(!kv || kv->size() == s.n_past, "kv_tokens holds {} tokens, the cache {}", kv ? kv->size() : 0, s.n_past);
  auto evaluated = [&](std::span<const int32_t> ids) {
    if (kv) kv->insert(kv->end(), ids.begin(), ids.end());
  };
  Sampler own;
  if (!o.sampler) {
    own = make_sampler(o.sampling);
    constrain(s, own);
  }
  Sampler& sampler = o.sampler ? *o.sampler : own;
  const SamplerParams& sp = sampler.params;
  for (int32_t id : prompt) accept_token(sampler, id);

  // Greedy decoding, and sampling without a repetition penalty (sampled on the GPU from the
  // top-k), keep step t + 1 in flight while step t's token is read (session.h).
  const bool gpu_sampled = can_sample_on_gpu(s, sp);
  Readout readout = step_readout(s, sp);
  if (gpu_sampled) readout = Readout::Argmax;  // the sampled id lands where the argmax does
  const bool pipelined = readout == Readout::Argmax && can_feed(s);
  GpuSample pick{0, sp.temperature, sp.top_p, sp.min_p, sp.top_k};
  auto draw = [&]() -> const GpuSample* {
    if (!gpu_sampled) return nullptr;
    pick.draw = next_draw(sampler);
    return &pick;
  };
  // Bias, penalties and grammar: the GPU adjusts the logits and the step reads its top-k; a step
  // the GPU cannot adjust (batch.h can_adjust_on_gpu) reads the whole row for the CPU.
  Sampler* const adjust_rows[] = {&sampler};
  auto step_read = [&] { return stage_adjust(s, adjust_rows) ? Readout::TopK : readout; };
  auto t0 = Clock::now();
  eval(s, prompt, {}, step_read(), draw());
  evaluated(prompt);
  st.n_prompt = prompt.size();
  st.stop_reason = "length";
  if (o.n_predict == 0) {
    st.prompt_seconds = since(t0);
    return st;
  }
  Emit em = emit_begin(s.tok, o.stop, o.n_predict > 0 ? o.n_predict : -1, o.interrupt);
  bool cut = false;  // the sink ended it
  // Emits `id`; false when the generation ends with it. `full`: the context has no room for
  // the step that would feed `id` (o.make_room may make some).
  auto emit = [&](int32_t id, bool full) {
    const Emitted out = emit_token(em, s.tok, id, full, o.make_room);
    if (out.counted && !sink(out.text, id)) {
      cut = true;
      return false;
    }
    return !out.end;
  };
  auto end = [&](Clock::time_point t1) {
    st.n_generated = em.n_generated;
    st.stop_reason = cut ? "callback" : em.stop_reason;
    if (!cut)
      if (std::string tail = emit_end(em); !tail.empty()) sink(tail, -1);
    st.generate_seconds = since(t1);
    WGRT_CHECK(!kv || kv->size() == s.n_past, "kv_tokens holds {} tokens, the cache {}", kv->size(), s.n_past);
    return st;
  };
  // Another token after the next one may still be wanted.
  auto wants_two_more = [&] { return o.n_predict < 0 || em.n_generated + 2 <= size_t(o.n_predict); };

  if (pipelined) {
    graph::Snapshot step = s.last;  // holds the next token
    std::optional<graph::Snapshot> ahead;
    auto submit_ahead = [&] {
      ahead.reset();
      if (wants_two_more() && s.n_past < s.mg.n_ctx) ahead = submit_fed_step(s, draw());
    };
    submit_ahead();
    int32_t id = read_argmax(s, step);
    st.prompt_seconds = since(t0);
    auto t1 = Clock::now();
    while (true) {
      accept_token(sampler, id);
      // Without a step ahead the budget would have let another token through: the context is full.
      if (!emit(id, /*full=*/!ahead)) {
        if (ahead) s.n_past -= 1;  // the step in flight consumed a token nobody keeps
        break;
      }
      if (ahead) {
        step = *ahead;  // it consumed `id`
      } else {
        // make_room made some: `id` goes in from the host, the steps after it are fed again.
        eval(s, std::span<const int32_t>(&id, 1), {}, step_read(), draw());
        step = s.last;
      }
      evaluated(std::span<const int32_t>(&id, 1));
      submit_ahead();
      id = read_argmax(s, step);
    }
    return end(t1);
  }

  int32_t next = pick_next(s, sampler);
  st.prompt_seconds = since(t0);
  auto t1 = Clock::now();
  while (emit(next, /*full=*/s.n_past >= s.mg.n_ctx)) {
    eval(s, std::span<const int32_t>(&next, 1), {}, step_read());
    evaluated(std::span<const int32_t>(&next, 1));
    next = pick_next(s, sampler);
  }
  return end(t1);
}

void dump_prompt_logits(Session& s, std::span<const int32_t> prompt, const std::string& path) {
  if (!s.mg.all_logits) throw std::logic_error("--dump-logits needs a session built with all_logits");
  if (prompt.empty() || prompt.size() > s.mg.n_ctx - s.n_past)
    throw std::invalid_argument(fmt::format("the prompt has {} tokens, the context {} free (hint: a larger --ctx-size "
                                            "or a shorter prompt)", prompt.size(), s.mg.n_ctx - s.n_past));
  std::ofstream dump(path, std::ios::binary | std::ios::trunc);
  if (!dump) throw std::runtime_error(fmt::format("{}: cannot open for writing (hint: check the path)", path));
  eval(s, prompt, [&](size_t, size_t) {
    const std::vector<float> rows = read_logits(s);
    dump.write(reinterpret_cast<const char*>(rows.data()), std::streamsize(rows.size() * sizeof(float)));
  }, Readout::All);
  dump.close();
  if (!dump) throw std::runtime_error(fmt::format("{}: write failed", path));
}

double PerplexityResult::perplexity() const { return n_scored ? std::exp(nll / double(n_scored)) : NAN; }

double PerplexityResult::error() const {
  if (n_scored < 2) return NAN;
  const double mean = nll / double(n_scored), var = nll2 / double(n_scored) - mean * mean;
  if (!(var > 0)) return NAN;
  return std::exp(mean) * std::sqrt(var / double(n_scored - 1));
}

size_t perplexity_chunks(size_t n_tokens, size_t n_ctx) {
  if (n_ctx < 2 || n_tokens < 2 * n_ctx)
    throw std::invalid_argument(fmt::format(
        "the text has {} tokens; perplexity with a context of {} needs at least {} (2 chunks of the "
        "context: only each chunk's second half is scored) (hint: a longer text, or a smaller -c)",
        n_tokens, n_ctx, 2 * n_ctx));
  return n_tokens / n_ctx;
}

double token_nll(const float* row, size_t n_vocab, int32_t target) {
  double mx = row[0];
  for (size_t j = 1; j < n_vocab; ++j) mx = std::max(mx, double(row[j]));
  double sum = 0;
  for (size_t j = 0; j < n_vocab; ++j) sum += std::exp(double(row[j]) - mx);
  return mx + std::log(sum) - double(row[target]);
}

PerplexityResult perplexity_windows(std::span<const int32_t> tokens, size_t n_ctx, size_t n_vocab, int32_t bos,
                                    const ChunkLogits& logits,
                                    const std::function<void(const PerplexityResult&)>& progress) {
  PerplexityResult r;
  const size_t n_chunks = perplexity_chunks(tokens.size(), n_ctx), first = n_ctx / 2;
  std::vector<int32_t> chunk(n_ctx);
  for (size_t c = 0; c < n_chunks; ++c) {
    const std::span<const int32_t> orig = tokens.subspan(c * n_ctx, n_ctx);
    std::copy(orig.begin(), orig.end(), chunk.begin());
    if (bos >= 0) chunk[0] = bos;
    logits(chunk, [&](size_t pos, const float* row) {
      if (pos < first || pos + 1 >= n_ctx) return;
      const double v = token_nll(row, n_vocab, orig[pos + 1]);
      r.nll += v;
      r.nll2 += v * v;
      ++r.n_scored;
    });
    r.n_chunks = c + 1;
    if (progress) progress(r);
  }
  return r;
}

PerplexityResult perplexity(Session& s, std::span<const int32_t> tokens,
                            const std::function<void(const PerplexityResult&)>& progress) {
  if (!s.mg.all_logits) throw std::logic_error("perplexity needs a session built with all_logits");
  const size_t v = s.mg.n_vocab;
  const int32_t bos = s.tok.vocab.add_bos ? s.tok.vocab.bos_id : -1;
  auto gpu_logits = [&](std::span<const int32_t> chunk, const std::function<void(size_t, const float*)>& row) {
    reset(s);
    eval(s, chunk, [&](size_t first, size_t count) {
      const std::vector<float> logits = read_logits(s);
      for (size_t i = 0; i < count; ++i) row(first + i, &logits[i * v]);
    });
  };
  return perplexity_windows(tokens, s.mg.n_ctx, v, bos, gpu_logits, progress);
}

}  // namespace wgrt::llm
