// Writes the kernel IR as text (see ir_text.h). Index arithmetic is written infix with full parentheses below
// the top, value operations by their op names (exp(x), add(a, b)), so the text shows which arithmetic is index
// math (int64, floor semantics) and which is the kernel's values.
#include "jit/ir/ir_text.h"

#include <cctype>
#include <cstdio>

namespace metajit {
namespace {

// Past this many nodes written out, an expression is summarised: shared halves can double at every level.
constexpr int64_t kMostWrittenNodes = 4096;

std::string float_text(double value) {
  char text[40];
  std::snprintf(text, sizeof(text), "%.9g", value);
  std::string written = text;
  // A float reads as one: 1 -> 1.0 (inf and nan are words already).
  if (written.find_first_of(".eni") == std::string::npos) written += ".0";
  return written;
}

class ExpressionWriter {
 public:
  explicit ExpressionWriter(const IrKernel* kernel) : kernel_(kernel) {}

  void write(const IrExprPtr& expression, bool top, std::string& out) const {
    const IrExpr& node = *expression;
    switch (node.kind) {
      case IrKind::IntConstant:
        out += node.dtype == DType::Bool ? (node.integer ? "true" : "false") : std::to_string(node.integer);
        return;
      case IrKind::FloatConstant:
        out += float_text(node.floating);
        if (node.dtype != DType::Float32) out += std::string(":") + dtype_name(node.dtype);
        return;
      case IrKind::Variable: out += node.name; return;
      case IrKind::Load:
        out += buffer_name(node.buffer) + "[";
        write(node.args[0], true, out);
        out += "]";
        return;
      case IrKind::Unary: call(unary_op_name(UnaryOp(node.op)), node.args, out); return;
      case IrKind::Binary: call(binary_op_name(BinaryOp(node.op)), node.args, out); return;
      case IrKind::Cast: call(dtype_name(node.dtype), node.args, out); return;
      case IrKind::Select:
        if (!top) out += "(";
        write(node.args[0], false, out);
        out += " ? ";
        write(node.args[1], false, out);
        out += " : ";
        write(node.args[2], false, out);
        if (!top) out += ")";
        return;
      case IrKind::IndexUnary: {
        const char* symbol = index_operator_symbol(IndexOperator(node.op));
        if (std::isalpha(static_cast<unsigned char>(symbol[0]))) return call(symbol, node.args, out);
        out += symbol;
        write(node.args[0], false, out);
        return;
      }
      case IrKind::IndexBinary: {
        const char* symbol = index_operator_symbol(IndexOperator(node.op));
        if (std::isalpha(static_cast<unsigned char>(symbol[0]))) return call(symbol, node.args, out);
        if (!top) out += "(";
        write(node.args[0], false, out);
        out += std::string(" ") + symbol + " ";
        write(node.args[1], false, out);
        if (!top) out += ")";
        return;
      }
    }
  }

 private:
  void call(const char* name, const std::vector<IrExprPtr>& args, std::string& out) const {
    out += name;
    out += "(";
    for (size_t index = 0; index < args.size(); ++index) {
      if (index) out += ", ";
      write(args[index], true, out);
    }
    out += ")";
  }

  std::string buffer_name(int buffer) const {
    if (kernel_ && buffer >= 0 && size_t(buffer) < kernel_->buffers.size()) return kernel_->buffers[buffer].name;
    return "buffer" + std::to_string(buffer);
  }

  const IrKernel* kernel_;
};

std::string expression_text(const IrExprPtr& expression, const IrKernel* kernel) {
  if (!expression) return "(none)";
  int64_t size = ir_tree_size({expression}, kMostWrittenNodes + 1);
  if (size > kMostWrittenNodes)
    return "<" + std::string(dtype_name(expression->dtype)) + " expression of more than " +
           std::to_string(kMostWrittenNodes) + " nodes>";
  std::string out;
  ExpressionWriter(kernel).write(expression, true, out);
  return out;
}

std::string loops_text(const std::vector<std::pair<std::string, int64_t>>& loops) {
  std::string text;
  for (size_t index = 0; index < loops.size(); ++index)
    text += (index ? ", " : "") + loops[index].first + " < " + std::to_string(loops[index].second);
  return text;
}

void write_statements(const std::vector<IrStatement>& statements, const IrKernel& kernel, int depth, std::string& out) {
  std::string pad(depth * 2, ' ');
  for (const IrStatement& statement : statements) {
    switch (statement.kind) {
      case IrStatement::Kind::Let:
        out += pad + "let " + statement.name + ": " + dtype_name(statement.dtype) + " = " +
               expression_text(statement.value, &kernel) + "\n";
        break;
      case IrStatement::Kind::Store:
        out += pad + "store " + kernel.buffers[statement.buffer].name + "[" +
               expression_text(statement.offset, &kernel) + "] = " + expression_text(statement.value, &kernel) + "\n";
        break;
      case IrStatement::Kind::ReduceLoop:
        out += pad + "reduce " + statement.name + ": " + dtype_name(statement.dtype) + " = " +
               reduce_op_name(statement.reduce_op) + " over " + loops_text(statement.loops) +
               (statement.spill.empty() ? "" : ", terms kept in " + statement.spill) + "\n";
        write_statements(statement.body, kernel, depth + 1, out);
        out += pad + "  term " + expression_text(statement.value, &kernel) + "\n";
        break;
      case IrStatement::Kind::ScatterAccumulate:
        out += pad + "accumulate " + reduce_op_name(kernel.scatter_op) + " " + kernel.buffers[statement.buffer].name +
               "[" + expression_text(statement.offset, &kernel) + "] with " + dtype_name(statement.dtype) + " " +
               expression_text(statement.value, &kernel) +
               (statement.condition ? " where " + expression_text(statement.condition, &kernel) : "") + "\n";
        break;
    }
  }
}

std::string schedule_text(const IrSchedule& schedule) {
  std::string text = schedule_form_name(schedule.form);
  if (schedule.statement >= 0) text += " of statement " + std::to_string(schedule.statement);
  if (schedule.across >= 0) text += " across dim " + std::to_string(schedule.across);
  if (schedule.tile > 0) text += ", tile " + std::to_string(schedule.tile);
  if (schedule.work_items >= 0)
    text += "; " + std::to_string(schedule.work_items) + " work items, grain " + std::to_string(schedule.grain);
  auto edges = [](const std::vector<int64_t>& pieces) {
    std::string list;
    for (int64_t edge : pieces) list += (list.empty() ? "" : " ") + std::to_string(edge);
    return "[" + list + "]";
  };
  if (!schedule.column_pieces.empty()) text += "; element loop in pieces " + edges(schedule.column_pieces);
  if (schedule.row_piece_dim >= 0) {
    text += "; dim " + std::to_string(schedule.row_piece_dim) + " in pieces " + edges(schedule.row_pieces);
    for (const std::vector<int64_t>& columns : schedule.row_piece_columns)
      text += ", element loop " + (columns.empty() ? std::string("whole") : edges(columns));
  }
  return text;
}

}  // namespace

std::string ir_text(const IrExprPtr& expression, const IrKernel* kernel) { return expression_text(expression, kernel); }

std::string ir_text(const IrKernel& kernel) {
  bool pointwise = kernel.kind == IrKernel::Kind::Pointwise;
  std::string out =
      std::string("kernel ") + (pointwise ? "pointwise" : "scatter") + " over " + shape_to_string(kernel.domain);
  if (!pointwise)
    out += std::string(", accumulating ") + reduce_op_name(kernel.scatter_op) +
           (kernel.scatter_split_rows ? ", rows split" : "");
  out += "\n";
  for (const IrBuffer& buffer : kernel.buffers)
    out += "  " + std::string(buffer.is_output ? "output " : "input ") + buffer.name + ": " + dtype_name(buffer.dtype) +
           " " + shape_to_string(buffer.shape) + "\n";
  for (const std::string& op : kernel.fused_ops) out += "  fused " + op + "\n";
  out += "  work per point " + std::to_string(kernel.inner_work);
  if (!kernel.row_body.empty()) out += ", per row " + std::to_string(kernel.row_work);
  out += "\n";
  // Only once a scheduling pass has looked at the kernel (the shared IR that both renderers read has none).
  if (kernel.schedule.work_items >= 0 || kernel.schedule.form != IrSchedule::Form::Elements)
    out += "  schedule " + schedule_text(kernel.schedule) + "\n";
  std::string indices;
  for (size_t dim = 0; dim < kernel.domain.size(); ++dim)
    indices += (dim ? ", i" : "i") + std::to_string(dim) + " < " + std::to_string(kernel.domain[dim]);
  if (!kernel.row_body.empty()) {
    out += "per row:\n";
    write_statements(kernel.row_body, kernel, 1, out);
  }
  out += "per point (" + indices + "):\n";
  write_statements(kernel.body, kernel, 1, out);
  return out;
}

}  // namespace metajit
