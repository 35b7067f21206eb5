// IR -> CUDA text. Expressions render through the shared ExpressionRenderer (CUDA dialect); this file decides
// the schedule (which thread computes what) and renders statements for it. A reduction is "cooperative" when
// the block's threads split its iterations: each thread accumulates a strided share in order, then
// mj_block_reduce combines the shares and hands every thread the result.
#include "jit/cuda_renderer.h"

#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "jit/cuda_prelude.h"
#include "jit/expression_renderer.h"

namespace metajit {
namespace {

enum class Schedule { ThreadPerElement, BlockPerElement, ThreadPerRow, BlockPerRow, Scatter };

const char* schedule_name(Schedule schedule) {
  switch (schedule) {
    case Schedule::ThreadPerElement: return "thread per element";
    case Schedule::BlockPerElement: return "block per element";
    case Schedule::ThreadPerRow: return "thread per row";
    case Schedule::BlockPerRow: return "block per row";
    case Schedule::Scatter: return "scatter with atomics";
  }
  return "";
}

// Rows up to this long are computed by one thread each; longer rows by a block.
constexpr int64_t kShortRow = 64;
// A pointwise kernel's reductions are split over a block when each is at least this long and the kernel has
// fewer outputs than kFewOutputs (with more, one thread per output already fills the GPU).
constexpr int64_t kCooperativeReduction = 64;
constexpr int64_t kFewOutputs = 32768;

int64_t iterations(const IrStatement& statement) {
  int64_t total = 1;
  for (const auto& loop : statement.loops) total *= loop.second;
  return total;
}

int64_t longest_reduction(const std::vector<IrStatement>& statements) {
  int64_t longest = 0;
  for (const IrStatement& statement : statements)
    if (statement.kind == IrStatement::Kind::ReduceLoop) longest = std::max(longest, iterations(statement));
  return longest;
}

class CudaRenderer : public ExpressionRenderer {
 public:
  explicit CudaRenderer(const IrKernel& kernel) : ExpressionRenderer(kernel, SourceDialect::Cuda) {}

  RenderedCudaKernel render() {
    Schedule schedule = choose_schedule();
    RenderedCudaKernel rendered;
    rendered.schedule = schedule_name(schedule);
    std::ostringstream header;
    header << "// metajit CUDA kernel: " << (kernel_.kind == IrKernel::Kind::Pointwise ? "pointwise" : "scatter")
           << " over " << shape_to_string(kernel_.domain) << ", " << rendered.schedule
           << "\n// fused ops (op, shape, created at):\n";
    for (const std::string& line : kernel_.fused_ops) header << "//   " << line << "\n";
    rendered.header_comment = header.str();
    out_ << kCudaPrelude;
    const Shape& domain = kernel_.domain;
    int64_t count = shape_numel(domain);
    switch (schedule) {
      case Schedule::ThreadPerElement:
      case Schedule::BlockPerElement: {
        bool block = schedule == Schedule::BlockPerElement;
        begin_kernel("metajit_kernel");
        out_ << "  for (int64_t flat = " << first_item(block) << "; flat < " << count << "; flat += " << item_stride(block)
             << ") {\n";
        declare_indices("flat", int(domain.size()) - 1, 2);
        statements(kernel_.body, 2, block);
        out_ << "  }\n}\n";
        rendered.launches.push_back({"metajit_kernel", count, block});
        break;
      }
      case Schedule::ThreadPerRow:
      case Schedule::BlockPerRow: {
        bool block = schedule == Schedule::BlockPerRow;
        int rank = int(domain.size());
        int64_t row_length = domain.back();
        int64_t rows = row_length == 0 ? 0 : count / row_length;
        std::string element = "i" + std::to_string(rank - 1);
        if (block) note_spilled_rows(element);
        begin_kernel("metajit_kernel");
        out_ << "  for (int64_t row = " << first_item(block) << "; row < " << rows << "; row += " << item_stride(block)
             << ") {\n";
        declare_indices("row", rank - 2, 2);
        statements(kernel_.row_body, 2, block);
        if (block)
          out_ << "    for (int64_t " << element << " = threadIdx.x; " << element << " < " << row_length << "; " << element
               << " += " << kCudaBlockSize << ") {\n";
        else
          out_ << "    for (int64_t " << element << " = 0; " << element << " < " << row_length << "; ++" << element << ") {\n";
        statements(kernel_.body, 3, false);
        out_ << "    }\n  }\n}\n";
        rendered.launches.push_back({"metajit_kernel", rows, block});
        break;
      }
      case Schedule::Scatter: {
        const IrBuffer& output = kernel_.buffers[0];
        int64_t output_count = shape_numel(output.shape);
        std::string initial = identity(kernel_.scatter_op, output.dtype);
        if (output.dtype == DType::Float16) initial = "mj_float_to_half(" + initial + ")";
        begin_kernel("metajit_initialize");
        out_ << "  for (int64_t flat = " << first_item(false) << "; flat < " << output_count << "; flat += "
             << item_stride(false) << ") out0[flat] = " << initial << ";\n}\n\n";
        begin_kernel("metajit_kernel");
        out_ << "  for (int64_t flat = " << first_item(false) << "; flat < " << count << "; flat += " << item_stride(false)
             << ") {\n";
        declare_indices("flat", int(domain.size()) - 1, 2);
        statements(kernel_.body, 2, false);
        out_ << "  }\n}\n";
        rendered.launches.push_back({"metajit_initialize", output_count, false});
        rendered.launches.push_back({"metajit_kernel", count, false});
        break;
      }
    }
    rendered.source = out_.str();
    return rendered;
  }

 protected:
  std::string variable(const IrExprPtr& node) override {
    auto found = spill_reads_.find(node->name);
    return found == spill_reads_.end() ? node->name : found->second;
  }

 private:
  Schedule choose_schedule() const {
    if (kernel_.kind == IrKernel::Kind::Scatter) return Schedule::Scatter;
    if (!kernel_.row_body.empty())
      return kernel_.domain.back() <= kShortRow ? Schedule::ThreadPerRow : Schedule::BlockPerRow;
    bool long_reduction = longest_reduction(kernel_.body) >= kCooperativeReduction;
    return long_reduction && shape_numel(kernel_.domain) < kFewOutputs ? Schedule::BlockPerElement
                                                                        : Schedule::ThreadPerElement;
  }

  static std::string first_item(bool block) {
    return block ? "blockIdx.x" : "(int64_t)blockIdx.x * " + std::to_string(kCudaBlockSize) + " + threadIdx.x";
  }
  static std::string item_stride(bool block) {
    return block ? "gridDim.x" : "(int64_t)gridDim.x * " + std::to_string(kCudaBlockSize);
  }

  void begin_kernel(const char* name) {
    out_ << "\nextern \"C\" __global__ void __launch_bounds__(" << kCudaBlockSize << ") " << name << "(\n";
    for (size_t index = 0; index < kernel_.buffers.size(); ++index) {
      const IrBuffer& buffer = kernel_.buffers[index];
      out_ << "    " << (buffer.is_output ? "" : "const ") << dtype_c_type(buffer.dtype) << "* __restrict__ "
           << buffer.name << (index + 1 < kernel_.buffers.size() ? "," : ")") << "  // " << dtype_name(buffer.dtype)
           << " " << shape_to_string(buffer.shape) << "\n";
    }
    if (kernel_.buffers.empty()) out_ << ")\n";
    out_ << "{\n";
  }

  // Declares i0 .. i<last_dim> from `flat`, the row-major index over the domain's first last_dim+1 dims.
  void declare_indices(const std::string& flat, int last_dim, int depth) {
    std::string pad(depth * 2, ' ');
    std::string remaining = flat;
    for (int dim = last_dim; dim >= 0; --dim) {
      if (dim == 0) {
        out_ << pad << "const int64_t i0 = " << remaining << ";\n";
      } else {
        out_ << pad << "const int64_t i" << dim << " = " << remaining << " % " << kernel_.domain[dim] << ";\n";
        out_ << pad << "const int64_t " << flat << "_" << dim << " = " << remaining << " / " << kernel_.domain[dim] << ";\n";
        remaining = flat + "_" + std::to_string(dim);
      }
    }
  }

  // A block-per-row kernel keeps a row's spilled terms in per-thread slots: the thread that computes the
  // term of element i (i = threadIdx.x + k * blockDim.x) is the one that reads it back, from slot i / blockDim.x.
  void note_spilled_rows(const std::string& element) {
    for (const IrStatement& statement : kernel_.row_body)
      if (statement.kind == IrStatement::Kind::ReduceLoop && !statement.spill.empty())
        spill_reads_[statement.spill + "[" + element + "]"] =
            statement.spill + "[" + element + " / " + std::to_string(kCudaBlockSize) + "]";
  }

  void statements(const std::vector<IrStatement>& list, int depth, bool cooperative) {
    std::string pad(depth * 2, ' ');
    for (const IrStatement& statement : list) {
      switch (statement.kind) {
        case IrStatement::Kind::Let:
          out_ << pad << let_line(statement) << "\n";
          break;
        case IrStatement::Kind::Store:
          // In a block-per-element kernel every thread holds the reduced value; one of them writes it.
          out_ << pad << (cooperative ? "if (threadIdx.x == 0) " : "") << store_line(statement) << "\n";
          break;
        case IrStatement::Kind::ReduceLoop:
          reduce_loop(statement, depth, cooperative);
          break;
        case IrStatement::Kind::ScatterAccumulate:
          scatter_accumulate(statement, depth);
          break;
      }
    }
  }

  void reduce_loop(const IrStatement& statement, int depth, bool cooperative) {
    std::string pad(depth * 2, ' ');
    std::string type = value_type(statement.dtype);
    out_ << pad << type << " " << statement.name << " = " << identity(statement.reduce_op, statement.dtype) << ";\n";
    std::string spill_index;
    if (!statement.spill.empty()) {
      const std::string& loop = statement.loops[0].first;
      int64_t length = statement.loops[0].second;
      int64_t slots = cooperative ? (length + kCudaBlockSize - 1) / kCudaBlockSize : length;
      out_ << pad << value_type(statement.value->dtype) << " " << statement.spill << "[" << std::max<int64_t>(1, slots)
           << "];\n";
      spill_index = cooperative ? loop + " / " + std::to_string(kCudaBlockSize) : loop;
    }
    int inner = depth;
    if (cooperative) {
      // One strided loop over all iterations, split back into the loop variables.
      std::string flat = statement.loops.size() == 1 ? statement.loops[0].first : statement.name + "_iteration";
      out_ << pad << "for (int64_t " << flat << " = threadIdx.x; " << flat << " < " << iterations(statement) << "; "
           << flat << " += " << kCudaBlockSize << ") {\n";
      ++inner;
      if (statement.loops.size() > 1) {
        std::string remaining = flat;
        std::string inner_pad(inner * 2, ' ');
        for (size_t index = statement.loops.size(); index-- > 0;) {
          const auto& loop = statement.loops[index];
          if (index == 0) {
            out_ << inner_pad << "const int64_t " << loop.first << " = " << remaining << ";\n";
          } else {
            out_ << inner_pad << "const int64_t " << loop.first << " = " << remaining << " % " << loop.second << ";\n";
            out_ << inner_pad << "const int64_t " << loop.first << "_rest = " << remaining << " / " << loop.second << ";\n";
            remaining = loop.first + "_rest";
          }
        }
      }
    } else {
      for (const auto& loop : statement.loops) {
        out_ << std::string(inner * 2, ' ') << "for (int64_t " << loop.first << " = 0; " << loop.first << " < "
             << loop.second << "; ++" << loop.first << ") {\n";
        ++inner;
      }
    }
    std::string body_pad(inner * 2, ' ');
    statements(statement.body, inner, false);
    std::string term = statement.name + "_term";
    out_ << body_pad << "const " << type << " " << term << " = " << expression(statement.value) << ";\n";
    if (!spill_index.empty()) out_ << body_pad << statement.spill << "[" << spill_index << "] = " << term << ";\n";
    out_ << body_pad << statement.name << " = " << combine(statement.reduce_op, statement.dtype, statement.name, term)
         << ";\n";
    int loops = cooperative ? 1 : int(statement.loops.size());
    for (int loop = 0; loop < loops; ++loop) {
      --inner;
      out_ << std::string(inner * 2, ' ') << "}\n";
    }
    if (cooperative)
      out_ << pad << statement.name << " = mj_block_reduce(" << statement.name << ", [](" << type << " a, " << type
           << " b) { return " << combine(statement.reduce_op, statement.dtype, "a", "b") << "; });\n";
  }

  void scatter_accumulate(const IrStatement& statement, int depth) {
    std::string pad(depth * 2, ' ');
    const IrBuffer& buffer = kernel_.buffers[statement.buffer];
    std::string target = "&" + buffer.name + "[" + expression(statement.offset) + "]";
    std::string value = statement.name.empty() ? "scatter_value" : statement.name + "_value";
    std::string open = statement.condition ? "if (" + expression(statement.condition) + ") {\n" : "{\n";
    out_ << pad << open;
    out_ << pad << "  const " << value_type(statement.dtype) << " " << value << " = " << expression(statement.value)
         << ";\n";
    DType storage = buffer.dtype;
    bool hardware_add = kernel_.scatter_op == ReduceOp::Add &&
                        (storage == DType::Float32 || storage == DType::Float64 || storage == DType::Int32 ||
                         storage == DType::Int64);
    if (hardware_add) {
      out_ << pad << "  mj_atomic_add(" << target << ", (" << dtype_c_type(storage) << ")" << value << ");\n";
    } else {
      std::string current = storage == DType::Float16 ? "mj_half_to_float(current)" : "current";
      std::string updated = combine(kernel_.scatter_op, statement.dtype, current, value);
      if (storage == DType::Float16) updated = "mj_float_to_half(" + updated + ")";
      out_ << pad << "  mj_atomic_update(" << target << ", [&](" << dtype_c_type(storage) << " current) { return ("
           << dtype_c_type(storage) << ")" << updated << "; });\n";
    }
    out_ << pad << "}\n";
  }

  std::ostringstream out_;
  std::unordered_map<std::string, std::string> spill_reads_;  // a spilled term's variable -> its slot
};

}  // namespace

RenderedCudaKernel render_cuda(const IrKernel& kernel) { return CudaRenderer(kernel).render(); }

}  // namespace metajit
