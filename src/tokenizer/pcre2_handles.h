// PCRE2 (8-bit code units) with owning handles for compiled patterns and match data, shared
// by the pre-tokenizer and the normalizers' regex Replace.
#pragma once

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

#include <memory>

namespace wgrt::tokenizer {

struct CodeDeleter {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};
struct MatchDataDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};
using Pcre2Code = std::unique_ptr<pcre2_code, CodeDeleter>;
using Pcre2MatchData = std::unique_ptr<pcre2_match_data, MatchDataDeleter>;

}  // namespace wgrt::tokenizer
