// Kernels with several outputs. Planning gives every stored value a kernel of its own, so values computed from
// the same inputs each read them again and each pay a launch: an LSTM step stored its four gates, the cell,
// tanh of the cell and the hidden state in seven kernels of [N, H]; a momentum step stores the new velocity,
// then reads it back to update the weight. After planning, this pass joins elementwise kernels of one shape
// that read a common input, read each other's output at their own index, or are small, into one kernel that
// stores each value; a value they share is computed once, and one launch does the work of several.
#pragma once
#include <unordered_set>
#include <vector>

#include "jit/ir/lowering.h"
#include "jit/plan/contraction_matching.h"

namespace metajit {

// Rewrites the planned kernels (launch order; `matches` runs alongside) so that siblings share kernels. A joined
// kernel takes the launch position of its last member, so no kernel between its members may read an earlier
// member's output; its members' value at every index is what their own kernels computed.
// `consumers` as for lower_group: a joined kernel may not grow past the size planning cuts kernels at.
void join_sibling_kernels(std::vector<LoweredKernel>& lowered, std::vector<ContractionMatch>& matches,
                          const std::unordered_set<Node*>& materialized, const ConsumerCounts* consumers);

// METAJIT_MULTIPLE_OUTPUTS=0 / mj.flags.multiple_outputs = False keeps one kernel per stored value.
bool sibling_kernels_enabled();
void set_sibling_kernels_enabled(bool enabled);

}  // namespace metajit
