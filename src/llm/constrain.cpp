#include "llm/constrain.h"

#include "grammar/token_index.h"

namespace wgrt::llm {

void constrain(Session& s, Sampler& sampler) {
  if (!sampler.params.grammar) return;
  if (!s.token_index) s.token_index = std::make_shared<const grammar::TokenIndex>(grammar::build_token_index(s.tok));
  sampler.constraint = std::make_shared<grammar::Constraint>(
      grammar::Constraint{grammar::make_matcher(sampler.params.grammar), s.token_index});
}

}  // namespace wgrt::llm
