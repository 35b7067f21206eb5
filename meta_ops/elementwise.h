// The elementwise meta-op family (one-to-one): unary, binary (numpy broadcasting), where, cast, and the
// nullary generators constant and arange. Builders infer shape and dtype now and throw std::invalid_argument
// (ValueError in Python) at the user's call; nothing is computed here.
#pragma once
#include <string>
#include <vector>

#include "core/node.h"

namespace metajit {

enum class UnaryOp : uint16_t {
  Negate, Abs, Exp, Log, Sqrt, Rsqrt, Sin, Cos, Tanh, Sigmoid, Relu, Floor, Ceil, Round, LogicalNot, BitwiseNot,
  // Appended, so the codes above (part of cached plans and kernel keys) keep their values. libm functions.
  Log1p, Expm1, Log2, Log10, Erf, Tan, Asin, Acos, Atan, Sinh, Cosh
};
enum class BinaryOp : uint16_t {
  Add, Subtract, Multiply, Divide, FloorDivide, Modulo, Power, Maximum, Minimum,
  Less, LessEqual, Greater, GreaterEqual, Equal, NotEqual,
  LogicalAnd, LogicalOr, LogicalXor, BitwiseAnd, BitwiseOr, BitwiseXor
};

const char* unary_op_name(UnaryOp op);
const char* binary_op_name(BinaryOp op);
UnaryOp unary_op_from_name(const std::string& name);    // throws on unknown names
BinaryOp binary_op_from_name(const std::string& name);
// Every op's name, in enum order: the one list the bindings and the Python package build their functions from.
std::vector<std::string> unary_op_names();
std::vector<std::string> binary_op_names();
bool is_comparison(BinaryOp op);
bool is_logical(BinaryOp op);

// numpy broadcasting of two shapes; throws naming both shapes when they are incompatible.
Shape broadcast_shapes(const Shape& left, const Shape& right);

NodePtr unary(UnaryOp op, const NodePtr& input);
NodePtr binary(BinaryOp op, const NodePtr& left, const NodePtr& right);
// A Python scalar operand: it decides the promotion category only (PyTorch rule), never the width. `site`
// names the place in the user's program that passed it (0: unknown): a constant in the kernel until that place
// passes another value, an input buffer from then on (meta_ops/scalar_sites.h).
NodePtr binary_with_scalar(BinaryOp op, const NodePtr& tensor, double scalar, bool scalar_is_float,
                           bool scalar_on_left, uint64_t site = 0);
// The same for an integer scalar, kept exact when the operation happens in an integer dtype.
NodePtr binary_with_integer_scalar(BinaryOp op, const NodePtr& tensor, int64_t scalar, bool scalar_on_left,
                                   uint64_t site = 0);
NodePtr where(const NodePtr& condition, const NodePtr& if_true, const NodePtr& if_false);
NodePtr cast(const NodePtr& input, DType dtype);
NodePtr constant(const Shape& shape, DType dtype, double value);
// A constant holding an integer exactly (for integer dtypes; others get the nearest representable value).
NodePtr integer_constant(const Shape& shape, DType dtype, int64_t value);
NodePtr arange(double start, double stop, double step, DType dtype);

// Dtype that a unary op produces from its input dtype (exp of an int tensor is float32, as in PyTorch).
DType unary_result_dtype(UnaryOp op, DType input);

// Gradient rule of the family (called by meta_ops/autodiff) for Unary, Binary, Where and Cast nodes: the
// gradient of each input given `grad`, the gradient of the output; null where an input gets none (integer and
// boolean operands, conditions). Maximum/minimum split ties evenly, as PyTorch does; floor/ceil/round and
// floor division have zero gradient.
std::vector<NodePtr> elementwise_gradient(const NodePtr& node, const NodePtr& grad);

// Registers op names with core (node->op_name()).
void register_op_names();

}  // namespace metajit
