// View construction with validation. Views of views are folded into one View so chains of transposes and
// slices cost one index computation in the kernel.
#include "meta_ops/broadcast.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/executor.h"
#include "meta_ops/elementwise.h"
#include "meta_ops/index_expression.h"
#include "meta_ops/reduce.h"

namespace metajit {

std::vector<int> normalize_dims(const std::vector<int64_t>& dims, int rank, const char* what) {
  std::vector<int> result;
  for (int64_t dim : dims) {
    if (dim < -rank || dim >= rank)
      throw std::invalid_argument(std::string(what) + ": dim " + std::to_string(dim) +
                                  " is out of range for a tensor of rank " + std::to_string(rank) + " (expected " +
                                  std::to_string(-rank) + ".." + std::to_string(rank - 1) + ")");
    int normalized = int(dim < 0 ? dim + rank : dim);
    if (std::find(result.begin(), result.end(), normalized) != result.end())
      throw std::invalid_argument(std::string(what) + ": dim " + std::to_string(dim) + " is repeated");
    result.push_back(normalized);
  }
  std::sort(result.begin(), result.end());
  return result;
}

NodePtr view(const NodePtr& input, const Shape& shape, std::vector<ViewDimension> dimensions) {
  if (dimensions.size() != input->shape.size())
    throw std::invalid_argument("view needs one mapping per input dimension");
  for (int64_t extent : shape)
    if (extent < 0) throw std::invalid_argument("negative dimension in shape " + shape_to_string(shape));
  bool identity = shape == input->shape;
  for (size_t dim = 0; dim < dimensions.size() && identity; ++dim)
    identity = dimensions[dim].output_dim == int(dim) && dimensions[dim].step == 1 && dimensions[dim].offset == 0;
  if (identity) return input;
  NodePtr source = input->kind == NodeKind::View ? pending_source(*input) : nullptr;
  // Composition skips the inner node, so it must not be a gradient target or a gradient stop, nor a .data
  // alias's node (the version check stops there).
  if (source && !input->requires_grad && !source->requires_grad && !input->own_version_counter) {
    // Compose: inner index = offset + step * (outer offset + outer step * i[outer dim]).
    std::vector<ViewDimension> composed;
    for (const ViewDimension& inner : input->view) {
      if (inner.output_dim < 0) {
        composed.push_back(inner);
        continue;
      }
      const ViewDimension& outer = dimensions[inner.output_dim];
      composed.push_back({outer.output_dim, inner.step * outer.step, inner.offset + inner.step * outer.offset});
    }
    for (ViewDimension& dimension : composed)
      if (dimension.output_dim < 0) dimension.step = 0;
    return view(source, shape, std::move(composed));
  }
  auto node = make_node(NodeKind::View, input->dtype, shape, {input});
  node->view = std::move(dimensions);
  return node;
}

NodePtr broadcast(const NodePtr& input, const Shape& shape, const std::vector<int64_t>& dims) {
  int rank = int(shape.size());
  std::vector<int> new_dims = normalize_dims(dims, rank, "broadcast");
  if (int(input->shape.size()) + int(new_dims.size()) != rank)
    throw std::invalid_argument("broadcast: input of shape " + shape_to_string(input->shape) + " plus " +
                                std::to_string(new_dims.size()) + " new dims does not give rank " +
                                std::to_string(rank) + " of " + shape_to_string(shape));
  std::vector<ViewDimension> mapping;
  int input_dim = 0;
  for (int dim = 0; dim < rank; ++dim) {
    if (std::find(new_dims.begin(), new_dims.end(), dim) != new_dims.end()) continue;
    int64_t extent = input->shape[input_dim];
    if (extent != shape[dim] && extent != 1)
      throw std::invalid_argument("broadcast: input dim " + std::to_string(input_dim) + " of shape " +
                                  shape_to_string(input->shape) + " has extent " + std::to_string(extent) +
                                  " which cannot broadcast to " + std::to_string(shape[dim]) + " in " +
                                  shape_to_string(shape));
    mapping.push_back(extent == 1 ? ViewDimension{-1, 0, 0} : ViewDimension{dim, 1, 0});
    ++input_dim;
  }
  return view(input, shape, std::move(mapping));
}

NodePtr broadcast_to(const NodePtr& input, const Shape& shape) {
  int rank = int(shape.size()), input_rank = int(input->shape.size());
  if (input_rank > rank)
    throw std::invalid_argument("cannot broadcast shape " + shape_to_string(input->shape) + " to " +
                                shape_to_string(shape));
  std::vector<int64_t> new_dims;
  for (int dim = 0; dim < rank - input_rank; ++dim) new_dims.push_back(dim);
  for (int dim = 0; dim < input_rank; ++dim) {
    int64_t extent = input->shape[dim], target = shape[rank - input_rank + dim];
    if (extent != target && extent != 1)
      throw std::invalid_argument("cannot broadcast shape " + shape_to_string(input->shape) + " to " +
                                  shape_to_string(shape));
  }
  return broadcast(input, shape, new_dims);
}

NodePtr permute(const NodePtr& input, const std::vector<int64_t>& order) {
  int rank = int(input->shape.size());
  if (int(order.size()) != rank)
    throw std::invalid_argument("permute: expected " + std::to_string(rank) + " dims for a tensor of shape " +
                                shape_to_string(input->shape) + ", got " + std::to_string(order.size()));
  normalize_dims(order, rank, "permute");  // validates range and repeats
  Shape shape(rank);
  std::vector<ViewDimension> mapping(rank);
  for (int output_dim = 0; output_dim < rank; ++output_dim) {
    int source = int(order[output_dim] < 0 ? order[output_dim] + rank : order[output_dim]);
    shape[output_dim] = input->shape[source];
    mapping[source] = {output_dim, 1, 0};
  }
  return view(input, shape, std::move(mapping));
}

NodePtr transpose(const NodePtr& input, int64_t first, int64_t second) {
  int rank = int(input->shape.size());
  std::vector<int> dims = normalize_dims({first}, rank, "transpose");
  std::vector<int> other = normalize_dims({second}, rank, "transpose");
  std::vector<int64_t> order(rank);
  for (int dim = 0; dim < rank; ++dim) order[dim] = dim;
  std::swap(order[dims[0]], order[other[0]]);
  return permute(input, order);
}

NodePtr transposed_matrix_source(const NodePtr& node) {
  if (node->kind != NodeKind::View || node->shape.size() != 2) return nullptr;
  NodePtr source = pending_source(*node);
  if (!source || source->shape.size() != 2 || node->view.size() != 2) return nullptr;
  for (int dim = 0; dim < 2; ++dim) {
    const ViewDimension& mapping = node->view[dim];
    if (mapping.output_dim != 1 - dim || mapping.step != 1 || mapping.offset != 0) return nullptr;
  }
  return source->shape[0] == node->shape[1] && source->shape[1] == node->shape[0] ? source : nullptr;
}

NodePtr reshape(const NodePtr& input, Shape shape) {
  int64_t known = 1;
  int inferred = -1;
  for (size_t dim = 0; dim < shape.size(); ++dim) {
    if (shape[dim] == -1) {
      if (inferred >= 0) throw std::invalid_argument("reshape: only one dimension can be -1");
      inferred = int(dim);
    } else if (shape[dim] < 0) {
      throw std::invalid_argument("reshape: invalid extent " + std::to_string(shape[dim]));
    } else {
      known *= shape[dim];
    }
  }
  int64_t count = input->numel();
  if (inferred >= 0) {
    if (known == 0 || count % known != 0)
      throw std::invalid_argument("reshape: cannot reshape " + shape_to_string(input->shape) + " into " +
                                  shape_to_string(shape));
    shape[inferred] = count / known;
  }
  if (shape_numel(shape) != count)
    throw std::invalid_argument("reshape: cannot reshape " + shape_to_string(input->shape) + " (" +
                                std::to_string(count) + " elements) into " + shape_to_string(shape));
  if (shape == input->shape) return input;
  if (input->kind == NodeKind::Reshape && !input->requires_grad)
    if (NodePtr source = pending_source(*input))
      if (!source->requires_grad) return reshape(source, shape);
  return make_node(NodeKind::Reshape, input->dtype, shape, {input});
}

NodePtr stop_gradient(const NodePtr& input) {
  return input->requires_grad ? detached(input) : input;
}

std::vector<NodePtr> reshape_gradient(const NodePtr& node, const NodePtr& grad) {
  return {reshape(grad, node->inputs[0]->shape)};
}

namespace {

// The output dims of a view that some input dim moves along; the others were broadcast (or are new size-1 dims).
std::vector<bool> walked_dims(const std::vector<ViewDimension>& mapping, int output_rank) {
  std::vector<bool> walked(output_rank, false);
  for (const ViewDimension& dimension : mapping)
    if (dimension.output_dim >= 0 && dimension.step != 0) walked[dimension.output_dim] = true;
  return walked;
}

}  // namespace

NodePtr place_view_elements(const Shape& input_shape, const std::vector<ViewDimension>& mapping,
                            const Shape& view_shape, const NodePtr& walked_value, bool* covers_input) {
  int output_rank = int(view_shape.size()), input_rank = int(input_shape.size());
  std::vector<bool> walked = walked_dims(mapping, output_rank);
  std::vector<int> kept_position(output_rank, -1);  // output dim -> its position in walked_value
  Shape kept_shape;
  for (int dim = 0; dim < output_rank; ++dim) {
    if (!walked[dim]) continue;
    kept_position[dim] = int(kept_shape.size());
    kept_shape.push_back(view_shape[dim]);
  }
  if (walked_value->shape != kept_shape)
    throw std::logic_error("internal error: place_view_elements got shape " + shape_to_string(walked_value->shape) +
                           ", expected " + shape_to_string(kept_shape));

  // 1. Common cases without index expressions: every input dim walks one kept dim with step 1 from 0 over its
  //    whole extent (size-1 input dims aside): a reshape, or a permutation.
  bool plain = true;
  std::vector<int64_t> order;
  for (int dim = 0; dim < input_rank && plain; ++dim) {
    const ViewDimension& dimension = mapping[dim];
    bool walks = dimension.output_dim >= 0 && dimension.step != 0;
    if (!walks) {
      plain = input_shape[dim] == 1 && dimension.offset == 0;
      continue;
    }
    plain = dimension.step == 1 && dimension.offset == 0 && input_shape[dim] == view_shape[dimension.output_dim];
    order.push_back(kept_position[dimension.output_dim]);
  }
  if (covers_input) *covers_input = plain && order.size() == kept_shape.size();
  if (plain && order.size() == kept_shape.size()) {
    // Input dim k reads kept dim order[k]: put the kept dims in input order, then restore size-1 dims.
    NodePtr arranged = std::is_sorted(order.begin(), order.end()) ? walked_value : permute(walked_value, order);
    return reshape(arranged, input_shape);
  }

  // 2. Slices, flips, strides, diagonals: each input position receives at most one output element, so this is
  //    a gather (reindex) from the walked value with overflow where nothing was read.
  auto payload = std::make_shared<IndexPayload>();
  std::vector<IndexExpression> position_of(kept_shape.size());
  std::vector<IndexExpression> conditions;
  for (int dim = 0; dim < input_rank; ++dim) {
    const ViewDimension& dimension = mapping[dim];
    IndexExpression here = make_loop_index(dim);
    if (dimension.output_dim < 0 || dimension.step == 0) {
      if (input_shape[dim] != 1 || dimension.offset != 0)
        conditions.push_back(make_binary(IndexOperator::NotEqual, here, make_integer(dimension.offset)));
      continue;
    }
    IndexExpression shifted = make_binary(IndexOperator::Subtract, here, make_integer(dimension.offset));
    IndexExpression step = make_integer(dimension.step);
    IndexExpression position = make_binary(IndexOperator::FloorDivide, shifted, step);
    if (dimension.step != 1 && dimension.step != -1)
      conditions.push_back(make_binary(IndexOperator::NotEqual, make_binary(IndexOperator::FloorModulo, shifted, step),
                                       make_integer(0)));
    IndexExpression& slot = position_of[kept_position[dimension.output_dim]];
    if (slot)  // a second input dim walking the same output dim (a diagonal): both must agree
      conditions.push_back(make_binary(IndexOperator::NotEqual, slot, position));
    else
      slot = position;
  }
  for (IndexExpression& position : position_of) payload->indexes.push_back(simplify(position));
  if (!conditions.empty()) {
    IndexExpression any = conditions[0];
    for (size_t index = 1; index < conditions.size(); ++index)
      any = make_binary(IndexOperator::LogicalOr, any, conditions[index]);
    payload->overflow_conditions.push_back(simplify(any));
  }
  return reindex_parsed(walked_value, input_shape, std::move(payload), 0.0, {});
}

std::vector<NodePtr> view_gradient(const NodePtr& node, const NodePtr& grad) {
  // Output dims no input dim moves along were broadcast: sum the gradient over them, then place it.
  std::vector<bool> walked = walked_dims(node->view, int(node->shape.size()));
  std::vector<int64_t> summed;
  for (int dim = 0; dim < int(walked.size()); ++dim)
    if (!walked[dim]) summed.push_back(dim);
  NodePtr reduced = summed.empty() ? grad : reduce(grad, ReduceOp::Add, summed, false);
  return {place_view_elements(node->inputs[0]->shape, node->view, node->shape, reduced, nullptr)};
}

NodePtr write_through_view(const NodePtr& base, const Shape& view_shape, const std::vector<ViewDimension>& mapping,
                           const NodePtr& value) {
  std::vector<bool> walked = walked_dims(mapping, int(view_shape.size()));
  Shape kept_shape;
  for (int dim = 0; dim < int(view_shape.size()); ++dim) {
    if (walked[dim]) {
      kept_shape.push_back(view_shape[dim]);
    } else if (view_shape[dim] > 1) {
      throw std::invalid_argument(
          "unsupported operation: more than one element of the written-to tensor refers to a single memory "
          "location (dim " + std::to_string(dim) + " of the view " + shape_to_string(view_shape) +
          " is expanded). Please clone() the tensor before performing the operation.");
    }
  }
  bool covers_base = false;
  NodePtr placed = place_view_elements(base->shape, mapping, view_shape, reshape(value, kept_shape), &covers_base);
  if (covers_base) return placed;
  NodePtr written = place_view_elements(base->shape, mapping, view_shape, constant(kept_shape, DType::Bool, 1.0), nullptr);
  return where(written, placed, base);
}

NodePtr detached(const NodePtr& input) {
  if (input->is_computed()) {  // share the value, not the history
    auto node = make_node(NodeKind::Data, input->dtype, input->shape);
    node->storage = input->storage;
    node->shares_value_of = input;
    return node;
  }
  std::vector<ViewDimension> identity;
  for (int dim = 0; dim < int(input->shape.size()); ++dim) identity.push_back({dim, 1, 0});
  auto node = make_node(NodeKind::View, input->dtype, input->shape, {input});
  node->view = std::move(identity);
  node->requires_grad = false;
  node->gradient_history = false;
  node->gradient_leaf = true;
  return node;
}

}  // namespace metajit
