#include "jit/ir/placement.h"

#include <algorithm>
#include <map>

#include "meta_ops/reduce.h"

namespace metajit {
namespace {

// sum(coefficient * i<k>) + constant.
struct Affine {
  std::map<int, int64_t> terms;
  int64_t constant = 0;
};

// `expression` as an affine function of the loop indices, shapes taken as the constants they are; false for
// anything else (a division, a min, an index buffer read).
bool affine(const IndexExpression& expression, const Shape& source_shape, const Shape& target_shape, Affine* result) {
  switch (expression->kind) {
    case IndexNodeKind::Integer:
      if (expression->type != IndexType::Integer) return false;
      result->constant = expression->value;
      return true;
    case IndexNodeKind::LoopIndex: result->terms[int(expression->value)] = 1; return true;
    case IndexNodeKind::InputShape: result->constant = source_shape[size_t(expression->value)]; return true;
    case IndexNodeKind::OutputShape: result->constant = target_shape[size_t(expression->value)]; return true;
    case IndexNodeKind::Unary: {
      if (expression->op != IndexOperator::Negate) return false;
      if (!affine(expression->operands[0], source_shape, target_shape, result)) return false;
      result->constant = -result->constant;
      for (auto& [index, coefficient] : result->terms) coefficient = -coefficient;
      return true;
    }
    case IndexNodeKind::Binary: {
      Affine left, right;
      if (!affine(expression->operands[0], source_shape, target_shape, &left) ||
          !affine(expression->operands[1], source_shape, target_shape, &right))
        return false;
      if (expression->op == IndexOperator::Add || expression->op == IndexOperator::Subtract) {
        int64_t sign = expression->op == IndexOperator::Add ? 1 : -1;
        *result = left;
        result->constant += sign * right.constant;
        for (const auto& [index, coefficient] : right.terms) result->terms[index] += sign * coefficient;
      } else if (expression->op == IndexOperator::Multiply && (left.terms.empty() || right.terms.empty())) {
        const Affine& scaled = left.terms.empty() ? right : left;
        int64_t factor = left.terms.empty() ? left.constant : right.constant;
        result->constant = scaled.constant * factor;
        for (const auto& [index, coefficient] : scaled.terms) result->terms[index] = coefficient * factor;
      } else {
        return false;
      }
      for (auto term = result->terms.begin(); term != result->terms.end();)
        term = term->second == 0 ? result->terms.erase(term) : std::next(term);
      return true;
    }
    default: return false;
  }
}

}  // namespace

std::optional<std::vector<PlacedDimension>> injective_placement(const Node& node) {
  if (node.kind != NodeKind::ReindexReduce || ReduceOp(node.op_code) != ReduceOp::Add || node.inputs.size() != 1 ||
      !node.payload)
    return std::nullopt;
  const Node& source = *node.inputs[0];
  const auto& payload = static_cast<const IndexPayload&>(*node.payload);
  if (source.dtype != node.dtype || !payload.overflow_conditions.empty() || payload.indexes.size() != node.shape.size())
    return std::nullopt;
  std::vector<PlacedDimension> placement(node.shape.size());
  std::vector<int> moved(source.shape.size(), 0);  // per source dim: the target dims it moves
  for (size_t dim = 0; dim < payload.indexes.size(); ++dim) {
    Affine index;
    if (!affine(payload.indexes[dim], source.shape, node.shape, &index)) return std::nullopt;
    PlacedDimension& placed = placement[dim];
    placed.offset = index.constant;
    for (const auto& [source_dim, coefficient] : index.terms) {
      int64_t extent = source.shape[size_t(source_dim)];
      if (extent == 1) continue;  // always 0: adds nothing
      placed.terms.push_back({source_dim, coefficient, extent});
      ++moved[size_t(source_dim)];
    }
    std::sort(placed.terms.begin(), placed.terms.end(),
              [](const PlacedTerm& a, const PlacedTerm& b) { return a.coefficient < b.coefficient; });
    for (size_t term = 1; term < placed.terms.size(); ++term) {
      const PlacedTerm& inner = placed.terms[term - 1];
      if (inner.coefficient <= 0 || placed.terms[term].coefficient != inner.coefficient * inner.extent)
        return std::nullopt;  // terms that overlap (i1 + i2) or leave gaps between them
    }
  }
  // A source dim in no target dim is summed over; one in two lands on a diagonal (still one element per target,
  // but not read back by one index each, so left to the scatter).
  for (size_t dim = 0; dim < source.shape.size(); ++dim)
    if (source.shape[dim] > 1 && moved[dim] != 1) return std::nullopt;
  // Gathered along the innermost loop, `w / 2` (max pooling's gradient over 2x2 windows) or `w / 2` under a test
  // of `w % 2` became vector gathers (vgatherqps), slow on these CPUs: a batch-norm-like sum reading max pooling's
  // gradient of [32, 16, 56, 56] took 1.46 ms, against 0.39 ms plus 0.85 ms for the scatter it replaced.
  if (!placement.empty()) {
    const PlacedDimension& innermost = placement.back();
    if (innermost.terms.size() > 1 ||
        (innermost.terms.size() == 1 && innermost.terms[0].coefficient != 1 && innermost.terms[0].coefficient != -1))
      return std::nullopt;
  }
  bool identity = source.shape == node.shape;
  for (size_t dim = 0; dim < placement.size() && identity; ++dim) {
    const PlacedDimension& placed = placement[dim];
    identity = placed.offset == 0 &&
               (placed.terms.empty() ? node.shape[dim] == 1
                                     : placed.terms.size() == 1 && placed.terms[0].source_dim == int(dim) &&
                                           placed.terms[0].coefficient == 1);
  }
  if (identity) return std::nullopt;
  return placement;
}

}  // namespace metajit
