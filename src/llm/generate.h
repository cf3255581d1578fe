// Text generation: prefill the prompt, then decode token by token with the sampler, streaming
// text, until EOS, a stop string or the token budget.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "llm/sampler.h"
#include "llm/session.h"

namespace wgrt::llm {

struct GenerateOptions {
  std::string prompt;
  int32_t n_predict = 128;          // 0: prompt only; < 0: until EOS or the context is full
  SamplerParams sampling;
  std::vector<std::string> stop;    // generation ends before any of these
  std::string dump_logits;          // file for the prompt's logits (needs all_logits)
};

struct GenerateStats {
  size_t n_prompt = 0;
  size_t n_generated = 0;
  double prompt_seconds = 0;
  double generate_seconds = 0;
  std::string stop_reason;  // "eos", "stop string", "length", "context"
};

GenerateStats generate(Session& s, const GenerateOptions& o, const std::function<void(std::string_view)>& on_text);

// What a decode step must read back for this sampler (the argmax alone when greedy).
Readout step_readout(const Session& s, const SamplerParams& p);
// The next token from the latest step, as the sampler picks it (argmax, top-k candidates or
// all logits, whichever it needs), accepted into its history.
int32_t pick_next(Session& s, Sampler& sampler);
bool is_end_token(const Session& s, int32_t id);  // EOS or end of turn

// Holds back text that might be the start of a stop string; finds a complete one.
struct StopFilter {
  std::vector<std::string> stops;
  std::string held;
  bool stopped = false;
};
// Returns the text that is safe to emit now.
std::string stop_filter_push(StopFilter& f, std::string_view text);
std::string stop_filter_flush(StopFilter& f);  // at the end: what is still held

// Mean negative log-likelihood per token over `tokens` (windows of n_ctx, every position
// after the first of its window scored). Needs a session built with all_logits.
struct PerplexityResult {
  double nll = 0;
  size_t n_scored = 0;
  double perplexity() const;
};
PerplexityResult perplexity(Session& s, const std::vector<int32_t>& tokens,
                            const std::function<void(size_t done, size_t total)>& progress = {});

}  // namespace wgrt::llm
