// The statistics take two passes, the mean and then the mean of squared deviations from it (numerically safer
// than E[x^2] - E[x]^2), as python/metajit/ops/normalization.py's layer and group norms do.
#include "meta_ops/batch_norm.h"

#include <vector>

#include "meta_ops/broadcast.h"
#include "meta_ops/elementwise.h"
#include "meta_ops/reduce.h"

namespace metajit {
namespace {

// The scalar operand sites of one call: distinct, and stable from call to call at one Python place.
uint64_t operand_site(uint64_t site, uint64_t operand) { return site == 0 ? 0 : site * 16 + operand; }

// Var.mean(dims, keepdim=True): a sum divided by the (integer) count.
NodePtr mean_over(const NodePtr& input, const std::vector<int64_t>& dims, uint64_t site) {
  int64_t count = 1;
  for (int64_t dim : dims) count *= input->shape[size_t(dim)];
  return binary_with_integer_scalar(BinaryOp::Divide, reduce(input, ReduceOp::Add, dims, true), count, false, site);
}

NodePtr running_estimate(const NodePtr& running, const NodePtr& batch, double momentum, uint64_t site) {
  NodePtr kept = binary_with_scalar(BinaryOp::Multiply, detached(running), 1.0 - momentum, true, false, site);
  NodePtr taken = binary_with_scalar(BinaryOp::Multiply, batch, momentum, true, false, site + 1);
  return cast(binary(BinaryOp::Add, kept, taken), running->dtype);
}

}  // namespace

BatchNormNodes batch_norm(const NodePtr& input, const NodePtr& running_mean, const NodePtr& running_var,
                          const NodePtr& weight, const NodePtr& bias, bool training, double momentum, double eps,
                          uint64_t site) {
  int64_t channels = input->shape[1];
  Shape channel_shape(input->shape.size(), 1);
  channel_shape[1] = channels;
  std::vector<int64_t> dims{0};
  for (int64_t dim = 2; dim < int64_t(input->shape.size()); ++dim) dims.push_back(dim);
  BatchNormNodes result{nullptr, running_mean, running_var};
  NodePtr mean, variance;
  if (training) {
    mean = mean_over(input, dims, operand_site(site, 0));
    NodePtr deviation = binary(BinaryOp::Subtract, input, mean);
    variance = mean_over(binary(BinaryOp::Multiply, deviation, deviation), dims, operand_site(site, 1));
    if (running_mean) {
      int64_t count = input->numel() / channels;
      NodePtr batch_mean = reshape(detached(mean), {channels});
      NodePtr batch_variance =
          binary_with_scalar(BinaryOp::Multiply, reshape(detached(variance), {channels}),
                             double(count) / double(count - 1), true, false, operand_site(site, 2));
      result.running_mean = running_estimate(running_mean, batch_mean, momentum, operand_site(site, 3));
      result.running_var = running_estimate(running_var, batch_variance, momentum, operand_site(site, 5));
    }
  } else {
    mean = reshape(running_mean, channel_shape);
    variance = reshape(running_var, channel_shape);
  }
  NodePtr scale =
      unary(UnaryOp::Rsqrt, binary_with_scalar(BinaryOp::Add, variance, eps, true, false, operand_site(site, 7)));
  NodePtr output = binary(BinaryOp::Multiply, binary(BinaryOp::Subtract, input, mean), scale);
  if (weight) output = binary(BinaryOp::Multiply, output, reshape(weight, channel_shape));
  if (bias) output = binary(BinaryOp::Add, output, reshape(bias, channel_shape));
  result.output = output;
  return result;
}

}  // namespace metajit
