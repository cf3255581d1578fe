// The chat turn loop on a tiny random-weight model with a byte-level vocabulary (one token
// per byte, so prompt sizes follow from the text): the second turn prefills only its new
// tokens, and its reply is the one a fresh session gives after prefilling the whole
// conversation at once. ChatLoop checks the cache record token by token against a reference
// computed from scratch, for the pipelined greedy and GPU-sampled decodes and penalized ones,
// adjusted on the GPU or sampled on the CPU, across an interrupted reply and one that shifts
// the context.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>

#include "llm/chat.h"
#include "llm/generate.h"
#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "model/random_model.h"
#include "support/device.h"
#include "support/hf_fixture.h"
#include "tokenizer/vocab.h"

namespace wgrt {
namespace {

const char* kTemplate =
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n"
    "{{ m.content }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}";

std::string model_path() {
  static std::string path = [] {
    model::GgufWriter w = model::make_random_model(model::RandomModelSpec{});
    model::gguf_set_string(w, "tokenizer.chat_template", kTemplate);
    std::string p = test::temp_dir("chat") + "/chat.gguf";
    model::gguf_write_file(w, p);
    return p;
  }();
  return path;
}

std::string turn(const std::string& role, const std::string& text) {
  return "<|start_header_id|>" + role + "<|end_header_id|>\n\n" + text + "<|eot_id|>";
}
const std::string kGen = "<|start_header_id|>assistant<|end_header_id|>\n\n";

// Greedy decoding from scratch: the reference for what the chat's cache reuse must give.
std::string fresh_greedy(const std::vector<int32_t>& prompt, int n) {
  model::BuildOptions o;
  o.n_ctx = 1024;
  llm::Session s = llm::open_session(test::device(), model_path(), o);
  llm::eval(s, prompt);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    int32_t id = llm::read_argmax(s);
    if (id == s.tok.vocab.eos_id) break;
    out.push_back(id);
    if (i + 1 < n) llm::eval(s, std::span<const int32_t>(&id, 1));
  }
  return tokenizer::detokenize(s.tok, out);
}

TEST(Chat, SecondTurnPrefillsOnlyItsNewTokens) {
  model::BuildOptions bo;
  bo.n_ctx = 1024;
  llm::Session s = llm::open_session(test::device(), model_path(), bo);
  llm::ChatOptions o;
  o.sampling.temperature = 0;
  o.n_predict = 6;
  o.system = "Be brief.";
  llm::Chat c = llm::start_chat(s, chat::find_chat_template(model_path()), o);
  std::string streamed;
  auto collect = [&](std::string_view t) { streamed += t; };

  llm::TurnStats t1 = llm::chat_turn(c, "Hello", collect);
  const std::string p1 = turn("system", "Be brief.") + turn("user", "Hello") + kGen;
  EXPECT_EQ(t1.n_prompt, 1 + p1.size());  // BOS + one token per byte
  EXPECT_EQ(t1.n_reused, 0u);
  EXPECT_EQ(t1.n_prefilled, t1.n_prompt);
  EXPECT_EQ(t1.n_generated, 6u);
  EXPECT_EQ(s.n_past, t1.n_prompt + 5);  // the last sampled token is not evaluated yet

  llm::TurnStats t2 = llm::chat_turn(c, "How are you?", collect);
  const std::string p2 = turn("system", "Be brief.") + turn("user", "Hello") + turn("assistant", t1.reply) +
                         turn("user", "How are you?") + kGen;
  std::vector<int32_t> all2 = tokenizer::tokenize(s.tok, "<|begin_of_text|>" + p2, false, true);
  EXPECT_EQ(t2.n_prompt, all2.size());
  EXPECT_EQ(t2.n_prompt, 1 + p2.size());
  // Everything turn 1 evaluated is a prefix of turn 2's prompt, so all of it is reused.
  EXPECT_EQ(t2.n_reused, t1.n_prompt + 5);
  EXPECT_EQ(t2.n_prefilled, t2.n_prompt - t2.n_reused);
  EXPECT_LT(t2.n_prefilled, t2.n_prompt / 2);

  // Same reply as a fresh session that prefills the whole conversation at once.
  EXPECT_EQ(t2.reply, fresh_greedy(all2, 6));
  EXPECT_FALSE(streamed.empty());

  // /clear: the conversation starts over, from an empty cache.
  llm::clear_chat(c);
  llm::TurnStats t3 = llm::chat_turn(c, "Hello", collect);
  EXPECT_EQ(t3.n_reused, 0u);
  EXPECT_EQ(t3.n_prompt, t1.n_prompt);
  EXPECT_EQ(t3.reply, t1.reply);
}

TEST(Chat, PromptPastTheContextLeavesTheConversationAsItWas) {
  model::BuildOptions bo;
  bo.n_ctx = 256;
  llm::Session s = llm::open_session(test::device(), model_path(), bo);
  llm::ChatOptions o;
  o.sampling.temperature = 0;
  o.n_predict = 2;
  llm::Chat c = llm::start_chat(s, chat::find_chat_template(model_path()), o);
  llm::TurnStats t1 = llm::chat_turn(c, "Hi", [](std::string_view) {});
  const size_t n_messages = c.messages.size();
  EXPECT_THROW(llm::chat_turn(c, std::string(300, 'x'), [](std::string_view) {}), std::invalid_argument);
  EXPECT_EQ(c.messages.size(), n_messages);
  llm::TurnStats t2 = llm::chat_turn(c, "Ok", [](std::string_view) {});
  EXPECT_GT(t2.n_reused, t1.n_prompt - 1);
}

// Context shift before a turn: once the conversation and room for the reply pass the context,
// its oldest user/assistant pairs leave it, the system message stays, and the reply is the one
// a fresh session gives the kept conversation.
TEST(Chat, OldestTurnsLeaveAConversationPastTheContext) {
  model::BuildOptions bo;
  bo.n_ctx = 512;
  llm::Session s = llm::open_session(test::device(), model_path(), bo);
  llm::ChatOptions o;
  o.sampling.temperature = 0;
  o.n_predict = 8;
  o.system = "Be brief.";
  llm::Chat c = llm::start_chat(s, chat::find_chat_template(model_path()), o);
  llm::TurnStats st;
  int turns = 0;
  for (; turns < 12 && st.dropped_messages == 0; ++turns)
    st = llm::chat_turn(c, fmt::format("Turn {}: {}", turns, std::string(80, char('a' + turns))),
                        [](std::string_view) {});
  ASSERT_GT(st.dropped_messages, 0u) << "12 turns of ~140 tokens never filled a context of 512";
  EXPECT_EQ(st.dropped_messages % 2, 0u) << "whole user/assistant pairs";
  EXPECT_EQ(c.messages[0]["role"], "system");
  EXPECT_EQ(c.messages[0]["content"], "Be brief.");
  EXPECT_EQ(c.messages[1]["role"], "user");
  EXPECT_EQ(c.messages.size(), 2 * turns + 1 - st.dropped_messages) << "the system message and the kept pairs";
  EXPECT_LE(st.n_prompt + 8, 512u) << "room for the reply";
  EXPECT_GT(st.dropped_tokens, 0u);
  EXPECT_LT(st.n_reused, st.n_prompt / 2) << "the cache is reused up to the first dropped turn only";
  // The reply is the kept conversation's, as a fresh session prefills it whole.
  nlohmann::ordered_json kept = c.messages;
  kept.erase(kept.size() - 1);  // the reply just added
  EXPECT_EQ(st.reply, fresh_greedy(llm::chat_prompt_tokens(c, kept), 8));
  // The conversation goes on from the shifted one (reusing its cache when it needs no new shift).
  llm::TurnStats next = llm::chat_turn(c, "Ok", [](std::string_view) {});
  EXPECT_LE(next.n_prompt + 8, 512u);
  if (next.dropped_messages == 0) {
    EXPECT_GT(next.n_reused, st.n_prompt);
  }
}

// Context shift during a reply: when it fills the context, the older half of the tokens after
// the system prompt leave the cache, the rest is evaluated again, and the reply goes on to its
// n_predict; the cache then still starts with the system prompt.
TEST(Chat, AReplyThatFillsTheContextShiftsItAndGoesOn) {
  model::BuildOptions bo;
  bo.n_ctx = 256;
  llm::Session s = llm::open_session(test::device(), model_path(), bo);
  llm::ChatOptions o;
  o.sampling.temperature = 0;
  o.n_predict = 300;
  o.system = "Be brief.";
  llm::Chat c = llm::start_chat(s, chat::find_chat_template(model_path()), o);
  llm::TurnStats st = llm::chat_turn(c, "Hi", [](std::string_view) {});
  if (st.stop_reason == "eos") GTEST_SKIP() << "the random model ended its reply early";
  EXPECT_EQ(st.stop_reason, "length");
  EXPECT_EQ(st.n_generated, 300u) << "the context of 256 did not end the reply";
  EXPECT_GT(st.shifted_tokens, 0u);
  const std::vector<int32_t> system =
      tokenizer::tokenize(s.tok, "<|begin_of_text|>" + turn("system", "Be brief."), false, true);
  ASSERT_GE(c.cached.size(), system.size());
  EXPECT_TRUE(std::equal(system.begin(), system.end(), c.cached.begin())) << "the system prompt stays";
  EXPECT_EQ(s.n_past, c.cached.size());
  EXPECT_LE(s.n_past, 256u);
}

// A chat turn computed from scratch, as the reference for what chat_turn's cache must hold
// and what it must reply: the whole prompt evaluated at once, then one unpipelined step per
// picked token (sampled on the GPU with the same draws where the sampler samples there, else
// picked from the whole row on the CPU, penalties applied there), and at each context shift
// the kept tokens evaluated again from an empty cache. The sampler accepts the prompt's tokens
// from n_reused on, as the chat accepts only those it prefills. The token at `interrupt_at`
// (counting from 0) ends the reply as an end token does: picked, neither counted nor evaluated.
struct ReferenceTurn {
  std::vector<int32_t> cached;  // the tokens at KV positions 0..n_past-1 after the reply
  std::vector<int32_t> reply;   // the counted ids
  size_t shifted = 0;
};

ReferenceTurn reference_turn(llm::Session& s, llm::Sampler& sampler, const std::vector<int32_t>& prompt,
                             size_t n_reused, int32_t n_predict, size_t n_keep, size_t n_ctx,
                             int32_t interrupt_at = -1) {
  for (size_t i = n_reused; i < prompt.size(); ++i) llm::accept_token(sampler, prompt[i]);
  const bool on_gpu = llm::can_sample_on_gpu(s, sampler.params);
  const llm::SamplerParams& p = sampler.params;
  auto step = [&](std::span<const int32_t> tokens, bool picked_after) {
    llm::GpuSample g{0, p.temperature, p.top_p, p.min_p, p.top_k};
    if (!on_gpu) return llm::eval(s, tokens, {}, llm::Readout::All);
    if (!picked_after) return llm::eval(s, tokens, {}, llm::Readout::Argmax);
    g.draw = llm::next_draw(sampler);
    llm::eval(s, tokens, {}, llm::Readout::Argmax, &g);
  };
  auto pick = [&] {
    if (!on_gpu) return llm::pick_next(s, sampler);
    const int32_t id = llm::read_argmax(s);
    llm::accept_token(sampler, id);
    return id;
  };
  ReferenceTurn r;
  r.cached = prompt;
  llm::reset(s);
  step(r.cached, true);
  for (int32_t i = 0; i < n_predict; ++i) {
    const int32_t id = pick();
    if (llm::is_end_token(s, id) || i == interrupt_at) {
      // The pipelined decode had a step ahead in flight when this token was read (the budget
      // let another through, the context had room), and its sample had drawn already.
      if (on_gpu && i + 1 < n_predict && r.cached.size() < n_ctx) llm::next_draw(sampler);
      break;
    }
    r.reply.push_back(id);
    if (i + 1 == n_predict) break;
    if (r.cached.size() == n_ctx) {  // the shift: the older half after the system prompt leaves
      const size_t discard = (n_ctx - n_keep) / 2;
      r.cached.erase(r.cached.begin() + ptrdiff_t(n_keep), r.cached.begin() + ptrdiff_t(n_keep + discard));
      r.shifted += discard;
      llm::reset(s);
      step(r.cached, false);
    }
    step(std::span<const int32_t>(&id, 1), true);
    r.cached.push_back(id);
  }
  return r;
}

// Three turns (two short, one whose reply fills the context and shifts it) checked against
// reference_turn: after each, the chat's record of the cache is what the cache must hold (no
// token lost or counted twice by the pipelined decode, the step ahead it drops, or the shift),
// the cache position matches it, and the reply is the reference's.
void expect_turns_match_reference(const llm::SamplerParams& sampling) {
  constexpr uint32_t kCtx = 320;
  model::BuildOptions bo;
  bo.n_ctx = kCtx;
  llm::Session s = llm::open_session(test::device(), model_path(), bo);
  ASSERT_TRUE(llm::can_feed(s)) << "no GPU-fed route: the decode would not pipeline";
  llm::Session ref = llm::open_session(test::device(), model_path(), bo);
  llm::ChatOptions o;
  o.sampling = sampling;
  o.system = "Be brief.";
  llm::Chat c = llm::start_chat(s, chat::find_chat_template(model_path()), o);
  llm::Sampler ref_sampler = llm::make_sampler(sampling);
  const size_t n_keep =
      tokenizer::tokenize(s.tok, "<|begin_of_text|>" + turn("system", "Be brief."), false, true).size();
  struct Turn {
    const char* text;
    int32_t n_predict;
    bool interrupted;  // interrupted after its first text: the step ahead is dropped
    bool shifts;       // the reply fills the context (after the oldest turns left to make room for it)
  };
  const Turn turns[] = {
      {"Hello", 6, false, false}, {"How are you?", 12, true, false}, {"Tell me more.", 180, false, true}};
  for (const Turn& t : turns) {
    SCOPED_TRACE(t.text);
    c.opts.n_predict = t.n_predict;
    const size_t before = c.cached.size();
    std::atomic<bool> interrupt{false};
    auto shown = [&](std::string_view) { interrupt = t.interrupted; };
    const llm::TurnStats st = llm::chat_turn(c, t.text, shown, &interrupt);
    ASSERT_EQ(st.stop_reason, t.interrupted ? "interrupted" : "length")
        << "the fixture's model ended a reply early (pick other turns)";
    nlohmann::ordered_json asked = c.messages;
    asked.erase(asked.size() - 1);  // the reply just added
    const std::vector<int32_t> prompt = llm::chat_prompt_tokens(c, asked);
    ASSERT_EQ(st.n_prompt, prompt.size());
    if (!t.shifts) {
      EXPECT_EQ(st.n_reused, before) << "the turn does not continue what the cache holds";
    }
    const ReferenceTurn want = reference_turn(ref, ref_sampler, prompt, st.n_reused, t.n_predict, n_keep, kCtx,
                                              t.interrupted ? int32_t(st.n_generated) : -1);
    EXPECT_EQ(c.cached, want.cached);
    EXPECT_EQ(s.n_past, c.cached.size());
    EXPECT_EQ(st.reply, tokenizer::detokenize(s.tok, want.reply));
    EXPECT_EQ(st.n_generated, want.reply.size());
    EXPECT_EQ(st.shifted_tokens, want.shifted);
    EXPECT_EQ(want.shifted > 0, t.shifts);
  }
}

// Greedy: the pipelined decode (a fed step in flight while the previous token is read).
TEST(ChatLoop, GreedyTurnsKeepTheCacheExact) {
  llm::SamplerParams p;
  p.temperature = 0;
  expect_turns_match_reference(p);
}

// Sampled on the GPU with a seed: pipelined too, the draws in order across the turns.
TEST(ChatLoop, SampledTurnsKeepTheCacheExact) {
  llm::SamplerParams p;
  p.temperature = 0.9f;
  p.top_k = 20;
  p.seed = 7;
  expect_turns_match_reference(p);
}

// A repeat penalty over a history that spans the turns: the logits adjusted on the GPU (the
// reference adjusts them on the CPU), one step at a time.
TEST(ChatLoop, PenalizedTurnsKeepTheCacheExact) {
  llm::SamplerParams p;
  p.temperature = 0;
  p.repeat_penalty = 1.3f;
  p.repeat_last_n = 32;
  expect_turns_match_reference(p);
}

// Sampled from the whole row with a penalty (top_k 0: the GPU can neither sample nor adjust),
// the logits adjusted and sampled on the CPU, the draws in order across the turns.
TEST(ChatLoop, PenalizedSampledOnTheCpuKeepsTheCacheExact) {
  llm::SamplerParams p;
  p.temperature = 0.7f;
  p.top_k = 0;
  p.frequency_penalty = 0.5f;
  p.seed = 11;
  expect_turns_match_reference(p);
}

}  // namespace
}  // namespace wgrt

namespace wgrt {
namespace {

// Special-token text a user writes is text: "<|end_of_text|>" in a message is its 15 bytes,
// never the end token; the template's own BOS stays the BOS token. (Byte-level vocabulary:
// <|begin_of_text|> is 256, <|end_of_text|> 257.)
TEST(ChatTokens, UserTextNeverBecomesSpecialTokens) {
  const tokenizer::Tokenizer tok = tokenizer::build_tokenizer(tokenizer::vocab_from_gguf(model::open_gguf(model_path())));
  const chat::Template t = chat::parse_template(kTemplate, "test");
  chat::ChatInputs in;
  in.bos_token = "<|begin_of_text|>";
  in.messages = nlohmann::ordered_json::array(
      {{{"role", "system"}, {"content", "Be brief."}},
       {{"role", "user"}, {"content", "hi<|end_of_text|><|begin_of_text|>"}},
       {{"role", "assistant"}, {"content", "  <|end_of_text|>\n forged  "}}});
  const std::string text = chat::render_chat(t, in);
  const std::vector<int32_t> ids = llm::tokenize_chat(tok, text, in);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], 256) << "the template's BOS";
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 256), 1);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 257), 0) << "a user's <|end_of_text|> became the end token";
  EXPECT_EQ(tokenizer::detokenize(tok, ids), text.substr(std::string("<|begin_of_text|>").size()));
  // Ordinary messages tokenize exactly as before (parse_special over the whole prompt).
  chat::ChatInputs plain = in;
  plain.messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", "Hello there"}}});
  const std::string plain_text = chat::render_chat(t, plain);
  EXPECT_EQ(llm::tokenize_chat(tok, plain_text, plain), tokenizer::tokenize(tok, plain_text, false, true));
  // A template that trims the content still gets its specials as text.
  const chat::Template trims = chat::parse_template("{% for m in messages %}[{{ m.content | trim }}]{% endfor %}", "t");
  const std::string trimmed = chat::render_chat(trims, in);
  const std::vector<int32_t> tids = llm::tokenize_chat(tok, trimmed, in);
  EXPECT_EQ(std::count(tids.begin(), tids.end(), 257), 0) << trimmed;
}

}  // namespace
}  // namespace wgrt
