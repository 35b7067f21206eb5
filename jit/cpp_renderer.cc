// IR -> C++ text. Values compute in float for float16 storage (converted at loads and stores); index math is
// int64 with the index language's floor semantics, rendered as plain C operators where the range analysis
// proves both sides non-negative. Sum loops reassociate only their accumulation, so they vectorise.
#include "jit/cpp_renderer.h"

#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "jit/cpp_prelude.h"

namespace metajit {

const char* const kKernelSymbol = "metajit_kernel";

namespace {

const char* value_type(DType dtype) { return dtype == DType::Float16 ? "float" : dtype_c_type(dtype); }

std::string float_literal(double value, DType dtype) {
  bool single = dtype != DType::Float64;
  if (std::isnan(value)) return single ? "__builtin_nanf(\"\")" : "__builtin_nan(\"\")";
  if (std::isinf(value)) return std::string(value < 0 ? "-" : "") + (single ? "__builtin_inff()" : "__builtin_inf()");
  char text[64];
  std::snprintf(text, sizeof(text), single ? "%.9g" : "%.17g", single ? double(float(value)) : value);
  std::string literal = text;
  if (literal.find_first_of(".eE") == std::string::npos) literal += ".0";
  return "(" + literal + (single ? "f" : "") + ")";
}

std::string integer_literal(int64_t value) {
  if (value == INT64_MIN) return "(-9223372036854775807LL - 1)";
  return value < 0 ? "(" + std::to_string(value) + "LL)" : std::to_string(value) + "LL";
}

class Renderer {
 public:
  explicit Renderer(const IrKernel& kernel) : kernel_(kernel) {}

  std::string expression(const IrExprPtr& node) {
    const auto& args = node->args;
    switch (node->kind) {
      case IrKind::IntConstant:
        return node->dtype == DType::Bool ? (node->integer ? "true" : "false") : integer_literal(node->integer);
      case IrKind::FloatConstant: return float_literal(node->floating, node->dtype);
      case IrKind::Variable: return node->name;
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

  std::string cast(DType target, const IrExprPtr& operand) {
    std::string value = expression(operand);
    if (target == DType::Bool) return "(" + value + " != 0)";
    if (target == DType::Float16) return "mj_round_to_half((float)" + value + ")";
    return "(" + std::string(value_type(target)) + ")" + value;
  }

  std::string unary(UnaryOp op, DType dtype, const IrExprPtr& operand_node) {
    std::string x = expression(operand_node);
    bool single = dtype == DType::Float32 || dtype == DType::Float16;
    bool floating = is_floating(dtype);
    std::string type = value_type(dtype);
    switch (op) {
      case UnaryOp::Negate: return "(" + type + ")(-" + x + ")";
      case UnaryOp::Abs:
        if (floating) return (single ? "__builtin_fabsf(" : "__builtin_fabs(") + x + ")";
        return dtype == DType::Bool || dtype == DType::UInt8 ? x : "(" + type + ")(" + x + " < 0 ? -" + x + " : " + x + ")";
      case UnaryOp::Exp: return single ? "mj_exp(" + x + ")" : "exp(" + x + ")";
      case UnaryOp::Log: return single ? "mj_log(" + x + ")" : "log(" + x + ")";
      case UnaryOp::Sqrt: return (single ? "__builtin_sqrtf(" : "__builtin_sqrt(") + x + ")";
      case UnaryOp::Rsqrt: return single ? "(1.0f / __builtin_sqrtf(" + x + "))" : "(1.0 / __builtin_sqrt(" + x + "))";
      case UnaryOp::Sin: return (single ? "sinf(" : "sin(") + x + ")";
      case UnaryOp::Cos: return (single ? "cosf(" : "cos(") + x + ")";
      case UnaryOp::Tanh: return (single ? "tanhf(" : "tanh(") + x + ")";
      case UnaryOp::Sigmoid:
        return single ? "(1.0f / (1.0f + mj_exp(-" + x + ")))" : "(1.0 / (1.0 + exp(-" + x + ")))";
      case UnaryOp::Relu: return "(" + x + " < 0 ? (" + type + ")0 : " + x + ")";
      case UnaryOp::Floor: return floating ? (single ? "__builtin_floorf(" : "__builtin_floor(") + x + ")" : x;
      case UnaryOp::Ceil: return floating ? (single ? "__builtin_ceilf(" : "__builtin_ceil(") + x + ")" : x;
      case UnaryOp::Round: return floating ? (single ? "__builtin_rintf(" : "__builtin_rint(") + x + ")" : x;
      case UnaryOp::LogicalNot: return "(!(" + x + " != 0))";
      case UnaryOp::BitwiseNot: return dtype == DType::Bool ? "(!" + x + ")" : "(" + type + ")(~" + x + ")";
    }
    throw std::logic_error("unknown unary op");
  }

  std::string binary(BinaryOp op, DType dtype, const IrExprPtr& left_node, const IrExprPtr& right_node) {
    std::string a = expression(left_node), b = expression(right_node);
    DType operand_dtype = left_node->dtype;
    bool floating = is_floating(operand_dtype);
    bool single = operand_dtype == DType::Float32 || operand_dtype == DType::Float16;
    std::string type = value_type(dtype);
    auto wrap = [&](const std::string& text) { return "(" + type + ")(" + text + ")"; };
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
        if (floating) return wrap((single ? "powf(" : "pow(") + a + ", " + b + ")");
        return wrap("mj_integer_power(" + a + ", " + b + ")");
      case BinaryOp::Maximum: return "mj_max<" + type + ">(" + a + ", " + b + ")";
      case BinaryOp::Minimum: return "mj_min<" + type + ">(" + a + ", " + b + ")";
      case BinaryOp::Less: return "(" + a + " < " + b + ")";
      case BinaryOp::LessEqual: return "(" + a + " <= " + b + ")";
      case BinaryOp::Greater: return "(" + a + " > " + b + ")";
      case BinaryOp::GreaterEqual: return "(" + a + " >= " + b + ")";
      case BinaryOp::Equal: return "(" + a + " == " + b + ")";
      case BinaryOp::NotEqual: return "(" + a + " != " + b + ")";
      case BinaryOp::LogicalAnd: return "(" + a + " && " + b + ")";
      case BinaryOp::LogicalOr: return "(" + a + " || " + b + ")";
      case BinaryOp::LogicalXor: return "(" + a + " != " + b + ")";
      case BinaryOp::BitwiseAnd: return wrap(a + " & " + b);
      case BinaryOp::BitwiseOr: return wrap(a + " | " + b);
      case BinaryOp::BitwiseXor: return wrap(a + " ^ " + b);
    }
    throw std::logic_error("unknown binary op");
  }

  std::string index_binary(const IrExprPtr& node) {
    const IrExprPtr& left = node->args[0];
    const IrExprPtr& right = node->args[1];
    std::string a = expression(left), b = expression(right);
    auto non_negative_division = [&] {
      IrRange numerator = ir_range(left), divisor = ir_range(right);
      return numerator.low >= 0 && divisor.low > 0;
    };
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
      case IndexOperator::Less: return "(" + a + " < " + b + ")";
      case IndexOperator::LessEqual: return "(" + a + " <= " + b + ")";
      case IndexOperator::Greater: return "(" + a + " > " + b + ")";
      case IndexOperator::GreaterEqual: return "(" + a + " >= " + b + ")";
      case IndexOperator::Equal: return "(" + a + " == " + b + ")";
      case IndexOperator::NotEqual: return "(" + a + " != " + b + ")";
      case IndexOperator::LogicalAnd: return "(" + a + " && " + b + ")";
      case IndexOperator::LogicalOr: return "(" + a + " || " + b + ")";
      default: throw std::logic_error("bad index binary");
    }
  }

  std::string identity(ReduceOp op, DType dtype) {
    std::string type = value_type(dtype);
    switch (op) {
      case ReduceOp::Add: return "(" + type + ")0";
      case ReduceOp::Multiply: return "(" + type + ")1";
      case ReduceOp::LogicalAnd: return "true";
      case ReduceOp::LogicalOr: return "false";
      case ReduceOp::Maximum:
      case ReduceOp::Minimum: {
        bool maximum = op == ReduceOp::Maximum;
        if (is_floating(dtype)) return std::string(maximum ? "-" : "") + (dtype == DType::Float64 ? "__builtin_inf()" : "__builtin_inff()");
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

  std::string combine(ReduceOp op, DType dtype, const std::string& accumulator, const std::string& value) {
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

  // max/min of floats as an integer max/min of order keys plus a NaN flag (see mj_order_key): vectorises.
  void float_extremum_loop(const IrStatement& statement, int depth) {
    std::string pad(depth * 2, ' ');
    const char* key_type = statement.dtype == DType::Float64 ? "int64_t" : "int32_t";
    std::string type = value_type(statement.dtype);
    std::string key = statement.name + "_key", nan = statement.name + "_nan", value = statement.name + "_value";
    bool maximum = statement.reduce_op == ReduceOp::Maximum;
    out_ << pad << key_type << " " << key << " = mj_order_key((" << type << ")"
         << identity(statement.reduce_op, statement.dtype) << ");\n";
    out_ << pad << "int32_t " << nan << " = 0;\n";
    int inner = depth;
    for (const auto& loop : statement.loops) {
      out_ << std::string(inner * 2, ' ') << "for (int64_t " << loop.first << " = 0; " << loop.first << " < "
           << loop.second << "; ++" << loop.first << ") {\n";
      ++inner;
    }
    std::string body_pad(inner * 2, ' ');
    // No reassociation here: integer keys vectorise without it, and the max-pool gradient recomputes these
    // values in other kernels and compares them for equality, so they must round as everywhere else.
    statements(statement.body, inner);
    out_ << body_pad << "const " << type << " " << value << " = " << expression(statement.value) << ";\n";
    out_ << body_pad << "const " << key_type << " " << value << "_key = mj_order_key(" << value << ");\n";
    out_ << body_pad << key << " = " << value << "_key " << (maximum ? ">" : "<") << " " << key << " ? " << value
         << "_key : " << key << ";\n";
    out_ << body_pad << nan << " |= (" << value << " != " << value << ");\n";
    for (size_t loop = 0; loop < statement.loops.size(); ++loop) {
      --inner;
      out_ << std::string(inner * 2, ' ') << "}\n";
    }
    out_ << pad << "const " << type << " " << statement.name << " = " << nan << " ? ("
         << (statement.dtype == DType::Float64 ? "__builtin_nan(\"\")" : "__builtin_nanf(\"\")") << ") : mj_from_order_key("
         << key << ");\n";
  }

  void statements(const std::vector<IrStatement>& list, int depth) {
    std::string pad(depth * 2, ' ');
    for (const IrStatement& statement : list) {
      switch (statement.kind) {
        case IrStatement::Kind::Let:
          out_ << pad << "const " << value_type(statement.dtype) << " " << statement.name << " = "
               << expression(statement.value) << ";\n";
          break;
        case IrStatement::Kind::Store: {
          const IrBuffer& buffer = kernel_.buffers[statement.buffer];
          std::string value = expression(statement.value);
          if (buffer.dtype == DType::Float16) value = "mj_float_to_half(" + value + ")";
          out_ << pad << buffer.name << "[" << expression(statement.offset) << "] = " << value << ";\n";
          break;
        }
        case IrStatement::Kind::ReduceLoop: {
          bool float_extremum = is_floating(statement.dtype) &&
                                (statement.reduce_op == ReduceOp::Maximum || statement.reduce_op == ReduceOp::Minimum);
          if (float_extremum) {
            float_extremum_loop(statement, depth);
            break;
          }
          out_ << pad << value_type(statement.dtype) << " " << statement.name << " = "
               << identity(statement.reduce_op, statement.dtype) << ";\n";
          if (!statement.spill.empty())
            out_ << pad << "alignas(64) " << value_type(statement.value->dtype) << " " << statement.spill << "["
                 << statement.loops[0].second << "];\n";
          int inner = depth;
          for (const auto& loop : statement.loops) {
            std::string loop_pad(inner * 2, ' ');
            out_ << loop_pad << "for (int64_t " << loop.first << " = 0; " << loop.first << " < " << loop.second
                 << "; ++" << loop.first << ") {\n";
            ++inner;
          }
          std::string body_pad(inner * 2, ' ');
          statements(statement.body, inner);
          if (is_floating(statement.dtype) && statement.reduce_op == ReduceOp::Add) {
            // Only the accumulation may be reassociated (that is what lets the loop vectorise). With the whole
            // body reassociable LLVM rewrites the summed values too, e.g. pow(x, a) * pow(x, a) into
            // pow(x, 2a), which is a number where the true value is NaN (x < 0). Products are never
            // reassociated, for the same reason.
            std::string term = statement.name + "_term";
            out_ << body_pad << "const " << value_type(statement.dtype) << " " << term << " = "
                 << expression(statement.value) << ";\n";
            if (!statement.spill.empty())
              out_ << body_pad << statement.spill << "[" << statement.loops[0].first << "] = " << term << ";\n";
            out_ << body_pad << "{\n" << body_pad << "#pragma clang fp reassociate(on)\n";
            out_ << body_pad << "  " << statement.name << " = "
                 << combine(statement.reduce_op, statement.dtype, statement.name, term) << ";\n";
            out_ << body_pad << "}\n";
          } else {
            out_ << body_pad << statement.name << " = "
                 << combine(statement.reduce_op, statement.dtype, statement.name, expression(statement.value))
                 << ";\n";
          }
          for (size_t loop = 0; loop < statement.loops.size(); ++loop) {
            --inner;
            out_ << std::string(inner * 2, ' ') << "}\n";
          }
          break;
        }
        case IrStatement::Kind::ScatterAccumulate: {
          const IrBuffer& buffer = kernel_.buffers[statement.buffer];
          std::string target = buffer.name + "[" + expression(statement.offset) + "]";
          std::string current = buffer.dtype == DType::Float16 ? "mj_half_to_float(" + target + ")" : target;
          std::string updated = combine(kernel_.scatter_op, statement.dtype, current, expression(statement.value));
          if (buffer.dtype == DType::Float16) updated = "mj_float_to_half(" + updated + ")";
          if (statement.condition)
            out_ << pad << "if (" << expression(statement.condition) << ") " << target << " = " << updated << ";\n";
          else
            out_ << pad << target << " = " << updated << ";\n";
          break;
        }
      }
    }
  }

  // The body takes its buffers as __restrict__ parameters: LLVM honours restrict on parameters only, and
  // without it a kernel reading more than a few buffers needs more runtime overlap checks than the vectoriser
  // allows (8), so it stayed scalar (a batch-norm backward kernel with 9 inputs ran 5x slower).
  std::string parameters() {
    std::string text;
    for (const IrBuffer& buffer : kernel_.buffers) {
      text += std::string("    ") + (buffer.is_output ? "" : "const ") + dtype_c_type(buffer.dtype) + "* __restrict__ " +
              buffer.name + ",  // " + dtype_name(buffer.dtype) + " " + shape_to_string(buffer.shape) + "\n";
    }
    return text + "    int64_t begin, int64_t end";
  }

  std::string arguments() {
    std::string text;
    for (size_t index = 0; index < kernel_.buffers.size(); ++index) {
      const IrBuffer& buffer = kernel_.buffers[index];
      text += std::string("(") + (buffer.is_output ? "" : "const ") + dtype_c_type(buffer.dtype) + "*)buffers[" +
              std::to_string(index) + "], ";
    }
    return text + "begin, end";
  }

  // Declares i0 .. i(rank-2) from `row`, the index of a row (every dim but the last).
  void row_indices() {
    const Shape& domain = kernel_.domain;
    std::string remaining = "row";
    for (int dim = int(domain.size()) - 2; dim >= 0; --dim) {
      if (dim == 0) {
        out_ << "    const int64_t i0 = " << remaining << ";\n";
      } else {
        out_ << "    const int64_t i" << dim << " = " << remaining << " % " << domain[dim] << ";\n";
        out_ << "    const int64_t row_" << dim << " = " << remaining << " / " << domain[dim] << ";\n";
        remaining = "row_" + std::to_string(dim);
      }
    }
  }

  // Pointwise: [begin, end) is a range of flat output elements, walked row by row so the innermost loop is the
  // contiguous last dimension.
  void pointwise_body() {
    const Shape& domain = kernel_.domain;
    int rank = int(domain.size());
    if (rank == 0) {
      out_ << "  if (begin >= end) return;\n";
      statements(kernel_.body, 1);
      return;
    }
    // Unrolling and interleaving the element loop buy nothing measurable on these memory-bound loops but
    // cost several milliseconds of compile time per kernel.
    const char* loop_pragma = "#pragma clang loop unroll(disable) interleave_count(1)\n";
    if (rank == 1) {
      out_ << "  " << loop_pragma << "  for (int64_t i0 = begin; i0 < end; ++i0) {\n";
      statements(kernel_.body, 2);
      out_ << "  }\n";
      return;
    }
    int64_t last = domain[rank - 1];
    if (!kernel_.row_body.empty()) {
      // [begin, end) is a range of whole rows: the row's reductions run once, then its elements.
      out_ << "  for (int64_t row = begin; row < end; ++row) {\n";
      row_indices();
      statements(kernel_.row_body, 2);
      out_ << "    " << loop_pragma;
      out_ << "    for (int64_t i" << rank - 1 << " = 0; i" << rank - 1 << " < " << last << "; ++i" << rank - 1 << ") {\n";
      statements(kernel_.body, 3);
      out_ << "    }\n";
      out_ << "  }\n";
      return;
    }
    out_ << "  for (int64_t flat = begin; flat < end;) {\n";
    out_ << "    const int64_t row = flat / " << last << ";\n";
    out_ << "    const int64_t column_begin = flat - row * " << last << ";\n";
    out_ << "    const int64_t column_end = (end - flat) < (" << last << " - column_begin) ? column_begin + (end - flat) : "
         << last << ";\n";
    row_indices();
    out_ << "    " << loop_pragma;
    out_ << "    for (int64_t i" << rank - 1 << " = column_begin; i" << rank - 1 << " < column_end; ++i" << rank - 1
         << ") {\n";
    statements(kernel_.body, 3);
    out_ << "    }\n";
    out_ << "    flat += column_end - column_begin;\n";
    out_ << "  }\n";
  }

  // Scatter: the output (or this thread's rows of it) starts at the reduction identity, then every input element
  // is accumulated into its target.
  void scatter_body() {
    const Shape& domain = kernel_.domain;
    const IrBuffer& output = kernel_.buffers[0];
    int64_t output_count = shape_numel(output.shape);
    std::string init = identity(kernel_.scatter_op, output.dtype);
    if (output.dtype == DType::Float16) init = "mj_float_to_half(" + init + ")";
    if (kernel_.scatter_split_rows) {
      int64_t row_size = output_count / output.shape[0];
      out_ << "  for (int64_t element = begin * " << row_size << "; element < end * " << row_size
           << "; ++element) out0[element] = " << init << ";\n";
    } else {
      out_ << "  if (begin >= end) return;\n";
      out_ << "  for (int64_t element = 0; element < " << output_count << "; ++element) out0[element] = " << init << ";\n";
    }
    int depth = 1;
    for (size_t dim = 0; dim < domain.size(); ++dim) {
      std::string pad(depth * 2, ' ');
      // Clang 14 miscompiles a scatter whose small inner loops were fully unrolled into an outer loop that it
      // then vectorises: two accumulations into the same element in one unrolled body become one interleaved
      // store group, and one of the additions is lost (sum of abs(i - 2) targets gave 1 where 2 was due). Only
      // the innermost loop may be vectorised; its dependences are analysed correctly.
      if (dim + 1 < domain.size()) out_ << pad << "#pragma clang loop vectorize(disable)\n";
      if (dim == 0 && kernel_.scatter_split_rows)
        out_ << pad << "for (int64_t i0 = begin; i0 < end; ++i0) {\n";
      else
        out_ << pad << "for (int64_t i" << dim << " = 0; i" << dim << " < " << domain[dim] << "; ++i" << dim << ") {\n";
      ++depth;
    }
    statements(kernel_.body, depth);
    for (size_t dim = 0; dim < domain.size(); ++dim) {
      --depth;
      out_ << std::string(depth * 2, ' ') << "}\n";
    }
  }

  RenderedKernel render() {
    RenderedKernel rendered;
    std::ostringstream header;
    header << "// metajit kernel: " << (kernel_.kind == IrKernel::Kind::Pointwise ? "pointwise" : "scatter")
           << " over " << shape_to_string(kernel_.domain) << "\n// fused ops (op, shape, created at):\n";
    for (const std::string& line : kernel_.fused_ops) header << "//   " << line << "\n";
    rendered.header_comment = header.str();
    out_ << kCppPrelude << "\nstatic __attribute__((noinline)) void kernel_body(\n" << parameters() << ") {\n";
    if (kernel_.kind == IrKernel::Kind::Pointwise) {
      pointwise_body();
      rendered.work_items = shape_numel(kernel_.domain);
      rendered.grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, kernel_.inner_work));
      if (!kernel_.row_body.empty()) {  // work items are rows
        int64_t last = kernel_.domain.back();
        rendered.work_items = last == 0 ? 0 : rendered.work_items / last;
        rendered.grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, last * kernel_.inner_work + kernel_.row_work));
      }
    } else {
      scatter_body();
      rendered.work_items = kernel_.scatter_split_rows ? kernel_.domain[0] : 1;
      int64_t row_work = kernel_.scatter_split_rows ? shape_numel(kernel_.domain) / kernel_.domain[0] : 1;
      rendered.grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, row_work));
    }
    out_ << "}\n\nextern \"C\" void " << kKernelSymbol << "(void* const* buffers, int64_t begin, int64_t end) {\n"
         << "  kernel_body(" << arguments() << ");\n}\n";
    rendered.source = out_.str();
    return rendered;
  }

 private:
  const IrKernel& kernel_;
  std::ostringstream out_;
};

}  // namespace

RenderedKernel render_cpp(const IrKernel& kernel) { return Renderer(kernel).render(); }

}  // namespace metajit
