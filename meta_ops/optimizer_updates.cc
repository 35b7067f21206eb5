// The moments follow python/metajit/optim/optimizer.py's _moments, which NAdam and RAdam still build op by op:
// change them together.
#include "meta_ops/optimizer_updates.h"

#include "meta_ops/elementwise.h"

namespace metajit {
namespace {

NodePtr add(const NodePtr& left, const NodePtr& right) { return binary(BinaryOp::Add, left, right); }
NodePtr multiply(const NodePtr& left, const NodePtr& right) { return binary(BinaryOp::Multiply, left, right); }

}  // namespace

AdamNodes adam_update(const NodePtr& param, const NodePtr& grad, const NodePtr& exp_avg, const NodePtr& exp_avg_sq,
                      const NodePtr& max_exp_avg_sq, const AdamScalars& scalars) {
  AdamNodes result;
  result.exp_avg = add(multiply(scalars.beta1, exp_avg), multiply(scalars.one_minus_beta1, grad));
  result.exp_avg_sq = add(multiply(scalars.beta2, exp_avg_sq), multiply(multiply(scalars.one_minus_beta2, grad), grad));
  NodePtr second_moment = result.exp_avg_sq;
  if (max_exp_avg_sq) second_moment = result.max_exp_avg_sq = binary(BinaryOp::Maximum, max_exp_avg_sq, second_moment);
  NodePtr denominator =
      add(binary(BinaryOp::Divide, unary(UnaryOp::Sqrt, second_moment), scalars.bias_correction2_sqrt), scalars.eps);
  NodePtr step = binary(BinaryOp::Divide, multiply(scalars.step_size, result.exp_avg), denominator);
  result.param = binary(BinaryOp::Subtract, param, step);
  return result;
}

SgdNodes sgd_update(const NodePtr& param, const NodePtr& grad, const NodePtr& weight_decay, const NodePtr& buffer,
                    const NodePtr& keep, const NodePtr& take, const NodePtr& nesterov_momentum, const NodePtr& lr) {
  SgdNodes result;
  NodePtr direction = weight_decay ? add(grad, multiply(weight_decay, param)) : grad;
  if (buffer) {
    result.momentum_buffer = add(multiply(keep, buffer), multiply(take, direction));
    direction = nesterov_momentum ? add(direction, multiply(nesterov_momentum, result.momentum_buffer))
                                  : result.momentum_buffer;
  }
  result.param = binary(BinaryOp::Subtract, param, multiply(lr, direction));
  return result;
}

}  // namespace metajit
