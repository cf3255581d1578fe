// Text generation: prefill the prompt, then decode token by token with the sampler, streaming
// text, until EOS, a stop string or the token budget.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "llm/emit.h"
#include "llm/sampler.h"
#include "llm/session.h"

namespace wgrt::llm {

struct GenerateOptions {
  std::string prompt;
  int32_t n_predict = 128;          // 0: prompt only; < 0: until EOS or the context is full
  SamplerParams sampling;
  std::vector<std::string> stop;    // generation ends before any of these
  const std::atomic<bool>* interrupt = nullptr;  // set: the next token ends it ("interrupted")

  // A conversation that goes on over one cache (llm/chat.h's turn), the prompt continuing the
  // s.n_past tokens the cache holds. All three may stay empty.
  // The caller's sampler instead of one made from `sampling` (not read then): its token history
  // (the penalties') carries over, and a grammar must be attached already (constrain). The
  // prompt's tokens are accepted into it as into a fresh one.
  Sampler* sampler = nullptr;
  // The tokens at KV positions 0..s.n_past-1, kept so: each token evaluated is appended (the
  // prompt's, then each decoded one, fed on the GPU or not), one a step in flight consumed and
  // nobody keeps is not. Must hold s.n_past tokens on entry; holds them on return and whenever
  // make_room runs.
  std::vector<int32_t>* kv_tokens = nullptr;
  // Called when the next token has no room (s.n_past == n_ctx): may free positions (a context
  // shift, which rewrites s.n_past and kv_tokens and may evaluate); true: it did, the
  // generation goes on; false: it ends ("context"). The decode resumes pipelined after it.
  std::function<bool()> make_room;
};

struct GenerateStats {
  size_t n_prompt = 0;
  size_t n_generated = 0;
  double prompt_seconds = 0;
  double generate_seconds = 0;
  std::string stop_reason;  // "eos", "stop string", "length", "context", "interrupted", "callback"
};

GenerateStats generate(Session& s, const GenerateOptions& o, const std::function<void(std::string_view)>& on_text);

// Each generated token's text (empty while held back or mid-character) and id, then the text
// still held at the end with id -1 (when there is some); false ends the generation there
// ("callback", and no text at the end).
using TokenSink = std::function<bool(std::string_view text, int32_t id)>;
// generate() on prompt tokens (o.prompt is not read), streaming through `sink`.
GenerateStats generate_tokens(Session& s, std::span<const int32_t> prompt, const GenerateOptions& o,
                              const TokenSink& sink);

// The prompt's logits, f32 [n_prompt, n_vocab], written to `path` as each chunk is evaluated (a
// session built with all_logits); the cache then holds the prompt.
void dump_prompt_logits(Session& s, std::span<const int32_t> prompt, const std::string& path);

// What a decode step must read back for this sampler (the argmax alone when greedy).
Readout step_readout(const Session& s, const SamplerParams& p);
// The next token from the latest step, as the sampler picks it (argmax, top-k candidates or
// all logits, whichever it needs), accepted into its history.
int32_t pick_next(Session& s, Sampler& sampler);
bool is_end_token(const Session& s, int32_t id);  // EOS or end of turn

// Perplexity as llama.cpp's llama-perplexity computes it, so the two numbers compare. The text's
// tokens (a BOS first when the vocabulary adds one) are cut into floor(n / n_ctx) chunks of
// n_ctx tokens; the rest is left out. Each chunk runs from an empty cache, its first token
// replaced by BOS when the vocabulary adds one, and only its second half is scored: the logits
// at positions [n_ctx/2, n_ctx - 1) predict the token after each, n_ctx - n_ctx/2 - 1 tokens a
// chunk. The +/- is the standard error of the mean NLL carried through exp:
// PPL * sqrt((mean(nll^2) - mean(nll)^2) / (n - 1)).
struct PerplexityResult {
  double nll = 0;   // sum over the scored tokens of -log p(token)
  double nll2 = 0;  // sum of the squares
  size_t n_scored = 0;
  size_t n_chunks = 0;
  double perplexity() const;
  double error() const;  // NAN with fewer than 2 tokens or no spread
};
// Chunks of n_ctx tokens in n_tokens; throws std::invalid_argument when there are fewer than
// 2 * n_ctx tokens (the first chunk's first half is never scored).
size_t perplexity_chunks(size_t n_tokens, size_t n_ctx);
// -log softmax(row)[target] over n_vocab logits.
double token_nll(const float* row, size_t n_vocab, int32_t target);

// One chunk's logits: calls row(pos, logits) for each position of `chunk` (any order; n_vocab floats each).
using ChunkLogits =
    std::function<void(std::span<const int32_t> chunk, const std::function<void(size_t pos, const float* row)>& row)>;
// The scoring above over `tokens` with logits from `logits` (wgrt's GPU, or a reference);
// bos < 0: no BOS replacement. progress(r) after each chunk, with the running sums.
PerplexityResult perplexity_windows(std::span<const int32_t> tokens, size_t n_ctx, size_t n_vocab, int32_t bos,
                                    const ChunkLogits& logits,
                                    const std::function<void(const PerplexityResult&)>& progress = {});
// On the session's model (built with all_logits), n_ctx its context.
PerplexityResult perplexity(Session& s, std::span<const int32_t> tokens,
                            const std::function<void(const PerplexityResult&)>& progress = {});

}  // namespace wgrt::llm
