// Custom-gradient nodes, the graph side of mj.Function: each output of the user's forward (computed with
// gradient recording off) is wrapped in a NodeKind::Custom node whose value is that output and whose inputs
// also list the function's inputs, so gradients flow to them through a rule given from outside (the user's
// backward, itself written in ops and therefore differentiable again).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/node.h"
#include "meta_ops/autodiff.h"

namespace metajit {

class CustomFunction {
 public:
  virtual ~CustomFunction() = default;
  // Gradients for each function input (null: none) from one gradient per output (never null: zeros where
  // nothing flowed back). Runs while the backward graph is being built.
  virtual std::vector<NodePtr> backward(const std::vector<NodePtr>& output_grads) = 0;
  virtual std::string name() const = 0;  // for error messages, e.g. "mj.Function MySquare"
  std::vector<std::weak_ptr<Node>> outputs;
  // Each output's shape and dtype: an output the user dropped still gets its zero gradient.
  std::vector<std::pair<Shape, DType>> output_types;
};

struct CustomPayload : MultiOutputPayload {
  CustomPayload(std::shared_ptr<CustomFunction> function, int output_index)
      : function(std::move(function)), output_index(output_index) {}
  std::shared_ptr<CustomFunction> function;
  int output_index;
  std::string describe() const override { return "custom"; }  // the value is input 0; the rule adds nothing to kernels
  std::vector<NodePtr> outputs() const override;
  std::vector<NodePtr> gradient(const Node& reached, const std::vector<NodePtr>& output_grads,
                                const std::vector<bool>& needed) const override;
};

// Wraps `values` (the forward's outputs) so their gradients reach `inputs` through `function`.
std::vector<NodePtr> make_custom_outputs(const std::vector<NodePtr>& values, const std::vector<NodePtr>& inputs,
                                         std::shared_ptr<CustomFunction> function);

}  // namespace metajit
