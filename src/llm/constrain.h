// Constrained sampling's link to a model: a sampler whose params carry a grammar gets the
// session's token index (built once, on the first constrained request) and a fresh matcher.
#pragma once

#include "llm/sampler.h"
#include "llm/session.h"

namespace wgrt::llm {

// No-op without params.grammar. Call after make_sampler, before the first pick.
void constrain(Session& s, Sampler& sampler);

}  // namespace wgrt::llm
