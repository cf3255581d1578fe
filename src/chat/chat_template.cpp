#include "chat/chat_template.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace wgrt::chat {

namespace {

namespace fs = std::filesystem;

// Chat templates and message files are small; anything bigger is not one.
constexpr uintmax_t kMaxFileBytes = uintmax_t(64) << 20;

std::string read_text_file(const std::string& path, const char* what) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    throw std::runtime_error(fmt::format("{}: no such file (hint: check the path of the {})", path, what));
  if (fs::file_size(path, ec) > kMaxFileBytes)
    throw std::runtime_error(fmt::format("{}: larger than 64 MiB, not a {}", path, what));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open (hint: check its permissions)", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A token entry of tokenizer_config.json: "text" or {"content": "text", ...}.
std::optional<std::string> token_text(const nlohmann::ordered_json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("content") && j["content"].is_string()) return j["content"].get<std::string>();
  return std::nullopt;
}

ChatTemplateSource from_config_json(const nlohmann::ordered_json& cfg, const std::string& path, bool want_tools) {
  ChatTemplateSource src;
  src.origin = path + ": chat_template";
  if (cfg.contains("bos_token")) src.bos_token = token_text(cfg["bos_token"]);
  if (cfg.contains("eos_token")) src.eos_token = token_text(cfg["eos_token"]);
  const auto it = cfg.find("chat_template");
  if (it == cfg.end() || it->is_null())
    throw std::runtime_error(fmt::format("{}: no chat_template (hint: give one with --chat-template FILE)", path));
  if (it->is_string()) {
    src.text = it->get<std::string>();
    return src;
  }
  if (!it->is_array())
    throw std::runtime_error(fmt::format("{}: chat_template is neither a string nor a list of named templates", path));
  const nlohmann::ordered_json* pick = nullptr;
  for (const auto& e : *it) {
    if (!e.is_object() || !e.contains("name") || !e.contains("template") || !e["template"].is_string())
      throw std::runtime_error(fmt::format("{}: a chat_template list entry needs a name and a template string", path));
    std::string name = e["name"].is_string() ? e["name"].get<std::string>() : "";
    if (want_tools && name == "tool_use") pick = &e;
    if (name == "default" && !(pick && want_tools)) pick = &e;
  }
  if (it->empty()) throw std::runtime_error(fmt::format("{}: chat_template is an empty list", path));
  if (!pick) pick = &(*it)[0];
  src.text = (*pick)["template"].get<std::string>();
  src.origin = fmt::format("{}: chat_template '{}'", path, (*pick)["name"].is_string() ? (*pick)["name"].get<std::string>() : "");
  return src;
}

}  // namespace

nlohmann::ordered_json read_json_file(const std::string& path, const char* what) {
  std::string text = read_text_file(path, what);
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // Byte offset → line and column, for the message.
    size_t at = std::min<size_t>(e.byte, text.size()), line = 1, col = 1;
    for (size_t i = 0; i + 1 < at; ++i) {
      if (text[i] == '\n') ++line, col = 1;
      else ++col;
    }
    throw std::runtime_error(fmt::format("{}:{}:{}: not valid JSON ({}) (hint: the {} must be JSON)", path, line, col,
                                         e.what(), what));
  } catch (const nlohmann::json::exception& e) {  // parses, but e.g. a number past double's range: 1e400
    throw std::runtime_error(fmt::format("{}: not usable JSON ({}) (hint: the {} must be plain JSON)", path, e.what(), what));
  }
}

namespace {

void gguf_special_texts(const model::GgufFile& g, ChatTemplateSource& src) {
  auto token = [&](const char* key) -> std::optional<std::string> {
    std::optional<uint64_t> id = g.opt_uint(key);
    const model::GgufValue* tokens = g.find("tokenizer.ggml.tokens");
    if (!id || !tokens || tokens->type != model::GgufType::Array) return std::nullopt;
    const auto& strings = std::get<model::GgufArray>(tokens->v).strings;
    if (*id >= strings.size()) return std::nullopt;
    return strings[*id];
  };
  src.bos_token = token("tokenizer.ggml.bos_token_id");
  src.eos_token = token("tokenizer.ggml.eos_token_id");
}

}  // namespace

ChatTemplateSource template_from_gguf(const model::GgufFile& g) {
  std::optional<std::string> text = g.opt_string("tokenizer.chat_template");
  if (!text)
    throw std::runtime_error(fmt::format("{}: no tokenizer.chat_template in the GGUF metadata (hint: give a template "
                                         "with --chat-template FILE)", g.path));
  ChatTemplateSource src;
  src.text = *text;
  src.origin = g.path + ": tokenizer.chat_template";
  gguf_special_texts(g, src);
  return src;
}

void model_special_texts(const std::string& model_path, ChatTemplateSource& src) {
  std::error_code ec;
  ChatTemplateSource found;
  if (fs::is_directory(model_path, ec)) {
    fs::path cfg = fs::path(model_path) / "tokenizer_config.json";
    if (!fs::exists(cfg, ec)) return;
    nlohmann::ordered_json j = read_json_file(cfg.string(), "tokenizer_config.json");
    if (j.is_object() && j.contains("bos_token")) found.bos_token = token_text(j["bos_token"]);
    if (j.is_object() && j.contains("eos_token")) found.eos_token = token_text(j["eos_token"]);
  } else {
    gguf_special_texts(model::open_gguf(model_path), found);
  }
  if (!src.bos_token) src.bos_token = found.bos_token;
  if (!src.eos_token) src.eos_token = found.eos_token;
}

ChatTemplateSource template_from_tokenizer_config(const std::string& path, bool want_tools) {
  nlohmann::ordered_json cfg = read_json_file(path, "tokenizer_config.json");
  if (!cfg.is_object()) throw std::runtime_error(fmt::format("{}: not a JSON object", path));
  return from_config_json(cfg, path, want_tools);
}

ChatTemplateSource template_from_file(const std::string& path, bool want_tools) {
  if (path.ends_with(".json")) return template_from_tokenizer_config(path, want_tools);
  ChatTemplateSource src;
  src.text = read_text_file(path, "chat template");
  src.origin = path;
  return src;
}

ChatTemplateSource find_chat_template(const std::string& model_path, bool want_tools) {
  std::error_code ec;
  if (fs::is_directory(model_path, ec)) {
    // Newer checkpoints keep the template in chat_template.jinja beside tokenizer_config.json.
    fs::path jinja = fs::path(model_path) / "chat_template.jinja";
    if (fs::exists(jinja, ec)) {
      ChatTemplateSource src = template_from_file(jinja.string());
      model_special_texts(model_path, src);
      return src;
    }
    fs::path cfg = fs::path(model_path) / "tokenizer_config.json";
    if (!fs::exists(cfg, ec))
      throw std::runtime_error(fmt::format("{}: no chat_template.jinja or tokenizer_config.json, so no chat template "
                                           "(hint: give one with --chat-template FILE)", model_path));
    return template_from_tokenizer_config(cfg.string(), want_tools);
  }
  if (!fs::exists(model_path, ec))
    throw std::runtime_error(fmt::format("{}: no such file (hint: -m takes a .gguf file or a Hugging Face model "
                                         "directory)", model_path));
  return template_from_gguf(model::open_gguf(model_path));
}

nlohmann::ordered_json normalize_messages(const nlohmann::ordered_json& messages) {
  if (!messages.is_array())
    throw std::invalid_argument("messages must be a JSON list of {\"role\": ..., \"content\": ...} objects");
  nlohmann::ordered_json out = messages;
  for (size_t i = 0; i < out.size(); ++i) {
    nlohmann::ordered_json& m = out[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      throw std::invalid_argument(fmt::format("message {}: needs a string \"role\" (system, user, assistant, tool)", i));
    if (!m.contains("tool_calls") || m["tool_calls"].is_null()) continue;
    if (!m["tool_calls"].is_array()) throw std::invalid_argument(fmt::format("message {}: tool_calls must be a list", i));
    for (size_t k = 0; k < m["tool_calls"].size(); ++k) {
      nlohmann::ordered_json& call = m["tool_calls"][k];
      if (!call.is_object()) throw std::invalid_argument(fmt::format("message {}: tool call {} is not an object", i, k));
      nlohmann::ordered_json* fn = call.contains("function") ? &call["function"] : &call;
      if (!fn->is_object() || !fn->contains("arguments") || !(*fn)["arguments"].is_string()) continue;
      const std::string args = (*fn)["arguments"].get<std::string>();
      try {
        (*fn)["arguments"] = nlohmann::ordered_json::parse(args);
      } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for 1e400
        throw std::invalid_argument(fmt::format("message {}: tool call {}: arguments are a string but not JSON ({})",
                                                i, k, e.what()));
      }
    }
  }
  return out;
}

Value chat_context(const ChatInputs& in) {
  Value ctx = make_object();
  set_key(ctx, "messages", from_json(in.messages));
  if (!in.tools.is_null()) set_key(ctx, "tools", from_json(in.tools));
  set_key(ctx, "add_generation_prompt", make_bool(in.add_generation_prompt));
  if (in.bos_token) set_key(ctx, "bos_token", make_string(*in.bos_token));
  if (in.eos_token) set_key(ctx, "eos_token", make_string(*in.eos_token));
  if (in.enable_thinking) set_key(ctx, "enable_thinking", make_bool(*in.enable_thinking));
  return ctx;
}

std::string render_chat(const Template& t, const ChatInputs& in, const RenderOptions& o) {
  return render(t, chat_context(in), o);
}

}  // namespace wgrt::chat
