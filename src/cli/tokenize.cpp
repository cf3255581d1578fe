// `wgrt tokenize`: the token ids of a text, from a model's tokenizer or a tokenizer.json.
#include <fmt/format.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "llm/session.h"
#include "tokenizer/tokenizer.h"

namespace wgrt::cli {
namespace {

struct TokenizeFlags {
  std::string model;
  std::string tokenizer_json;
  bool no_bos = false;
  bool json = false;
  std::string text;
  std::string file;
};

int run_tokenize(const TokenizeFlags& f) {
  tokenizer::Tokenizer tok;
  if (!f.tokenizer_json.empty()) {
    tok = tokenizer::build_tokenizer(tokenizer::vocab_from_tokenizer_json(f.tokenizer_json));
  } else {
    model::ModelFile m = llm::open_model_or_default(f.model);
    tok = tokenizer::build_tokenizer(m.gguf ? tokenizer::vocab_from_gguf(*m.gguf)
                                            : tokenizer::vocab_from_tokenizer_json(m.tokenizer_json));
  }
  std::string text = f.text;
  if (!f.file.empty()) {  // as `wgrt perplexity` reads and tokenizes a file
    std::ifstream in(f.file, std::ios::binary);
    if (!in) throw std::runtime_error(fmt::format("{}: cannot open (hint: check the path given to -f)", f.file));
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  std::vector<int32_t> ids =
      tokenizer::tokenize(tok, text, /*add_special=*/!f.no_bos, /*parse_special=*/f.file.empty());
  if (f.json) {
    fmt::print("{}\n", nlohmann::json(ids).dump());
  } else {
    for (int32_t id : ids)
      fmt::print("{:>8} {}\n", id, nlohmann::json(tokenizer::token_to_piece(tok, id, true)).dump());
  }
  return 0;
}

}  // namespace

Run add_tokenize(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "print the token ids of a text");
  auto f = std::make_shared<TokenizeFlags>();
  auto* m = cmd->add_option("-m,--model", f->model, "a .gguf file or a Hugging Face model directory");
  auto* t = cmd->add_option("--tokenizer", f->tokenizer_json, "a tokenizer.json file");
  m->excludes(t);
  cmd->add_flag("--no-bos", f->no_bos, "do not add BOS/EOS tokens");
  cmd->add_flag("--json", f->json, "print a JSON array of ids");
  auto* text = cmd->add_option("text", f->text, "the text");
  auto* file = cmd->add_option("-f,--file", f->file, "tokenize this file instead, as `wgrt perplexity` does "
                                                     "(special-token text is not parsed)");
  text->excludes(file);
  cmd->callback([text, file] {
    if (text->count() + file->count() == 0) throw CLI::RequiredError("text or --file");
  });
  return [f] { return run_tokenize(*f); };
}

}  // namespace wgrt::cli
