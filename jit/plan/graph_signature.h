// Plans are cached by the structure of the pending graph. A training loop builds the same graph every step, so
// after the first step a sync only walks the graph once to compute its signature and replays the plan found
// under it (jit/plan/plan_cache.h) instead of planning again.
#pragma once
#include <string>
#include <vector>

#include "core/node.h"

namespace metajit {

// The pending graph behind some targets, as text that fixes everything planning looks at (kinds, dtypes,
// shapes, op payloads, constants, which inputs are computed, how nodes are shared, where they were created) and
// the nodes in the order the text numbers them.
struct GraphSignature {
  std::string text;
  std::vector<NodePtr> nodes;
  std::vector<int> targets;  // positions of the targets in `nodes`
};
GraphSignature graph_signature(const std::vector<NodePtr>& targets);

}  // namespace metajit
