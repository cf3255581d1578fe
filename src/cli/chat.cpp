// `wgrt chat`: an interactive terminal chat. Lines from stdin are user turns; replies stream
// to stdout, per-turn speed goes to stderr. Ctrl-C stops a reply (Ctrl-C at the prompt, or
// end of input, leaves); /clear starts over; /exit leaves; /help lists the commands. Any other
// line that starts with '/' is refused as an unknown command, not sent to the model ('//' sends
// a line that starts with '/'). Works from a pipe too. A conversation that outgrows the context
// drops its oldest turns, and a reply that fills it shifts it (llm/chat.h); a notice says so.
#include <algorithm>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/flags.h"
#include "llm/chat.h"

namespace wgrt::cli {
namespace {

std::atomic<bool> g_interrupt{false};

extern "C" void on_sigint(int) { g_interrupt.store(true); }

struct ChatCommand {
  const char* name;
  const char* help;
};
constexpr ChatCommand kChatCommands[] = {
    {"/help", "list these commands"},
    {"/clear", "start the conversation over"},
    {"/exit", "leave (also /quit, Ctrl-C at the prompt, or end of input)"},
    {"/quit", "leave"},
};

void print_chat_help() {
  fmt::print(stderr, "wgrt: commands:\n");
  for (const ChatCommand& c : kChatCommands) fmt::print(stderr, "  {:<7} {}\n", c.name, c.help);
  fmt::print(stderr, "  a line that starts with '//' is sent to the model without its first '/'\n");
}

struct ChatFlags {
  ModelFlags model;
  SamplingFlags sampling;
  std::string chat_template;
  std::string system;
  bool has_system = false;
  int32_t n_predict = -1;
  std::vector<std::string> stop;
  std::string enable_thinking;
};

// On the library's internals, not the C API's wgrt_chat (include/wgrt/wgrt.h): that renders a
// whole conversation from scratch each call, where chat keeps its KV cache across turns, shifts
// the context, applies stop strings and prints per-turn stats; the turn's token loop is the
// one the C API runs (llm::generate_tokens).
int run_chat(const gpu::DeviceOptions& dev_opts, const ChatFlags& f) {
  // The template first: a model without one fails before the GPU work.
  chat::ChatTemplateSource src;
  if (!f.chat_template.empty()) {
    src = chat::template_from_file(f.chat_template);
    if (!f.model.model.empty()) chat::model_special_texts(f.model.model, src);
  } else if (!f.model.model.empty()) {
    src = chat::find_chat_template(f.model.model);
  } else {
    throw std::invalid_argument("the built-in default model has no chat template (hint: give -m MODEL, or "
                                "--chat-template FILE)");
  }

  gpu::Device dev = gpu::create_device(dev_opts);
  Progress progress;
  start_progress(progress, dev, f.model.model);
  llm::Session s = llm::open_session(dev, f.model.model, build_options(f.model, false));
  end_progress(progress);
  if (llm::is_default_model(s))
    fmt::print(stderr, "wgrt: the built-in default model has RANDOM WEIGHTS: its replies are noise.\n");
  llm::ChatOptions o;
  o.sampling = sampler_params(f.sampling, int32_t(std::min<size_t>(s.tok.vocab.n_vocab(), s.mg.n_vocab)));
  o.n_predict = f.n_predict;
  o.stop = f.stop;
  if (f.has_system) o.system = f.system;
  if (!f.enable_thinking.empty()) o.enable_thinking = f.enable_thinking == "true";
  llm::Chat c = llm::start_chat(s, src, o);
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: Ctrl-C at the prompt ends the read, and the chat
  struct sigaction old {};
  sigaction(SIGINT, &sa, &old);

  fmt::print(stderr, "wgrt: chatting with {} on {} (template: {}), context {}, seed {}. Ctrl-C stops a reply, "
                     "/clear starts over, /exit leaves, /help lists the commands.\n",
             s.model.path, dev.caps.adapter.name, src.origin, s.mg.n_ctx, o.sampling.seed);

  const bool tty = isatty(STDIN_FILENO);
  std::string line;
  while (true) {
    if (tty) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
    }
    g_interrupt.store(false);
    if (!std::getline(std::cin, line)) break;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/clear") {
      llm::clear_chat(c);
      fmt::print(stderr, "wgrt: conversation cleared\n");
      continue;
    }
    if (line == "/help" || line == "/?") {
      print_chat_help();
      continue;
    }
    if (line.starts_with("//")) {
      line.erase(0, 1);
    } else if (line.starts_with('/')) {
      std::string known;
      for (const ChatCommand& cmd : kChatCommands) known += fmt::format("{}{}", known.empty() ? "" : ", ", cmd.name);
      const std::string word = line.substr(0, line.find_first_of(" \t"));
      fmt::print(stderr, "wgrt: unknown command '{}' (not sent to the model); the commands are {} (hint: start the "
                         "line with '//' to send text that begins with '/')\n", word, known);
      continue;
    }
    if (line.empty()) continue;
    llm::TurnStats st;
    try {
      st = llm::chat_turn(c, line, [](std::string_view text) {
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
      }, &g_interrupt);
    } catch (const std::invalid_argument& e) {  // this message alone passes the context: say so, keep chatting
      fmt::print(stderr, "wgrt: {}\n", e.what());
      continue;
    }
    std::fputs("\n", stdout);
    std::fflush(stdout);
    if (st.dropped_messages)
      fmt::print(stderr, "wgrt: context shift: the {} oldest messages ({} tokens) left the conversation to fit the "
                         "context of {} (the system message stays)\n", st.dropped_messages, st.dropped_tokens, s.mg.n_ctx);
    if (st.shifted_tokens)
      fmt::print(stderr, "wgrt: context shift: the reply filled the context; {} older tokens were discarded and the "
                         "rest evaluated again\n", st.shifted_tokens);
    fmt::print(stderr, "wgrt: turn of {} tokens: {} reused from the cache, {} prefilled in {:.3f} s; {} generated "
                       "in {:.3f} s ({:.1f} tok/s); stopped by {}\n",
               st.n_prompt, st.n_reused, st.n_prefilled, st.prefill_seconds, st.n_generated, st.generate_seconds,
               st.n_generated / std::max(st.generate_seconds, 1e-9), st.stop_reason);
  }
  sigaction(SIGINT, &old, nullptr);
  if (tty) std::fputs("\n", stdout);
  return 0;
}

}  // namespace

Run add_chat(CLI::App& app, gpu::DeviceOptions& dev_opts) {
  auto* cmd = app.add_subcommand("chat", "an interactive chat with a model, through its chat template");
  auto f = std::make_shared<ChatFlags>();
  add_model_flags(*cmd, f->model);
  cmd->add_option("--chat-template", f->chat_template, "a Jinja template file (or a tokenizer_config.json) to use "
                                                       "instead of the model's");
  cmd->add_option("--system", f->system, "a system message that opens the conversation")
      ->each([f](const std::string&) { f->has_system = true; });
  cmd->add_option("-n,--n-predict", f->n_predict, "tokens per reply at most (-1: until EOS or the context is full)")
      ->check(integer_in(-1, 1 << 20));
  add_sampling_flags(*cmd, f->sampling);
  cmd->add_option("--stop", f->stop, "end a reply before this text (repeatable)")->default_str("");
  cmd->add_option("--enable-thinking", f->enable_thinking, "set enable_thinking for templates that read it")
      ->check(CLI::IsMember({"true", "false"}));
  add_device_flags(*cmd, dev_opts);
  return [&dev_opts, f] { return run_chat(dev_opts, *f); };
}

}  // namespace wgrt::cli
