// IR -> C++ text. Values compute in float for float16 storage (converted at loads and stores); index math is
// int64 with the index language's floor semantics, rendered as plain C operators where the range analysis
// proves both sides non-negative. Sum loops reassociate only their accumulation, so they vectorise.
#include "jit/cpp_renderer.h"

#include <sstream>
#include <stdexcept>

#include "jit/cpp_prelude.h"
#include "jit/expression_renderer.h"

namespace metajit {

const char* const kKernelSymbol = "metajit_kernel";

namespace {

class Renderer : ExpressionRenderer {
 public:
  explicit Renderer(const IrKernel& kernel) : ExpressionRenderer(kernel, SourceDialect::Cpp) {}

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
         << not_a_number(statement.dtype) << ") : mj_from_order_key("
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
  std::ostringstream out_;
};

}  // namespace

RenderedKernel render_cpp(const IrKernel& kernel) { return Renderer(kernel).render(); }

}  // namespace metajit
