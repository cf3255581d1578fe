// Shared by build() and update(): the staged propagation and the commit.
#pragma once

#include "graph/graph.h"

namespace wgrt::graph {

// g.staged holds the new input shapes and symbol values (every other entry as in g.live).
// Runs infer and plan for every node into g.staged, validates it, then commits: uniform
// blocks that changed are written and g.live takes the staged state. Throws before the
// commit on any failure, leaving g.live and the GPU buffers untouched.
void propagate_and_commit(Graph& g);

// Whether any route of the node binds its uniform block (it then gets a uniform buffer).
bool node_uses_params(const Node& node);

}  // namespace wgrt::graph
