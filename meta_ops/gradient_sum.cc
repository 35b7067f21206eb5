#include "meta_ops/gradient_sum.h"

#include <stdexcept>
#include <string>
#include <unordered_map>

#include "meta_ops/broadcast.h"
#include "meta_ops/elementwise.h"
#include "meta_ops/reduce.h"

namespace metajit {
namespace {

// mj.stack's grouping (python/metajit/ops/tensor.py): a kernel renders a loop per piece for up to eight pieces,
// and a join of more than 64 stores each group first so no kernel holds them all.
constexpr size_t kMostPiecesPerGroup = 8;
constexpr size_t kMostPiecesInAKernel = kMostPiecesPerGroup * kMostPiecesPerGroup;
constexpr size_t kStoreJoinsAbove = 4;  // with gradients flowing, as mj.cat: a scatter per piece would recompute it
// The views and reshapes followed below a contraction's product (a matmul's operands take two or three).
constexpr int kMostOperandSteps = 6;

std::shared_ptr<IndexPayload> identity_payload(size_t rank) {
  auto payload = std::make_shared<IndexPayload>();
  for (size_t dim = 0; dim < rank; ++dim) payload->indexes.push_back(make_loop_index(int(dim)));
  return payload;
}

NodePtr stored(const NodePtr& value) {  // an identity reindex_reduce is always computed into a buffer
  return reindex_reduce_parsed(value, ReduceOp::Add, value->shape, identity_payload(value->shape.size()), {});
}

// Pieces of one shape but their leading extent, each placed at its offset by a reindex that reads -0.0 elsewhere
// (x + -0.0 == x keeps every value, signed zeros included), and added: one fused kernel.
NodePtr place_and_add(const std::vector<NodePtr>& pieces) {
  Shape shape = pieces[0]->shape;
  shape[0] = 0;
  for (const NodePtr& piece : pieces) shape[0] += piece->shape[0];
  NodePtr result;
  int64_t offset = 0;
  for (const NodePtr& piece : pieces) {
    auto payload = identity_payload(shape.size());
    payload->indexes[0] = simplify(make_binary(IndexOperator::Subtract, make_loop_index(0), make_integer(offset)));
    offset += piece->shape[0];
    NodePtr placed = reindex_parsed(piece, shape, std::move(payload), -0.0, {});
    result = result ? binary(BinaryOp::Add, result, placed) : placed;
  }
  return result;
}

NodePtr join(const std::vector<NodePtr>& pieces) {
  if (pieces.size() > kMostPiecesPerGroup) {
    bool store_groups = pieces.size() > kMostPiecesInAKernel;
    std::vector<NodePtr> joined;
    for (size_t start = 0; start < pieces.size(); start += kMostPiecesPerGroup) {
      std::vector<NodePtr> group(pieces.begin() + long(start),
                                 pieces.begin() + long(std::min(pieces.size(), start + kMostPiecesPerGroup)));
      if (group.size() == 1) {
        joined.push_back(group[0]);
        continue;
      }
      NodePtr group_join = join(group);
      joined.push_back(store_groups && !group_join->requires_grad ? stored(group_join) : group_join);
    }
    return join(joined);
  }
  NodePtr result = place_and_add(pieces);
  return pieces.size() > kStoreJoinsAbove && result->requires_grad ? stored(result) : result;
}

Shape with_leading(int64_t extent, const Shape& shape) {
  Shape result{extent};
  result.insert(result.end(), shape.begin(), shape.end());
  return result;
}

bool same_view(const Node& a, const Node& b) {
  if (a.view.size() != b.view.size()) return false;
  for (size_t dim = 0; dim < a.view.size(); ++dim)
    if (a.view[dim].output_dim != b.view[dim].output_dim || a.view[dim].step != b.view[dim].step ||
        a.view[dim].offset != b.view[dim].offset)
      return false;
  return true;
}

// Whether the nodes at one position of the terms are the same step of a contraction operand's path (a view or a
// reshape with the same parameters, of inputs of one shape): lifted to a step of the stacked operand rather than
// stacked themselves. Below the first step that differs, the values differ: those are stacked.
bool common_step(const std::vector<NodePtr>& nodes, int depth) {
  const Node& first = *nodes[0];
  if (depth > kMostOperandSteps || (first.kind != NodeKind::View && first.kind != NodeKind::Reshape)) return false;
  for (const NodePtr& node : nodes) {
    if (node->kind != first.kind || node->shape != first.shape || node->inputs.size() != 1 || !node->inputs[0] ||
        node->inputs[0]->shape != nodes[0]->inputs.at(0)->shape || node->inputs[0]->dtype != first.dtype)
      return false;
    if (first.kind == NodeKind::View && !same_view(*node, first)) return false;
  }
  return true;
}

std::vector<const Node*> key_of(const std::vector<NodePtr>& pieces) {
  std::vector<const Node*> key;
  for (const NodePtr& piece : pieces) key.push_back(piece.get());
  return key;
}

std::vector<NodePtr> inputs_at(const std::vector<NodePtr>& nodes, size_t index) {
  std::vector<NodePtr> inputs;
  for (const NodePtr& node : nodes) inputs.push_back(node->inputs[index]);
  return inputs;
}

// The values to stack below one position: false when they cannot be (shapes differ) or should not be (one value
// for every term: its terms would be better summed before the product, which this does not do).
bool collect_stacked(const std::vector<NodePtr>& nodes, int depth, std::vector<std::vector<NodePtr>>& stacked) {
  if (common_step(nodes, depth)) return collect_stacked(inputs_at(nodes, 0), depth + 1, stacked);
  bool all_one = true;
  for (const NodePtr& node : nodes) {
    if (node->shape != nodes[0]->shape || node->dtype != nodes[0]->dtype) return false;
    all_one = all_one && node == nodes[0];
  }
  if (all_one) return false;
  stacked.push_back(nodes);
  return true;
}

// A term's sum below the reshapes that give it its value's shape (matmul's gradient, built with grad mode on,
// reshapes its [1, K, N] placement back to [K, N]).
NodePtr summed_core(const NodePtr& term) {
  NodePtr core = term;
  for (int step = 0;
       step < kMostOperandSteps && core->kind == NodeKind::Reshape && core->inputs.size() == 1 && core->inputs[0];
       ++step)
    core = core->inputs[0];
  return core;
}

// A term the rewrite can take: a sum (over some dims) of a product or of a value, in a floating dtype.
bool is_summed_term(const Node& node) {
  return node.kind == NodeKind::Reduce && ReduceOp(node.op_code) == ReduceOp::Add && !node.keepdim &&
         node.inputs.size() == 1 && node.inputs[0] && is_floating(node.dtype);
}

bool is_product(const Node& node) {
  return node.kind == NodeKind::Binary && BinaryOp(node.op_code) == BinaryOp::Multiply && node.inputs.size() == 2 &&
         node.inputs[0] && node.inputs[1] && node.inputs[0]->shape == node.shape && node.inputs[1]->shape == node.shape;
}

// The views and reshapes an operand is reached through, as text: kinds, shapes and which dims each view walks
// with which step (not where it starts: a slice of each step's input is stacked). Terms whose paths differ are
// not stacked together (a view computed by an earlier sync has lost its input: its terms keep their own sums).
void describe_path(const Node& node, int depth, std::string& text) {
  text += shape_to_string(node.shape);
  text += dtype_name(node.dtype);
  if ((node.kind != NodeKind::View && node.kind != NodeKind::Reshape) || depth > kMostOperandSteps) return;
  text += node.kind == NodeKind::View ? " view" : " reshape";
  for (const ViewDimension& dimension : node.view)
    text += " " + std::to_string(dimension.output_dim) + ":" + std::to_string(dimension.step);
  if (node.inputs.size() != 1 || !node.inputs[0]) {
    text += " of a computed value";
    return;
  }
  text += " of ";
  describe_path(*node.inputs[0], depth + 1, text);
}

// Terms that may be one contraction share this text: the same sum of the same shape, both products or neither,
// with operands reached the same way.
std::string form_of(const Node& core) {
  const Node& summed = *core.inputs[0];
  std::string text = std::to_string(core.reduce_mask) + " ";
  if (!is_product(summed))
    describe_path(summed, 1, text);
  else
    for (const NodePtr& factor : summed.inputs) {
      text += " | ";
      describe_path(*factor, 1, text);
    }
  return text;
}

// The positions below the sum where the terms' operands start: the product's two factors, or the summed value.
std::vector<std::vector<NodePtr>> operand_positions(const std::vector<NodePtr>& terms) {
  std::vector<NodePtr> summed = inputs_at(terms, 0);
  if (!is_product(*summed[0])) return {summed};
  return {inputs_at(summed, 0), inputs_at(summed, 1)};
}

}  // namespace

NodePtr stack_values(const std::vector<NodePtr>& pieces) {
  if (pieces.empty()) throw std::logic_error("internal error: stack_values of no values");
  if (!is_floating(pieces[0]->dtype)) throw std::logic_error("internal error: stack_values of a non-float dtype");
  std::vector<NodePtr> rows;
  for (const NodePtr& piece : pieces) {
    if (piece->shape != pieces[0]->shape || piece->dtype != pieces[0]->dtype)
      throw std::logic_error("internal error: stack_values of values of different shapes or dtypes");
    rows.push_back(reshape(piece, with_leading(1, piece->shape)));
  }
  return rows.size() == 1 ? rows[0] : join(rows);
}

NodePtr GradientSum::stacked(const std::vector<NodePtr>& pieces) {
  NodePtr& slot = stacks_[key_of(pieces)];
  if (!slot) slot = stack_values(pieces);
  return slot;
}

NodePtr GradientSum::lift(const std::vector<NodePtr>& nodes, int depth) {
  if (!common_step(nodes, depth)) return stacked(nodes);
  NodePtr input = lift(inputs_at(nodes, 0), depth + 1);
  const Node& first = *nodes[0];
  Shape shape = with_leading(int64_t(nodes.size()), first.shape);
  if (first.kind == NodeKind::Reshape) return reshape(input, shape);
  std::vector<ViewDimension> mapping{{0, 1, 0}};  // the new dim of the stack walks the new dim of the view
  for (ViewDimension dimension : first.view) {
    if (dimension.output_dim >= 0) ++dimension.output_dim;
    mapping.push_back(dimension);
  }
  return view(input, shape, std::move(mapping));
}

NodePtr GradientSum::stacked_contraction(const std::vector<NodePtr>& reshaped_terms) {
  std::vector<NodePtr> terms;
  for (const NodePtr& term : reshaped_terms) terms.push_back(summed_core(term));
  std::vector<std::vector<NodePtr>> positions = operand_positions(terms), stacks;
  for (const std::vector<NodePtr>& position : positions)
    if (!collect_stacked(position, 1, stacks)) return nullptr;
  // Worth it when stacking writes less than the per-term results it saves (each written, then read by the sum):
  // an LSTM's weight gradient has a [1024, 256] result per step from [32, 1024] and [32, 256] operands; a
  // bias's gradient only reuses the stack its weight made.
  int64_t stacked_elements = 0;
  for (const std::vector<NodePtr>& pieces : stacks)
    if (!stacks_.count(key_of(pieces))) stacked_elements += pieces[0]->numel();
  if (stacked_elements > terms[0]->numel()) return nullptr;
  std::vector<NodePtr> lifted;
  for (const std::vector<NodePtr>& position : positions) lifted.push_back(lift(position, 1));
  NodePtr summed = lifted.size() == 2 ? binary(BinaryOp::Multiply, lifted[0], lifted[1]) : lifted[0];
  std::vector<int64_t> dims{0};  // the steps, and each term's own summed dims
  for (int dim = 0; dim < int(terms[0]->inputs[0]->shape.size()); ++dim)
    if (terms[0]->reduce_mask >> dim & 1) dims.push_back(dim + 1);
  return reshape(reduce(summed, ReduceOp::Add, dims, false), reshaped_terms[0]->shape);
}

NodePtr GradientSum::total(const std::vector<NodePtr>& terms) {
  if (terms.empty()) throw std::logic_error("internal error: GradientSum::total of no terms");
  // Groups of terms of one form, in the order of their first term; a term of no such form is a group of one.
  std::vector<std::vector<NodePtr>> groups;
  std::unordered_map<std::string, size_t> group_of_form;
  for (const NodePtr& term : terms) {
    NodePtr core = summed_core(term);
    if (!is_summed_term(*core)) {
      groups.push_back({term});
      continue;
    }
    auto [found, added] = group_of_form.emplace(form_of(*core), groups.size());
    if (added) groups.emplace_back();
    groups[found->second].push_back(term);
  }
  std::vector<NodePtr> values;  // one per group, null where the group's terms are added one by one
  bool any_stacked = false;
  for (const std::vector<NodePtr>& group : groups) {
    values.push_back(group.size() > 1 ? stacked_contraction(group) : group[0]);
    any_stacked = any_stacked || (group.size() > 1 && values.back());
  }
  NodePtr result;
  auto add = [&](const NodePtr& value) { result = result ? binary(BinaryOp::Add, result, value) : value; };
  if (!any_stacked) {  // in arrival order, as before this rewrite existed: the same rounding
    for (const NodePtr& term : terms) add(term);
    return result;
  }
  for (size_t index = 0; index < groups.size(); ++index) {
    if (values[index])
      add(values[index]);
    else
      for (const NodePtr& term : groups[index]) add(term);
  }
  return result;
}

}  // namespace metajit
