#include "jit/codegen/cpp/vector_expression_renderer.h"

namespace metajit {

VectorExpressionRenderer::VectorExpressionRenderer(ExpressionRenderer& scalar, const IrKernel& kernel,
                                                   std::string loop_variable, std::set<std::string> stashes)
    : scalar_(scalar), kernel_(kernel), loop_variable_(std::move(loop_variable)) {
  for (const std::string& stash : stashes) stash_reads_.insert(stash + "[" + loop_variable_ + "]");
}

const char* VectorExpressionRenderer::vector_type(DType dtype) {
  switch (dtype) {
    case DType::Bool: return "mj_mask_vector";
    case DType::Int64: return "mj_long_vector";
    case DType::Float64: return "mj_double_vector";
    default: return "mj_float_vector";
  }
}

bool VectorExpressionRenderer::has_lanes(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Bool || dtype == DType::Int64 || dtype == DType::Float64;
}

bool VectorExpressionRenderer::unit_stride(const IrExprPtr& offset, const std::string& variable) {
  if (offset->kind == IrKind::Variable) return offset->name == variable;
  if (offset->kind != IrKind::IndexBinary || IndexOperator(offset->op) != IndexOperator::Add) return false;
  const IrExprPtr& left = offset->args[0];
  const IrExprPtr& right = offset->args[1];
  bool in_left = mentions_variable(left, variable), in_right = mentions_variable(right, variable);
  if (in_left == in_right) return false;
  return unit_stride(in_left ? left : right, variable);
}

bool VectorExpressionRenderer::is_stash_read(const IrExprPtr& node) const {
  return node->kind == IrKind::Variable && stash_reads_.count(node->name);
}

bool VectorExpressionRenderer::varies(const IrExprPtr& node) const {
  if (node->kind == IrKind::Variable)
    return node->name == loop_variable_ || vector_lets_.count(node->name) || is_stash_read(node) ||
           vector_reads_.count(node->name);
  for (const IrExprPtr& argument : node->args)
    if (varies(argument)) return true;
  return false;
}

// Float32 values and masks with the operations the prelude has vector forms of, and the index arithmetic that
// leads to them (int64 and float64 lanes: a causal mask's comparison, an arange's conversion); anything else keeps
// the loop scalar (LLVM still vectorises it where it can).
bool VectorExpressionRenderer::accepts_value(const IrExprPtr& node) const {
  const auto& args = node->args;
  // An operand that does not vary is scalar text, splatted: any value of the type will do.
  auto operand = [&](const IrExprPtr& argument, DType dtype) {
    if (argument->dtype != dtype) return false;
    return !varies(argument) || accepts_value(argument);
  };
  // Both operands of one arithmetic lane type (float32, int64 or float64).
  auto arithmetic_operands = [&](DType dtype) {
    return has_lanes(dtype) && dtype != DType::Bool && operand(args[0], dtype) && operand(args[1], dtype);
  };
  switch (node->kind) {
    case IrKind::Variable:
      if (is_stash_read(node) || vector_reads_.count(node->name)) return node->dtype == DType::Float32;
      if (node->name == loop_variable_) return node->dtype == DType::Int64;  // mj_index_lanes
      return vector_lets_.count(node->name) > 0;  // accepted when defined
    case IrKind::Load: {
      const IrBuffer& buffer = kernel_.buffers[node->buffer];
      if (buffer.dtype != DType::Float32 || node->dtype != DType::Float32) return false;
      if (!unit_stride(args[0], loop_variable_)) return false;
      // The rest of the offset must not change with the loop (a vector Let in it would be a gather).
      for (const std::string& name : vector_lets_)
        if (mentions_variable(args[0], name)) return false;
      return true;
    }
    case IrKind::Unary: {
      if (node->dtype == DType::Bool)  // not of a mask
        return (UnaryOp(node->op) == UnaryOp::LogicalNot || UnaryOp(node->op) == UnaryOp::BitwiseNot) &&
               operand(args[0], DType::Bool);
      if ((node->dtype == DType::Int64 || node->dtype == DType::Float64) && UnaryOp(node->op) == UnaryOp::Negate)
        return operand(args[0], node->dtype);
      if (node->dtype != DType::Float32 || !operand(args[0], DType::Float32)) return false;
      switch (UnaryOp(node->op)) {
        case UnaryOp::Negate: case UnaryOp::Abs: case UnaryOp::Exp: case UnaryOp::Relu: case UnaryOp::Sigmoid:
        case UnaryOp::Tanh: case UnaryOp::Sin: case UnaryOp::Cos: case UnaryOp::Erf:
          return true;
        default: return false;
      }
    }
    case IrKind::Binary: {
      BinaryOp op = BinaryOp(node->op);
      switch (op) {
        case BinaryOp::Add: case BinaryOp::Subtract: case BinaryOp::Multiply:
          return node->dtype == args[0]->dtype && arithmetic_operands(node->dtype);
        case BinaryOp::Divide:  // not of integers: C's division truncates, the index language's floors
          return node->dtype != DType::Int64 && node->dtype == args[0]->dtype && arithmetic_operands(node->dtype);
        case BinaryOp::Maximum: case BinaryOp::Minimum:  // of floats NaN-aware (mj_max), of index values plain
          return (node->dtype == DType::Float32 || node->dtype == DType::Int64) && arithmetic_operands(node->dtype);
        case BinaryOp::Power:
          return node->dtype == DType::Float32 && args[1]->kind == IrKind::FloatConstant && args[1]->floating == 2.0 &&
                 operand(args[0], DType::Float32);
        case BinaryOp::Less: case BinaryOp::LessEqual: case BinaryOp::Greater: case BinaryOp::GreaterEqual:
        case BinaryOp::Equal: case BinaryOp::NotEqual:
          return node->dtype == DType::Bool && arithmetic_operands(args[0]->dtype);
        case BinaryOp::LogicalAnd: case BinaryOp::LogicalOr: case BinaryOp::LogicalXor:
        case BinaryOp::BitwiseAnd: case BinaryOp::BitwiseOr: case BinaryOp::BitwiseXor:
          return node->dtype == DType::Bool && operand(args[0], DType::Bool) && operand(args[1], DType::Bool);
        default: return false;
      }
    }
    case IrKind::IndexUnary:
      switch (IndexOperator(node->op)) {
        case IndexOperator::Negate: return node->dtype == DType::Int64 && operand(args[0], DType::Int64);
        case IndexOperator::Not: return node->dtype == DType::Bool && operand(args[0], DType::Bool);
        default: return false;
      }
    case IrKind::IndexBinary: {
      IndexOperator op = IndexOperator(node->op);
      if (ExpressionRenderer::comparison_symbol(op)) return node->dtype == DType::Bool && arithmetic_operands(DType::Int64);
      switch (op) {
        case IndexOperator::Add: case IndexOperator::Subtract: case IndexOperator::Multiply:
        case IndexOperator::Minimum: case IndexOperator::Maximum:
          return node->dtype == DType::Int64 && arithmetic_operands(DType::Int64);
        case IndexOperator::LogicalAnd: case IndexOperator::LogicalOr:
          return node->dtype == DType::Bool && operand(args[0], DType::Bool) && operand(args[1], DType::Bool);
        default: return false;  // floor division and modulo
      }
    }
    case IrKind::Select:
      return node->dtype == DType::Float32 && operand(args[0], DType::Bool) && operand(args[1], DType::Float32) &&
             operand(args[2], DType::Float32);
    case IrKind::Cast: {
      DType from = args[0]->dtype;
      if (!operand(args[0], from)) return false;
      if (node->dtype == DType::Float32)
        return from == DType::Float32 || from == DType::Bool || from == DType::Int64 || from == DType::Float64;
      if (node->dtype == DType::Float64) return from == DType::Float64 || from == DType::Int64 || from == DType::Float32;
      return node->dtype == DType::Int64 && from == DType::Int64;
    }
    default:
      return false;
  }
}

bool VectorExpressionRenderer::accepts(const std::vector<IrStatement>& statements, bool allow_stores,
                                       const IrExprPtr& value) {
  for (const IrStatement& statement : statements) {
    switch (statement.kind) {
      case IrStatement::Kind::Let:
        if (!varies(statement.value)) break;  // stays a scalar let (LLVM hoists it)
        if (!has_lanes(statement.dtype) || statement.value->dtype != statement.dtype || !accepts_value(statement.value))
          return false;
        vector_lets_.insert(statement.name);
        break;
      case IrStatement::Kind::Store: {
        if (!allow_stores || kernel_.buffers[statement.buffer].dtype != DType::Float32 ||
            statement.value->dtype != DType::Float32 || !unit_stride(statement.offset, loop_variable_))
          return false;
        for (const std::string& name : vector_lets_)
          if (mentions_variable(statement.offset, name)) return false;
        if (varies(statement.value) && !accepts_value(statement.value)) return false;
        break;
      }
      default:
        return false;
    }
  }
  if (!value) return true;
  return value->dtype == DType::Float32 && (!varies(value) || accepts_value(value));
}

std::string VectorExpressionRenderer::vector_expression(const IrExprPtr& node) {
  if (varies(node)) return expression(node);
  std::string scalar = scalar_.expression(node);
  switch (node->dtype) {
    case DType::Bool: return "mj_splat_mask(" + scalar + ")";
    case DType::Int64: return "(" + scalar + " + (mj_long_vector){})";
    case DType::Float64: return "(" + scalar + " - (mj_double_vector){})";  // keeps -0, as mj_splat
    default: return "mj_splat(" + scalar + ")";
  }
}

std::string VectorExpressionRenderer::load(const std::string& address) const {
  return lanes_.empty() ? "mj_load_vector(" + address + ")" : "mj_load_lanes(" + address + ", " + lanes_ + ")";
}

std::string VectorExpressionRenderer::expression(const IrExprPtr& node) {
  if (!varies(node)) return scalar_.expression(node);
  const auto& args = node->args;
  switch (node->kind) {
    case IrKind::Variable:
      if (is_stash_read(node)) return load("&" + node->name);
      if (vector_reads_.count(node->name)) return node->name;
      return node->name == loop_variable_ ? "mj_index_lanes(" + node->name + ")" : node->name;
    case IrKind::Load:
      return load("&" + kernel_.buffers[node->buffer].name + "[" + scalar_.expression(args[0]) + "]");
    case IrKind::Unary: {
      std::string x = expression(args[0]);
      switch (UnaryOp(node->op)) {
        case UnaryOp::Negate: return "(-" + x + ")";
        case UnaryOp::Abs: return "mj_abs(" + x + ")";
        case UnaryOp::Exp: return "mj_exp_lanes(" + x + ")";
        case UnaryOp::Tanh: return "mj_tanh_lanes(" + x + ")";
        case UnaryOp::Sin: return "mj_sin_lanes(" + x + ")";
        case UnaryOp::Cos: return "mj_cos_lanes(" + x + ")";
        case UnaryOp::Erf: return "mj_erf_lanes(" + x + ")";
        case UnaryOp::Relu: return "(" + x + " < 0.0f ? mj_splat(0.0f) : " + x + ")";
        case UnaryOp::Sigmoid: return "(1.0f / (1.0f + mj_exp_lanes(-" + x + ")))";
        case UnaryOp::LogicalNot: case UnaryOp::BitwiseNot: return "(~" + x + ")";  // masks are -1 or 0
        default: break;
      }
      break;
    }
    case IrKind::Binary: {
      // Arithmetic and comparisons splat a scalar operand by themselves; calls and masks need vectors.
      std::string a = expression(args[0]), b = expression(args[1]);
      if (const char* symbol = ExpressionRenderer::comparison_symbol(BinaryOp(node->op)))
        return mask_of("(" + a + " " + symbol + " " + b + ")", args[0]->dtype);
      switch (BinaryOp(node->op)) {
        case BinaryOp::Add: return "(" + a + " + " + b + ")";
        case BinaryOp::Subtract: return "(" + a + " - " + b + ")";
        case BinaryOp::Multiply: return "(" + a + " * " + b + ")";
        case BinaryOp::Divide: return "(" + a + " / " + b + ")";
        case BinaryOp::Power: return "(" + a + " * " + a + ")";
        case BinaryOp::Maximum: case BinaryOp::Minimum: {
          bool maximum = BinaryOp(node->op) == BinaryOp::Maximum;
          std::string left = vector_expression(args[0]), right = vector_expression(args[1]);
          if (node->dtype == DType::Int64) return extremum(left, right, maximum);
          return std::string(maximum ? "mj_max(" : "mj_min(") + left + ", " + right + ")";
        }
        case BinaryOp::LogicalAnd: case BinaryOp::BitwiseAnd:
          return "(" + vector_expression(args[0]) + " & " + vector_expression(args[1]) + ")";
        case BinaryOp::LogicalOr: case BinaryOp::BitwiseOr:
          return "(" + vector_expression(args[0]) + " | " + vector_expression(args[1]) + ")";
        case BinaryOp::LogicalXor: case BinaryOp::BitwiseXor:
          return "(" + vector_expression(args[0]) + " ^ " + vector_expression(args[1]) + ")";
        default: break;
      }
      break;
    }
    case IrKind::IndexUnary:
      if (IndexOperator(node->op) == IndexOperator::Not) return "(~" + expression(args[0]) + ")";
      return "(-" + expression(args[0]) + ")";
    case IrKind::IndexBinary: {
      IndexOperator op = IndexOperator(node->op);
      if (const char* symbol = ExpressionRenderer::comparison_symbol(op))
        return mask_of("(" + expression(args[0]) + " " + symbol + " " + expression(args[1]) + ")", DType::Int64);
      switch (op) {
        case IndexOperator::Add: return "(" + expression(args[0]) + " + " + expression(args[1]) + ")";
        case IndexOperator::Subtract: return "(" + expression(args[0]) + " - " + expression(args[1]) + ")";
        case IndexOperator::Multiply: return "(" + expression(args[0]) + " * " + expression(args[1]) + ")";
        case IndexOperator::Minimum: case IndexOperator::Maximum:
          return extremum(vector_expression(args[0]), vector_expression(args[1]), op == IndexOperator::Maximum);
        case IndexOperator::LogicalAnd:
          return "(" + vector_expression(args[0]) + " & " + vector_expression(args[1]) + ")";
        case IndexOperator::LogicalOr:
          return "(" + vector_expression(args[0]) + " | " + vector_expression(args[1]) + ")";
        default: break;
      }
      break;
    }
    case IrKind::Select:
      return "(" + expression(args[0]) + " ? " + vector_expression(args[1]) + " : " + vector_expression(args[2]) + ")";
    case IrKind::Cast: {
      DType from = args[0]->dtype;
      if (from == DType::Bool) return "__builtin_convertvector(" + expression(args[0]) + " & 1, mj_float_vector)";
      if (from == node->dtype) return expression(args[0]);
      // The conversions of C's casts, lane by lane (int64 -> float rounds to nearest, as the scalar cast).
      return "__builtin_convertvector(" + expression(args[0]) + ", " + vector_type(node->dtype) + ")";
    }
    default: break;
  }
  return scalar_.expression(node);  // unreachable after accepts()
}

// The larger (smaller) of two int64 vectors, lane by lane.
std::string VectorExpressionRenderer::extremum(const std::string& left, const std::string& right, bool maximum) {
  return "(" + left + (maximum ? " > " : " < ") + right + " ? " + left + " : " + right + ")";
}

// A comparison's lanes as a mask: comparing int64 or double lanes gives 64-bit -1/0 lanes, narrowed to the
// 32-bit lanes of mj_mask_vector (lane i still lane i).
std::string VectorExpressionRenderer::mask_of(const std::string& comparison, DType operands) {
  if (operands == DType::Int64 || operands == DType::Float64)
    return "__builtin_convertvector(" + comparison + ", mj_mask_vector)";
  return comparison;
}

std::string VectorExpressionRenderer::statements(const std::vector<IrStatement>& list, const std::string& pad) {
  std::string text;
  for (const IrStatement& statement : list) {
    if (statement.kind == IrStatement::Kind::Let) {
      bool vector = vector_lets_.count(statement.name) > 0;
      text += pad + "const " + (vector ? vector_type(statement.dtype) : ExpressionRenderer::value_type(statement.dtype)) +
              " " + statement.name + " = " + (vector ? expression(statement.value) : scalar_.expression(statement.value)) +
              ";\n";
    } else {  // Store (accepts() allowed no other kind)
      std::string address = "&" + kernel_.buffers[statement.buffer].name + "[" + scalar_.expression(statement.offset) + "]";
      std::string value = vector_expression(statement.value);
      text += pad + (lanes_.empty() ? "mj_store_vector(" + address + ", " + value
                                    : "mj_store_lanes(" + address + ", " + value + ", " + lanes_) + ");\n";
    }
  }
  return text;
}

}  // namespace metajit
