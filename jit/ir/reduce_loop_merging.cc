// A merge is tried by substitution: outer := merged / B, inner := merged % B, rebuilt through ir_index, whose
// simplifier joins `merged % B + (merged / B) * B` back into `merged`. The merge is kept only when no division
// or modulo of the merged index is left anywhere in the loop's statements.
#include "jit/ir/reduce_loop_merging.h"

#include <unordered_map>

namespace metajit {
namespace {

using Substitution = std::unordered_map<std::string, IrExprPtr>;

// The loop variables of `substitution` replaced by their expressions.
IrVisitor substituting(const Substitution& substitution) {
  return [&substitution](const IrExprPtr& expression) {
    if (expression->kind != IrKind::Variable) return expression;
    auto found = substitution.find(expression->name);
    return found == substitution.end() ? expression : found->second;
  };
}

// Tries to merge loops `position` and `position + 1` of `loop`; returns whether it did.
bool merge_pair(IrStatement& loop, size_t position) {
  const auto& [outer, outer_extent] = loop.loops[position];
  const auto& [inner, inner_extent] = loop.loops[position + 1];
  std::string merged = outer + "_" + inner.substr(1);  // r2 and r3 -> r2_3
  IrExprPtr index = ir_loop_variable(merged, outer_extent * inner_extent);
  Substitution substitution{{outer, ir_index(IndexOperator::FloorDivide, index, ir_int(inner_extent))},
                            {inner, ir_index(IndexOperator::FloorModulo, index, ir_int(inner_extent))}};
  IrStatement candidate = loop;
  IrVisitor substitute = substituting(substitution);
  candidate.value = ir_rewrite(candidate.value, substitute);
  ir_rewrite_statements(candidate.body, substitute);
  if (splits_variable(candidate.value, merged) || statements_split_variable(candidate.body, merged)) return false;
  candidate.loops[position] = {merged, outer_extent * inner_extent};
  candidate.loops.erase(candidate.loops.begin() + long(position) + 1);
  loop = std::move(candidate);
  return true;
}

void merge_in(std::vector<IrStatement>& statements) {
  for (IrStatement& statement : statements) {
    if (statement.kind != IrStatement::Kind::ReduceLoop) continue;
    merge_in(statement.body);
    // A kept-terms array is indexed by the single loop's variable; such loops never have a pair to merge.
    if (!statement.spill.empty() || statement.loops.size() < 2) continue;
    // Innermost pair first; a merged loop may then merge with the loop outside it.
    for (size_t position = statement.loops.size() - 1; position >= 1; --position) merge_pair(statement, position - 1);
  }
}

}  // namespace

void merge_reduce_loops(IrKernel& kernel) {
  merge_in(kernel.row_body);
  merge_in(kernel.body);
}

}  // namespace metajit
