// Reverse-mode autodiff over the lazy graph. The gradient of every meta-op is built from meta-ops again (rules
// live beside each family: elementwise.h, broadcast.h, reduce.h), so backward graphs fuse and compile like
// forward ones, and a gradient that requires grad can be differentiated again (higher-order gradients).
#pragma once
#include <vector>

#include "core/node.h"

namespace metajit {

// The payload of an op whose outputs are separate nodes computed together (a Code op, an mj.Function). Its
// gradient rule is given by the op, not by a meta-op family, and runs once for all outputs: when the
// backward walk reaches the first of them, every output's gradient is already complete (all consumers of
// the outputs were created after the op, so they come first in reverse creation order).
struct MultiOutputPayload : NodePayload {
  // The op's output nodes in order; null where an output is no longer referenced.
  virtual std::vector<NodePtr> outputs() const = 0;
  // One gradient per input of `reached` (the output the walk reached first), null for "none". Every output
  // reads the op's inputs at the same positions, so these are the gradients of the whole op.
  // `output_grads` has one entry per output, null where nothing flows back into that output. `needed` says,
  // per input, whether anyone asked for its gradient (a rule may refuse only those it cannot give).
  virtual std::vector<NodePtr> gradient(const Node& reached, const std::vector<NodePtr>& output_grads,
                                        const std::vector<bool>& needed) const = 0;
};

// The values a node's gradient rule reads, as PyTorch saves them for backward: indices of inputs, and -1 for the
// node's own value. Sums, views and index-only ops read none; products read the other factor.
std::vector<int> saved_values(const Node& node);

// Gradients of `output` with respect to each of `inputs`, as lazy nodes of the inputs' shapes and dtypes.
// `output_grad` (same shape as output) seeds the chain rule; null means ones (the gradient of output.sum()).
// An input the output does not depend on gets zeros. Throws std::invalid_argument when the output is not
// floating point, when an input does not require grad, or when output_grad has the wrong shape. With grad
// mode on, the results require grad wherever they depend on something that does (so they can be
// differentiated again); with it off they are plain values.
std::vector<NodePtr> gradients(const NodePtr& output, const std::vector<NodePtr>& inputs, NodePtr output_grad = nullptr);

// The leaves (requires_grad nodes built from nothing that requires grad) that `output` depends on, in
// creation order: what backward() accumulates into.
std::vector<NodePtr> gradient_leaves(const NodePtr& output);

// backward() without retain_graph: every node between `output` and its leaves may drop its inputs once it is
// computed (see Node::backward_taken). A later gradient through such a node then throws, naming it.
void mark_backward_taken(const NodePtr& output);

}  // namespace metajit
