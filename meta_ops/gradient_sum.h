// The sum of the gradient contributions one value receives in a backward pass (meta_ops/autodiff.cc calls it).
// Contributions that are the same contraction of different operands become one contraction: a weight used at
// every step of an unrolled recurrence gets sum over t of G_t^T H_t, which is built as one product of the stacked
// G_t and H_t summed over the steps and the batch together (one library call with K = steps * batch, instead of
// a call per step writing a weight-sized result and a kernel adding them all). The rest are added in order.
// This file only rewrites gradient sums; it never decides how a contraction runs (jit/ does).
#pragma once
#include <map>
#include <vector>

#include "core/node.h"

namespace metajit {

class GradientSum {
 public:
  // `terms` in the order they arrived, all of one shape and dtype; at least one.
  NodePtr total(const std::vector<NodePtr>& terms);

 private:
  // Stacked operands by the nodes stacked, kept for one backward pass: the incoming gradient of an LSTM's gates
  // is one operand of both weights' and both biases' gradients, and is stacked once for all four.
  std::map<std::vector<const Node*>, NodePtr> stacks_;

  NodePtr stacked(const std::vector<NodePtr>& pieces);
  NodePtr lift(const std::vector<NodePtr>& nodes, int depth);
  NodePtr stacked_contraction(const std::vector<NodePtr>& terms);  // null: not one contraction, or not worth it
};

// Equally shaped values joined along a new leading dim (mj.stack's structure: each piece placed by a shifted
// reindex, the placed pieces added, in nested groups of eight so a kernel renders a loop per piece).
NodePtr stack_values(const std::vector<NodePtr>& pieces);

}  // namespace metajit
