// metajit.Var's semantics in C++: rebinding on writes, aliasing views, PyTorch's layout rules (meta_ops/var.h).
#include "meta_ops/var.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "meta_ops/broadcast.h"
#include "meta_ops/custom_gradient.h"
#include "meta_ops/elementwise.h"

namespace metajit {
namespace {

bool is_leaf_requiring_grad(const Node& node) { return node.requires_grad && !node.gradient_history; }
std::vector<ViewDimension> identity_dimensions(size_t rank);

// Gradients of a value replaced outside the graph flow on to the replaced value's history, as PyTorch keeps a
// tensor's grad_fn across an in-place op under no_grad or through a detached alias. A write in grad mode of a
// value that carries no gradient (fill_, copy_ of a constant) keeps the Var requiring grad, with zero gradient
// to what it replaced (PyTorch's FillBackward). Both are Custom nodes whose value is the new one.
// Inputs: the replaced value, then (when `to_new_value`) the new value with its own history.
class GradientToReplaced : public CustomFunction {
 public:
  GradientToReplaced(bool passes_gradient, bool to_new_value)
      : passes_gradient_(passes_gradient), to_new_value_(to_new_value) {}
  std::vector<NodePtr> backward(const std::vector<NodePtr>& output_grads) override {
    // A zero gradient, not none: PyTorch still runs the replaced value's backward (and its version checks).
    const NodePtr& grad = output_grads[0];
    std::vector<NodePtr> grads{passes_gradient_ ? grad : constant(grad->shape, grad->dtype, 0.0)};
    if (to_new_value_) grads.push_back(grad);
    return grads;
  }
  std::string name() const override { return "an in-place op"; }
  bool passes_gradient() const { return passes_gradient_; }

 private:
  bool passes_gradient_;
  bool to_new_value_;
};

// Whether `value` was computed from `old` within a few ops (an update such as old + y, or a partial write
// where(mask, y, old)), rather than replacing it whole (copy_, fill_, x[:] = y).
bool reads_within_a_few_ops(const NodePtr& value, const Node* old) {
  std::vector<std::pair<const Node*, int>> stack{{value.get(), 0}};
  for (int visited = 0; !stack.empty() && visited < 64; ++visited) {
    auto [node, depth] = stack.back();
    stack.pop_back();
    if (node == old) return true;
    if (depth < 4)
      for (const NodePtr& input : node->inputs)
        if (input) stack.push_back({input.get(), depth + 1});
  }
  return false;
}

// The node a Var holds after a write replaced `old` by `value`. When `old` was a leaf that requires grad (a
// parameter updated under no_grad, or through .data) the new value stays one, with the gradient gathered so
// far. When `old` was computed from values that require grad and `value` carries no gradient, it keeps
// requiring grad: gradients flow on to `old` when the write was outside the graph (`outside_graph`: no_grad,
// .data, detach()), else stop there.
NodePtr successor(const NodePtr& old, NodePtr value, bool outside_graph) {
  if (!old || value == old || !old->requires_grad) return value;
  if (!old->gradient_history) {
    NodePtr leaf = detached(value);  // a node of its own: `value` may be another Var's
    leaf->requires_grad = true;
    leaf->store_when_read = !leaf->is_computed();
    if (!old->gradient_slot) old->gradient_slot = std::make_shared<Node::GradientSlot>();
    leaf->gradient_slot = old->gradient_slot;
    return leaf;
  }
  if (value->requires_grad && !outside_graph) {
    if (!reads_within_a_few_ops(value, old.get())) {
      // Replaced whole by a value with history: gradients go to it, and zeros to what it replaced, whose
      // backward PyTorch still runs (CopyBackwards).
      NodePtr kept = make_custom_outputs({stop_gradient(value)}, {old, value},
                                         std::make_shared<GradientToReplaced>(false, true))[0];
      kept->requires_grad = true;
      kept->gradient_history = true;
      return kept;
    }
    return value;
  }
  NodePtr kept = make_custom_outputs({stop_gradient(value)}, {old},
                                     std::make_shared<GradientToReplaced>(outside_graph, false))[0];
  kept->requires_grad = true;
  kept->gradient_history = true;
  return kept;
}

// A re-derived node of a Var the user made a leaf of stays that leaf (sharing its .grad); others are `value`.
NodePtr keep_leaf(const NodePtr& old, NodePtr value) {
  if (!old || value == old || !is_leaf_requiring_grad(*old)) return value;
  return successor(old, std::move(value), false);
}

void mark_overwritten(Node& node, const std::string& operation, uint64_t first_node_id) {
  // The latest write counts: an op recorded after one write and before the next read the value the next write
  // changed (PyTorch's version counter moved on).
  for (Node* marked = &node; marked && marked->overwritten_from_id < first_node_id;) {
    marked->overwritten_by = intern_string(operation);
    marked->overwritten_at = current_provenance();
    marked->overwritten_from_id = first_node_id;
    marked->read_by_in_place_ops.push_back({first_node_id, next_node_id_value()});
    // A value changed outside the graph is still the tensor it replaced (the same grad_fn in PyTorch): a write
    // to it counts for that tensor too.
    auto* custom = dynamic_cast<const CustomPayload*>(marked->payload.get());
    bool same_tensor = custom && dynamic_cast<const GradientToReplaced*>(custom->function.get()) &&
                       static_cast<const GradientToReplaced*>(custom->function.get())->passes_gradient() &&
                       marked->inputs.size() > 1;
    marked = same_tensor ? marked->inputs[1].get() : nullptr;
  }
}

// Runs a scope with grad mode set as given, restoring it after.
class GradModeScope {
 public:
  explicit GradModeScope(bool enabled) : previous_(grad_enabled()) { set_grad_enabled(enabled); }
  ~GradModeScope() { set_grad_enabled(previous_); }

 private:
  bool previous_;
};

std::vector<ViewDimension> identity_dimensions(size_t rank) {
  std::vector<ViewDimension> dimensions;
  for (int dim = 0; dim < int(rank); ++dim) dimensions.push_back({dim, 1, 0});
  return dimensions;
}

// The View from a step's input to what a second View of its output reads (as meta_ops/broadcast.cc folds them).
std::vector<ViewDimension> compose(const std::vector<ViewDimension>& first, const std::vector<ViewDimension>& second) {
  std::vector<ViewDimension> composed;
  for (const ViewDimension& inner : first) {
    if (inner.output_dim < 0) {
      composed.push_back(inner);
      continue;
    }
    const ViewDimension& outer = second[size_t(inner.output_dim)];
    composed.push_back({outer.output_dim, outer.output_dim < 0 ? 0 : inner.step * outer.step,
                        inner.offset + inner.step * outer.offset});
  }
  return composed;
}

// A reshape that only adds or drops size-1 dims as an affine step (each other dim to the same dim in order), or
// nothing when it regroups elements.
std::optional<std::vector<ViewDimension>> reshape_as_affine(const Shape& input_shape, const Shape& shape) {
  std::vector<ViewDimension> dimensions;
  size_t output = 0;
  for (int64_t extent : input_shape) {
    if (extent == 1) {
      dimensions.push_back({-1, 0, 0});
      continue;
    }
    while (output < shape.size() && shape[output] == 1) ++output;
    if (output == shape.size() || shape[output] != extent) return std::nullopt;
    dimensions.push_back({int32_t(output++), 1, 0});
  }
  while (output < shape.size() && shape[output] == 1) ++output;
  if (output != shape.size()) return std::nullopt;
  return dimensions;
}

// `base_value` with the elements that the first `step_count` steps (View and Reshape steps: a Detach step only
// ever ends a child group's path from its parent and is never among them) read replaced by
// `value`, written back one segment at a time: a run of View steps is one composed View (so a slice of an
// expanded view writes only its own elements), a reshape is a segment of its own.
NodePtr write_back_path(const NodePtr& base_value, const std::vector<ViewStep>& steps, size_t step_count,
                        NodePtr value) {
  struct Segment {
    bool affine;
    std::vector<ViewDimension> dimensions;  // affine: from the segment's input to its output
    NodePtr input;
    Shape output_shape;
  };
  std::vector<Segment> segments;
  NodePtr walked = base_value;
  for (size_t index = 0; index < step_count; ++index) {
    const ViewStep& step = steps[index];
    if (step.kind == ViewStep::Kind::Detach) throw std::logic_error("internal error: a Detach step inside a path");
    // An unsqueeze or squeeze joins the views around it: a slice of an unsqueezed expanded alias writes only its
    // own elements, where writing the reshape's whole input back through the expand would refuse.
    std::optional<std::vector<ViewDimension>> unit_reshape;
    if (step.kind == ViewStep::Kind::Reshape) unit_reshape = reshape_as_affine(walked->shape, step.shape);
    bool affine = step.kind == ViewStep::Kind::Affine || unit_reshape;
    const std::vector<ViewDimension>& dimensions = unit_reshape ? *unit_reshape : step.dimensions;
    if (affine && !segments.empty() && segments.back().affine)
      segments.back().dimensions = compose(segments.back().dimensions, dimensions);
    else
      segments.push_back({affine, affine ? dimensions : std::vector<ViewDimension>{}, walked, {}});
    segments.back().output_shape = step.shape;
    if (index + 1 < step_count) walked = apply_view_step(walked, step);
  }
  for (size_t index = segments.size(); index-- > 0;) {
    const Segment& segment = segments[index];
    value = segment.affine ? write_through_view(segment.input, segment.output_shape, segment.dimensions, value)
                           : reshape(value, segment.input->shape);
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

// Whether an affine step only adds or drops size-1 dims (unsqueeze, squeeze, a transpose of a size-1 dim,
// selecting index 0 of one): every element keeps its row-major position, as under a reshape.
static bool keeps_row_major_order(const ViewStep& step, const Shape& input_shape) {
  if (step.dimensions.size() != input_shape.size()) return false;
  std::vector<int> walkers(step.shape.size(), 0);
  int previous = -1;
  for (size_t dim = 0; dim < input_shape.size(); ++dim) {
    const ViewDimension& dimension = step.dimensions[dim];
    if (dimension.offset != 0) return false;
    if (dimension.output_dim < 0) {
      if (input_shape[dim] != 1) return false;
      continue;
    }
    int64_t extent = step.shape[size_t(dimension.output_dim)];
    if (extent != input_shape[dim] || (extent != 1 && dimension.step != 1)) return false;
    ++walkers[size_t(dimension.output_dim)];
    if (extent == 1) continue;
    if (dimension.output_dim < previous) return false;
    previous = dimension.output_dim;
  }
  for (size_t dim = 0; dim < step.shape.size(); ++dim)
    if (step.shape[dim] != 1 && walkers[dim] != 1) return false;  // a broadcast or a diagonal
  return true;
}

// Adds `step` to a view's path from its base, merged into the last step where the two compose into one:
// a loop that views its own view (`x = x.reshape(2, 1); x += 1; x = x.reshape(2)`) otherwise makes a path as
// long as the loop, and every use re-derives it and every write scatters back through it: time and memory
// growing as the square of the loop.
static void append_view_step(std::vector<ViewStep>& steps, ViewStep step, const Shape& input_shape) {
  // A squeeze or unsqueeze after an affine step joins it: writing through an expanded view needs the run of
  // affine steps whole (see below).
  if (step.kind == ViewStep::Kind::Reshape && !steps.empty() && steps.back().kind == ViewStep::Kind::Affine) {
    if (auto dimensions = reshape_as_affine(input_shape, step.shape)) {
      step.kind = ViewStep::Kind::Affine;
      step.dimensions = std::move(*dimensions);
    }
  }
  // Only after a reshape, which it then joins. After an affine step it stays affine, composing with it: writing
  // through an expanded view needs the run of affine steps whole, to see that a later slice writes only one of
  // the expanded elements. As a first step it stays what it is, so a write through it records what it did.
  bool after_reshape = !steps.empty() && steps.back().kind == ViewStep::Kind::Reshape;
  if (step.kind == ViewStep::Kind::Affine && after_reshape && keeps_row_major_order(step, input_shape)) {
    step.kind = ViewStep::Kind::Reshape;
    step.dimensions.clear();
  }
  if (!steps.empty() && steps.back().kind == step.kind) {
    ViewStep& last = steps.back();
    if (step.kind == ViewStep::Kind::Reshape) {  // row-major reshapes compose to the last one
      last.shape = std::move(step.shape);
      return;
    }
    if (step.kind == ViewStep::Kind::Affine) {  // index = offset + step * outer index, applied twice
      for (ViewDimension& dimension : last.dimensions) {
        if (dimension.output_dim < 0) continue;
        const ViewDimension& next = step.dimensions[size_t(dimension.output_dim)];
        dimension.offset += dimension.step * next.offset;
        dimension.step = next.output_dim < 0 ? 0 : dimension.step * next.step;
        dimension.output_dim = next.output_dim;
      }
      last.shape = std::move(step.shape);
      return;
    }
  }
  steps.push_back(std::move(step));
}

NodePtr apply_view_step(const NodePtr& input, const ViewStep& step) {
  if (step.kind == ViewStep::Kind::Detach) return detached(input);
  NodePtr result = step.kind == ViewStep::Kind::Affine ? view(input, step.shape, step.dimensions)
                                                       : reshape(input, step.shape);
  if (result != input || !input->requires_grad || !grad_enabled()) return result;
  // An identity view of a value that requires grad is still a view (not a leaf), as in PyTorch.
  result = make_node(NodeKind::View, input->dtype, input->shape, {input});
  result->view = identity_dimensions(input->shape.size());
  return result;
}

Var::Var(NodePtr node) : node_(std::move(node)) {
  if (TraceRecording* recording = active_trace_recording()) recording->made.insert(this);
}

Var::~Var() {
  if (TraceRecording* recording = active_trace_recording()) recording->made.erase(this);
}

void Var::take_replayed_value(NodePtr value) {
  if (!steps_.empty()) throw std::logic_error("a replayed value cannot be given to a view");
  if (group_) {
    group_->replace_value(value);
    seen_version_ = ++group_->version;
  }
  node_ = std::move(value);
}

AliasGroup& Var::group() {
  if (!group_) {
    group_ = std::make_shared<AliasGroup>();
    group_->value = node_;
    group_->gradient_of = gradient_of_;
  }
  return *group_;
}

namespace {
// A write replaced `before` with `after` in a Var or alias group that is a leaf's gradient: the gradient
// follows, unless it was replaced since (zero_grad, another backward), which leaves this handle on its own.
void carry_to_gradient(const std::weak_ptr<Node::GradientSlot>& owner, const NodePtr& before,
                       const NodePtr& after) {
  if (auto slot = owner.lock(); slot && slot->grad == before) {
    slot->grad = after;
    if (active_trace_recording()) note_trace_gradient_write(slot);
  }
}
}  // namespace

VarPtr Var::gradient_of(const NodePtr& owner) {
  if (!owner->gradient_slot || !owner->gradient_slot->grad) return nullptr;
  const std::shared_ptr<Node::GradientSlot>& slot = owner->gradient_slot;
  if (active_trace_recording()) note_trace_gradient_read(slot);
  if (auto cached = std::static_pointer_cast<Var>(slot->handle.lock()); cached && cached->node() == slot->grad)
    return cached;
  auto handle = std::make_shared<Var>(slot->grad);
  handle->gradient_of_ = slot;
  slot->handle = handle;
  return handle;
}

void Var::set_gradient(const NodePtr& owner, const VarPtr& value) {
  if (!value) {
    owner->set_grad(nullptr);
    if (active_trace_recording()) note_trace_gradient_write(owner->gradient_slot);
    return;
  }
  owner->set_grad(value->node());
  if (active_trace_recording()) note_trace_gradient_write(owner->gradient_slot);
  value->gradient_of_ = owner->gradient_slot;
  if (value->group_ && value->steps_.empty()) value->group_->gradient_of = owner->gradient_slot;
  owner->gradient_slot->handle = value;
}

void AliasGroup::remember(const NodePtr& node) {
  earlier_values.erase(std::remove_if(earlier_values.begin(), earlier_values.end(),
                                      [](const std::weak_ptr<Node>& earlier) { return earlier.expired(); }),
                       earlier_values.end());
  earlier_values.push_back(node);
}

void AliasGroup::replace_value(NodePtr next) {
  if (value && value != next) remember(value);
  value = std::move(next);
}

const NodePtr& AliasGroup::current() {
  if (!parent) return value;
  const NodePtr& parent_value = parent->current();
  if (parent_version_seen == parent->version) return value;
  GradModeScope scope(made_in_grad_mode);
  NodePtr derived = parent_value;
  for (const ViewStep& step : from_parent) derived = apply_view_step(derived, step);
  derived->own_version_counter = !shares_versions;
  // A leaf stays one (x.detach().requires_grad_()); a value with history keeps it, its values changed under it,
  // as PyTorch keeps a tensor's grad_fn when another alias of its storage is written. The value replaced stays
  // this alias's (an earlier value): a later write counted here must mark it too.
  replace_value(successor(value, std::move(derived), true));
  parent_version_seen = parent->version;
  ++version;
  return value;
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

namespace {

// PyTorch's is_non_overlapping_and_dense: the dims, ordered by stride, tile a dense block.
bool non_overlapping_and_dense(const Shape& shape, std::vector<int64_t> strides) {
  std::vector<size_t> order;
  for (size_t dim = 0; dim < shape.size(); ++dim)
    if (shape[dim] != 1) order.push_back(dim);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return strides[a] < strides[b]; });
  int64_t expected = 1;
  for (size_t dim : order) {
    if (strides[dim] != expected) return false;
    expected *= shape[dim];
  }
  return true;
}

}  // namespace

Var::Overlap Var::overlap_with(Var& other) {
  if (this == &other) return Overlap::Full;
  node();
  other.node();
  auto storage_of = [](std::shared_ptr<AliasGroup> group) {
    while (group && group->parent) group = group->parent;
    return group;
  };
  if (!group_ || storage_of(group_) != storage_of(other.group_)) return Overlap::None;
  const Shape& shape = node_->shape;
  const Shape& other_shape = other.node_->shape;
  if (shape_numel(shape) == 0 || shape_numel(other_shape) == 0) return Overlap::None;
  std::vector<int64_t> layout = strides(), other_layout = other.strides();
  if (!non_overlapping_and_dense(shape, layout) || !non_overlapping_and_dense(other_shape, other_layout))
    return Overlap::Unknown;
  int64_t begin = storage_offset_, end = begin + shape_numel(shape);
  int64_t other_begin = other.storage_offset_, other_end = other_begin + shape_numel(other_shape);
  if (begin == other_begin && end == other_end) {
    // The same elements: the same layout (strides compared as PyTorch does) is a full overlap, another partial.
    return layout == other_layout ? Overlap::Full : Overlap::Partial;
  }
  return begin < other_end && other_begin < end ? Overlap::Partial : Overlap::None;
}

void Var::derive() {
  GradModeScope scope(made_in_grad_mode_);  // a view made in grad mode stays differentiable when re-derived
  NodePtr value = group_->value;
  for (const ViewStep& step : steps_) value = apply_view_step(value, step);
  // A view the user made a leaf of (x.detach().requires_grad_()) stays one when its base changes.
  node_ = steps_.empty() ? value : keep_leaf(node_, std::move(value));
  // Recording an op on it in grad mode is refused (make_node); reading it, or using it under no_grad, is not.
  if (no_grad_view_ && group_->grad_write_version > created_version_ && !steps_.empty()) {
    if (node_ == group_->value) {  // an identity view (expand to its own shape): the mark needs a node of its own
      NodePtr own = make_node(NodeKind::View, node_->dtype, node_->shape, {node_});
      own->view = identity_dimensions(node_->shape.size());
      node_ = std::move(own);
    }
    node_->ambiguous_no_grad_view = true;
  }
  seen_version_ = group_->version;
}

VarPtr Var::make_view(const VarPtr& base, ViewStep step, std::vector<int64_t> strides, int64_t offset,
                      NodePtr node) {
  // PyTorch refuses to build on a view made under no_grad once its storage was written in grad mode with history
  // since: whether the view should carry that history is ambiguous.
  if (grad_enabled() && base->no_grad_view_ && base->group_ && base->group_->grad_write_version > base->created_version_)
    throw std::runtime_error(kAmbiguousNoGradViewMessage);
  if (!node) node = apply_view_step(base->node(), step);
  AliasGroup& shared = base->group();
  auto view = std::make_shared<Var>(std::move(node));
  view->group_ = base->group_;
  view->steps_ = base->steps_;
  append_view_step(view->steps_, std::move(step), base->node()->shape);
  view->seen_version_ = shared.version;
  view->strides_ = std::move(strides);
  view->storage_offset_ = offset;
  view->made_in_grad_mode_ = grad_enabled();
  view->no_grad_view_of_grad_value_ = (!grad_enabled() && base->node_->requires_grad) || base->no_grad_view_of_grad_value_;
  view->no_grad_view_ = !grad_enabled() || base->no_grad_view_;
  view->created_version_ = grad_enabled() && base->no_grad_view_ ? base->created_version_ : shared.version;
  bool from_leaf = is_leaf_requiring_grad(*base->node_) || base->view_of_leaf_;
  view->view_of_leaf_ = from_leaf && view->steps_.back().kind != ViewStep::Kind::Detach;
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
    // A size-1 dim no input dim walks (unsqueeze, expand to 1) takes the stride PyTorch gives it: that of the
    // next dim times its extent, so overlap checks compare layouts as PyTorch does.
    std::vector<bool> walked(step.shape.size(), false);
    for (const ViewDimension& dimension : step.dimensions)
      if (dimension.output_dim >= 0) walked[size_t(dimension.output_dim)] = true;
    for (size_t dim = step.shape.size(); dim-- > 0;)
      if (!walked[dim] && step.shape[dim] == 1)
        strides[dim] = dim + 1 < step.shape.size() ? strides[dim + 1] * std::max<int64_t>(step.shape[dim + 1], 1) : 1;
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
  return view_of(base, std::move(step), one_step && built != base_node ? built : nullptr);
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
  if (base->node_ == node) node = nullptr;  // an identity: make_view makes the view's own node
  return make_view(base, ViewStep{ViewStep::Kind::Reshape, std::move(view_shape), {}}, std::move(*strides),
                   base->storage_offset_, std::move(node));
}

VarPtr Var::make_detached_alias(const VarPtr& base, bool shares_versions) {
  const NodePtr& base_node = base->node();
  AliasGroup& parent = base->group();
  auto child = std::make_shared<AliasGroup>();
  child->parent = base->group_;
  child->from_parent = base->steps_;
  child->from_parent.push_back(ViewStep{ViewStep::Kind::Detach, base_node->shape, {}});
  child->parent_version_seen = parent.version;
  child->shares_versions = shares_versions;
  child->made_in_grad_mode = grad_enabled();
  child->value = detached(base_node);
  child->value->own_version_counter = !shares_versions;
  if (shares_versions) {
    std::vector<std::weak_ptr<AliasGroup>>& siblings = parent.version_sharing_children;
    siblings.erase(std::remove_if(siblings.begin(), siblings.end(),
                                  [](const std::weak_ptr<AliasGroup>& sibling) { return sibling.expired(); }),
                   siblings.end());
    siblings.push_back(child);
  }
  auto alias = std::make_shared<Var>(child->value);
  alias->group_ = std::move(child);
  alias->strides_ = base->strides();
  alias->storage_offset_ = base->storage_offset_;
  return alias;
}

VarPtr Var::detached_alias(const VarPtr& base) { return make_detached_alias(base, true); }

VarPtr Var::data_alias(const VarPtr& base) { return make_detached_alias(base, false); }

namespace {
[[noreturn]] void throw_no_grad_view_error(const std::string& operation) {
  throw std::runtime_error("A view was created in no_grad mode and is being modified inplace with grad mode enabled (" +
                           operation + "). Given that this use case is ambiguous and error-prone, it is forbidden. "
                           "You can clarify your code by moving both the view and the inplace either both inside the "
                           "no_grad block (if you don't want the inplace to be tracked) or both outside (if you want "
                           "the inplace to be tracked).");
}
}  // namespace

void Var::write(NodePtr value, const std::string& operation, uint64_t first_node_id) {
  if (active_trace_recording()) note_trace_write(*this);
  if (!first_node_id) first_node_id = next_node_id_value();
  const NodePtr current = node();
  if (value->shape != current->shape)
    throw std::invalid_argument(operation + ": the new value has shape " + shape_to_string(value->shape) +
                                " but the Var written has shape " + shape_to_string(current->shape));
  check_writable(operation);
  const Shape& shape = current->shape;
  std::vector<int64_t> layout = strides();
  for (size_t dim = 0; dim < shape.size(); ++dim)
    if (shape[dim] > 1 && layout[dim] == 0)
      throw std::invalid_argument(
          "unsupported operation: more than one element of the written-to tensor refers to a single memory "
          "location (" + operation + " on an expanded view). Please clone() the tensor before performing the "
          "operation.");
  // PyTorch forbids recording history into a view made under no_grad: the value written requires grad here.
  if (grad_enabled() && no_grad_view_ && value->requires_grad) throw_no_grad_view_error(operation);
  if (value->dtype != current->dtype) value = cast(value, current->dtype);
  // Under no_grad a write records no history: x.copy_(y) of a y that requires grad leaves x as it was.
  if (!grad_enabled() && value->requires_grad) value = stop_gradient(value);
  if (grad_enabled() && value->requires_grad && !value->gradient_history) {
    // Another Var's leaf (copy_(leaf)): this Var holds a copy of it, a value with history, never that leaf.
    NodePtr copy = make_node(NodeKind::View, value->dtype, value->shape, {value});
    copy->view = identity_dimensions(value->shape.size());
    value = std::move(copy);
  }
  mark_versions(*current, operation, first_node_id);
  bool outside_graph = !grad_enabled();
  if (!group_) {
    node_ = successor(current, std::move(value), outside_graph);
    carry_to_gradient(gradient_of_, current, node_);
    return;
  }
  NodePtr written = value;
  NodePtr replacement = write_back_path(group_->value, steps_, steps_.size(), std::move(value));
  NodePtr before = group_->value;
  group_->replace_value(successor(group_->value, std::move(replacement), outside_graph));
  if (!steps_.empty()) {
    group_->remember(written);
    if (!outside_graph && group_->value->requires_grad) group_->value->written_through_view = true;
  }
  carry_to_gradient(group_->gradient_of, before, group_->value);
  ++group_->version;
  if (!outside_graph && group_->value->requires_grad) group_->grad_write_version = group_->version;
  // A detached alias passes the values written, not their history, on to the values it aliases: through the
  // path from the parent's base to this Var (the Detach step reads the same elements), so only the elements
  // written move (a slice of an expanded alias writes its own elements).
  NodePtr carried = stop_gradient(written);
  std::vector<ViewStep> path = steps_;
  for (AliasGroup* child = group_.get(); child->parent; child = child->parent.get()) {
    AliasGroup& parent = *child->parent;
    path.insert(path.begin(), child->from_parent.begin(), child->from_parent.end() - 1);
    NodePtr parent_replacement = write_back_path(parent.current(), path, path.size(), carried);
    NodePtr parent_before = parent.value;
    parent.replace_value(successor(parent.value, std::move(parent_replacement), true));
    carry_to_gradient(parent.gradient_of, parent_before, parent.value);
    ++parent.version;
    // A child without history re-derives from the parent, whose values now show the write everywhere it
    // aliases (a detached expand written at one position shows it at every position that shares it).
    child->parent_version_seen = child->value->requires_grad ? parent.version : parent.version - 1;
  }
  derive();
  carry_to_gradient(gradient_of_, current, node_);  // a view that was assigned as a gradient itself
}

// PyTorch's version counters: a write bumps the counter of what it wrote and of the storage it shares; a .data
// alias has a counter of its own. detach() shares its parent's, so the groups sharing one counter are a tree:
// up from the written group to its root, then down to every detach() alias of it.
void Var::mark_versions(Node& current, const std::string& operation, uint64_t first_node_id) {
  mark_overwritten(current, operation, first_node_id);
  if (!group_) return;
  AliasGroup* root = group_.get();
  while (root->shares_versions && root->parent) root = root->parent.get();
  std::vector<AliasGroup*> pending{root};
  while (!pending.empty()) {
    AliasGroup* group = pending.back();
    pending.pop_back();
    mark_overwritten(*group->value, operation, first_node_id);
    for (const std::weak_ptr<Node>& earlier : group->earlier_values)
      if (NodePtr node = earlier.lock()) mark_overwritten(*node, operation, first_node_id);
    for (const std::weak_ptr<AliasGroup>& weak_child : group->version_sharing_children)
      if (std::shared_ptr<AliasGroup> child = weak_child.lock()) pending.push_back(child.get());
  }
}

void Var::count_write(const std::string& operation) {
  NodePtr current = node();
  check_writable(operation);
  mark_versions(*current, operation, next_node_id_value());
}

void Var::check_writable(const std::string& operation) {
  if (!grad_enabled()) return;
  if (is_leaf_requiring_grad(*node()))
    throw std::runtime_error("a leaf Variable that requires grad is being used in an in-place operation (" +
                             operation + "); wrap it in `with mj.no_grad():` or write through .data");
  if (view_of_leaf_)
    throw std::runtime_error("a view of a leaf Variable that requires grad is being used in an in-place operation (" +
                             operation + "); wrap it in `with mj.no_grad():` or write through .data");
  if (no_grad_view_of_grad_value_) throw_no_grad_view_error(operation);
}

void Var::set_data(NodePtr value) {
  if (active_trace_recording()) note_trace_write(*this);
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
    if (node_->gradient_history)
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
  node_->gradient_leaf = true;  // a leaf even when computed from values that require grad (under no_grad)
  if (base_of_group) {
    group_->value = node_;
    seen_version_ = ++group_->version;
  }
}

void Var::detach_in_place() {
  if (active_trace_recording()) note_trace_write(*this);
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
