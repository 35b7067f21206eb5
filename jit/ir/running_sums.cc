// A running sum is recognised by ir_running_sum_guard (kernel_ir.h): one loop of Add or Multiply whose term is
// kept only where r <= the index, nothing else depending on that index. Element i's sum is then element i-1's
// combined with term i, so the scan adds each term once instead of up to n of them per element.
#include "jit/ir/running_sums.h"

namespace metajit {
namespace {

// Columns a column scan keeps accumulators for at once: their totals (4 KB of floats) stay in L1.
constexpr int64_t kColumnTile = 1024;

// Whether the kernel's first statement is a running sum along dim rank - from_end, every later statement being
// element-wise work on it. from_end 1: along the last dim, row by row (the row's own reductions run first);
// 2: down dim rank-2 of [..., n, B], which cumsum writes that way when B is wide instead of transposing twice,
// and which has no row body.
bool running_sum_along(const IrKernel& kernel, int from_end) {
  const std::vector<IrStatement>& body = kernel.body;
  int rank = int(kernel.domain.size());
  if (rank < from_end || body.empty() || body[0].kind != IrStatement::Kind::ReduceLoop) return false;
  if (from_end > 1 && !kernel.row_body.empty()) return false;
  const IrStatement& sum = body[0];
  if (!sum.spill.empty()) return false;
  for (size_t position = 1; position < body.size(); ++position)
    if (body[position].kind == IrStatement::Kind::ReduceLoop ||
        body[position].kind == IrStatement::Kind::ScatterAccumulate)
      return false;
  return ir_running_sum_guard(sum, "i" + std::to_string(rank - from_end)) != nullptr;
}

// The gradient of a running sum, as a scatter: each element i of dim rank-2 adds its value into every target
// r <= i along the last dim (out[r] = sum of the values at i >= r), the value depending on nothing of r and the
// target on nothing of i. Walking i downwards, one accumulator gives each r its sum.
bool reverse_running_sum(const IrKernel& kernel) {
  const Shape& domain = kernel.domain;
  int rank = int(domain.size());
  if (rank < 2 || kernel.scatter_op != ReduceOp::Add || (rank == 2 && kernel.scatter_split_rows)) return false;
  const std::vector<IrStatement>& body = kernel.body;
  if (body.empty() || body.back().kind != IrStatement::Kind::ScatterAccumulate || !body.back().condition) return false;
  std::string target_index = "i" + std::to_string(rank - 1), source_index = "i" + std::to_string(rank - 2);
  for (size_t position = 0; position + 1 < body.size(); ++position)
    if (body[position].kind != IrStatement::Kind::Let || mentions_variable(body[position].value, target_index))
      return false;
  const IrStatement& scatter = body.back();
  if (!ir_at_most(scatter.condition, target_index, source_index) || mentions_variable(scatter.value, target_index))
    return false;
  return reads_only_domain_indices(scatter.offset, rank - 1) && !mentions_variable(scatter.offset, source_index);
}

}  // namespace

void choose_running_sums(IrKernel& kernel) {
  IrSchedule& schedule = kernel.schedule;
  if (kernel.kind == IrKernel::Kind::Scatter) {
    if (!reverse_running_sum(kernel)) return;
    schedule.form = IrSchedule::Form::ReverseRunningSum;
    schedule.statement = int(kernel.body.size()) - 1;
    return;
  }
  if (running_sum_along(kernel, 1)) {
    schedule.form = IrSchedule::Form::RunningSum;
    schedule.statement = 0;
  } else if (running_sum_along(kernel, 2)) {
    schedule.form = IrSchedule::Form::ColumnRunningSum;
    schedule.statement = 0;
    schedule.tile = kColumnTile;
  }
}

}  // namespace metajit
