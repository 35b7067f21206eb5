#include "meta_ops/autodiff.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "meta_ops/broadcast.h"
#include "meta_ops/elementwise.h"
#include "meta_ops/gradient_sum.h"
#include "meta_ops/recomputation.h"
#include "meta_ops/reduce.h"

namespace metajit {
namespace {

// A backward() without retain_graph went through `node`: PyTorch freed the values its gradient saved, so a second
// backward through it fails when it saved any (sums and views save none); here the node keeps them until it is
// computed, which frees its inputs.
void require_graph(const Node& node) {
  if (!node.backward_taken.load(std::memory_order_relaxed)) return;
  if (!node.inputs.empty() && (node.written_through_view || !saved_values(node).empty()))
    throw std::runtime_error(
        "Trying to backward through the graph a second time (or directly access saved tensors after they have "
        "already been freed): " + node.op_name() + " " + shape_to_string(node.shape) + " (created at " +
        node.provenance.to_string() + ") was differentiated by an earlier backward(). Specify retain_graph=True "
        "if you need to backward through the graph a second time.");
  if (node.inputs.empty())
    throw std::runtime_error(
        "backward through a graph whose saved values were freed: " + node.op_name() + " " +
        shape_to_string(node.shape) + " (created at " + node.provenance.to_string() +
        ") was computed after an earlier backward() went through it, so it no longer holds its inputs. Pass "
        "retain_graph=True to that earlier backward() to differentiate through this graph again.");
}

// Every node reachable from `output` through edges that carry gradient (inputs that require grad), in no order.
std::vector<Node*> gradient_graph_nodes(const NodePtr& output) {
  std::vector<Node*> nodes;
  std::unordered_set<Node*> seen{output.get()};
  std::vector<Node*> stack{output.get()};
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    require_graph(*node);
    nodes.push_back(node);
    if (!node->any_input_requires_grad()) continue;  // a leaf, perhaps one computed from others (detach)
    for (const NodePtr& input : node->inputs)
      if (input && input->requires_grad && seen.insert(input.get()).second) stack.push_back(input.get());
  }
  return nodes;
}

// The same nodes newest first: ids are creation order and inputs are always older than their users, so this is a
// reverse topological order.
std::vector<Node*> gradient_graph(const NodePtr& output) {
  std::vector<Node*> nodes = gradient_graph_nodes(output);
  std::sort(nodes.begin(), nodes.end(), [](const Node* a, const Node* b) { return a->id > b->id; });
  return nodes;
}

}  // namespace

std::vector<int> saved_values(const Node& node) {
  auto requires = [&](size_t index) { return index < node.inputs.size() && node.inputs[index] && node.inputs[index]->requires_grad; };
  switch (node.kind) {
    case NodeKind::Unary:
      switch (UnaryOp(node.op_code)) {
        case UnaryOp::Negate: case UnaryOp::Floor: case UnaryOp::Ceil: case UnaryOp::Round: case UnaryOp::LogicalNot:
        case UnaryOp::BitwiseNot:
          return {};
        case UnaryOp::Exp: case UnaryOp::Tanh: case UnaryOp::Sigmoid: case UnaryOp::Sqrt: case UnaryOp::Rsqrt:
        case UnaryOp::Relu: case UnaryOp::Expm1: case UnaryOp::Tan:
          return {-1};
        default:
          return {0};
      }
    case NodeKind::Binary:
      switch (BinaryOp(node.op_code)) {
        case BinaryOp::Multiply: {
          std::vector<int> saved;
          if (requires(1)) saved.push_back(0);
          if (requires(0)) saved.push_back(1);
          return saved;
        }
        case BinaryOp::Divide:
          return requires(1) ? std::vector<int>{0, 1} : std::vector<int>{1};
        case BinaryOp::Power: case BinaryOp::Maximum: case BinaryOp::Minimum:
          return {0, 1};
        default:
          return {};
      }
    case NodeKind::Where: return {0};
    case NodeKind::Reduce: case NodeKind::ReindexReduce:
      return ReduceOp(node.op_code) == ReduceOp::Add ? std::vector<int>{} : std::vector<int>{0, -1};
    default: return {};
  }
}

namespace {

// The nodes a saved value shares memory with in PyTorch: what a view or reshape reads, what a detached copy
// shares its storage with. (Not what a where's condition was compared from: PyTorch's masked_fill saves the
// mask, not the tensor it came from, so following comparisons raised where PyTorch does not.)
std::vector<const Node*> sharing_sources(const Node& node) {
  std::vector<const Node*> sources;
  if (node.own_version_counter) return sources;  // a .data alias: the storage is shared, its counter is not
  if (NodePtr shared = node.shares_value_of.lock()) sources.push_back(shared.get());
  if ((node.kind == NodeKind::View || node.kind == NodeKind::Reshape) && !node.inputs.empty() && node.inputs[0])
    sources.push_back(node.inputs[0].get());
  return sources;
}

// PyTorch's version-counter check: a value the gradient rule of `node` reads was modified in place since (the
// node is intact here, but PyTorch's saved tensor would not be). Views share their base's counter.
void check_saved_values(const Node& node) {
  std::vector<int> saved = saved_values(node);
  // where(x < low, low, x), a clamp: PyTorch's clamp saves x, the value the condition compares and the where
  // passes on. (A masked_fill's where passes on another tensor than its mask compares: PyTorch saved the mask.)
  if (node.kind == NodeKind::Where && node.inputs.size() == 3 && node.inputs[0]->kind == NodeKind::Binary &&
      BinaryOp(node.inputs[0]->op_code) >= BinaryOp::Less && BinaryOp(node.inputs[0]->op_code) <= BinaryOp::NotEqual)
    for (const NodePtr& compared : node.inputs[0]->inputs)
      for (int branch : {1, 2})
        if (compared == node.inputs[size_t(branch)]) saved.push_back(branch);
  for (int index : saved) {
    const Node* value = index < 0 ? &node : node.inputs[size_t(index)].get();
    std::vector<std::pair<const Node*, int>> stack{{value, 0}};
    while (!stack.empty()) {
      auto [through, depth] = stack.back();
      stack.pop_back();
      bool saved_as_a_copy = false;  // by the in-place op that replaced it (PyTorch's original self)
      for (const auto& [first, end] : through->read_by_in_place_ops)
        saved_as_a_copy = saved_as_a_copy || (node.id >= first && node.id < end);
      if (through->overwritten_by && node.id < through->overwritten_from_id && !saved_as_a_copy)
        throw std::runtime_error(
            "one of the variables needed for gradient computation has been modified by an inplace operation: the " +
            std::string(dtype_name(value->dtype)) + " " + shape_to_string(value->shape) + " " +
            (index < 0 ? "output" : "input " + std::to_string(index)) + " of " + node.op_name() + " (created at " +
            node.provenance.to_string() + ") was changed by " + through->overwritten_by + " at " +
            through->overwritten_at.to_string() + " before backward. Modify a clone() instead, or modify it after "
            "backward().");
      if (depth < 8)
        for (const Node* source : sharing_sources(*through)) stack.push_back({source, depth + 1});
    }
  }
}

std::vector<NodePtr> rule_for(const NodePtr& node, const NodePtr& grad) {
  switch (node->kind) {
    case NodeKind::Unary: case NodeKind::Binary: case NodeKind::Where: case NodeKind::Cast:
      return elementwise_gradient(node, grad);
    case NodeKind::View: return view_gradient(node, grad);
    case NodeKind::Reshape: return reshape_gradient(node, grad);
    case NodeKind::Reduce: return reduce_gradient(node, grad);
    case NodeKind::Reindex: return reindex_gradient(node, grad);
    case NodeKind::ReindexReduce: return reindex_reduce_gradient(node, grad);
    default: return std::vector<NodePtr>(node->inputs.size());  // leaves
  }
}

NodePtr shared_pointer(const NodePtr& root, Node* node, const std::unordered_map<Node*, NodePtr>& owners) {
  if (node == root.get()) return root;
  return owners.at(node);
}

}  // namespace

std::vector<NodePtr> gradients(const NodePtr& output, const std::vector<NodePtr>& inputs, NodePtr output_grad) {
  if (!is_floating(output->dtype))
    throw std::invalid_argument(std::string("grad: the output must be a floating-point Var, got ") + dtype_name(output->dtype));
  for (size_t index = 0; index < inputs.size(); ++index)
    if (!inputs[index]->requires_grad)
      throw std::invalid_argument("grad: input " + std::to_string(index) + " (shape " + shape_to_string(inputs[index]->shape) +
                                  ") does not require grad; set requires_grad=True on it before computing the output");
  if (output_grad) {
    if (output_grad->shape != output->shape)
      throw std::invalid_argument("grad: the output gradient has shape " + shape_to_string(output_grad->shape) +
                                  " but the output has shape " + shape_to_string(output->shape));
    output_grad = cast(output_grad, output->dtype);
  } else {
    output_grad = constant(output->shape, output->dtype, 1.0);
  }
  std::vector<NodePtr> results(inputs.size());
  if (output->requires_grad) {
    std::vector<Node*> order = gradient_graph(output);
    // Which nodes lie on a path to a requested input (others need no gradient).
    std::unordered_set<Node*> wanted;
    for (const NodePtr& input : inputs) wanted.insert(input.get());
    std::unordered_set<Node*> relevant;
    std::unordered_map<Node*, NodePtr> owners;  // raw node -> a shared pointer held by one of its users
    for (auto node = order.rbegin(); node != order.rend(); ++node) {
      bool on_path = wanted.count(*node) != 0;
      for (const NodePtr& input : (*node)->inputs) {
        if (!input || !input->requires_grad) continue;
        owners.emplace(input.get(), input);
        if (relevant.count(input.get())) on_path = true;
      }
      if (on_path) relevant.insert(*node);
    }
    // Under mj.flags.memory_budget, rules read recomputed clones of some forward values instead of the values
    // themselves (meta_ops/recomputation.h); gradients still accumulate onto the forward nodes' inputs.
    Recomputation recomputation(output, order, inputs);
    // Each node's gradient terms in arrival order, summed when the walk reaches the node (by then every user,
    // newer than it, has added its term): GradientSum makes terms of one contraction one product.
    std::unordered_map<Node*, std::vector<NodePtr>> accumulated{{output.get(), {output_grad}}};
    GradientSum gradient_sum;
    auto gradient_of = [&](Node* raw) -> NodePtr {
      auto found = accumulated.find(raw);
      if (found == accumulated.end()) return nullptr;
      if (found->second.size() > 1) found->second = {gradient_sum.total(found->second)};
      return found->second[0];
    };
    std::unordered_set<Node*> done_outputs;  // outputs of multi-output ops whose rule already ran
    for (Node* raw : order) {
      if (!accumulated.count(raw) || !relevant.count(raw) || done_outputs.count(raw)) continue;
      NodePtr node = shared_pointer(output, raw, owners);
      if (!node->any_input_requires_grad()) continue;  // a leaf: summed with the results, below
      NodePtr grad = gradient_of(raw);
      check_saved_values(*node);
      std::vector<NodePtr> input_grads;
      if (auto* multi = dynamic_cast<const MultiOutputPayload*>(node->payload.get())) {
        std::vector<NodePtr> output_grads;
        for (const NodePtr& sibling : multi->outputs()) {
          output_grads.push_back(sibling ? gradient_of(sibling.get()) : nullptr);
          if (sibling) done_outputs.insert(sibling.get());
        }
        std::vector<bool> needed;
        for (const NodePtr& input : node->inputs)
          needed.push_back(input && input->requires_grad && relevant.count(input.get()));
        input_grads = multi->gradient(*node, output_grads, needed);
        if (input_grads.size() != node->inputs.size())
          throw std::logic_error("internal error: a multi-output gradient rule returned the wrong number of gradients");
      } else {
        input_grads = rule_for(recomputation.value_for(node), grad);
      }
      for (size_t index = 0; index < node->inputs.size(); ++index) {
        const NodePtr& input = node->inputs[index];
        if (!input || !input->requires_grad || !relevant.count(input.get()) || !input_grads[index]) continue;
        NodePtr contribution = input_grads[index];
        if (contribution->shape != input->shape)
          throw std::logic_error("internal error: gradient of " + node->op_name() + " input " + std::to_string(index) +
                                 " has shape " + shape_to_string(contribution->shape) + ", expected " +
                                 shape_to_string(input->shape));
        accumulated[input.get()].push_back(cast(contribution, input->dtype));
      }
    }
    // Larger gradients first: a weight's sum stacks the operands its bias's sum can then reuse (GradientSum).
    std::vector<size_t> by_size(inputs.size());
    for (size_t index = 0; index < inputs.size(); ++index) by_size[index] = index;
    std::stable_sort(by_size.begin(), by_size.end(),
                     [&](size_t a, size_t b) { return inputs[a]->numel() > inputs[b]->numel(); });
    for (size_t index : by_size) results[index] = gradient_of(inputs[index].get());
  }
  for (size_t index = 0; index < inputs.size(); ++index)
    if (!results[index]) results[index] = constant(inputs[index]->shape, inputs[index]->dtype, 0.0);
  return results;
}

std::vector<NodePtr> gradient_leaves(const NodePtr& output) {
  std::vector<NodePtr> leaves;
  if (!output->requires_grad) return leaves;
  std::unordered_set<Node*> seen{output.get()};
  std::vector<NodePtr> stack{output};
  while (!stack.empty()) {
    NodePtr node = std::move(stack.back());
    stack.pop_back();
    require_graph(*node);
    if (!node->any_input_requires_grad()) {
      leaves.push_back(node);
      continue;
    }
    for (const NodePtr& input : node->inputs)
      if (input && input->requires_grad && seen.insert(input.get()).second) stack.push_back(input);
  }
  std::sort(leaves.begin(), leaves.end(), [](const NodePtr& a, const NodePtr& b) { return a->id < b->id; });
  return leaves;
}

void mark_backward_taken(const NodePtr& output) {
  if (!output->requires_grad) return;
  // Only where the gradient read saved values, which PyTorch frees, and at writes through views (CopySlices):
  // through a clone, a sum or a view a later backward still works, so such a node keeps its edges when computed.
  // Under a memory budget every node lets go: a sum or a view that keeps its edges holds the forward values below
  // it until the step ends (the run may release a buffer early only if the graph lets go of it, see
  // jit/plan/buffer_lifetimes.h), and recomputation exists to free those values as soon as the forward is done.
  bool free_everything = memory_budget() > 0;
  for (Node* node : gradient_graph_nodes(output))
    if (node->any_input_requires_grad() &&
        (free_everything || node->written_through_view || !saved_values(*node).empty()))
      node->backward_taken.store(true, std::memory_order_relaxed);
}

}  // namespace metajit
