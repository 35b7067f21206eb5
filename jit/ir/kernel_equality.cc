// Field by field over IrKernel, IrStatement, IrBuffer, IrSchedule and IrExpr (kernel_ir.h): a field added there
// must be compared here, or kernels that differ in it would share one rendering.
#include "jit/ir/kernel_equality.h"

#include <cstring>

namespace metajit {
namespace {

bool same_bits(double first, double second) { return std::memcmp(&first, &second, sizeof(double)) == 0; }

bool same_expression(const IrExprPtr& first, const IrExprPtr& second) {
  if (first == second) return true;
  if (!first || !second) return false;
  if (first->kind != second->kind || first->dtype != second->dtype || first->op != second->op ||
      first->integer != second->integer || first->let_low != second->let_low || first->let_high != second->let_high ||
      !same_bits(first->floating, second->floating) || first->buffer != second->buffer || first->name != second->name ||
      first->args.size() != second->args.size() || ir_hash(first) != ir_hash(second))
    return false;
  for (size_t index = 0; index < first->args.size(); ++index)
    if (!same_expression(first->args[index], second->args[index])) return false;
  return true;
}

bool same_statements(const std::vector<IrStatement>& first, const std::vector<IrStatement>& second);

bool same_statement(const IrStatement& first, const IrStatement& second) {
  return first.kind == second.kind && first.name == second.name && first.dtype == second.dtype &&
         first.buffer == second.buffer && first.reduce_op == second.reduce_op && first.loops == second.loops &&
         first.spill == second.spill && same_expression(first.value, second.value) &&
         same_expression(first.offset, second.offset) && same_expression(first.condition, second.condition) &&
         same_statements(first.body, second.body);
}

bool same_statements(const std::vector<IrStatement>& first, const std::vector<IrStatement>& second) {
  if (first.size() != second.size()) return false;
  for (size_t index = 0; index < first.size(); ++index)
    if (!same_statement(first[index], second[index])) return false;
  return true;
}

bool same_buffers(const std::vector<IrBuffer>& first, const std::vector<IrBuffer>& second) {
  if (first.size() != second.size()) return false;
  for (size_t index = 0; index < first.size(); ++index) {
    const IrBuffer& a = first[index];
    const IrBuffer& b = second[index];
    if (a.name != b.name || a.dtype != b.dtype || a.shape != b.shape || a.is_output != b.is_output) return false;
  }
  return true;
}

bool same_schedule(const IrSchedule& first, const IrSchedule& second) {
  return first.form == second.form && first.statement == second.statement && first.across == second.across &&
         first.tile == second.tile && first.work_items == second.work_items && first.grain == second.grain &&
         first.column_pieces == second.column_pieces && first.row_piece_dim == second.row_piece_dim &&
         first.row_pieces == second.row_pieces && first.row_piece_columns == second.row_piece_columns;
}

uint64_t mix(uint64_t hash, uint64_t value) { return (hash ^ value) * 0x9e3779b97f4a7c15ULL; }

uint64_t statements_hash(uint64_t hash, const std::vector<IrStatement>& statements) {
  hash = mix(hash, statements.size());
  for (const IrStatement& statement : statements) {
    hash = mix(hash, uint64_t(statement.kind));
    for (const IrExprPtr* part : {&statement.value, &statement.offset, &statement.condition})
      hash = mix(hash, *part ? ir_hash(*part) : 0);
    hash = statements_hash(hash, statement.body);
  }
  return hash;
}

}  // namespace

uint64_t ir_kernel_hash(const IrKernel& kernel) {
  uint64_t hash = mix(uint64_t(kernel.kind), kernel.buffers.size());
  for (int64_t extent : kernel.domain) hash = mix(hash, uint64_t(extent));
  hash = statements_hash(hash, kernel.body);
  return statements_hash(hash, kernel.row_body);
}

bool ir_kernels_equal(const IrKernel& first, const IrKernel& second) {
  return first.kind == second.kind && first.domain == second.domain && first.row_work == second.row_work &&
         first.scatter_op == second.scatter_op && first.scatter_split_rows == second.scatter_split_rows &&
         first.inner_work == second.inner_work && first.fused_ops == second.fused_ops &&
         same_schedule(first.schedule, second.schedule) && same_buffers(first.buffers, second.buffers) &&
         same_statements(first.body, second.body) && same_statements(first.row_body, second.row_body);
}

}  // namespace metajit
