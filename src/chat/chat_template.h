// Chat prompts: where a model's chat template comes from, and rendering a conversation
// (OpenAI-style messages) with it.
//   GGUF: metadata `tokenizer.chat_template`; BOS/EOS texts from tokenizer.ggml.tokens at
//         tokenizer.ggml.bos_token_id / eos_token_id.
//   Hugging Face directory: chat_template.jinja when present, else tokenizer_config.json
//         `chat_template` (a string, or a list of {name, template}: "default", or "tool_use"
//         when tools are given); `bos_token` and `eos_token` (strings or {"content": ...}) from
//         tokenizer_config.json.
//   --chat-template FILE: the file's text (a tokenizer_config.json is read as above).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "chat/jinja.h"
#include "model/gguf.h"

namespace wgrt::chat {

struct ChatTemplateSource {
  std::string text;
  std::string origin;  // for messages: "model.gguf: tokenizer.chat_template"
  std::optional<std::string> bos_token, eos_token;
};

// From a .gguf file or a Hugging Face directory. Throws std::runtime_error naming the file
// and a hint when the model has no template (`--chat-template` gives one).
ChatTemplateSource find_chat_template(const std::string& model_path, bool want_tools = false);
ChatTemplateSource template_from_gguf(const model::GgufFile& g);
ChatTemplateSource template_from_tokenizer_config(const std::string& path, bool want_tools = false);
// Fills src's unset BOS/EOS texts from the model (GGUF tokens, or tokenizer_config.json),
// whether or not the model has a template.
void model_special_texts(const std::string& model_path, ChatTemplateSource& src);
// A template file: Jinja text, or a tokenizer_config.json.
ChatTemplateSource template_from_file(const std::string& path, bool want_tools = false);

// Reads a JSON file (bounded); errors name the file, the line and column.
nlohmann::ordered_json read_json_file(const std::string& path, const char* what);

// Checks OpenAI messages (a list of objects with a string `role`) and returns them with each
// tool call's `arguments` as an object (a JSON string there is parsed). Errors name the
// message index.
nlohmann::ordered_json normalize_messages(const nlohmann::ordered_json& messages);

struct ChatInputs {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // normalized
  nlohmann::ordered_json tools;                                       // null: none
  bool add_generation_prompt = true;
  std::optional<bool> enable_thinking;  // unset: the template's default
  std::optional<std::string> bos_token, eos_token;
};

// The template's variables: messages, tools, add_generation_prompt, bos_token, eos_token,
// enable_thinking (only those that are set).
Value chat_context(const ChatInputs& in);
std::string render_chat(const Template& t, const ChatInputs& in, const RenderOptions& o = {});

}  // namespace wgrt::chat
