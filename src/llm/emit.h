// The token-emit step that every generation loop shares (llm::generate_tokens, which runs
// wgrt run, the chat turn and the C API; wgrt serve's worker): each token the sampler picked
// is checked against the end tokens, detokenized incrementally, held back while it may start a
// stop string, counted against the budget and the context. The loops around it differ only in how they step the model
// (pipelined or not, one sequence or a batch) and where the text goes.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace wgrt::llm {

bool is_end_token(const tokenizer::Vocab& v, int32_t id);  // EOS or end of turn

// Holds back text that might be the start of a stop string; finds a complete one.
struct StopFilter {
  std::vector<std::string> stops;
  std::string held;
  bool stopped = false;
};
// Returns the text that is safe to emit now.
std::string stop_filter_push(StopFilter& f, std::string_view text);
std::string stop_filter_flush(StopFilter& f);  // at the end: what is still held

// One generation's emit state.
struct Emit {
  StopFilter filter;
  tokenizer::StreamDecoder dec;
  int32_t max_tokens = -1;                       // the budget; < 0: none
  const std::atomic<bool>* interrupt = nullptr;  // set: the next token ends the generation
  size_t n_generated = 0;                        // tokens counted into the output
  // Set by the token that ends the generation: "eos", "stop string", "length", "context",
  // "interrupted".
  std::string stop_reason;
};

Emit emit_begin(const tokenizer::Tokenizer& tok, std::vector<std::string> stop, int32_t max_tokens,
                const std::atomic<bool>* interrupt = nullptr);

struct Emitted {
  std::string text;      // safe to show now (empty while held back or mid-character)
  bool counted = false;  // the token is part of the output (not an end token, not interrupted)
  bool end = false;      // the generation ends with this token (Emit::stop_reason says why)
};

// The step for the token `id`, in this order: the interrupt, an end token, the text and a stop
// string, the budget, then the context: `full` says the next step has no room to feed `id`,
// and make_room (a context shift; may be empty) may make some, else the reason is "context".
Emitted emit_token(Emit& e, const tokenizer::Tokenizer& tok, int32_t id, bool full,
                   const std::function<bool()>& make_room = {});

// At the end: the text still held back and the bytes of a character left unfinished.
std::string emit_end(Emit& e);

}  // namespace wgrt::llm
