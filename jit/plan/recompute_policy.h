// Recompute or store: fusion inlines an elementwise value into every kernel that reads it, which is free when
// the value is cheap to rebuild from few buffers, and costly when it sits at the end of a long chain (the
// gradient flowing through a residual network is rebuilt from every block's saved tensors). Once fusion has
// settled, this pass picks the shared values whose recomputation reads more memory than storing them would.
#pragma once
#include <unordered_set>
#include <vector>

#include "core/node.h"

namespace metajit {

// `roots`: the root of every fused group; `materialized`: the nodes that are already their own kernels' outputs.
// Returns the values to materialise as well, producers first (may be empty).
std::vector<Node*> shared_values_to_store(const std::vector<NodePtr>& roots,
                                          const std::unordered_set<Node*>& materialized);

}  // namespace metajit
