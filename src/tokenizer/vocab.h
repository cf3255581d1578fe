// Tokenizer vocabularies, loaded from GGUF metadata or a Hugging Face tokenizer.json.
//
// GGUF keys read (llama.cpp's convention):
//   tokenizer.ggml.model        "llama" (SentencePiece-style BPE) | "gpt2" (byte-level BPE)
//   tokenizer.ggml.pre          pre-tokenizer name (byte-level BPE): "gpt-2", "llama-bpe", "qwen2", ...
//   tokenizer.ggml.tokens       [n_vocab] strings; SentencePiece marks spaces with "▁" (U+2581),
//                               byte-level BPE spells bytes through the GPT-2 byte↔unicode table
//   tokenizer.ggml.scores       [n_vocab] f32, SentencePiece merge priority (higher merges first)
//   tokenizer.ggml.token_type   [n_vocab] ints, TokenType below (optional: all NORMAL)
//   tokenizer.ggml.merges       [n_merges] "left right" strings, byte-level BPE, rank = index
//   tokenizer.ggml.{bos,eos,eot,unknown,padding}_token_id, tokenizer.ggml.add_{bos,eos}_token,
//   tokenizer.ggml.add_space_prefix (all optional)
//
// tokenizer.json (Hugging Face `tokenizers`): model {type "BPE", vocab {text: id}, merges
// ["a b"] or [["a","b"]], byte_fallback, ignore_merges, unk_token}, added_tokens [{id, content,
// special, normalized}], normalizer (normalize.h), pre_tokenizer, post_processor
// (TemplateProcessing gives BOS/EOS). A tokenizer_config.json next to it (optional) adds
// bos_token / eos_token / add_bos_token. A normalizer or pre-tokenizer type wgrt does not
// implement is an error naming it.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/normalize.h"

namespace wgrt::model {
struct GgufFile;
}

namespace wgrt::tokenizer {

// Untrusted input (files) that cannot be used: names what, where, and a hint.
struct TokenizerError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Values as stored in tokenizer.ggml.token_type.
enum class TokenType : uint8_t {
  Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6,
};

enum class ModelKind : uint8_t {
  Spm,  // SentencePiece-style: "▁" for spaces, dummy prefix, <0xXX> byte fallback
  Bpe,  // byte-level BPE: GPT-2 byte↔unicode table, pre-tokenizer regexes, ranked merges
};

struct Vocab {
  std::string source;  // file the vocab came from (for error messages)
  ModelKind kind = ModelKind::Spm;
  std::string pre;                       // pre-tokenizer name ("gpt-2", "llama-bpe", "tokenizer.json")
  std::vector<std::string> pre_regexes;  // applied in order; each splits every piece, keeping gaps
  std::vector<std::string> tokens;       // [n_vocab]
  std::vector<float> scores;             // [n_vocab] Spm without merges: merge priority
  std::vector<TokenType> types;          // [n_vocab]
  // Ranked merges (rank = index). Byte-level BPE always; Spm from tokenizer.json (HF BPE with
  // byte fallback). An Spm vocab without merges merges by scores.
  std::vector<std::pair<std::string, std::string>> merges;
  int32_t bos_id = -1, eos_id = -1, eot_id = -1, unk_id = -1, pad_id = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = false;  // Spm: the dummy "▁" prefix; Bpe: a leading " " (HF add_prefix_space)
  bool ignore_merges = false;     // Bpe: a pre-token that is a whole vocab entry skips merging (llama 3)
  bool byte_fallback = false;     // Spm: unknown characters become <0xXX> tokens
  std::vector<NormStep> normalizers;     // tokenizer.json: applied to text between added tokens
  std::vector<int32_t> normalized_added;  // added tokens matched after normalization ("normalized")

  int32_t n_vocab() const { return static_cast<int32_t>(tokens.size()); }
};

// Reads the tokenizer.ggml.* keys. Throws TokenizerError (or model::GgufError for a missing
// key) naming the key and a hint.
Vocab vocab_from_gguf(const model::GgufFile& f);
// Reads a Hugging Face tokenizer.json (and tokenizer_config.json beside it, if present).
Vocab vocab_from_tokenizer_json(const std::string& path);
// Parses tokenizer.json text; `config_text` may be empty. `name` is used in messages.
Vocab vocab_from_tokenizer_json_text(const std::string& json_text, const std::string& config_text,
                                     const std::string& name);

// The pre-tokenizer regexes for a GGUF tokenizer.ggml.pre name; throws TokenizerError naming
// an unknown name.
std::vector<std::string> pre_tokenizer_regexes(const std::string& pre, const std::string& where);

}  // namespace wgrt::tokenizer
