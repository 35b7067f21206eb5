// Shape/dtype rules of the elementwise family. Broadcasting inserts explicit View nodes so the fuser and the
// code generator only ever see same-shaped elementwise operands.
#include "meta_ops/elementwise.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "meta_ops/broadcast.h"
#include "meta_ops/reduce.h"
#include "meta_ops/scalar_sites.h"

namespace metajit {
namespace {

const char* const kUnaryNames[] = {"neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid",
                                   "relu", "floor", "ceil", "round", "logical_not", "bitwise_not", "log1p", "expm1",
                                   "log2", "log10", "erf", "tan", "asin", "acos", "atan", "sinh", "cosh"};
const char* const kBinaryNames[] = {"add", "sub", "mul", "div", "floor_div", "mod", "pow", "maximum", "minimum",
                                    "less", "less_equal", "greater", "greater_equal", "equal", "not_equal",
                                    "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
                                    "bitwise_xor"};

bool is_bitwise(BinaryOp op) {
  return op == BinaryOp::BitwiseAnd || op == BinaryOp::BitwiseOr || op == BinaryOp::BitwiseXor;
}

// Result dtype given the promoted operand dtype.
DType binary_result_dtype(BinaryOp op, DType promoted) {
  if (is_comparison(op) || is_logical(op)) return DType::Bool;
  if (is_bitwise(op)) {
    if (is_floating(promoted))
      throw std::invalid_argument(std::string(binary_op_name(op)) + " needs integer or bool operands, got " +
                                  dtype_name(promoted));
    return promoted;
  }
  if (op == BinaryOp::Divide && !is_floating(promoted)) return DType::Float32;  // true division
  if (promoted == DType::Bool && (op == BinaryOp::Add || op == BinaryOp::Subtract || op == BinaryOp::Multiply ||
                                  op == BinaryOp::FloorDivide || op == BinaryOp::Modulo || op == BinaryOp::Power)) {
    if (op == BinaryOp::Subtract)
      throw std::invalid_argument("sub of two bool tensors is not supported; use logical_xor instead");
    return DType::Int64;
  }
  return promoted;
}

// The dtype both operands are cast to, so the kernel sees one computation type: the promoted dtype, except for
// true division of integers (float32) and arithmetic on bools (int64).
DType common_dtype(BinaryOp op, DType operand_dtype) {
  DType result = binary_result_dtype(op, operand_dtype);
  if (op == BinaryOp::Divide && !is_floating(operand_dtype)) return result;
  if (result == DType::Int64 && operand_dtype == DType::Bool) return DType::Int64;
  return operand_dtype;
}

NodePtr make_binary(BinaryOp op, NodePtr left, NodePtr right, DType operand_dtype) {
  Shape shape = broadcast_shapes(left->shape, right->shape);
  DType result = binary_result_dtype(op, operand_dtype);
  DType common = common_dtype(op, operand_dtype);
  if (left->dtype != common) left = cast(left, common);
  if (right->dtype != common) right = cast(right, common);
  if (left->shape != shape) left = broadcast_to(left, shape);
  if (right->shape != shape) right = broadcast_to(right, shape);
  auto node = make_node(NodeKind::Binary, result, shape, {std::move(left), std::move(right)});
  node->op_code = uint16_t(op);
  return node;
}

DType scalar_operand_dtype(BinaryOp op, const NodePtr& tensor, bool scalar_is_float) {
  DType scalar_dtype = scalar_is_float ? DType::Float64 : DType::Int64;
  return is_logical(op) ? DType::Bool
                        : promote_types(tensor->dtype, OperandKind::Tensor, scalar_dtype, OperandKind::Scalar);
}

// A double's integer part; out of int64 range it saturates and nan gives 0 (a plain cast would be undefined).
int64_t saturating_integer(double value) {
  if (std::isnan(value)) return 0;
  if (value >= 9223372036854775808.0) return std::numeric_limits<int64_t>::max();
  if (value < -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return int64_t(value);
}

std::string name_node(const Node& node) {
  switch (node.kind) {
    case NodeKind::Unary: return unary_op_name(UnaryOp(node.op_code));
    case NodeKind::Binary: return binary_op_name(BinaryOp(node.op_code));
    case NodeKind::Reduce: return std::string("reduce_") + reduce_op_name(ReduceOp(node.op_code));
    case NodeKind::ReindexReduce: return std::string("reindex_reduce_") + reduce_op_name(ReduceOp(node.op_code));
    case NodeKind::Cast: return std::string("cast_") + dtype_name(node.dtype);
    default: return node_kind_name(node.kind);
  }
}

}  // namespace

const char* unary_op_name(UnaryOp op) { return kUnaryNames[int(op)]; }

std::vector<std::string> unary_op_names() { return {std::begin(kUnaryNames), std::end(kUnaryNames)}; }
std::vector<std::string> binary_op_names() { return {std::begin(kBinaryNames), std::end(kBinaryNames)}; }
const char* binary_op_name(BinaryOp op) { return kBinaryNames[int(op)]; }

UnaryOp unary_op_from_name(const std::string& name) {
  for (size_t index = 0; index < sizeof(kUnaryNames) / sizeof(*kUnaryNames); ++index)
    if (name == kUnaryNames[index]) return UnaryOp(index);
  throw std::invalid_argument("unknown unary op '" + name + "'");
}

BinaryOp binary_op_from_name(const std::string& name) {
  for (size_t index = 0; index < sizeof(kBinaryNames) / sizeof(*kBinaryNames); ++index)
    if (name == kBinaryNames[index]) return BinaryOp(index);
  throw std::invalid_argument("unknown binary op '" + name + "'");
}

bool is_comparison(BinaryOp op) { return op >= BinaryOp::Less && op <= BinaryOp::NotEqual; }
bool is_logical(BinaryOp op) { return op >= BinaryOp::LogicalAnd && op <= BinaryOp::LogicalXor; }

Shape broadcast_shapes(const Shape& left, const Shape& right) {
  size_t rank = std::max(left.size(), right.size());
  Shape result(rank);
  for (size_t dim = 0; dim < rank; ++dim) {
    int64_t left_extent = dim < rank - left.size() ? 1 : left[dim - (rank - left.size())];
    int64_t right_extent = dim < rank - right.size() ? 1 : right[dim - (rank - right.size())];
    if (left_extent != right_extent && left_extent != 1 && right_extent != 1)
      throw std::invalid_argument("shapes " + shape_to_string(left) + " and " + shape_to_string(right) +
                                  " cannot be broadcast together (dimension " + std::to_string(dim) + ": " +
                                  std::to_string(left_extent) + " vs " + std::to_string(right_extent) + ")");
    result[dim] = left_extent == 1 ? right_extent : left_extent;
  }
  return result;
}

DType unary_result_dtype(UnaryOp op, DType input) {
  switch (op) {
    case UnaryOp::LogicalNot: return DType::Bool;
    case UnaryOp::BitwiseNot:
      if (is_floating(input)) throw std::invalid_argument("bitwise_not needs an integer or bool tensor, got " +
                                                          std::string(dtype_name(input)));
      return input;
    case UnaryOp::Negate:
      if (input == DType::Bool) throw std::invalid_argument("neg of a bool tensor is not supported; use logical_not");
      return input;
    case UnaryOp::Abs: case UnaryOp::Relu: case UnaryOp::Floor: case UnaryOp::Ceil: case UnaryOp::Round:
      return input == DType::Bool && op != UnaryOp::Abs ? DType::Int64 : input;
    default:
      return is_floating(input) ? input : DType::Float32;
  }
}

NodePtr unary(UnaryOp op, const NodePtr& input) {
  DType result = unary_result_dtype(op, input->dtype);
  NodePtr operand = input;
  if (op != UnaryOp::LogicalNot && result != input->dtype) operand = cast(input, result);
  auto node = make_node(NodeKind::Unary, result, input->shape, {std::move(operand)});
  node->op_code = uint16_t(op);
  return node;
}

NodePtr binary(BinaryOp op, const NodePtr& left, const NodePtr& right) {
  DType operands = is_logical(op) ? DType::Bool : promote_types(left->dtype, right->dtype);
  return make_binary(op, left, right, operands);
}

// The key of a scalar operand's place for scalar_site_is_dynamic: the op, the operand's side and the tensor's
// dtype, so one line's `x * 2` and `2 ** x` are different places.
namespace {
int scalar_site_code(BinaryOp op, const NodePtr& tensor, bool scalar_on_left) {
  return (int(op) << 8) | (int(tensor->dtype) << 1) | int(scalar_on_left);
}
}  // namespace

NodePtr binary_with_scalar(BinaryOp op, const NodePtr& tensor, double scalar, bool scalar_is_float,
                           bool scalar_on_left, uint64_t site) {
  DType operands = scalar_operand_dtype(op, tensor, scalar_is_float);
  if (!scalar_is_float && !is_floating(operands) && scalar != std::floor(scalar))
    throw std::invalid_argument("integer scalar expected");
  // The scalar is made directly in the computation dtype: int8_tensor / 300 must not wrap 300 to int8 first.
  uint64_t bits = 0;
  std::memcpy(&bits, &scalar, sizeof(bits));
  NodePtr scalar_node =
      scalar_site_is_dynamic(site, scalar_site_code(op, tensor, scalar_on_left), bits, binary_op_name(op))
          ? scalar_argument(tensor->shape, common_dtype(op, operands), scalar, 0, /*integer=*/false)
          : constant(tensor->shape, common_dtype(op, operands), scalar);
  return scalar_on_left ? make_binary(op, scalar_node, tensor, operands)
                        : make_binary(op, tensor, scalar_node, operands);
}

NodePtr binary_with_integer_scalar(BinaryOp op, const NodePtr& tensor, int64_t scalar, bool scalar_on_left,
                                   uint64_t site) {
  DType operands = scalar_operand_dtype(op, tensor, /*scalar_is_float=*/false);
  NodePtr scalar_node =
      scalar_site_is_dynamic(site, scalar_site_code(op, tensor, scalar_on_left), uint64_t(scalar),
                             binary_op_name(op))
          ? scalar_argument(tensor->shape, common_dtype(op, operands), double(scalar), scalar, /*integer=*/true)
          : integer_constant(tensor->shape, common_dtype(op, operands), scalar);
  return scalar_on_left ? make_binary(op, scalar_node, tensor, operands)
                        : make_binary(op, tensor, scalar_node, operands);
}

NodePtr where(const NodePtr& condition, const NodePtr& if_true, const NodePtr& if_false) {
  Shape shape = broadcast_shapes(broadcast_shapes(condition->shape, if_true->shape), if_false->shape);
  DType result = promote_types(if_true->dtype, if_false->dtype);
  NodePtr mask = condition->dtype == DType::Bool ? condition : cast(condition, DType::Bool);
  NodePtr first = if_true->dtype == result ? if_true : cast(if_true, result);
  NodePtr second = if_false->dtype == result ? if_false : cast(if_false, result);
  if (mask->shape != shape) mask = broadcast_to(mask, shape);
  if (first->shape != shape) first = broadcast_to(first, shape);
  if (second->shape != shape) second = broadcast_to(second, shape);
  return make_node(NodeKind::Where, result, shape, {std::move(mask), std::move(first), std::move(second)});
}

NodePtr cast(const NodePtr& input, DType dtype) {
  if (input->dtype == dtype) return input;
  return make_node(NodeKind::Cast, dtype, input->shape, {input});
}

NodePtr constant(const Shape& shape, DType dtype, double value) {
  for (int64_t extent : shape)
    if (extent < 0) throw std::invalid_argument("negative dimension in shape " + shape_to_string(shape));
  auto node = make_node(NodeKind::Constant, dtype, shape);
  node->scalar = dtype == DType::Bool ? double(value != 0) : value;
  node->integer_scalar = saturating_integer(node->scalar);
  return node;
}

NodePtr integer_constant(const Shape& shape, DType dtype, int64_t value) {
  NodePtr node = constant(shape, dtype, double(value));
  node->integer_scalar = dtype == DType::Bool ? int64_t(value != 0) : value;
  return node;
}

NodePtr arange(double start, double stop, double step, DType dtype) {
  if (step == 0) throw std::invalid_argument("arange step must not be zero");
  double count = std::ceil((stop - start) / step);
  auto node = make_node(NodeKind::Arange, dtype, {int64_t(count > 0 ? count : 0)});
  node->scalar = start;
  node->scalar_step = step;
  return node;
}

void register_op_names() { set_op_namer(&name_node); }

namespace {

NodePtr subtract(const NodePtr& a, const NodePtr& b) { return binary(BinaryOp::Subtract, a, b); }
NodePtr multiply(const NodePtr& a, const NodePtr& b) { return binary(BinaryOp::Multiply, a, b); }
NodePtr divide(const NodePtr& a, const NodePtr& b) { return binary(BinaryOp::Divide, a, b); }
NodePtr scaled(const NodePtr& a, double factor) { return binary_with_scalar(BinaryOp::Multiply, a, factor, true, false); }
NodePtr zeros_like(const NodePtr& like) { return constant(like->shape, like->dtype, 0.0); }
NodePtr ones_like(const NodePtr& like) { return constant(like->shape, like->dtype, 1.0); }
NodePtr compare(BinaryOp op, const NodePtr& a, const NodePtr& b) { return binary(op, a, b); }
NodePtr masked(const NodePtr& condition, const NodePtr& value) { return where(condition, value, zeros_like(value)); }

std::vector<NodePtr> unary_gradient(const NodePtr& node, const NodePtr& grad) {
  const NodePtr& x = node->inputs[0];
  if (!is_floating(x->dtype)) return {nullptr};
  switch (UnaryOp(node->op_code)) {
    case UnaryOp::Negate: return {unary(UnaryOp::Negate, grad)};
    case UnaryOp::Abs:
      return {where(compare(BinaryOp::Greater, x, zeros_like(x)), grad,
                    masked(compare(BinaryOp::Less, x, zeros_like(x)), unary(UnaryOp::Negate, grad)))};
    case UnaryOp::Exp: return {multiply(grad, node)};
    case UnaryOp::Log: return {divide(grad, x)};
    case UnaryOp::Sqrt: return {divide(scaled(grad, 0.5), node)};
    case UnaryOp::Rsqrt: return {multiply(scaled(grad, -0.5), multiply(node, multiply(node, node)))};
    case UnaryOp::Sin: return {multiply(grad, unary(UnaryOp::Cos, x))};
    case UnaryOp::Cos: return {unary(UnaryOp::Negate, multiply(grad, unary(UnaryOp::Sin, x)))};
    case UnaryOp::Tanh: return {multiply(grad, subtract(ones_like(node), multiply(node, node)))};
    case UnaryOp::Sigmoid: return {multiply(grad, multiply(node, subtract(ones_like(node), node)))};
    case UnaryOp::Relu:  // from the output, as PyTorch: no need to keep the input, and NaN passes the gradient
      return {where(compare(BinaryOp::LessEqual, node, zeros_like(node)), zeros_like(grad), grad)};
    case UnaryOp::Floor: case UnaryOp::Ceil: case UnaryOp::Round: return {zeros_like(grad)};
    case UnaryOp::Log1p: return {divide(grad, binary_with_scalar(BinaryOp::Add, x, 1.0, true, false))};
    case UnaryOp::Expm1: return {multiply(grad, binary_with_scalar(BinaryOp::Add, node, 1.0, true, false))};
    case UnaryOp::Log2: return {divide(grad, scaled(x, 0.69314718055994530942))};
    case UnaryOp::Log10: return {divide(grad, scaled(x, 2.30258509299404568402))};
    case UnaryOp::Erf:  // 2 / sqrt(pi) * exp(-x^2)
      return {multiply(scaled(grad, 1.12837916709551257390),
                       unary(UnaryOp::Exp, unary(UnaryOp::Negate, multiply(x, x))))};
    case UnaryOp::Tan: return {multiply(grad, binary_with_scalar(BinaryOp::Add, multiply(node, node), 1.0, true, false))};
    case UnaryOp::Asin: case UnaryOp::Acos: {  // +-1 / sqrt(1 - x^2)
      NodePtr root = unary(UnaryOp::Sqrt, subtract(ones_like(x), multiply(x, x)));
      NodePtr slope = divide(grad, root);
      return {UnaryOp(node->op_code) == UnaryOp::Asin ? slope : unary(UnaryOp::Negate, slope)};
    }
    case UnaryOp::Atan: return {divide(grad, binary_with_scalar(BinaryOp::Add, multiply(x, x), 1.0, true, false))};
    case UnaryOp::Sinh: return {multiply(grad, unary(UnaryOp::Cosh, x))};
    case UnaryOp::Cosh: return {multiply(grad, unary(UnaryOp::Sinh, x))};
    default: return {nullptr};
  }
}

std::vector<NodePtr> binary_gradient(const NodePtr& node, const NodePtr& grad) {
  const NodePtr& a = node->inputs[0];
  const NodePtr& b = node->inputs[1];
  if (!is_floating(node->dtype)) return {nullptr, nullptr};
  switch (BinaryOp(node->op_code)) {
    case BinaryOp::Add: return {grad, grad};
    case BinaryOp::Subtract: return {grad, unary(UnaryOp::Negate, grad)};
    case BinaryOp::Multiply: return {multiply(grad, b), multiply(grad, a)};
    case BinaryOp::Divide: {
      NodePtr over_b = divide(grad, b);
      return {over_b, b->requires_grad ? unary(UnaryOp::Negate, multiply(over_b, node)) : nullptr};
    }
    case BinaryOp::Power: {
      // d/da a^b = b * a^(b-1); d/db a^b = a^b * log(a), taken as 0 where a == 0 and b >= 0 (PyTorch's choice).
      NodePtr for_a = a->requires_grad
          ? multiply(grad, multiply(b, binary(BinaryOp::Power, a, binary_with_scalar(BinaryOp::Subtract, b, 1.0, true, false))))
          : nullptr;
      NodePtr for_b = nullptr;
      if (b->requires_grad) {
        NodePtr at_zero = binary(BinaryOp::LogicalAnd, compare(BinaryOp::Equal, a, zeros_like(a)),
                                 compare(BinaryOp::GreaterEqual, b, zeros_like(b)));
        for_b = where(at_zero, zeros_like(grad), multiply(grad, multiply(node, unary(UnaryOp::Log, a))));
      }
      return {for_a, for_b};
    }
    case BinaryOp::Maximum:
    case BinaryOp::Minimum: {
      BinaryOp wins = BinaryOp(node->op_code) == BinaryOp::Maximum ? BinaryOp::Greater : BinaryOp::Less;
      NodePtr half = scaled(grad, 0.5);
      NodePtr tie = compare(BinaryOp::Equal, a, b);
      return {where(compare(wins, a, b), grad, masked(tie, half)), where(compare(wins, b, a), grad, masked(tie, half))};
    }
    case BinaryOp::Modulo:  // a mod b = a - floor(a / b) * b
      return {grad, b->requires_grad ? unary(UnaryOp::Negate, multiply(grad, binary(BinaryOp::FloorDivide, a, b))) : nullptr};
    case BinaryOp::FloorDivide: return {zeros_like(grad), zeros_like(grad)};
    default: return {nullptr, nullptr};
  }
}

}  // namespace

std::vector<NodePtr> elementwise_gradient(const NodePtr& node, const NodePtr& grad) {
  switch (node->kind) {
    case NodeKind::Unary: return unary_gradient(node, grad);
    case NodeKind::Binary: return binary_gradient(node, grad);
    case NodeKind::Where:
      return {nullptr, masked(node->inputs[0], grad), where(node->inputs[0], zeros_like(grad), grad)};
    case NodeKind::Cast:
      return {is_floating(node->inputs[0]->dtype) ? cast(grad, node->inputs[0]->dtype) : nullptr};
    default:
      return std::vector<NodePtr>(node->inputs.size());
  }
}

}  // namespace metajit
