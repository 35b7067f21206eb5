// metajit.Var's semantics in C++: rebinding on writes, aliasing views, PyTorch's layout rules (meta_ops/var.h).
#include "meta_ops/var.h"

#include <stdexcept>

#include "meta_ops/broadcast.h"
#include "meta_ops/custom_gradient.h"
#include "meta_ops/elementwise.h"

namespace metajit {
namespace {

bool is_leaf_requiring_grad(const Node& node) { return node.requires_grad && !node.any_input_requires_grad(); }

// Gradients of a value replaced outside the graph flow on to the replaced value's history (a Custom node whose
// value is the new one), as PyTorch keeps a tensor's grad_fn across an in-place op under no_grad or via .data.
class GradientToReplaced : public CustomFunction {
 public:
  std::vector<NodePtr> backward(const std::vector<NodePtr>& output_grads) override { return {output_grads[0]}; }
  std::string name() const override { return "an in-place op outside the graph"; }
};

// The node a Var holds after a write replaced `old` by `value`: when `old` was a leaf that requires grad (a
// parameter updated under no_grad, or through .data), the new value stays one, with the gradient gathered so far.
// When `outside_graph` (no_grad, .data) and `old` was computed from values that require grad, gradients keep
// flowing to that history.
NodePtr successor(const NodePtr& old, NodePtr value, bool outside_graph) {
  if (!old || value == old || !old->requires_grad) return value;
  if (!old->any_input_requires_grad()) {
    NodePtr leaf = detached(value);  // a node of its own: `value` may be another Var's
    leaf->requires_grad = true;
    leaf->grad = old->grad;
    return leaf;
  }
  if (!outside_graph || value->requires_grad) return value;
  NodePtr kept = make_custom_outputs({value}, {old}, std::make_shared<GradientToReplaced>())[0];
  kept->requires_grad = true;
  return kept;
}

NodePtr keep_leaf(const NodePtr& old, NodePtr value) { return successor(old, std::move(value), false); }

void mark_overwritten(Node& node, const std::string& operation, uint64_t first_node_id) {
  if (node.overwritten_by) return;
  node.overwritten_by = intern_string(operation);
  node.overwritten_at = current_provenance();
  node.overwritten_from_id = first_node_id;
}

// `parent` (a step's input) with the elements the step reads replaced by `value`.
NodePtr write_back(const NodePtr& parent, const ViewStep& step, const NodePtr& value) {
  switch (step.kind) {
    case ViewStep::Kind::Affine: return write_through_view(parent, step.shape, step.dimensions, value);
    case ViewStep::Kind::Reshape: return reshape(value, parent->shape);
    case ViewStep::Kind::Detach: return value;
  }
  return value;
}

}  // namespace

std::vector<int64_t> contiguous_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (size_t dim = shape.size(); dim-- > 0;) {
    strides[dim] = stride;
    stride *= std::max<int64_t>(shape[dim], 1);
  }
  return strides;
}

std::optional<std::vector<int64_t>> view_strides(const Shape& shape, const std::vector<int64_t>& strides,
                                                 const Shape& new_shape) {
  if (shape_numel(shape) == 0) return shape == new_shape ? strides : contiguous_strides(new_shape);
  std::vector<int64_t> result(new_shape.size(), 1);
  if (shape.empty()) return result;  // a scalar: every new dim has extent 1
  // Walk the old dims from the innermost in chunks that are contiguous among themselves; the new dims covering
  // a chunk must multiply to exactly its size, and take strides inside it.
  int view_dim = int(new_shape.size()) - 1;
  int64_t chunk_base_stride = strides.back();
  int64_t tensor_elements = 1, view_elements = 1;
  for (int dim = int(shape.size()) - 1; dim >= 0; --dim) {
    tensor_elements *= shape[dim];
    bool chunk_ends = dim == 0 || (shape[dim - 1] != 1 && strides[dim - 1] != tensor_elements * chunk_base_stride);
    if (!chunk_ends) continue;
    while (view_dim >= 0 && (view_elements < tensor_elements || new_shape[view_dim] == 1)) {
      result[view_dim] = view_elements * chunk_base_stride;
      view_elements *= new_shape[view_dim];
      --view_dim;
    }
    if (view_elements != tensor_elements) return std::nullopt;
    if (dim > 0) {
      chunk_base_stride = strides[dim - 1];
      tensor_elements = 1;
      view_elements = 1;
    }
  }
  if (view_dim != -1) return std::nullopt;
  return result;
}

NodePtr apply_view_step(const NodePtr& input, const ViewStep& step) {
  switch (step.kind) {
    case ViewStep::Kind::Affine: return view(input, step.shape, step.dimensions);
    case ViewStep::Kind::Reshape: return reshape(input, step.shape);
    case ViewStep::Kind::Detach: return detached(input);
  }
  return input;
}

Var::Var(NodePtr node) : node_(std::move(node)) {}

AliasGroup& Var::group() {
  if (!group_) group_ = std::make_shared<AliasGroup>(AliasGroup{node_, 0});
  return *group_;
}

bool Var::is_detached_alias() const {
  for (const ViewStep& step : steps_)
    if (step.kind == ViewStep::Kind::Detach) return true;
  return false;
}

bool Var::is_contiguous() const {
  if (strides_.empty()) return true;
  const Shape& shape = node_->shape;
  if (shape_numel(shape) == 0) return true;
  int64_t expected = 1;
  for (size_t dim = shape.size(); dim-- > 0;) {
    if (shape[dim] == 1) continue;
    if (strides_[dim] != expected) return false;
    expected *= shape[dim];
  }
  return true;
}

void Var::derive() {
  NodePtr value = group_->value;
  for (const ViewStep& step : steps_) value = apply_view_step(value, step);
  // A view the user made a leaf of (x.detach().requires_grad_()) stays one when its base changes.
  node_ = steps_.empty() ? value : keep_leaf(node_, std::move(value));
  seen_version_ = group_->version;
}

VarPtr Var::make_view(const VarPtr& base, ViewStep step, std::vector<int64_t> strides, int64_t offset,
                      NodePtr node) {
  if (!node) node = apply_view_step(base->node(), step);
  AliasGroup& shared = base->group();
  auto view = std::make_shared<Var>(std::move(node));
  view->group_ = base->group_;
  view->steps_ = base->steps_;
  view->steps_.push_back(std::move(step));
  view->seen_version_ = shared.version;
  view->strides_ = std::move(strides);
  view->storage_offset_ = offset;
  view->untracked_ = base->untracked_;
  return view;
}

VarPtr Var::view_of(const VarPtr& base, ViewStep step, NodePtr built) {
  base->node();  // current strides and value
  std::vector<int64_t> base_strides = base->strides();
  std::vector<int64_t> strides(step.shape.size(), 0);
  int64_t offset = base->storage_offset_;
  if (step.kind == ViewStep::Kind::Affine) {
    for (size_t dim = 0; dim < step.dimensions.size(); ++dim) {
      const ViewDimension& dimension = step.dimensions[dim];
      offset += dimension.offset * base_strides[dim];
      if (dimension.output_dim >= 0) strides[dimension.output_dim] += dimension.step * base_strides[dim];
    }
  } else {
    strides = std::move(base_strides);
  }
  return make_view(base, std::move(step), std::move(strides), offset, std::move(built));
}

VarPtr Var::view_of(const VarPtr& base, const std::function<NodePtr(const NodePtr&)>& build) {
  const NodePtr& base_node = base->node();
  // Usually the builder's node reads the base's node directly and is the step itself. When the builders fold
  // it into a view the base's node already is, the step is learnt on a stand-in without storage or inputs,
  // which nothing folds into.
  NodePtr built = build(base_node);
  NodePtr input = base_node;
  bool one_step = built == base_node || (built->inputs.size() == 1 && built->inputs[0] == base_node &&
                                         (built->kind == NodeKind::View || built->kind == NodeKind::Reshape));
  if (!one_step) {
    input = std::make_shared<Node>(NodeKind::Data, base_node->dtype, base_node->shape);
    built = build(input);
  }
  ViewStep step;
  if (built == input) {
    step.shape = base_node->shape;
    for (int dim = 0; dim < int(step.shape.size()); ++dim) step.dimensions.push_back({dim, 1, 0});
  } else if (built->kind == NodeKind::View && built->inputs.size() == 1 && built->inputs[0] == input) {
    step.shape = built->shape;
    step.dimensions = built->view;
  } else if (built->kind == NodeKind::Reshape && built->inputs.size() == 1 && built->inputs[0] == input) {
    return reshaped(base, built->shape, false);
  } else {
    throw std::logic_error("internal error: a view builder made a " + built->op_name() + " node, not a view");
  }
  return view_of(base, std::move(step), one_step ? built : nullptr);
}

VarPtr Var::reshaped(const VarPtr& base, Shape shape, bool must_be_view) {
  NodePtr node = reshape(base->node(), std::move(shape));  // checks the shape and infers a -1
  auto strides = view_strides(base->node_->shape, base->strides(), node->shape);
  if (!strides) {
    if (must_be_view)
      throw std::runtime_error(
          "view size is not compatible with input tensor's size and stride (at least one dimension spans across "
          "two contiguous subspaces). Use .reshape(...) instead.");
    return std::make_shared<Var>(std::move(node));  // PyTorch copies here: writes to it stay its own
  }
  Shape view_shape = node->shape;
  return make_view(base, ViewStep{ViewStep::Kind::Reshape, std::move(view_shape), {}}, std::move(*strides),
                   base->storage_offset_, std::move(node));
}

VarPtr Var::detached_alias(const VarPtr& base) {
  base->node();
  return make_view(base, ViewStep{ViewStep::Kind::Detach, base->node_->shape, {}}, base->strides(),
                   base->storage_offset_);
}

VarPtr Var::data_alias(const VarPtr& base) {
  VarPtr alias = detached_alias(base);
  alias->untracked_ = true;
  return alias;
}

void Var::write(NodePtr value, const std::string& operation, uint64_t first_node_id) {
  if (!first_node_id) first_node_id = next_node_id_value();
  const NodePtr current = node();
  if (value->shape != current->shape)
    throw std::invalid_argument(operation + ": the new value has shape " + shape_to_string(value->shape) +
                                " but the Var written has shape " + shape_to_string(current->shape));
  if (grad_enabled()) {
    if (is_leaf_requiring_grad(*current))
      throw std::runtime_error("a leaf Variable that requires grad is being used in an in-place operation (" +
                               operation + "); wrap it in `with mj.no_grad():` or write through .data");
    if (is_view() && !is_detached_alias() && is_leaf_requiring_grad(*group_->value))
      throw std::runtime_error("a view of a leaf Variable that requires grad is being used in an in-place operation (" +
                               operation + "); wrap it in `with mj.no_grad():` or write through .data");
  }
  if (value->dtype != current->dtype) value = cast(value, current->dtype);
  if (!untracked_) {
    mark_overwritten(*current, operation, first_node_id);
    if (group_) mark_overwritten(*group_->value, operation, first_node_id);
  }
  bool outside_graph = untracked_ || !grad_enabled();
  if (!group_) {
    node_ = successor(current, std::move(value), outside_graph);
    return;
  }
  // The nodes along the path from the base's value to this Var's, then the writes back up that path.
  std::vector<NodePtr> path{group_->value};
  for (size_t step = 0; step + 1 < steps_.size(); ++step) path.push_back(apply_view_step(path.back(), steps_[step]));
  NodePtr replacement = std::move(value);
  for (size_t step = steps_.size(); step-- > 0;) replacement = write_back(path[step], steps_[step], replacement);
  group_->value = successor(group_->value, std::move(replacement), outside_graph);
  ++group_->version;
  derive();
}

void Var::set_data(NodePtr value) {
  node();
  node_ = keep_leaf(node_, std::move(value));
  group_.reset();  // views taken before keep the old value, as PyTorch's keep the old storage
  steps_.clear();
  seen_version_ = 0;
  strides_.clear();
  storage_offset_ = 0;
}

void Var::set_requires_grad(bool requires_grad) {
  node();
  if (requires_grad == node_->requires_grad) return;
  if (requires_grad && !is_floating(node_->dtype))
    throw std::invalid_argument(std::string("only floating-point Vars can require grad, this one is ") +
                                dtype_name(node_->dtype));
  if (!requires_grad) {
    if (node_->any_input_requires_grad())
      throw std::runtime_error("you can only change requires_grad flags of leaf variables. If you want to use a "
                               "computed variable in a subgraph that doesn't require differentiation use "
                               "var_no_grad = var.detach().");
    node_->requires_grad = false;
    return;
  }
  // Ops recorded before (and a Var that copied this value) keep a node that does not require grad, as in PyTorch.
  bool base_of_group = group_ && steps_.empty();
  if (node_.use_count() > (base_of_group ? 2 : 1)) node_ = detached(node_);
  node_->requires_grad = true;
  if (base_of_group) {
    group_->value = node_;
    seen_version_ = ++group_->version;
  }
}

void Var::detach_in_place() {
  if (is_view()) throw std::runtime_error("Can't detach views in-place. Use detach() instead.");
  node();
  if (!node_->requires_grad) return;
  node_ = detached(node_);
  if (group_) {
    group_->value = node_;
    seen_version_ = ++group_->version;
  }
}

}  // namespace metajit
