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
// The position of `node` in signature.nodes, or -1 when it is not there. Found from the position the walk left
// on the node (checked against the list, and searched for when another walk has stamped the node since), so
// making a plan needs no map of every node to its position.
int signature_position(const GraphSignature& signature, const Node& node);

}  // namespace metajit
