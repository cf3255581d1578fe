#include "llm/chat.h"

#include <fmt/format.h>

#include <stdexcept>

#include "llm/context_shift.h"
#include "llm/generate.h"

namespace wgrt::llm {

namespace {

void start_messages(Chat& c) {
  c.messages = nlohmann::ordered_json::array();
  if (c.opts.system) c.messages.push_back({{"role", "system"}, {"content", *c.opts.system}});
}

// Every string (values and keys) in `j`, without recursion.
void collect_strings(const nlohmann::ordered_json& j, std::vector<std::string_view>& out) {
  std::vector<const nlohmann::ordered_json*> todo = {&j};
  while (!todo.empty()) {
    const nlohmann::ordered_json* v = todo.back();
    todo.pop_back();
    if (v->is_string()) out.push_back(v->get_ref<const std::string&>());
    if (v->is_object())
      for (auto it = v->begin(); it != v->end(); ++it) {
        out.push_back(it.key());
        todo.push_back(&*it);
      }
    if (v->is_array())
      for (const auto& e : *v) todo.push_back(&e);
  }
}

}  // namespace

std::vector<int32_t> tokenize_chat(const tokenizer::Tokenizer& tok, std::string_view rendered,
                                   const chat::ChatInputs& in) {
  std::vector<std::string_view> untrusted;
  collect_strings(in.messages, untrusted);
  collect_strings(in.tools, untrusted);
  const std::vector<tokenizer::TextSpan> plain = tokenizer::untrusted_spans(tok, rendered, untrusted);
  // Templates usually write the BOS text themselves; add BOS only when this one does not.
  const bool has_bos = in.bos_token && !in.bos_token->empty() && rendered.starts_with(*in.bos_token);
  return tokenizer::tokenize_with_plain_spans(tok, rendered, /*add_special=*/!has_bos, plain);
}

Chat start_chat(Session& s, const chat::ChatTemplateSource& src, const ChatOptions& o) {
  Chat c;
  c.s = &s;
  c.tmpl = chat::parse_template(src.text, src.origin);
  c.bos_token = src.bos_token;
  c.eos_token = src.eos_token;
  c.opts = o;
  c.sampler = make_sampler(o.sampling);
  start_messages(c);
  return c;
}

std::vector<int32_t> chat_prompt_tokens(const Chat& c) { return chat_prompt_tokens(c, c.messages); }

std::vector<int32_t> chat_prompt_tokens(const Chat& c, const nlohmann::ordered_json& messages) {
  chat::ChatInputs in;
  in.messages = messages;
  in.add_generation_prompt = true;
  in.bos_token = c.bos_token;
  in.eos_token = c.eos_token;
  in.enable_thinking = c.opts.enable_thinking;
  const std::string prompt = chat::render_chat(c.tmpl, in);
  return tokenize_chat(c.s->tok, prompt, in);
}

namespace {

// The prompt's first tokens that render the leading system messages (what a context shift
// keeps); 0 when there are none, or the template cannot render them alone.
size_t system_prompt_tokens(const Chat& c, const std::vector<int32_t>& prompt) {
  nlohmann::ordered_json system = nlohmann::ordered_json::array();
  for (const auto& m : c.messages) {
    if (m.value("role", "") != "system") break;
    system.push_back(m);
  }
  if (system.empty()) return 0;
  std::vector<int32_t> alone;
  try {
    chat::ChatInputs in;
    in.messages = system;
    in.add_generation_prompt = false;
    in.bos_token = c.bos_token;
    in.eos_token = c.eos_token;
    in.enable_thinking = c.opts.enable_thinking;
    alone = tokenize_chat(c.s->tok, chat::render_chat(c.tmpl, in), in);
  } catch (const chat::TemplateError&) {
    return 0;  // e.g. a template that insists on a user message
  }
  size_t n = 0;
  while (n < alone.size() && n < prompt.size() && alone[n] == prompt[n]) ++n;
  return n;
}

// A reply that filled the context: the older half of the tokens after the first n_keep leave
// the cache and the newer half is evaluated again right after them. Returns the tokens
// discarded, 0 when nothing can be (then the reply ends).
size_t shift_context(Chat& c, size_t n_keep) {
  Session& s = *c.s;
  const size_t n_past = s.n_past;
  if (n_keep + 2 > n_past) return 0;
  const size_t discard = (n_past - n_keep) / 2;
  c.cached.erase(c.cached.begin() + ptrdiff_t(n_keep), c.cached.begin() + ptrdiff_t(n_keep + discard));
  s.n_past = uint32_t(n_keep);
  eval(s, std::span<const int32_t>(c.cached.data() + n_keep, c.cached.size() - n_keep), {}, Readout::Argmax);
  return discard;
}

}  // namespace

TurnStats chat_turn(Chat& c, const std::string& user_text, const std::function<void(std::string_view)>& on_text,
                    const std::atomic<bool>* interrupt) {
  Session& s = *c.s;
  TurnStats st;
  c.messages.push_back({{"role", "user"}, {"content", user_text}});
  std::vector<int32_t> prompt;
  try {
    const auto tokens_of = [&](const nlohmann::ordered_json& m) { return chat_prompt_tokens(c, m); };
    std::optional<FittedChat> fit =
        fit_chat(c.messages, s.mg.n_ctx, reply_room(s.mg.n_ctx, c.opts.n_predict), tokens_of);
    if (!fit)
      throw std::invalid_argument(fmt::format(
          "this message and the system prompt take {} tokens, past the context of {} (hint: a shorter message, "
          "or a larger --ctx-size)", tokens_of(drop_turns(c.messages, c.messages.size())).size(), s.mg.n_ctx));
    c.messages = std::move(fit->messages);
    prompt = std::move(fit->tokens);
    st.dropped_messages = fit->dropped_messages;
    st.dropped_tokens = fit->dropped_tokens;
  } catch (...) {
    c.messages.erase(c.messages.size() - 1);
    throw;
  }
  st.n_prompt = prompt.size();
  const size_t n_keep = system_prompt_tokens(c, prompt);

  // Keep the cache for the longest shared prefix (the template may re-render earlier turns
  // differently); at least the last prompt token is evaluated, for its logits.
  size_t keep = 0;
  while (keep < c.cached.size() && keep < prompt.size() && c.cached[keep] == prompt[keep]) ++keep;
  if (keep == prompt.size()) --keep;
  s.n_past = uint32_t(keep);
  c.cached.resize(keep);
  st.n_reused = keep;

  // The turn runs generate_tokens's loop on the fresh tokens, with the chat's sampler (its
  // history spans the turns) and its record of the cache.
  std::span<const int32_t> fresh(prompt.data() + keep, prompt.size() - keep);
  st.n_prefilled = fresh.size();
  GenerateOptions g{.n_predict = c.opts.n_predict, .stop = c.opts.stop, .interrupt = interrupt,
                    .sampler = &c.sampler, .kv_tokens = &c.cached};
  // Without n_predict a reply runs until an end token or the full context, so no shift.
  if (c.opts.n_predict >= 0)
    g.make_room = [&] {
      const size_t discarded = shift_context(c, n_keep);
      st.shifted_tokens += discarded;
      return discarded > 0;
    };
  std::vector<int32_t> reply_ids;
  std::string shown;
  const GenerateStats gs = generate_tokens(s, fresh, g, [&](std::string_view text, int32_t id) {
    if (id >= 0) reply_ids.push_back(id);
    shown += text;
    if (!text.empty()) on_text(text);
    return true;
  });
  st.prefill_seconds = gs.prompt_seconds;
  st.generate_seconds = gs.generate_seconds;
  st.n_generated = gs.n_generated;
  st.stop_reason = gs.stop_reason;

  // The history keeps the reply's exact bytes (what the cache holds), cut at a stop string.
  st.reply = gs.stop_reason == "stop string" ? shown : tokenizer::detokenize(s.tok, reply_ids);
  c.messages.push_back({{"role", "assistant"}, {"content", st.reply}});
  return st;
}

void clear_chat(Chat& c) {
  start_messages(c);
  c.cached.clear();
  reset(*c.s);
  c.sampler = make_sampler(c.sampler.params);
}

}  // namespace wgrt::llm
