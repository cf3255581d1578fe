#include <algorithm>

#include "grammar/token_index.h"
#include "tokenizer/tokenizer.h"

namespace wgrt::grammar {

TokenIndex build_token_index(const tokenizer::Tokenizer& tok) {
  const tokenizer::Vocab& v = tok.vocab;
  std::vector<std::string> pieces(size_t(v.n_vocab()));
  for (int32_t i = 0; i < v.n_vocab(); ++i) {
    const auto t = v.types.empty() ? tokenizer::TokenType::Normal : v.types[size_t(i)];
    if (t == tokenizer::TokenType::Control || t == tokenizer::TokenType::Unknown || t == tokenizer::TokenType::Unused)
      continue;
    pieces[size_t(i)] = tokenizer::token_to_piece(tok, i, false);
  }
  std::vector<int32_t> ends;
  for (int32_t id : {v.eos_id, v.eot_id})
    if (id >= 0 && id < v.n_vocab() && std::find(ends.begin(), ends.end(), id) == ends.end()) ends.push_back(id);
  return build_token_index(std::move(pieces), std::move(ends));
}

}  // namespace wgrt::grammar
