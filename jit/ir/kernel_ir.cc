// Constructors, constant folding of index arithmetic, range analysis and canonical keys for the kernel IR.
#include "jit/ir/kernel_ir.h"

#include "jit/ir/index_sums.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <limits>
#include <sstream>
#include <unordered_map>

namespace metajit {
namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

IrExprPtr make(IrKind kind, DType dtype, uint16_t op, std::vector<IrExprPtr> args) {
  auto expression = std::make_shared<IrExpr>();
  expression->kind = kind;
  expression->dtype = dtype;
  expression->op = op;
  expression->args = std::move(args);
  return expression;
}

bool is_int_constant(const IrExprPtr& expression, int64_t* value = nullptr) {
  if (expression->kind != IrKind::IntConstant) return false;
  if (value) *value = expression->integer;
  return true;
}

IrRange full_range() { return {kMin, kMax}; }

IrRange checked(__int128 low, __int128 high) {
  if (low < kMin || high > kMax) return full_range();
  return {int64_t(low), int64_t(high)};
}

}  // namespace

namespace {

// Small integer constants (offsets, strides, extents) are built over and over while lowering, so ir_int hands out
// one shared node for each. Their lazily filled keys are filled here, before any thread can share them.
constexpr int64_t kSmallestShared = -16, kLargestShared = 1024;

IrExprPtr new_int(int64_t value) {
  auto expression = make(IrKind::IntConstant, DType::Int64, 0, {});
  std::const_pointer_cast<IrExpr>(expression)->integer = value;
  return expression;
}

const std::vector<IrExprPtr>& shared_ints() {
  static const std::vector<IrExprPtr>* constants = [] {
    auto* built = new std::vector<IrExprPtr>();  // leaked: the nodes outlive static destruction
    for (int64_t value = kSmallestShared; value <= kLargestShared; ++value) {
      IrExprPtr constant = new_int(value);
      ir_key(constant);
      ir_hash(constant);
      ir_tree_size({constant}, 1);
      built->push_back(std::move(constant));
    }
    return built;
  }();
  return *constants;
}

}  // namespace

IrExprPtr ir_int(int64_t value) {
  if (value >= kSmallestShared && value <= kLargestShared) return shared_ints()[size_t(value - kSmallestShared)];
  return new_int(value);
}

IrExprPtr ir_bool(bool value) {
  auto expression = make(IrKind::IntConstant, DType::Bool, 0, {});
  std::const_pointer_cast<IrExpr>(expression)->integer = value;
  return expression;
}

IrExprPtr ir_float(double value, DType dtype) {
  auto expression = std::make_shared<IrExpr>();
  expression->kind = IrKind::FloatConstant;
  expression->dtype = dtype;
  expression->floating = value;
  return expression;
}

IrExprPtr ir_loop_variable(const std::string& name, int64_t extent) {
  auto expression = std::make_shared<IrExpr>();
  expression->kind = IrKind::Variable;
  expression->dtype = DType::Int64;
  expression->name = name;
  expression->integer = extent;
  return expression;
}

IrExprPtr ir_variable(const std::string& name, DType dtype) {
  auto expression = std::make_shared<IrExpr>();
  expression->kind = IrKind::Variable;
  expression->dtype = dtype;
  expression->name = name;
  return expression;
}

IrExprPtr ir_let_variable(const std::string& name, const IrExprPtr& value) {
  auto expression = std::const_pointer_cast<IrExpr>(ir_variable(name, value->dtype));
  if (is_integral(value->dtype) && value->dtype != DType::Bool) {
    IrRange range = ir_range(value);
    expression->let_low = range.low;
    expression->let_high = range.high;
  }
  return expression;
}

IrExprPtr ir_load(int buffer, DType dtype, IrExprPtr offset) {
  auto expression = std::make_shared<IrExpr>();
  expression->kind = IrKind::Load;
  expression->dtype = dtype;
  expression->buffer = buffer;
  expression->args = {std::move(offset)};
  return expression;
}

IrExprPtr ir_unary(UnaryOp op, DType dtype, IrExprPtr operand) {
  return make(IrKind::Unary, dtype, uint16_t(op), {std::move(operand)});
}

IrExprPtr ir_binary(BinaryOp op, DType dtype, IrExprPtr left, IrExprPtr right) {
  return make(IrKind::Binary, dtype, uint16_t(op), {std::move(left), std::move(right)});
}

IrExprPtr ir_select(IrExprPtr condition, IrExprPtr if_true, IrExprPtr if_false) {
  int64_t value;
  if (is_int_constant(condition, &value)) return value ? if_true : if_false;
  DType dtype = if_true->dtype;
  return make(IrKind::Select, dtype, 0, {std::move(condition), std::move(if_true), std::move(if_false)});
}

IrExprPtr ir_cast(DType dtype, IrExprPtr operand) {
  if (operand->dtype == dtype) return operand;
  return make(IrKind::Cast, dtype, 0, {std::move(operand)});
}

IrExprPtr ir_round_to_half(IrExprPtr operand) {
  if (operand->kind == IrKind::Cast && operand->dtype == DType::Float16) return operand;  // rounded already
  return make(IrKind::Cast, DType::Float16, 0, {std::move(operand)});
}

// A comparison, min or max whose result the operands' value ranges already fix; null when they overlap.
static IrExprPtr decide_by_ranges(IndexOperator op, const IrExprPtr& left, const IrExprPtr& right) {
  IrRange a = ir_range(left), b = ir_range(right);
  switch (op) {
    case IndexOperator::Less:
      return a.high < b.low ? ir_bool(true) : a.low >= b.high ? ir_bool(false) : nullptr;
    case IndexOperator::LessEqual:
      return a.high <= b.low ? ir_bool(true) : a.low > b.high ? ir_bool(false) : nullptr;
    case IndexOperator::Greater:
      return a.low > b.high ? ir_bool(true) : a.high <= b.low ? ir_bool(false) : nullptr;
    case IndexOperator::GreaterEqual:
      return a.low >= b.high ? ir_bool(true) : a.high < b.low ? ir_bool(false) : nullptr;
    case IndexOperator::Minimum: return a.high <= b.low ? left : b.high <= a.low ? right : nullptr;
    case IndexOperator::Maximum: return a.low >= b.high ? left : b.low >= a.high ? right : nullptr;
    default: return nullptr;
  }
}

IrExprPtr ir_index(IndexOperator op, IrExprPtr left, IrExprPtr right) {
  bool boolean_result = op == IndexOperator::Not || (op >= IndexOperator::Less && op <= IndexOperator::LogicalOr);
  int64_t a = 0, b = 0;
  bool left_constant = is_int_constant(left, &a);
  bool right_constant = right && is_int_constant(right, &b);
  if (left_constant && (!right || right_constant)) {
    IndexEnvironment environment;
    IndexExpression folded = right ? make_binary(op, left->dtype == DType::Bool ? make_boolean(a) : make_integer(a),
                                                 right->dtype == DType::Bool ? make_boolean(b) : make_integer(b))
                                   : make_unary(op, left->dtype == DType::Bool ? make_boolean(a) : make_integer(a));
    int64_t value = evaluate_index_expression(folded, environment);
    return boolean_result ? ir_bool(value) : ir_int(value);
  }
  // Cheap identities that keep generated indices readable.
  switch (op) {
    case IndexOperator::Add: {
      if (left_constant && a == 0) return right;
      if (right_constant && b == 0) return left;
      // Sums whose terms cancel (the pieces of a flattened and split index) join again.
      if (IrExprPtr combined = combine_index_sum(left, right)) return combined;
      break;
    }
    case IndexOperator::Subtract:
      if (right_constant && b == 0) return left;
      break;
    case IndexOperator::Multiply:
      if (left_constant && a == 1) return right;
      if (right_constant && b == 1) return left;
      if ((left_constant && a == 0) || (right_constant && b == 0)) return ir_int(0);
      break;
    case IndexOperator::FloorDivide:
    case IndexOperator::FloorModulo: {
      if (!right_constant || b <= 0) break;
      bool divide = op == IndexOperator::FloorDivide;
      if (b == 1) return divide ? left : ir_int(0);
      IrRange range = ir_range(left);
      if (range.low >= 0 && range.high < b) return divide ? ir_int(0) : left;
      // (x / a) / b == x / (a * b) for positive a and b.
      int64_t inner_divisor, joined_divisor;
      if (divide && left->kind == IrKind::IndexBinary && IndexOperator(left->op) == IndexOperator::FloorDivide &&
          is_int_constant(left->args[1], &inner_divisor) && inner_divisor > 0 &&
          !__builtin_mul_overflow(inner_divisor, b, &joined_divisor))
        return ir_index(IndexOperator::FloorDivide, left->args[0], ir_int(joined_divisor));
      if (IrExprPtr divided = divide_index_sum(op, left, b)) return divided;
      break;
    }
    case IndexOperator::LogicalAnd:
      if (left_constant) return a ? right : ir_bool(false);
      if (right_constant) return b ? left : ir_bool(false);
      break;
    case IndexOperator::LogicalOr:
      if (left_constant) return a ? ir_bool(true) : right;
      if (right_constant) return b ? ir_bool(true) : left;
      break;
    default:
      break;
  }
  bool is_binary = right != nullptr;
  std::vector<IrExprPtr> args{std::move(left)};
  if (is_binary) args.push_back(std::move(right));
  return make(is_binary ? IrKind::IndexBinary : IrKind::IndexUnary, boolean_result ? DType::Bool : DType::Int64,
              uint16_t(op), std::move(args));
}

IrExprPtr ir_fold_by_ranges(const IrExprPtr& expression) {
  std::vector<IrExprPtr> args;
  for (const IrExprPtr& argument : expression->args) args.push_back(ir_fold_by_ranges(argument));
  IrExprPtr rebuilt = ir_with_args(expression, std::move(args));
  if (rebuilt->kind == IrKind::IndexBinary)
    if (IrExprPtr decided = decide_by_ranges(IndexOperator(rebuilt->op), rebuilt->args[0], rebuilt->args[1]))
      return decided;
  if (rebuilt->kind == IrKind::Select && rebuilt->args[0]->kind == IrKind::IntConstant)
    return rebuilt->args[0]->integer ? rebuilt->args[1] : rebuilt->args[2];
  // abs of an operand of known sign is the operand or its negation: within one piece of a reflected row the
  // index is affine again, and the row's reads are contiguous.
  if (rebuilt->kind == IrKind::IndexUnary && IndexOperator(rebuilt->op) == IndexOperator::Abs) {
    IrRange operand = ir_range(rebuilt->args[0]);
    if (operand.low >= 0) return rebuilt->args[0];
    if (operand.high <= 0 && operand.low > INT64_MIN)
      return ir_index(IndexOperator::Subtract, ir_int(0), rebuilt->args[0]);
  }
  return rebuilt;
}

// Interval arithmetic of one index operator (full range where an end could overflow or is unknown).
IrRange binary_range(IndexOperator op, IrRange left, IrRange right) {
  switch (op) {
    case IndexOperator::Add: return checked(__int128(left.low) + right.low, __int128(left.high) + right.high);
    case IndexOperator::Subtract: return checked(__int128(left.low) - right.high, __int128(left.high) - right.low);
    case IndexOperator::Multiply: {
      __int128 products[4] = {__int128(left.low) * right.low, __int128(left.low) * right.high,
                              __int128(left.high) * right.low, __int128(left.high) * right.high};
      __int128 low = products[0], high = products[0];
      for (__int128 product : products) low = std::min(low, product), high = std::max(high, product);
      return checked(low, high);
    }
    case IndexOperator::FloorDivide:
      if (right.low == right.high && right.low > 0)
        return {index_floor_divide(left.low, right.low), index_floor_divide(left.high, right.low)};
      // A negative divisor reverses the order (a flip's gradient divides by -1); INT64_MIN / -1 wraps.
      if (right.low == right.high && right.low < 0 && !(right.low == -1 && left.low == INT64_MIN))
        return {index_floor_divide(left.high, right.low), index_floor_divide(left.low, right.low)};
      return full_range();
    case IndexOperator::FloorModulo:
      if (right.low == right.high && right.low > 0) {
        if (left.low >= 0 && left.high < right.low) return left;
        return {0, right.low - 1};
      }
      return full_range();
    case IndexOperator::Minimum: return {std::min(left.low, right.low), std::min(left.high, right.high)};
    case IndexOperator::Maximum: return {std::max(left.low, right.low), std::max(left.high, right.high)};
    default: return full_range();
  }
}

IrRange ir_range(const IrExprPtr& expression) {
  switch (expression->kind) {
    case IrKind::IntConstant: return {expression->integer, expression->integer};
    case IrKind::Variable:
      if (expression->dtype == DType::Bool) return {0, 1};
      if (expression->integer > 0) return {0, expression->integer - 1};
      return {expression->let_low, expression->let_high};
    case IrKind::Select: {
      IrRange first = ir_range(expression->args[1]), second = ir_range(expression->args[2]);
      return {std::min(first.low, second.low), std::max(first.high, second.high)};
    }
    case IrKind::Cast:
      if (expression->args[0]->dtype == DType::Bool) return {0, 1};
      if (is_integral(expression->args[0]->dtype) && expression->dtype == DType::Int64)
        return ir_range(expression->args[0]);
      return full_range();
    case IrKind::IndexUnary: {
      if (expression->dtype == DType::Bool) return {0, 1};
      IrRange operand = ir_range(expression->args[0]);
      if (IndexOperator(expression->op) == IndexOperator::Negate) return checked(-__int128(operand.high), -__int128(operand.low));
      // abs: a reflected index (15 - abs(15 - abs(i - 1)), reflection padding) is then known to stay in range, so
      // its reads need no clamp and no bounds test. abs(INT64_MIN) wraps: checked gives the full range there.
      if (IndexOperator(expression->op) == IndexOperator::Abs) {
        if (operand.low >= 0) return operand;
        if (operand.high <= 0) return checked(-__int128(operand.high), -__int128(operand.low));
        return checked(0, std::max(-__int128(operand.low), __int128(operand.high)));
      }
      return full_range();
    }
    case IrKind::Binary: {  // int64 tensor arithmetic (an arange // 2 feeding a gather): the index forms' rules
      if (expression->dtype == DType::Bool) return {0, 1};
      if (expression->dtype != DType::Int64) return full_range();  // narrower integers wrap at their own width
      IndexOperator same;
      switch (BinaryOp(expression->op)) {
        case BinaryOp::Add: same = IndexOperator::Add; break;
        case BinaryOp::Subtract: same = IndexOperator::Subtract; break;
        case BinaryOp::Multiply: same = IndexOperator::Multiply; break;
        case BinaryOp::FloorDivide: same = IndexOperator::FloorDivide; break;
        case BinaryOp::Modulo: same = IndexOperator::FloorModulo; break;
        case BinaryOp::Maximum: same = IndexOperator::Maximum; break;
        case BinaryOp::Minimum: same = IndexOperator::Minimum; break;
        default: return full_range();
      }
      return binary_range(same, ir_range(expression->args[0]), ir_range(expression->args[1]));
    }
    case IrKind::IndexBinary: {
      if (expression->dtype == DType::Bool) return {0, 1};
      return binary_range(IndexOperator(expression->op), ir_range(expression->args[0]), ir_range(expression->args[1]));
    }
    default:
      return expression->dtype == DType::Bool ? IrRange{0, 1} : full_range();
  }
}

namespace {

// Written sizes saturate here: far above any limit asked for, and no sum of three copies of it overflows.
constexpr int64_t kLargestWrittenSize = int64_t(1) << 60;

// The written size of `expression` alone (saturating at kLargestWrittenSize), kept on each node once known.
int64_t written_size(const IrExpr* expression) {
  if (expression->summary.written_size >= 0) return expression->summary.written_size;
  // Post-order over the nodes not yet sized, so a chain of shared halves that doubles at every step costs its
  // length, not 2^length, and a deep expression needs no deep recursion.
  std::vector<std::pair<const IrExpr*, bool>> stack{{expression, false}};  // (node, its operands are done)
  while (!stack.empty()) {
    auto [node, operands_done] = stack.back();
    stack.pop_back();
    if (node->summary.written_size >= 0) continue;
    if (!operands_done) {
      stack.push_back({node, true});
      for (const IrExprPtr& argument : node->args)
        if (argument && argument->summary.written_size < 0) stack.push_back({argument.get(), false});
      continue;
    }
    // Index min, max and abs are written as conditionals that repeat their operands.
    int64_t copies = 1;
    if (node->kind == IrKind::IndexBinary || node->kind == IrKind::IndexUnary) {
      IndexOperator op = IndexOperator(node->op);
      if (op == IndexOperator::Minimum || op == IndexOperator::Maximum) copies = 2;
      if (op == IndexOperator::Abs) copies = 3;
    }
    int64_t size = 1;
    for (const IrExprPtr& argument : node->args)
      if (argument) size = std::min(kLargestWrittenSize, size + copies * argument->summary.written_size);
    node->summary.written_size = size;
  }
  return expression->summary.written_size;
}

}  // namespace

int64_t ir_tree_size(const std::vector<IrExprPtr>& expressions, int64_t limit) {
  int64_t total = 0;
  for (const IrExprPtr& expression : expressions)
    if (expression) total = std::min(limit, total + std::min(limit, written_size(expression.get())));
  return total;
}

const std::string& ir_key(const IrExprPtr& expression) {
  // Expressions are immutable once built, so the key is computed once and kept on the node: the lowering asks
  // for keys of the same subtrees over and over (memoisation of every value at every index).
  if (!expression->key.empty()) return expression->key;
  std::string text = std::to_string(int(expression->kind)) + ':' + std::to_string(int(expression->dtype)) + ':' +
                     std::to_string(expression->op) + ':';
  switch (expression->kind) {
    case IrKind::IntConstant: text += std::to_string(expression->integer); break;
    case IrKind::FloatConstant: {
      char hex[40];
      std::snprintf(hex, sizeof(hex), "%a", expression->floating);
      text += hex;
      break;
    }
    case IrKind::Variable: text += expression->name; break;
    case IrKind::Load: text += 'b' + std::to_string(expression->buffer); break;
    default: break;
  }
  text += '(';
  for (const IrExprPtr& argument : expression->args) {
    text += ir_key(argument);
    text += ',';
  }
  text += ')';
  expression->key = std::move(text);
  return expression->key;
}

namespace {

uint64_t mix(uint64_t hash, uint64_t value) {
  // splitmix64's finaliser over the running hash and the next value.
  uint64_t x = hash ^ (value + 0x9e3779b97f4a7c15ULL + (hash << 6) + (hash >> 2));
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The bits ir_key's "%a" tells apart: every NaN of one sign is written alike.
uint64_t float_bits(double value) {
  if (std::isnan(value)) return std::signbit(value) ? 1 : 2;
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

}  // namespace

uint64_t ir_hash(const IrExprPtr& expression) {
  if (expression->summary.hash) return expression->summary.hash;
  uint64_t hash = mix(mix(mix(0, uint64_t(expression->kind)), uint64_t(expression->dtype)), expression->op);
  switch (expression->kind) {
    case IrKind::IntConstant: hash = mix(hash, uint64_t(expression->integer)); break;
    case IrKind::FloatConstant: hash = mix(hash, float_bits(expression->floating)); break;
    case IrKind::Variable: hash = mix(hash, std::hash<std::string>()(expression->name)); break;
    case IrKind::Load: hash = mix(hash, uint64_t(expression->buffer)); break;
    default: break;
  }
  for (const IrExprPtr& argument : expression->args) hash = mix(hash, ir_hash(argument));
  expression->summary.hash = hash ? hash : 1;
  return expression->summary.hash;
}

bool ir_equal(const IrExprPtr& first, const IrExprPtr& second) {
  if (first == second) return true;
  if (ir_hash(first) != ir_hash(second) || first->kind != second->kind || first->dtype != second->dtype ||
      first->op != second->op || first->args.size() != second->args.size())
    return false;
  switch (first->kind) {
    case IrKind::IntConstant:
      if (first->integer != second->integer) return false;
      break;
    case IrKind::FloatConstant:
      if (float_bits(first->floating) != float_bits(second->floating)) return false;
      break;
    case IrKind::Variable:
      if (first->name != second->name) return false;
      break;
    case IrKind::Load:
      if (first->buffer != second->buffer) return false;
      break;
    default: break;
  }
  for (size_t index = 0; index < first->args.size(); ++index)
    if (!ir_equal(first->args[index], second->args[index])) return false;
  return true;
}

IrExprPtr ir_with_args(const IrExprPtr& expression, std::vector<IrExprPtr> args) {
  bool changed = false;
  for (size_t index = 0; index < args.size(); ++index) changed = changed || args[index] != expression->args[index];
  if (!changed) return expression;
  if (expression->kind == IrKind::IndexBinary || expression->kind == IrKind::IndexUnary)
    return ir_index(IndexOperator(expression->op), args[0], args.size() > 1 ? args[1] : nullptr);
  auto copy = std::make_shared<IrExpr>(*expression);
  copy->args = std::move(args);
  copy->key.clear();
  return copy;
}

IrExprPtr ir_rewrite(const IrExprPtr& expression, const IrVisitor& visit) {
  if (!expression) return expression;
  std::vector<IrExprPtr> args;
  args.reserve(expression->args.size());
  for (const IrExprPtr& argument : expression->args) args.push_back(ir_rewrite(argument, visit));
  return visit(ir_with_args(expression, std::move(args)));
}

IrStatement IrStatement::let(std::string name, DType dtype, IrExprPtr value) {
  IrStatement statement;
  statement.kind = Kind::Let;
  statement.name = std::move(name);
  statement.dtype = dtype;
  statement.value = std::move(value);
  return statement;
}

IrStatement IrStatement::reduce_loop(std::string name, DType dtype, ReduceOp reduce_op,
                                     std::vector<std::pair<std::string, int64_t>> loops, IrExprPtr value,
                                     std::vector<IrStatement> body) {
  IrStatement statement;
  statement.kind = Kind::ReduceLoop;
  statement.name = std::move(name);
  statement.dtype = dtype;
  statement.reduce_op = reduce_op;
  statement.loops = std::move(loops);
  statement.value = std::move(value);
  statement.body = std::move(body);
  return statement;
}

IrStatement IrStatement::store(int buffer, IrExprPtr offset, IrExprPtr value) {
  IrStatement statement;
  statement.kind = Kind::Store;
  statement.buffer = buffer;
  statement.offset = std::move(offset);
  statement.value = std::move(value);
  return statement;
}

IrStatement IrStatement::scatter_accumulate(int buffer, IrExprPtr offset, DType dtype, IrExprPtr value,
                                            IrExprPtr condition) {
  IrStatement statement;
  statement.kind = Kind::ScatterAccumulate;
  statement.buffer = buffer;
  statement.offset = std::move(offset);
  statement.dtype = dtype;
  statement.value = std::move(value);
  statement.condition = std::move(condition);
  return statement;
}

IrBuffer IrBuffer::input(std::string name, DType dtype, Shape shape) {
  return IrBuffer{std::move(name), dtype, std::move(shape), /*is_output=*/false};
}

IrBuffer IrBuffer::output(std::string name, DType dtype, Shape shape) {
  return IrBuffer{std::move(name), dtype, std::move(shape), /*is_output=*/true};
}

void ir_rewrite_statements(std::vector<IrStatement>& statements, const IrVisitor& visit) {
  for (IrStatement& statement : statements) {
    statement.value = ir_rewrite(statement.value, visit);
    statement.offset = ir_rewrite(statement.offset, visit);
    statement.condition = ir_rewrite(statement.condition, visit);
    ir_rewrite_statements(statement.body, visit);
  }
}

bool statements_split_variable(const std::vector<IrStatement>& statements, const std::string& name) {
  for (const IrStatement& statement : statements) {
    for (const IrExprPtr* part : {&statement.value, &statement.offset, &statement.condition})
      if (*part && splits_variable(*part, name)) return true;
    if (statements_split_variable(statement.body, name)) return true;
  }
  return false;
}

bool mentions_variable(const IrExprPtr& expression, const std::string& name) {
  if (expression->kind == IrKind::Variable) return expression->name == name;
  for (const IrExprPtr& argument : expression->args)
    if (mentions_variable(argument, name)) return true;
  return false;
}

IrExprPtr ir_substitute(const IrExprPtr& expression, const std::string& name, const IrExprPtr& replacement) {
  if (expression->kind == IrKind::Variable) return expression->name == name ? replacement : expression;
  std::vector<IrExprPtr> args;
  for (const IrExprPtr& argument : expression->args) args.push_back(ir_substitute(argument, name, replacement));
  return ir_with_args(expression, std::move(args));
}

IrStatement ir_substitute_and_fold(const IrStatement& statement, const std::string& name,
                                   const IrExprPtr& replacement) {
  IrStatement result = statement;
  for (IrExprPtr* part : {&result.value, &result.offset, &result.condition})
    if (*part) *part = ir_fold_by_ranges(ir_substitute(*part, name, replacement));
  for (IrStatement& inner : result.body) inner = ir_substitute_and_fold(inner, name, replacement);
  return result;
}

bool reads_only_domain_indices(const IrExprPtr& expression, int last, const std::string& also) {
  if (expression->kind == IrKind::Variable) {
    if (!also.empty() && expression->name == also) return true;
    for (int dim = 0; dim <= last; ++dim)
      if (expression->name == "i" + std::to_string(dim)) return true;
    return false;
  }
  for (const IrExprPtr& argument : expression->args)
    if (!reads_only_domain_indices(argument, last, also)) return false;
  return true;
}

void collect_loads(const IrExpr* expression, std::vector<const IrExpr*>* loads) {
  std::vector<const IrExpr*> pending{expression};
  while (!pending.empty()) {
    const IrExpr* current = pending.back();
    pending.pop_back();
    if (current->kind == IrKind::Load) loads->push_back(current);
    for (const IrExprPtr& argument : current->args) pending.push_back(argument.get());
  }
}

const char* schedule_form_name(IrSchedule::Form form) {
  switch (form) {
    case IrSchedule::Form::Elements: return "elements";
    case IrSchedule::Form::RunningSum: return "running sum";
    case IrSchedule::Form::ColumnRunningSum: return "column running sum";
    case IrSchedule::Form::ReverseRunningSum: return "reverse running sum";
    case IrSchedule::Form::ColumnSum: return "column sum";
    case IrSchedule::Form::TransposedTiles: return "transposed tiles";
  }
  return "";
}

bool ir_at_most(const IrExprPtr& condition, const std::string& low, const std::string& high) {
  auto is_variable = [](const IrExprPtr& expression, const std::string& name) {
    return expression->kind == IrKind::Variable && expression->name == name;
  };
  if (condition->kind == IrKind::IndexUnary && IndexOperator(condition->op) == IndexOperator::Not) {
    const IrExprPtr& inner = condition->args[0];
    return inner->kind == IrKind::IndexBinary && IndexOperator(inner->op) == IndexOperator::Greater &&
           is_variable(inner->args[0], low) && is_variable(inner->args[1], high);
  }
  if (condition->kind != IrKind::IndexBinary) return false;
  IndexOperator op = IndexOperator(condition->op);
  return (op == IndexOperator::LessEqual && is_variable(condition->args[0], low) &&
          is_variable(condition->args[1], high)) ||
         (op == IndexOperator::GreaterEqual && is_variable(condition->args[0], high) &&
          is_variable(condition->args[1], low));
}

IrExprPtr ir_let_value(const IrStatement& reduction, const IrExprPtr& expression) {
  IrExprPtr current = expression;
  for (bool followed = true; followed && current->kind == IrKind::Variable;) {
    followed = false;
    for (const IrStatement& let : reduction.body)
      if (let.kind == IrStatement::Kind::Let && let.name == current->name) {
        current = let.value;
        followed = true;
      }
  }
  return current;
}

IrExprPtr ir_running_sum_guard(const IrStatement& reduction, const std::string& index) {
  if (reduction.kind != IrStatement::Kind::ReduceLoop || reduction.loops.size() != 1 ||
      (reduction.reduce_op != ReduceOp::Add && reduction.reduce_op != ReduceOp::Multiply))
    return nullptr;
  IrExprPtr guarded = ir_let_value(reduction, reduction.value);
  if (guarded->kind != IrKind::Select) return nullptr;
  const IrExprPtr& otherwise = guarded->args[2];  // the reduction's identity: terms past index change nothing
  double identity = reduction.reduce_op == ReduceOp::Multiply ? 1.0 : 0.0;
  if (!(otherwise->kind == IrKind::FloatConstant && otherwise->floating == identity) &&
      !(otherwise->kind == IrKind::IntConstant && otherwise->integer == int64_t(identity)))
    return nullptr;
  IrExprPtr condition = ir_let_value(reduction, guarded->args[0]);
  if (!ir_at_most(condition, reduction.loops[0].first, index) || mentions_variable(guarded->args[1], index))
    return nullptr;
  // Nothing else in the sum may depend on index: every Let but the guard's own reads only r and other indices.
  for (const IrStatement& let : reduction.body)
    if (let.value != condition && let.value != guarded && mentions_variable(let.value, index)) return nullptr;
  return guarded;
}

bool splits_variable(const IrExprPtr& expression, const std::string& name) {
  if (expression->kind == IrKind::IndexBinary &&
      (IndexOperator(expression->op) == IndexOperator::FloorDivide ||
       IndexOperator(expression->op) == IndexOperator::FloorModulo) &&
      mentions_variable(expression->args[0], name))
    return true;
  for (const IrExprPtr& argument : expression->args)
    if (splits_variable(argument, name)) return true;
  return false;
}

}  // namespace metajit
