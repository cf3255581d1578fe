#include "tokenizer/vocab.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "model/gguf.h"

namespace wgrt::tokenizer {

namespace {

using nlohmann::json;

// The pre-tokenizer regexes are facts of the formats (GPT-2's encoder.py, tiktoken's cl100k-style
// patterns as published in each model's tokenizer.json). The case-insensitive contraction group
// is spelled with explicit classes so that Unicode case folding (ſ, K) cannot widen it.
constexpr const char* kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3Regex =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen 3.5: combining marks (\p{M}) stay with the letters they follow.
constexpr const char* kQwen35Regex =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Regex =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

bool is_llama3_family(const std::string& pre) {
  return pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3" || pre == "smaug-bpe" ||
         pre == "dbrx" || pre == "falcon3" || pre == "pixtral";
}

[[noreturn]] void fail(const std::string& where, const std::string& what, const std::string& hint) {
  throw TokenizerError(fmt::format("{}: {} (hint: {})", where, what, hint));
}

int32_t find_text(const std::vector<std::string>& tokens, const std::string& text) {
  for (size_t i = tokens.size(); i-- > 0;) {  // added tokens sit at the end
    if (tokens[i] == text) return static_cast<int32_t>(i);
  }
  return -1;
}

// llama.cpp's convention when a file names no end-of-turn token: a well-known turn marker.
void guess_eot(Vocab& v) {
  if (v.eot_id >= 0) return;
  for (const char* t : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|end_of_turn|>",
                        "<EOT>", "<|endoftext|>"}) {
    int32_t id = find_text(v.tokens, t);
    if (id >= 0 && (v.types[id] == TokenType::Control || v.types[id] == TokenType::UserDefined)) {
      v.eot_id = id;
      return;
    }
  }
}

bool is_byte_token_text(const std::string& t) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return t.size() == 6 && t[0] == '<' && t[1] == '0' && t[2] == 'x' && hex(t[3]) && hex(t[4]) &&
         t[5] == '>';
}

}  // namespace

std::vector<std::string> pre_tokenizer_regexes(const std::string& pre, const std::string& where) {
  if (pre == "gpt-2" || pre == "gpt2" || pre == "default" || pre == "mpt" || pre == "olmo" ||
      pre == "jais" || pre == "trillion")
    return {kGpt2Regex};
  if (is_llama3_family(pre)) return {kLlama3Regex};
  if (pre == "qwen2" || pre == "deepseek-r1-qwen" || pre == "stablelm2" || pre == "megrez" ||
      pre == "hunyuan")
    return {kQwen2Regex};
  if (pre == "qwen35") return {kQwen35Regex};
  // Punctuation runs, then GPT-2's pattern, then digits in threes.
  if (pre == "falcon") return {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2Regex, "[0-9][0-9][0-9]"};
  // Digits split one by one, then GPT-2's pattern.
  if (pre == "starcoder" || pre == "refact" || pre == "command-r" || pre == "smollm" ||
      pre == "codeshell" || pre == "exaone" || pre == "minerva-7b")
    return {R"(\p{N})", kGpt2Regex};
  fail(where, fmt::format("tokenizer.ggml.pre '{}' names a pre-tokenizer wgrt does not know", pre),
       "wgrt knows gpt-2 (mpt, olmo), llama-bpe (llama3, dbrx, smaug-bpe, falcon3), qwen2 "
       "(deepseek-r1-qwen, stablelm2), qwen35, falcon and starcoder (refact, command-r, smollm); "
       "load the model's tokenizer.json instead, which carries its regex");
}

// ---- GGUF ---------------------------------------------------------------------------------

Vocab vocab_from_gguf(const model::GgufFile& f) {
  Vocab v;
  v.source = f.path;
  const std::string model = f.get_string("tokenizer.ggml.model");
  if (model == "llama") {
    v.kind = ModelKind::Spm;
  } else if (model == "gpt2") {
    v.kind = ModelKind::Bpe;
  } else {
    fail(f.path, fmt::format("tokenizer.ggml.model '{}' is not supported", model),
         "wgrt supports 'llama' (SentencePiece-style BPE) and 'gpt2' (byte-level BPE)");
  }

  const model::GgufArray& tokens = f.get_array("tokenizer.ggml.tokens");
  if (tokens.type != model::GgufType::String)
    fail(f.path, fmt::format("tokenizer.ggml.tokens is an array of {}, expected strings",
                             model::gguf_type_name(tokens.type)),
         "the file's vocabulary is malformed; re-convert the model");
  if (tokens.strings.empty())
    fail(f.path, "tokenizer.ggml.tokens is empty", "the file carries no vocabulary");
  v.tokens = tokens.strings;
  const size_t n = v.tokens.size();

  v.types.assign(n, TokenType::Normal);
  if (f.find("tokenizer.ggml.token_type")) {
    const model::GgufArray& types = f.get_array("tokenizer.ggml.token_type");
    if (types.ints.size() != n)
      fail(f.path, fmt::format("tokenizer.ggml.token_type has {} entries, tokenizer.ggml.tokens {}",
                               types.size(), n),
           "the two arrays must have one entry per token");
    for (size_t i = 0; i < n; ++i) {
      int64_t t = types.ints[i];
      if (t < 0 || t > 6)
        fail(f.path, fmt::format("tokenizer.ggml.token_type[{}] = {} is not a token type", i, t),
             "types are 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte");
      v.types[i] = static_cast<TokenType>(t);
    }
  }

  if (v.kind == ModelKind::Spm) {
    const model::GgufArray& scores = f.get_array("tokenizer.ggml.scores");
    if (scores.floats.size() != n)
      fail(f.path, fmt::format("tokenizer.ggml.scores has {} entries, tokenizer.ggml.tokens {}",
                               scores.size(), n),
           "a SentencePiece vocab needs one score per token");
    v.scores.assign(scores.floats.begin(), scores.floats.end());
    v.pre = f.opt_string("tokenizer.ggml.pre").value_or("default");
    v.byte_fallback = true;
    v.add_space_prefix = true;
    v.add_bos = true;
  } else {
    const model::GgufArray& merges = f.get_array("tokenizer.ggml.merges");
    if (merges.type != model::GgufType::String)
      fail(f.path, "tokenizer.ggml.merges is not an array of strings",
           "merges are \"left right\" strings");
    v.merges.reserve(merges.strings.size());
    for (size_t i = 0; i < merges.strings.size(); ++i) {
      const std::string& m = merges.strings[i];
      size_t sp = m.find(' ', 1);
      if (sp == std::string::npos || sp + 1 >= m.size())
        fail(f.path, fmt::format("tokenizer.ggml.merges[{}] = '{}' is not \"left right\"", i, m),
             "each merge is two tokens separated by one space");
      v.merges.emplace_back(m.substr(0, sp), m.substr(sp + 1));
    }
    v.pre = f.opt_string("tokenizer.ggml.pre").value_or("default");
    v.pre_regexes = pre_tokenizer_regexes(v.pre, f.path);
    v.ignore_merges = is_llama3_family(v.pre);
    v.add_bos = is_llama3_family(v.pre);
  }

  auto id_key = [&](const char* key, int32_t& out) {
    std::optional<uint64_t> id = f.opt_uint(key);
    if (!id) return;
    if (*id >= n)
      fail(f.path, fmt::format("{} = {} is out of range for a {}-token vocabulary", key, *id, n),
           "the file's special token ids do not match its vocabulary");
    out = static_cast<int32_t>(*id);
  };
  id_key("tokenizer.ggml.bos_token_id", v.bos_id);
  id_key("tokenizer.ggml.eos_token_id", v.eos_id);
  id_key("tokenizer.ggml.eot_token_id", v.eot_id);
  id_key("tokenizer.ggml.unknown_token_id", v.unk_id);
  id_key("tokenizer.ggml.padding_token_id", v.pad_id);
  if (v.kind == ModelKind::Spm) {  // SentencePiece's own defaults
    if (v.unk_id < 0) v.unk_id = find_text(v.tokens, "<unk>");
    if (v.bos_id < 0) v.bos_id = find_text(v.tokens, "<s>");
    if (v.eos_id < 0) v.eos_id = find_text(v.tokens, "</s>");
  }

  auto bool_key = [&](const char* key, bool& out) {
    if (f.find(key)) out = f.get_bool(key);
  };
  bool_key("tokenizer.ggml.add_bos_token", v.add_bos);
  bool_key("tokenizer.ggml.add_eos_token", v.add_eos);
  bool_key("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  guess_eot(v);
  return v;
}

// ---- tokenizer.json -----------------------------------------------------------------------

namespace {

struct JsonCtx {
  std::string name;
  [[noreturn]] void bad(const std::string& at, const std::string& what, const std::string& hint) const {
    fail(fmt::format("{}: {}", name, at), what, hint);
  }
  const json& member(const json& obj, const char* key, const std::string& at) const {
    if (!obj.is_object()) bad(at, "is not a JSON object", "is this a Hugging Face tokenizer.json?");
    auto it = obj.find(key);
    if (it == obj.end())
      bad(at, fmt::format("has no \"{}\"", key), "is this a Hugging Face tokenizer.json?");
    return *it;
  }
  std::string str(const json& obj, const char* key, const std::string& at) const {
    const json& j = member(obj, key, at);
    if (!j.is_string()) bad(fmt::format("{}.{}", at, key), "is not a string", "expected a string");
    return j.get<std::string>();
  }
  // An optional string member: `dflt` when absent or null.
  std::string opt_str(const json& obj, const char* key, const std::string& at, const std::string& dflt) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return dflt;
    if (!it->is_string()) bad(fmt::format("{}.{}", at, key), "is not a string", "expected a string");
    return it->get<std::string>();
  }
};

bool opt_bool(const json& obj, const char* key, bool dflt) {
  auto it = obj.find(key);
  return (it != obj.end() && it->is_boolean()) ? it->get<bool>() : dflt;
}

std::string regex_literal(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

struct PreInfo {
  bool byte_level = false;
  bool metaspace = false;
};

constexpr const char* kSpmSpace = "\xE2\x96\x81";  // "▁" U+2581

// Split/Replace patterns: {"Regex": "..."} or {"String": "..."}; true for a regex.
bool read_pattern(const JsonCtx& c, const json& obj, const std::string& at, std::string& out) {
  const json& pat = c.member(obj, "pattern", at);
  if (pat.is_object() && pat.contains("Regex") && pat["Regex"].is_string()) {
    out = pat["Regex"].get<std::string>();
    return true;
  }
  if (pat.is_object() && pat.contains("String") && pat["String"].is_string()) {
    out = pat["String"].get<std::string>();
    return false;
  }
  c.bad(at + ".pattern", "is neither {\"Regex\": ...} nor {\"String\": ...}", "check the file");
}

void read_pre_tokenizer(const JsonCtx& c, const json& p, const std::string& at, Vocab& v, PreInfo& info) {
  if (p.is_null()) return;
  const std::string type = c.str(p, "type", at);
  if (type == "Sequence") {
    const json& list = c.member(p, "pretokenizers", at);
    if (!list.is_array()) c.bad(at + ".pretokenizers", "is not an array", "expected a list");
    for (size_t i = 0; i < list.size(); ++i)
      read_pre_tokenizer(c, list[i], fmt::format("{}.pretokenizers[{}]", at, i), v, info);
  } else if (type == "Split") {
    std::string re;
    if (!read_pattern(c, p, at, re)) re = regex_literal(re);
    const std::string behavior = c.opt_str(p, "behavior", at, "Isolated");
    if (behavior != "Isolated" || opt_bool(p, "invert", false))
      c.bad(at, fmt::format("Split behavior '{}'{} is not supported", behavior,
                            opt_bool(p, "invert", false) ? " (inverted)" : ""),
            "wgrt supports Split with behavior Isolated, invert false");
    v.pre_regexes.push_back(re);
  } else if (type == "ByteLevel") {
    info.byte_level = true;
    if (opt_bool(p, "add_prefix_space", false)) v.add_space_prefix = true;
    if (opt_bool(p, "use_regex", true)) v.pre_regexes.push_back(kGpt2Regex);
  } else if (type == "Metaspace") {
    info.metaspace = true;
    if (c.opt_str(p, "replacement", at, kSpmSpace) != "\xE2\x96\x81")
      c.bad(at + ".replacement", "is not \"▁\" (U+2581)", "wgrt's SentencePiece mode uses U+2581");
    const std::string scheme = c.opt_str(p, "prepend_scheme", at, "");
    v.add_space_prefix = scheme.empty() ? opt_bool(p, "add_prefix_space", true) : scheme != "never";
  } else if (type == "Digits") {
    v.pre_regexes.push_back(opt_bool(p, "individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)");
  } else {
    c.bad(at, fmt::format("pre-tokenizer type '{}' is not supported", type),
          "wgrt supports Sequence, Split, ByteLevel, Metaspace and Digits");
  }
}

void read_normalizer(const JsonCtx& c, const json& n, const std::string& at, Vocab& v, PreInfo& info) {
  if (n.is_null()) return;
  const std::string type = c.str(n, "type", at);
  NormStep step;
  if (type == "Sequence") {
    const json& list = c.member(n, "normalizers", at);
    if (!list.is_array()) c.bad(at + ".normalizers", "is not an array", "expected a list");
    for (size_t i = 0; i < list.size(); ++i)
      read_normalizer(c, list[i], fmt::format("{}.normalizers[{}]", at, i), v, info);
    return;
  } else if (type == "NFC") {
    step.kind = NormKind::Nfc;
  } else if (type == "NFD") {
    step.kind = NormKind::Nfd;
  } else if (type == "NFKC") {
    step.kind = NormKind::Nfkc;
  } else if (type == "NFKD") {
    step.kind = NormKind::Nfkd;
  } else if (type == "Lowercase") {
    step.kind = NormKind::Lowercase;
  } else if (type == "Strip") {
    step.kind = NormKind::Strip;
    step.strip_left = opt_bool(n, "strip_left", true);
    step.strip_right = opt_bool(n, "strip_right", true);
  } else if (type == "StripAccents") {
    step.kind = NormKind::StripAccents;
  } else if (type == "Replace") {
    step.kind = NormKind::Replace;
    step.regex = read_pattern(c, n, at, step.pattern);
    step.content = c.str(n, "content", at);
    if (step.content == kSpmSpace) info.metaspace = true;  // " " → "▁": SentencePiece-style
  } else if (type == "Prepend") {
    step.kind = NormKind::Prepend;
    step.content = c.str(n, "prepend", at);
    if (step.content == kSpmSpace) info.metaspace = true;
  } else {
    c.bad(at, fmt::format("normalizer type '{}' is not supported", type),
          "wgrt supports NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Replace, Prepend "
          "and Sequence");
  }
  v.normalizers.push_back(std::move(step));
}

// SentencePiece mode does two normalizer steps itself: the dummy "▁" prefix (add_space_prefix,
// which detokenize drops again) and spaces spelled "▁". Those steps leave the list.
void fold_spm_normalizers(Vocab& v) {
  std::vector<NormStep> rest;
  for (NormStep& s : v.normalizers) {
    if (s.kind == NormKind::Prepend && s.content == kSpmSpace) {
      v.add_space_prefix = true;
    } else if (!(s.kind == NormKind::Replace && !s.regex && s.pattern == " " && s.content == kSpmSpace)) {
      rest.push_back(std::move(s));
    }
  }
  v.normalizers = std::move(rest);
}

void read_post_processor(const JsonCtx& c, const json& p, const std::string& at, Vocab& v) {
  if (p.is_null()) return;
  const std::string type = c.str(p, "type", at);
  if (type == "Sequence") {
    const json& list = c.member(p, "processors", at);
    if (!list.is_array()) c.bad(at + ".processors", "is not an array", "expected a list");
    for (size_t i = 0; i < list.size(); ++i)
      read_post_processor(c, list[i], fmt::format("{}.processors[{}]", at, i), v);
    return;
  }
  if (type != "TemplateProcessing") return;  // ByteLevel, ...: no tokens added
  const json& single = c.member(p, "single", at);
  const json& specials = c.member(p, "special_tokens", at);
  if (!single.is_array()) c.bad(at + ".single", "is not an array", "expected the template items");
  bool seen_sequence = false;
  for (size_t i = 0; i < single.size(); ++i) {
    const std::string item_at = fmt::format("{}.single[{}]", at, i);
    const json& item = single[i];
    if (item.is_object() && item.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    const json& st = c.member(item, "SpecialToken", item_at);
    const std::string name = c.str(st, "id", item_at + ".SpecialToken");
    auto it = specials.find(name);
    if (it == specials.end())
      c.bad(item_at, fmt::format("special token '{}' is not in special_tokens", name),
            "the template names a token it does not define");
    const json& ids = c.member(*it, "ids", fmt::format("{}.special_tokens.{}", at, name));
    if (!ids.is_array() || ids.size() != 1 || !ids[0].is_number_integer())
      c.bad(fmt::format("{}.special_tokens.{}.ids", at, name), "is not a single integer id",
            "wgrt supports one id per template token");
    int64_t id = ids[0].get<int64_t>();
    if (id < 0 || id >= v.n_vocab())
      c.bad(fmt::format("{}.special_tokens.{}.ids", at, name),
            fmt::format("id {} is out of range for a {}-token vocabulary", id, v.n_vocab()),
            "the template and the vocabulary disagree");
    if (!seen_sequence) {
      v.bos_id = static_cast<int32_t>(id);
      v.add_bos = true;
    } else {
      v.eos_id = static_cast<int32_t>(id);
      v.add_eos = true;
    }
  }
}

// bos_token / eos_token in tokenizer_config.json: a string, {"content": ...}, or null.
std::optional<std::string> config_token(const json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  return std::nullopt;
}

json parse_json(const std::string& text, const std::string& name) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    fail(name, fmt::format("is not valid JSON at byte {}: {}", e.byte, e.what()),
         "the file is truncated or not a tokenizer.json");
  } catch (const json::exception& e) {  // e.g. a number past double's range
    fail(name, fmt::format("is not usable JSON: {}", e.what()), "the file is corrupt");
  }
}

}  // namespace

Vocab vocab_from_tokenizer_json_text(const std::string& json_text, const std::string& config_text,
                                     const std::string& name) {
  const JsonCtx c{name};
  const json j = parse_json(json_text, name);
  if (!j.is_object()) c.bad("top level", "is not a JSON object", "is this a tokenizer.json?");
  Vocab v;
  v.source = name;
  v.pre = "tokenizer.json";

  const json& model = c.member(j, "model", "top level");
  const std::string type = c.str(model, "type", "model");
  if (type != "BPE")
    c.bad("model.type", fmt::format("'{}' is not supported", type),
          "wgrt supports BPE models (byte-level or SentencePiece-style with byte fallback)");
  const json& vocab = c.member(model, "vocab", "model");
  if (!vocab.is_object()) c.bad("model.vocab", "is not an object", "expected {token: id}");

  // Ids: the model vocab plus added_tokens; the vocabulary spans 0..max id.
  constexpr int64_t kMaxId = 1 << 24;
  int64_t max_id = -1;
  for (const auto& [text, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxId)
      c.bad(fmt::format("model.vocab[\"{}\"]", text), fmt::format("id {} is not in [0, {})", id.dump(), kMaxId),
            "ids must be non-negative integers");
    max_id = std::max(max_id, id.get<int64_t>());
  }
  const json empty_array = json::array();
  const json& added = j.contains("added_tokens") ? j["added_tokens"] : empty_array;
  if (!added.is_array()) c.bad("added_tokens", "is not an array", "expected a list of tokens");
  for (size_t i = 0; i < added.size(); ++i) {
    const json& id = c.member(added[i], "id", fmt::format("added_tokens[{}]", i));
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxId)
      c.bad(fmt::format("added_tokens[{}].id", i), fmt::format("{} is not in [0, {})", id.dump(), kMaxId),
            "ids must be non-negative integers");
    max_id = std::max(max_id, id.get<int64_t>());
  }
  if (max_id < 0) c.bad("model.vocab", "is empty", "the file carries no vocabulary");
  const size_t n = static_cast<size_t>(max_id + 1);
  v.tokens.assign(n, std::string());
  v.types.assign(n, TokenType::Unused);  // ids nobody names stay unused
  std::vector<bool> seen(n, false);
  for (const auto& [text, id] : vocab.items()) {
    size_t i = id.get<size_t>();
    if (seen[i])
      c.bad(fmt::format("model.vocab[\"{}\"]", text),
            fmt::format("id {} is also used by \"{}\"", i, v.tokens[i]), "ids must be unique");
    seen[i] = true;
    v.tokens[i] = text;
    v.types[i] = TokenType::Normal;
  }
  for (size_t k = 0; k < added.size(); ++k) {
    const std::string at = fmt::format("added_tokens[{}]", k);
    size_t i = added[k]["id"].get<size_t>();
    v.tokens[i] = c.str(added[k], "content", at);
    const bool special = opt_bool(added[k], "special", false);
    v.types[i] = special ? TokenType::Control : TokenType::UserDefined;
    if (opt_bool(added[k], "normalized", !special)) v.normalized_added.push_back(static_cast<int32_t>(i));
  }

  const json& merges = model.contains("merges") ? model["merges"] : empty_array;
  if (!merges.is_array()) c.bad("model.merges", "is not an array", "expected [\"a b\"] or [[\"a\", \"b\"]]");
  v.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      size_t sp = s.find(' ', 1);
      if (sp == std::string::npos || sp + 1 >= s.size())
        c.bad(fmt::format("model.merges[{}]", i), fmt::format("'{}' is not \"left right\"", s),
              "each merge is two tokens separated by one space");
      v.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      v.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      c.bad(fmt::format("model.merges[{}]", i), fmt::format("{} is not a merge", m.dump()),
            "expected \"a b\" or [\"a\", \"b\"]");
    }
  }
  v.byte_fallback = opt_bool(model, "byte_fallback", false);
  v.ignore_merges = opt_bool(model, "ignore_merges", false);
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    v.unk_id = find_text(v.tokens, model["unk_token"].get<std::string>());
    if (v.unk_id < 0)
      c.bad("model.unk_token", fmt::format("'{}' is not in the vocabulary", model["unk_token"].get<std::string>()),
            "the unknown token must be a vocabulary entry");
    v.types[v.unk_id] = TokenType::Unknown;
  }

  PreInfo info;
  if (j.contains("normalizer")) read_normalizer(c, j["normalizer"], "normalizer", v, info);
  if (j.contains("pre_tokenizer")) read_pre_tokenizer(c, j["pre_tokenizer"], "pre_tokenizer", v, info);
  if (info.byte_level) {
    v.kind = ModelKind::Bpe;
  } else if (info.metaspace || v.byte_fallback) {
    v.kind = ModelKind::Spm;
    v.pre_regexes.clear();  // SentencePiece merges across the whole fragment
    fold_spm_normalizers(v);
    if (v.byte_fallback)
      for (size_t i = 0; i < n; ++i)
        if (v.types[i] == TokenType::Normal && is_byte_token_text(v.tokens[i])) v.types[i] = TokenType::Byte;
  } else {
    c.bad("pre_tokenizer", "names neither ByteLevel nor Metaspace, and the model has no byte fallback",
          "wgrt supports byte-level BPE and SentencePiece-style BPE tokenizers");
  }
  if (j.contains("post_processor")) read_post_processor(c, j["post_processor"], "post_processor", v);

  if (!config_text.empty()) {
    const std::string cname = name + " (tokenizer_config.json)";
    const json cfg = parse_json(config_text, cname);
    if (cfg.is_object()) {
      auto named = [&](const char* key, int32_t& out) {
        if (auto t = config_token(cfg, key)) {
          int32_t id = find_text(v.tokens, *t);
          if (id < 0)
            fail(cname, fmt::format("{} '{}' is not in the vocabulary", key, *t),
                 "tokenizer_config.json and tokenizer.json disagree");
          out = id;
        }
      };
      named("bos_token", v.bos_id);
      named("eos_token", v.eos_id);
      named("pad_token", v.pad_id);
      v.add_bos = opt_bool(cfg, "add_bos_token", v.add_bos);
      v.add_eos = opt_bool(cfg, "add_eos_token", v.add_eos);
    }
  }
  if (v.add_bos && v.bos_id < 0)
    c.bad("post_processor", "asks for a BOS token but none is known", "set bos_token in tokenizer_config.json");
  guess_eot(v);
  return v;
}

Vocab vocab_from_tokenizer_json(const std::string& path) {
  auto slurp = [](const std::filesystem::path& p, std::string& out) {
    std::ifstream in(p, std::ios::binary);
    if (!in) return false;
    std::ostringstream ss;
    ss << in.rdbuf();
    out = ss.str();
    return true;
  };
  std::string text, config;
  if (!slurp(path, text))
    fail(path, "cannot be read", "check the path to tokenizer.json");
  slurp(std::filesystem::path(path).parent_path() / "tokenizer_config.json", config);
  return vocab_from_tokenizer_json_text(text, config, path);
}

}  // namespace wgrt::tokenizer
