// A multi-turn conversation on one Session: each turn renders the whole conversation with
// the chat template, tokenizes it, keeps the KV cache for the tokens it shares with what the
// cache already holds (Session::n_past) and prefills only the rest, then samples the reply
// with llm::generate_tokens's loop (llm/generate.h: the decode pipelined, sampling and logit
// adjustment on the GPU where the sampler allows), as wgrt run and the C API do.
//
// Context shift, twice over. Before a turn: when the conversation and room for the reply
// (llm/context_shift.h's reply_room) pass the context, its oldest turns leave it, whole; the
// system message stays. During a reply that fills the context, when n_predict bounds it (else
// the full context ends it): the tokens after the system prompt's lose their older half and the rest is evaluated again at the positions that follow
// the system prompt's (a re-prefill: the KV cache stores keys rotated for their position, and
// each sequence's positions are its cache rows, so moving rows would mean rotating every kept
// key in place), then the reply goes on.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_template.h"
#include "chat/jinja.h"
#include "llm/sampler.h"
#include "llm/session.h"

namespace wgrt::llm {

// The tokens of a chat prompt the template rendered from `in`: the template's own markers
// become special tokens, while the strings of the messages and tools (untrusted: a user may
// write "<|eot_id|>" or "<|start_header_id|>") stay plain text wherever they spell one
// (tokenizer::untrusted_spans). BOS is added unless the template wrote its text.
std::vector<int32_t> tokenize_chat(const tokenizer::Tokenizer& tok, std::string_view rendered,
                                   const chat::ChatInputs& in);

struct ChatOptions {
  SamplerParams sampling;
  int32_t n_predict = -1;           // tokens per reply; 0: none; < 0: until EOS or the context is full
  std::vector<std::string> stop;    // a reply ends before any of these
  std::optional<std::string> system;
  std::optional<bool> enable_thinking;
};

struct Chat {
  Session* s = nullptr;
  chat::Template tmpl;
  std::optional<std::string> bos_token, eos_token;
  ChatOptions opts;
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  std::vector<int32_t> cached;  // the tokens at KV positions 0..n_past-1
  Sampler sampler;
};

struct TurnStats {
  size_t n_prompt = 0;     // tokens of the whole rendered conversation
  size_t n_reused = 0;     // of them, already in the KV cache
  size_t n_prefilled = 0;  // evaluated this turn before the reply
  size_t n_generated = 0;
  double prefill_seconds = 0, generate_seconds = 0;
  size_t dropped_messages = 0, dropped_tokens = 0;  // older turns left out before this one
  size_t shifted_tokens = 0;  // tokens discarded when the reply filled the context (0: none)
  std::string stop_reason;  // "eos", "stop string", "length", "context", "interrupted"
  std::string reply;        // the assistant's text, as it entered the conversation
};

Chat start_chat(Session& s, const chat::ChatTemplateSource& src, const ChatOptions& o);

// One user turn: streams the reply through on_text. `interrupt` (set from a signal handler)
// ends the reply early; what was generated stays in the conversation. Drops the oldest turns
// when the conversation does not fit (TurnStats says how many); throws std::invalid_argument,
// with the conversation as before, when even the system messages and this turn pass the context.
TurnStats chat_turn(Chat& c, const std::string& user_text, const std::function<void(std::string_view)>& on_text,
                    const std::atomic<bool>* interrupt = nullptr);

// Forget the conversation (the system message stays).
void clear_chat(Chat& c);

// The prompt's tokens for the current messages, or for `messages` (exposed for tests).
std::vector<int32_t> chat_prompt_tokens(const Chat& c);
std::vector<int32_t> chat_prompt_tokens(const Chat& c, const nlohmann::ordered_json& messages);

}  // namespace wgrt::llm
