// Pre-tokenization with PCRE2 (UTF mode, Unicode properties; invalid UTF-8 never matches and
// stays as its own piece). Each regex splits every current piece into its matches and the gaps
// between them (HF `Split` with behavior "Isolated"; llama.cpp's unicode_regex_split).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace wgrt::tokenizer {

struct PreTokenizer;

// Compiles the regexes; throws TokenizerError naming the pattern and the PCRE2 message.
std::shared_ptr<const PreTokenizer> compile_pre_tokenizer(const std::vector<std::string>& regexes,
                                                          const std::string& where);
// Splits `text` into pieces (views into `text`), in order, covering it exactly.
std::vector<std::string_view> pre_tokenize(const PreTokenizer& p, std::string_view text);

// The GPT-2 byte↔unicode table: byte b is spelled as the code point byte_to_codepoint(b).
uint32_t byte_to_codepoint(uint8_t b);
// Inverse; -1 when cp is not in the table.
int codepoint_to_byte(uint32_t cp);
void append_utf8(std::string& out, uint32_t cp);

}  // namespace wgrt::tokenizer
