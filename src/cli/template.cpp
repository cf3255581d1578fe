// `wgrt template`: print the prompt a chat template renders for a conversation, exactly, for
// users debugging templates. Needs no GPU.
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "chat/chat_template.h"
#include "cli/commands.h"

namespace wgrt::cli {
namespace {

struct TemplateFlags {
  std::string model;
  std::string chat_template;
  std::string messages;
  std::string tools;
  bool no_generation_prompt = false;
  std::string enable_thinking;  // "", "true", "false"
};

int run_template(const TemplateFlags& f) {
  if (f.model.empty() && f.chat_template.empty()) {
    fmt::print(stderr, "wgrt: template: no template to render (hint: give -m MODEL or --chat-template FILE)\n");
    return 2;
  }
  chat::ChatInputs in;
  if (!f.tools.empty()) {
    in.tools = chat::read_json_file(f.tools, "tools file");
    if (!in.tools.is_array())
      throw std::invalid_argument(fmt::format("{}: tools must be a JSON list of tool definitions", f.tools));
  }
  const bool want_tools = !in.tools.is_null() && !in.tools.empty();
  // --chat-template wins; the model then still gives the BOS/EOS texts it lacks.
  chat::ChatTemplateSource src = f.chat_template.empty() ? chat::find_chat_template(f.model, want_tools)
                                                         : chat::template_from_file(f.chat_template, want_tools);
  if (!f.chat_template.empty() && !f.model.empty()) chat::model_special_texts(f.model, src);
  nlohmann::ordered_json messages = chat::read_json_file(f.messages, "messages file");
  if (messages.is_object() && messages.contains("messages")) messages = messages["messages"];  // a request body
  try {
    in.messages = chat::normalize_messages(messages);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("{}: {}", f.messages, e.what()));
  }
  in.add_generation_prompt = !f.no_generation_prompt;
  if (!f.enable_thinking.empty()) in.enable_thinking = f.enable_thinking == "true";
  in.bos_token = src.bos_token;
  in.eos_token = src.eos_token;
  chat::Template t = chat::parse_template(src.text, src.origin);
  std::string prompt = chat::render_chat(t, in);
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace

Run add_template(CLI::App& app) {
  auto* cmd = app.add_subcommand("template", "print the prompt a chat template renders for a conversation");
  auto f = std::make_shared<TemplateFlags>();
  cmd->add_option("-m,--model", f->model, "a .gguf file or a Hugging Face directory: its template and BOS/EOS texts");
  cmd->add_option("--chat-template", f->chat_template, "a Jinja template file (or a tokenizer_config.json) to use instead");
  cmd->add_option("--messages", f->messages, "the conversation: a JSON list of OpenAI messages")->required();
  cmd->add_option("--tools", f->tools, "a JSON list of OpenAI tool definitions");
  cmd->add_flag("--no-generation-prompt", f->no_generation_prompt, "do not open the assistant's turn at the end");
  cmd->add_option("--enable-thinking", f->enable_thinking, "set enable_thinking for templates that read it")
      ->check(CLI::IsMember({"true", "false"}));
  return [f] { return run_template(*f); };
}

}  // namespace wgrt::cli
