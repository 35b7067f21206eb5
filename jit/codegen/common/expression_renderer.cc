#include "jit/codegen/common/expression_renderer.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace metajit {
namespace {

// sqrt(x) (`builtin_sqrt` renders the builtin), zeros passed through: the value is the same, sqrt(-0) being -0,
// but LLVM 14 takes a square root as never negative and a quotient of positives as positive, forgetting that
// 1 / -0 is -inf: it folded `1 / sqrt(x) <= -4` and `rsqrt(x) <= -4` to false at x = -0 (tools/fuzz.py seed
// 120205). A select between x and the builtin is not known to be positive.
std::string square_root(const std::string& x, const std::string& builtin_sqrt) {
  return "(" + x + " == 0 ? " + x + " : " + builtin_sqrt + ")";
}

}  // namespace

std::string integer_literal(int64_t value) {
  if (value == INT64_MIN) return "(-9223372036854775807LL - 1)";
  return value < 0 ? "(" + std::to_string(value) + "LL)" : std::to_string(value) + "LL";
}

const char* ExpressionRenderer::value_type(DType dtype) {
  return dtype == DType::Float16 ? "float" : dtype_c_type(dtype);
}

const char* ExpressionRenderer::comparison_symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::Less: return "<";
    case BinaryOp::LessEqual: return "<=";
    case BinaryOp::Greater: return ">";
    case BinaryOp::GreaterEqual: return ">=";
    case BinaryOp::Equal: return "==";
    case BinaryOp::NotEqual: return "!=";
    default: return nullptr;
  }
}

const char* ExpressionRenderer::comparison_symbol(IndexOperator op) {
  switch (op) {
    case IndexOperator::Less: return "<";
    case IndexOperator::LessEqual: return "<=";
    case IndexOperator::Greater: return ">";
    case IndexOperator::GreaterEqual: return ">=";
    case IndexOperator::Equal: return "==";
    case IndexOperator::NotEqual: return "!=";
    default: return nullptr;
  }
}

std::string ExpressionRenderer::not_a_number(DType dtype) {
  bool single = dtype != DType::Float64;
  if (dialect_ == SourceDialect::Cuda)
    return single ? "__int_as_float(0x7fc00000)" : "__longlong_as_double(0x7ff8000000000000LL)";
  return single ? "__builtin_nanf(\"\")" : "__builtin_nan(\"\")";
}

std::string ExpressionRenderer::infinity(DType dtype) {
  bool single = dtype != DType::Float64;
  if (dialect_ == SourceDialect::Cuda)
    return single ? "__int_as_float(0x7f800000)" : "__longlong_as_double(0x7ff0000000000000LL)";
  return single ? "__builtin_inff()" : "__builtin_inf()";
}

std::string ExpressionRenderer::builtin(const char* name, bool single, const std::string& argument) {
  std::string function = std::string(dialect_ == SourceDialect::Cpp ? "__builtin_" : "") + name + (single ? "f" : "");
  return function + "(" + argument + ")";
}

std::string ExpressionRenderer::float_literal(double value, DType dtype) {
  bool single = dtype != DType::Float64;
  if (std::isnan(value)) return not_a_number(dtype);
  // Rounded first: a finite double beyond float's range (x - 1e60 in float32) is an infinity, not "inf" text.
  double rounded = single ? double(float(value)) : value;
  if (std::isinf(rounded)) return std::string(rounded < 0 ? "-" : "") + infinity(dtype);
  char text[64];
  std::snprintf(text, sizeof(text), single ? "%.9g" : "%.17g", rounded);
  std::string literal = text;
  if (literal.find_first_of(".eE") == std::string::npos) literal += ".0";
  return "(" + literal + (single ? "f" : "") + ")";
}

std::string ExpressionRenderer::expression(const IrExprPtr& node) {
  const auto& args = node->args;
  switch (node->kind) {
    case IrKind::IntConstant:
      return node->dtype == DType::Bool ? (node->integer ? "true" : "false") : integer_literal(node->integer);
    case IrKind::FloatConstant: return float_literal(node->floating, node->dtype);
    case IrKind::Variable: return variable(node);
    case IrKind::Load: {
      const IrBuffer& buffer = kernel_.buffers[node->buffer];
      std::string element = buffer.name + "[" + expression(args[0]) + "]";
      return buffer.dtype == DType::Float16 ? "mj_half_to_float(" + element + ")" : element;
    }
    case IrKind::Cast: return cast(node->dtype, args[0]);
    case IrKind::Select:
      return "(" + expression(args[0]) + " ? " + expression(args[1]) + " : " + expression(args[2]) + ")";
    case IrKind::Unary: return unary(UnaryOp(node->op), node->dtype, args[0]);
    case IrKind::Binary: return binary(BinaryOp(node->op), node->dtype, args[0], args[1]);
    case IrKind::IndexUnary: {
      std::string operand = expression(args[0]);
      switch (IndexOperator(node->op)) {
        case IndexOperator::Negate: return "(int64_t)(0ull - (uint64_t)" + operand + ")";
        case IndexOperator::Not: return "(!" + operand + ")";
        case IndexOperator::Abs: return "(" + operand + " < 0 ? (int64_t)(0ull - (uint64_t)" + operand + ") : " + operand + ")";
        default: throw std::logic_error("bad index unary");
      }
    }
    case IrKind::IndexBinary: return index_binary(node);
  }
  throw std::logic_error("unknown IR node");
}

std::string ExpressionRenderer::cast(DType target, const IrExprPtr& operand) {
  std::string value = expression(operand);
  if (target == DType::Bool) return "(" + value + " != 0)";
  if (target == DType::Float16) return "mj_round_to_half((float)" + value + ")";
  return "(" + std::string(value_type(target)) + ")" + value;
}

std::string ExpressionRenderer::unary(UnaryOp op, DType dtype, const IrExprPtr& operand_node) {
  std::string x = expression(operand_node);
  bool single = dtype == DType::Float32 || dtype == DType::Float16;
  bool floating = is_floating(dtype);
  std::string type = value_type(dtype);
  switch (op) {
    case UnaryOp::Negate: return "(" + type + ")(-" + x + ")";
    case UnaryOp::Abs:
      if (floating) return builtin("fabs", single, x);
      return dtype == DType::Bool || dtype == DType::UInt8 ? x : "(" + type + ")(" + x + " < 0 ? -" + x + " : " + x + ")";
    case UnaryOp::Exp: return single ? "mj_exp(" + x + ")" : "exp(" + x + ")";
    case UnaryOp::Log: return single ? "mj_log(" + x + ")" : "log(" + x + ")";
    case UnaryOp::Sqrt: return square_root(x, builtin("sqrt", single, x));
    case UnaryOp::Rsqrt:
      return std::string(single ? "(1.0f / " : "(1.0 / ") + square_root(x, builtin("sqrt", single, x)) + ")";
    case UnaryOp::Sin: return (single ? "mj_sin(" : "sin(") + x + ")";
    case UnaryOp::Cos: return (single ? "mj_cos(" : "cos(") + x + ")";
    case UnaryOp::Tanh: return (single ? "mj_tanh(" : "tanh(") + x + ")";
    case UnaryOp::Sigmoid:
      return single ? "(1.0f / (1.0f + mj_exp(-" + x + ")))" : "(1.0 / (1.0 + exp(-" + x + ")))";
    case UnaryOp::Relu: return "(" + x + " < 0 ? (" + type + ")0 : " + x + ")";
    case UnaryOp::Floor: return floating ? builtin("floor", single, x) : x;
    case UnaryOp::Ceil: return floating ? builtin("ceil", single, x) : x;
    case UnaryOp::Round: return floating ? builtin("rint", single, x) : x;
    case UnaryOp::LogicalNot: return "(!(" + x + " != 0))";
    case UnaryOp::BitwiseNot: return dtype == DType::Bool ? "(!" + x + ")" : "(" + type + ")(~" + x + ")";
    case UnaryOp::Log1p: return (single ? "mj_log1p(" : "log1p(") + x + ")";
    case UnaryOp::Expm1: return (single ? "mj_expm1(" : "expm1(") + x + ")";
    case UnaryOp::Log2: return (single ? "log2f(" : "log2(") + x + ")";
    case UnaryOp::Log10: return (single ? "log10f(" : "log10(") + x + ")";
    case UnaryOp::Erf: return (single ? "mj_erf(" : "erf(") + x + ")";
    case UnaryOp::Tan: return (single ? "tanf(" : "tan(") + x + ")";
    case UnaryOp::Asin: return (single ? "asinf(" : "asin(") + x + ")";
    case UnaryOp::Acos: return (single ? "acosf(" : "acos(") + x + ")";
    case UnaryOp::Atan: return (single ? "atanf(" : "atan(") + x + ")";
    case UnaryOp::Sinh: return (single ? "sinhf(" : "sinh(") + x + ")";
    case UnaryOp::Cosh: return (single ? "coshf(" : "cosh(") + x + ")";
  }
  throw std::logic_error("unknown unary op");
}

std::string ExpressionRenderer::binary(BinaryOp op, DType dtype, const IrExprPtr& left_node, const IrExprPtr& right_node) {
  std::string a = expression(left_node), b = expression(right_node);
  DType operand_dtype = left_node->dtype;
  bool floating = is_floating(operand_dtype);
  bool single = operand_dtype == DType::Float32 || operand_dtype == DType::Float16;
  std::string type = value_type(dtype);
  auto wrap = [&](const std::string& text) { return "(" + type + ")(" + text + ")"; };
  if (const char* symbol = comparison_symbol(op)) return "(" + a + " " + symbol + " " + b + ")";
  switch (op) {
    case BinaryOp::Add: return wrap(a + " + " + b);
    case BinaryOp::Subtract: return wrap(a + " - " + b);
    case BinaryOp::Multiply: return wrap(a + " * " + b);
    case BinaryOp::Divide: return wrap(a + " / " + b);
    case BinaryOp::FloorDivide:
      if (floating) return wrap("mj_float_floor_divide(" + a + ", " + b + ")");
      return wrap("mj_floor_divide(" + a + ", " + b + ")");
    case BinaryOp::Modulo:
      if (floating) {
        std::string remainder = std::string(single ? "fmodf(" : "fmod(") + a + ", " + b + ")";
        return "[&]{ " + type + " m = " + remainder + "; return (m != 0 && ((m < 0) != (" + b + " < 0))) ? m + " + b +
               " : m; }()";
      }
      return wrap("mj_floor_modulo(" + a + ", " + b + ")");
    case BinaryOp::Power:
      if (right_node->kind == IrKind::FloatConstant && right_node->floating == 2.0) return wrap(a + " * " + a);
      // PyTorch takes x ** 0.5 and x ** -0.5 as sqrt and rsqrt, which differ from pow at -inf (NaN, not inf or 0)
      // and at -0 (sqrt(-0) is -0).
      if (floating && right_node->kind == IrKind::FloatConstant && right_node->floating == 0.5)
        return square_root(a, builtin("sqrt", single, a));
      if (floating && right_node->kind == IrKind::FloatConstant && right_node->floating == -0.5)
        return wrap(std::string(single ? "1.0f / " : "1.0 / ") + square_root(a, builtin("sqrt", single, a)));
      if (floating) return wrap((single ? "powf(" : "pow(") + a + ", " + b + ")");
      return wrap("mj_integer_power(" + a + ", " + b + ")");
    case BinaryOp::Maximum: return "mj_max<" + type + ">(" + a + ", " + b + ")";
    case BinaryOp::Minimum: return "mj_min<" + type + ">(" + a + ", " + b + ")";
    case BinaryOp::LogicalAnd: return "(" + a + " && " + b + ")";
    case BinaryOp::LogicalOr: return "(" + a + " || " + b + ")";
    case BinaryOp::LogicalXor: return "(" + a + " != " + b + ")";
    case BinaryOp::BitwiseAnd: return wrap(a + " & " + b);
    case BinaryOp::BitwiseOr: return wrap(a + " | " + b);
    case BinaryOp::BitwiseXor: return wrap(a + " ^ " + b);
    default: break;  // comparisons: above
  }
  throw std::logic_error("unknown binary op");
}

std::string ExpressionRenderer::index_binary(const IrExprPtr& node) {
  const IrExprPtr& left = node->args[0];
  const IrExprPtr& right = node->args[1];
  std::string a = expression(left), b = expression(right);
  auto non_negative_division = [&] {
    IrRange numerator = ir_range(left), divisor = ir_range(right);
    return numerator.low >= 0 && divisor.low > 0;
  };
  if (const char* symbol = comparison_symbol(IndexOperator(node->op))) return "(" + a + " " + symbol + " " + b + ")";
  switch (IndexOperator(node->op)) {
    case IndexOperator::Add: return "(" + a + " + " + b + ")";
    case IndexOperator::Subtract: return "(" + a + " - " + b + ")";
    case IndexOperator::Multiply: return "(" + a + " * " + b + ")";
    case IndexOperator::FloorDivide:
      return non_negative_division() ? "(" + a + " / " + b + ")" : "mj_floor_divide(" + a + ", " + b + ")";
    case IndexOperator::FloorModulo:
      return non_negative_division() ? "(" + a + " % " + b + ")" : "mj_floor_modulo(" + a + ", " + b + ")";
    case IndexOperator::Minimum: return "(" + a + " < " + b + " ? " + a + " : " + b + ")";
    case IndexOperator::Maximum: return "(" + a + " > " + b + " ? " + a + " : " + b + ")";
    case IndexOperator::LogicalAnd: return "(" + a + " && " + b + ")";
    case IndexOperator::LogicalOr: return "(" + a + " || " + b + ")";
    default: throw std::logic_error("bad index binary");
  }
}

std::string ExpressionRenderer::let_line(const IrStatement& statement) {
  return "const " + std::string(value_type(statement.dtype)) + " " + defined_name(statement.name) + " = " +
         expression(statement.value) + ";";
}

std::string ExpressionRenderer::store_line(const IrStatement& statement) {
  const IrBuffer& buffer = kernel_.buffers[statement.buffer];
  std::string value = expression(statement.value);
  if (buffer.dtype == DType::Float16) value = "mj_float_to_half(" + value + ")";
  return buffer.name + "[" + expression(statement.offset) + "] = " + value + ";";
}

std::string ExpressionRenderer::identity(ReduceOp op, DType dtype) {
  std::string type = value_type(dtype);
  switch (op) {
    case ReduceOp::Add: return "(" + type + ")0";
    case ReduceOp::Multiply: return "(" + type + ")1";
    case ReduceOp::LogicalAnd: return "true";
    case ReduceOp::LogicalOr: return "false";
    case ReduceOp::Maximum:
    case ReduceOp::Minimum: {
      bool maximum = op == ReduceOp::Maximum;
      if (is_floating(dtype)) return std::string(maximum ? "-" : "") + infinity(dtype);
      switch (dtype) {
        case DType::Bool: return maximum ? "false" : "true";
        case DType::Int8: return maximum ? "(int8_t)-128" : "(int8_t)127";
        case DType::UInt8: return maximum ? "(uint8_t)0" : "(uint8_t)255";
        case DType::Int32: return maximum ? "(int32_t)(-2147483647 - 1)" : "(int32_t)2147483647";
        default: return maximum ? "(-9223372036854775807LL - 1)" : "9223372036854775807LL";
      }
    }
  }
  return "0";
}

std::string ExpressionRenderer::combine(ReduceOp op, DType dtype, const std::string& accumulator, const std::string& value) {
  std::string type = value_type(dtype);
  switch (op) {
    case ReduceOp::Add: return "(" + type + ")(" + accumulator + " + " + value + ")";
    case ReduceOp::Multiply: return "(" + type + ")(" + accumulator + " * " + value + ")";
    case ReduceOp::Maximum: return "mj_max<" + type + ">(" + accumulator + ", " + value + ")";
    case ReduceOp::Minimum: return "mj_min<" + type + ">(" + accumulator + ", " + value + ")";
    case ReduceOp::LogicalAnd: return "(" + accumulator + " && (" + value + " != 0))";
    case ReduceOp::LogicalOr: return "(" + accumulator + " || (" + value + " != 0))";
  }
  return accumulator;
}

}  // namespace metajit
