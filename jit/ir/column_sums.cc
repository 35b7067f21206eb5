// A kernel is a column sum (or max, or min) when its body is that one reduction and then element-wise work,
// every load in the reduction is contiguous along the output's last dim, and its innermost loop is not.
// Lets may come before the sum (the load of a gradient the sum is added to, `grad + dy.sum(0)`) when the sum
// does not read them; they are evaluated after it, with the element-wise work: every accumulated bias gradient
// has that form.
#include "jit/ir/column_sums.h"

#include "jit/ir/index_sums.h"

namespace metajit {
namespace {

// Columns accumulated side by side: their accumulators (4 KB of floats) stay in L1.
constexpr int64_t kColumnTile = 1024;

// The position of the kernel's column sum in its body, or -1.
int column_sum(const IrKernel& kernel) {
  const std::vector<IrStatement>& body = kernel.body;
  size_t first = 0;
  while (first < body.size() && body[first].kind == IrStatement::Kind::Let) ++first;
  if (first == body.size() || body[first].kind != IrStatement::Kind::ReduceLoop) return -1;
  const IrStatement& sum = body[first];
  for (size_t position = 0; position < first; ++position) {
    const std::string& name = body[position].name;
    if (mentions_variable(sum.value, name)) return -1;
    for (const IrStatement& inner : sum.body)
      for (const IrExprPtr& part : {inner.value, inner.offset, inner.condition})
        if (part && mentions_variable(part, name)) return -1;
  }
  // Also max and min (softmax over dim 0, x.max(0)), and integers (argmax over dim 0 takes the least index).
  bool column_op =
      sum.reduce_op == ReduceOp::Add || sum.reduce_op == ReduceOp::Maximum || sum.reduce_op == ReduceOp::Minimum;
  if (!column_op || sum.dtype == DType::Bool || !sum.spill.empty() || sum.loops.empty()) return -1;
  for (size_t position = first + 1; position < body.size(); ++position)
    if (body[position].kind == IrStatement::Kind::ReduceLoop ||
        body[position].kind == IrStatement::Kind::ScatterAccumulate)
      return -1;
  std::string element = "i" + std::to_string(kernel.domain.size() - 1);
  const std::string& innermost = sum.loops.back().first;
  std::vector<const IrExpr*> loads;
  for (const IrStatement& inner : sum.body)
    if (inner.value) collect_loads(inner.value.get(), &loads);
  collect_loads(sum.value.get(), &loads);
  bool contiguous = false;
  for (const IrExpr* load : loads) {
    const IrExprPtr& offset = load->args[0];
    int64_t along_element, along_innermost;
    if (!index_coefficient(offset, element, &along_element) || (along_element != 0 && along_element != 1) ||
        !index_coefficient(offset, innermost, &along_innermost))
      return -1;
    if (along_element == 1 && (along_innermost == 1 || along_innermost == -1)) return -1;
    contiguous = contiguous || along_element == 1;
  }
  return contiguous ? int(first) : -1;
}

}  // namespace

void choose_column_sums(IrKernel& kernel) {
  if (kernel.kind != IrKernel::Kind::Pointwise || kernel.domain.empty() || !kernel.row_body.empty() ||
      kernel.schedule.form != IrSchedule::Form::Elements)
    return;
  int position = column_sum(kernel);
  if (position < 0) return;
  kernel.schedule.form = IrSchedule::Form::ColumnSum;
  kernel.schedule.statement = position;
  kernel.schedule.tile = kColumnTile;
}

}  // namespace metajit
