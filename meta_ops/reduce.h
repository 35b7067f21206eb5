// The reindex-reduce family (many-to-one): reduce over dims (the common case) and the general reindex_reduce,
// whose index expressions map every input element to an output position. Builders check at the call.
#pragma once
#include <string>
#include <vector>

#include "core/node.h"
#include "meta_ops/index_expression.h"

namespace metajit {

enum class ReduceOp : uint16_t { Add, Multiply, Maximum, Minimum, LogicalAnd, LogicalOr };

const char* reduce_op_name(ReduceOp op);           // "add", "mul", "max", "min", "and", "or"
ReduceOp reduce_op_from_name(const std::string& name);
DType reduce_result_dtype(ReduceOp op, DType input);  // sum/prod of bool and integers give int64 (PyTorch)

NodePtr reduce(const NodePtr& input, ReduceOp op, const std::vector<int64_t>& dims, bool keepdim);

// Index expressions of reindex / reindex_reduce, parsed once at the call (see index_expression.h).
struct IndexPayload : NodePayload {
  std::vector<IndexExpression> indexes;              // one per target dimension
  std::vector<IndexExpression> overflow_conditions;  // any true => overflow
  std::string describe() const override;
};

// y[indexes(i)] op= x[i] over all i in x's shape; out-of-range targets and true overflow conditions are skipped.
// Extras are node->inputs[1..].
NodePtr reindex_reduce(const NodePtr& input, ReduceOp op, const Shape& shape, const std::vector<std::string>& indexes,
                       const std::vector<std::string>& overflow_conditions, const std::vector<NodePtr>& extras);

// y[i] = x[indexes(i)], or overflow_value when an index is outside x or a condition is true.
NodePtr reindex(const NodePtr& input, const Shape& shape, const std::vector<std::string>& indexes, double overflow_value,
                const std::vector<std::string>& overflow_conditions, const std::vector<NodePtr>& extras);

// The same builders from already-parsed expressions (gradient rules and op builders use them).
NodePtr reindex_parsed(const NodePtr& input, const Shape& shape, std::shared_ptr<const IndexPayload> payload,
                       double overflow_value, const std::vector<NodePtr>& extras);
NodePtr reindex_reduce_parsed(const NodePtr& input, ReduceOp op, const Shape& shape,
                              std::shared_ptr<const IndexPayload> payload, const std::vector<NodePtr>& extras);

// Gradient rules of this family, called by meta_ops/autodiff: given `grad`, the gradient of `node`'s output,
// the gradient of each of its inputs (null where an input gets none). They are built from meta-ops again.
//   reduce add: broadcast back; max/min: shared evenly among the tied maxima (as torch.amax); mul: grad*y/x.
//   reindex: reindex_reduce(add) with the same expressions; reindex_reduce add: reindex with them; max/min:
//   the gradient goes to every input equal to its target's result.
std::vector<NodePtr> reduce_gradient(const NodePtr& node, const NodePtr& grad);
std::vector<NodePtr> reindex_gradient(const NodePtr& node, const NodePtr& grad);
std::vector<NodePtr> reindex_reduce_gradient(const NodePtr& node, const NodePtr& grad);

}  // namespace metajit
