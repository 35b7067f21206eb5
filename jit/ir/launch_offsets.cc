#include "jit/ir/launch_offsets.h"

#include <algorithm>
#include <climits>

namespace metajit {
namespace {

bool is_index_op(const IrExprPtr& expression, IndexOperator op) {
  return expression->kind == IrKind::IndexBinary && IndexOperator(expression->op) == op;
}

// The constant part of a linear index expression: constants reached through sums, differences and products
// with a constant. Anything else (a division, a guard, a loaded index) counts as having none.
int64_t constant_term(const IrExprPtr& expression) {
  if (expression->kind == IrKind::IntConstant && expression->dtype == DType::Int64) return expression->integer;
  if (is_index_op(expression, IndexOperator::Add))
    return constant_term(expression->args[0]) + constant_term(expression->args[1]);
  if (is_index_op(expression, IndexOperator::Subtract))
    return constant_term(expression->args[0]) - constant_term(expression->args[1]);
  if (is_index_op(expression, IndexOperator::Multiply)) {
    const IrExprPtr& left = expression->args[0];
    const IrExprPtr& right = expression->args[1];
    if (right->kind == IrKind::IntConstant) return constant_term(left) * right->integer;
    if (left->kind == IrKind::IntConstant) return left->integer * constant_term(right);
  }
  return 0;
}

// `expression` minus its constant_term, rebuilt through ir_index (which folds the zeros away).
IrExprPtr without_constant_term(const IrExprPtr& expression) {
  if (expression->kind == IrKind::IntConstant && expression->dtype == DType::Int64) return ir_int(0);
  if (is_index_op(expression, IndexOperator::Add) || is_index_op(expression, IndexOperator::Subtract))
    return ir_index(IndexOperator(expression->op), without_constant_term(expression->args[0]),
                    without_constant_term(expression->args[1]));
  if (is_index_op(expression, IndexOperator::Multiply)) {
    const IrExprPtr& left = expression->args[0];
    const IrExprPtr& right = expression->args[1];
    if (right->kind == IrKind::IntConstant) return ir_index(IndexOperator::Multiply, without_constant_term(left), right);
    if (left->kind == IrKind::IntConstant) return ir_index(IndexOperator::Multiply, left, without_constant_term(right));
  }
  return expression;
}

}  // namespace

std::vector<int64_t> move_constant_offsets_to_launch(IrKernel& kernel) {
  size_t count = kernel.buffers.size();
  std::vector<int64_t> least(count, INT64_MAX);  // per buffer: the smallest constant any of its reads adds
  IrVisitor measure = [&](const IrExprPtr& expression) {
    if (expression->kind == IrKind::Load && size_t(expression->buffer) < count)
      least[expression->buffer] = std::min(least[expression->buffer], constant_term(expression->args[0]));
    return expression;
  };
  ir_rewrite_statements(kernel.row_body, measure);
  ir_rewrite_statements(kernel.body, measure);
  std::vector<int64_t> offsets(count, 0);
  bool moved = false;
  for (size_t buffer = 0; buffer < count; ++buffer) {
    if (kernel.buffers[buffer].is_output || least[buffer] == INT64_MAX || least[buffer] <= 0) continue;
    offsets[buffer] = least[buffer];
    moved = true;
  }
  if (!moved) return {};
  IrVisitor move = [&](const IrExprPtr& expression) {
    if (expression->kind != IrKind::Load || offsets[expression->buffer] == 0) return expression;
    const IrExprPtr& offset = expression->args[0];
    IrExprPtr rest = ir_index(IndexOperator::Add, without_constant_term(offset),
                              ir_int(constant_term(offset) - offsets[expression->buffer]));
    return ir_with_args(expression, {rest});
  };
  ir_rewrite_statements(kernel.row_body, move);
  ir_rewrite_statements(kernel.body, move);
  return offsets;
}

std::string describe_launch_offsets(const IrKernel& kernel, const std::vector<int64_t>& offsets) {
  std::string text;
  for (size_t buffer = 0; buffer < offsets.size(); ++buffer)
    if (offsets[buffer])
      text += "// " + kernel.buffers[buffer].name + " starts " + std::to_string(offsets[buffer]) +
              " elements into its buffer (added at launch, so every such slice shares this kernel)\n";
  return text;
}

}  // namespace metajit
