#include "meta_ops/custom_gradient.h"

#include <stdexcept>

#include "meta_ops/elementwise.h"

namespace metajit {

std::vector<NodePtr> CustomPayload::outputs() const {
  std::vector<NodePtr> nodes;
  for (const std::weak_ptr<Node>& output : function->outputs) nodes.push_back(output.lock());
  return nodes;
}

std::vector<NodePtr> CustomPayload::gradient(const Node& reached, const std::vector<NodePtr>& output_grads,
                                            const std::vector<bool>& /*needed*/) const {
  std::vector<NodePtr> grads = output_grads;
  for (size_t index = 0; index < grads.size(); ++index) {
    if (grads[index]) continue;
    const auto& [shape, dtype] = function->output_types.at(index);
    grads[index] = constant(shape, dtype, 0.0);
  }
  std::vector<NodePtr> input_grads = function->backward(grads);
  size_t input_count = reached.inputs.size() - 1;  // input 0 is the forward's value
  if (input_grads.size() != input_count)
    throw std::invalid_argument(function->name() + ": backward returned " + std::to_string(input_grads.size()) +
                                " gradients for " + std::to_string(input_count) + " inputs");
  std::vector<NodePtr> result{nullptr};
  for (size_t index = 0; index < input_count; ++index) {
    const NodePtr& input = reached.inputs[index + 1];
    const NodePtr& grad = input_grads[index];
    if (grad && grad->shape != input->shape)
      throw std::invalid_argument(function->name() + ": backward returned a gradient of shape " +
                                  shape_to_string(grad->shape) + " for input " + std::to_string(index) + " of shape " +
                                  shape_to_string(input->shape));
    result.push_back(grad);
  }
  return result;
}

std::vector<NodePtr> make_custom_outputs(const std::vector<NodePtr>& values, const std::vector<NodePtr>& inputs,
                                         std::shared_ptr<CustomFunction> function) {
  std::vector<NodePtr> nodes;
  function->outputs.clear();
  function->output_types.clear();
  for (size_t index = 0; index < values.size(); ++index) {
    std::vector<NodePtr> node_inputs{values[index]};
    node_inputs.insert(node_inputs.end(), inputs.begin(), inputs.end());
    NodePtr node = make_node(NodeKind::Custom, values[index]->dtype, values[index]->shape, std::move(node_inputs));
    node->payload = std::make_shared<CustomPayload>(function, int(index));
    function->outputs.push_back(node);
    function->output_types.emplace_back(node->shape, node->dtype);
    nodes.push_back(node);
  }
  return nodes;
}

}  // namespace metajit
