// Only true division of floats by a variable the row body defines (a per-row reduction, or a value computed
// from them) is rewritten; floor division and division by anything varying along the row are left alone.
#include "jit/row_reciprocals.h"

#include <unordered_map>
#include <unordered_set>

namespace metajit {
namespace {

class ReciprocalHoister {
 public:
  explicit ReciprocalHoister(IrKernel& kernel) : kernel_(kernel) {
    for (const IrStatement& statement : kernel.row_body)
      if (statement.kind == IrStatement::Kind::Let || statement.kind == IrStatement::Kind::ReduceLoop)
        row_values_.insert(statement.name);
  }

  void run() {
    if (row_values_.empty()) return;
    rewrite(kernel_.body);
    for (IrStatement& statement : reciprocals_) kernel_.row_body.push_back(std::move(statement));
  }

 private:
  void rewrite(std::vector<IrStatement>& statements) {
    for (IrStatement& statement : statements) {
      statement.value = rewrite(statement.value);
      statement.condition = rewrite(statement.condition);
      rewrite(statement.body);
    }
  }

  IrExprPtr rewrite(const IrExprPtr& expression) {
    if (!expression || expression->args.empty()) return expression;
    std::vector<IrExprPtr> args;
    for (const IrExprPtr& argument : expression->args) args.push_back(rewrite(argument));
    const IrExprPtr& divisor = args.size() == 2 ? args[1] : nullptr;
    if (expression->kind == IrKind::Binary && BinaryOp(expression->op) == BinaryOp::Divide &&
        is_floating(expression->dtype) && divisor->kind == IrKind::Variable && divisor->dtype == expression->dtype &&
        row_values_.count(divisor->name))
      return ir_binary(BinaryOp::Multiply, expression->dtype, args[0], reciprocal_of(divisor));
    return ir_with_args(expression, std::move(args));
  }

  IrExprPtr reciprocal_of(const IrExprPtr& divisor) {
    std::string name = divisor->name + "_reciprocal";
    if (defined_.insert(name).second) {
      IrStatement statement{IrStatement::Kind::Let, name, divisor->dtype,
                            ir_binary(BinaryOp::Divide, divisor->dtype, ir_float(1.0, divisor->dtype), divisor),
                            nullptr, nullptr, -1, ReduceOp::Add, {}, {}, ""};
      reciprocals_.push_back(std::move(statement));
    }
    return ir_variable(name, divisor->dtype);
  }

  IrKernel& kernel_;
  std::unordered_set<std::string> row_values_, defined_;
  std::vector<IrStatement> reciprocals_;
};

}  // namespace

void hoist_row_reciprocals(IrKernel& kernel) { ReciprocalHoister(kernel).run(); }

}  // namespace metajit
