// IR -> CUDA text. Expressions render through the shared ExpressionRenderer (CUDA dialect); this file decides
// the schedule (which thread computes what) and renders statements for it. A reduction is "cooperative" when
// the block's threads split its iterations: each thread accumulates a strided share in order, then
// mj_block_reduce combines the shares and hands every thread the result.
#include "jit/codegen/cuda/cuda_renderer.h"

#include <cstdio>
#include <map>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "jit/codegen/common/expression_renderer.h"
#include "jit/codegen/cuda/cuda_prelude.h"

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
// A pointwise kernel of lets and stores computes this many elements per thread and loop step, a block's width
// apart, with the copies' statements interleaved: each thread then has this many loads in flight. One at a
// time left the memory system idle part of the time (an 8-op chain reached 70% of a device copy on an H200).
constexpr int kUnroll = 4;
// A block-per-row kernel unrolls its row loops when a thread takes at most this many of a row's elements: the
// spilled terms' slots then have constant indices and live in registers, and every load of a thread's share
// of the row is in flight at once.
constexpr int64_t kMostUnrolledSteps = 32;
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
        if (unrollable()) {
          unrolled_elements(count);
          rendered.launches.push_back({"metajit_kernel", count, false, kUnroll});
          break;
        }
        [[fallthrough]];
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
        if (block) {
          note_spilled_rows(element);
          find_row_loads(row_length, element);
        }
        begin_kernel("metajit_kernel");
        out_ << "  for (int64_t row = " << first_item(block) << "; row < " << rows << "; row += " << item_stride(block)
             << ") {\n";
        declare_indices("row", rank - 2, 2);
        declare_row_loads(row_length);
        statements(kernel_.row_body, 2, block);
        int depth = 3;
        if (block)
          depth = open_block_loop(element, row_length, 2);
        else
          out_ << "    for (int64_t " << element << " = 0; " << element << " < " << row_length << "; ++" << element << ") {\n";
        if (block && unrolled(row_length)) row_loop_variable_ = element;
        statements(kernel_.body, depth, false);
        row_loop_variable_.clear();
        close_loop(depth, 2);
        out_ << "  }\n}\n";
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
    return found == spill_reads_.end() ? node->name + copy_suffix_ : found->second;
  }
  std::string defined_name(const std::string& name) override { return name + copy_suffix_; }

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

  bool unrollable() const {
    for (const IrStatement& statement : kernel_.body)
      if (statement.kind != IrStatement::Kind::Let && statement.kind != IrStatement::Kind::Store) return false;
    return true;
  }

  // Thread per element, kUnroll elements per thread and step: copy k of the body computes element
  // base + k * blockDim with its variables suffixed _u<k>, and the copies' statements are interleaved, so the
  // loads of all copies come before the first store. The last, partial step (when the count is not a multiple
  // of kUnroll blocks) takes its elements one at a time.
  void unrolled_elements(int64_t count) {
    const int64_t step = int64_t(kCudaBlockSize) * kUnroll;
    const int last_dim = int(kernel_.domain.size()) - 1;
    begin_kernel("metajit_kernel");
    out_ << "  for (int64_t base = (int64_t)blockIdx.x * " << step << " + threadIdx.x; base < " << count
         << "; base += (int64_t)gridDim.x * " << step << ") {\n";
    bool whole_steps = count % step == 0;  // then every step is whole
    int depth = 2;
    if (!whole_steps) {
      out_ << "    if (base + " << step - kCudaBlockSize << " < " << count << ") {\n";
      depth = 3;
    }
    std::string pad(depth * 2, ' ');
    for (int copy = 0; copy < kUnroll; ++copy) {
      copy_suffix_ = "_u" + std::to_string(copy);
      out_ << pad << "const int64_t flat" << copy_suffix_ << " = base + " << copy * kCudaBlockSize << ";\n";
      declare_indices("flat" + copy_suffix_, last_dim, depth);
    }
    for (const IrStatement& statement : kernel_.body)
      for (int copy = 0; copy < kUnroll; ++copy) {
        copy_suffix_ = "_u" + std::to_string(copy);
        out_ << pad << (statement.kind == IrStatement::Kind::Let ? let_line(statement) : store_line(statement)) << "\n";
      }
    copy_suffix_.clear();
    if (!whole_steps) {
      out_ << "    } else {\n      for (int64_t flat = base; flat < " << count << "; flat += " << kCudaBlockSize << ") {\n";
      declare_indices("flat", last_dim, 4);
      statements(kernel_.body, 4, false);
      out_ << "      }\n    }\n";
    }
    out_ << "  }\n}\n";
  }

  // Declares i0 .. i<last_dim> (suffixed as the copy being rendered) from `flat`, the row-major index over the
  // domain's first last_dim+1 dims. Under 2^32 items the divisions are 32-bit: a 64-bit division by a
  // constant is several times the instructions.
  void declare_indices(const std::string& flat, int last_dim, int depth) {
    std::string pad(depth * 2, ' ');
    int64_t items = 1;
    for (int dim = 0; dim <= last_dim; ++dim) items *= kernel_.domain[dim];
    bool narrow = items <= int64_t(UINT32_MAX);
    std::string remaining = flat;
    for (int dim = last_dim; dim >= 0; --dim) {
      std::string index = "i" + std::to_string(dim) + copy_suffix_;
      if (dim == 0) {
        out_ << pad << "const int64_t " << index << " = " << remaining << ";\n";
        continue;
      }
      int64_t extent = kernel_.domain[dim];
      std::string next = flat + "_" + std::to_string(dim);
      if (narrow) {
        out_ << pad << "const int64_t " << index << " = (uint32_t)" << remaining << " % " << extent << "u;\n";
        out_ << pad << "const int64_t " << next << " = (uint32_t)" << remaining << " / " << extent << "u;\n";
      } else {
        out_ << pad << "const int64_t " << index << " = " << remaining << " % " << extent << ";\n";
        out_ << pad << "const int64_t " << next << " = " << remaining << " / " << extent << ";\n";
      }
      remaining = next;
    }
  }

  // A block-per-row kernel keeps a row's spilled terms in per-thread slots: the thread that computes the
  // term of element i (i = threadIdx.x + k * blockDim.x) is the one that reads it back, from slot k.
  void note_spilled_rows(const std::string& element) {
    for (const IrStatement& statement : kernel_.row_body)
      if (statement.kind == IrStatement::Kind::ReduceLoop && !statement.spill.empty())
        spill_reads_[statement.spill + "[" + element + "]"] = statement.spill + "[" + slot(element, statement.loops[0].second) + "]";
  }

  // ---- a row's loads kept in registers ----
  // When a block-per-row kernel's row loops are unrolled, step k of every loop over the row is element
  // threadIdx.x + k * blockDim.x on the same thread, so a value one loop loaded, a later loop over the row can
  // take from the register slot the first one filled instead of reading memory again (softmax and layer norm
  // then read their row once).
  struct RowLoad {
    std::string slots;  // the array "<first let>_row"
    DType dtype;
    bool filled = false;  // a loop rendered so far stores into it
  };

  // The text of a load with the row loop's variable written "@", so loads of the same element in different
  // loops over the row compare equal.
  static void canonical_text(const IrExprPtr& expression, const std::string& loop, std::string& text) {
    if (expression->kind == IrKind::Variable) {
      text += expression->name == loop ? "@" : expression->name;
      return;
    }
    char scalars[96];
    std::snprintf(scalars, sizeof(scalars), "%d:%d:%d:%lld:%d:%a(", int(expression->kind), int(expression->dtype),
                  int(expression->op), (long long)expression->integer, expression->buffer, expression->floating);
    text += scalars;
    for (const IrExprPtr& argument : expression->args) {
      canonical_text(argument, loop, text);
      text += ',';
    }
    text += ')';
  }
  bool is_input_load(const IrStatement& statement) const {
    return statement.kind == IrStatement::Kind::Let && statement.value->kind == IrKind::Load &&
           !kernel_.buffers[statement.value->buffer].is_output;
  }
  std::string row_load_key(const IrStatement& statement, const std::string& loop) const {
    std::string text;
    canonical_text(statement.value, loop, text);
    return text;
  }

  // The loads that more than one unrolled loop over the row reads.
  void find_row_loads(int64_t row_length, const std::string& element) {
    if (!unrolled(row_length)) return;
    row_length_ = row_length;
    struct Readers {
      int loops = 0, last_loop = 0;
      const IrStatement* first = nullptr;
    };
    std::map<std::string, Readers> readers;  // by load; a map, so the slots are declared in a fixed order
    int loop_number = 0;
    auto count = [&](const std::vector<IrStatement>& body, const std::string& loop) {
      ++loop_number;
      for (const IrStatement& statement : body) {
        if (!is_input_load(statement)) continue;
        Readers& entry = readers[row_load_key(statement, loop)];
        if (!entry.first) entry.first = &statement;
        if (entry.last_loop != loop_number) entry.loops++, entry.last_loop = loop_number;
      }
    };
    for (const IrStatement& statement : kernel_.row_body)
      if (statement.kind == IrStatement::Kind::ReduceLoop && statement.loops.size() == 1 &&
          statement.loops[0].second == row_length)
        count(statement.body, statement.loops[0].first);
    count(kernel_.body, element);
    for (const auto& [key, entry] : readers)
      if (entry.loops > 1) row_loads_[key] = {entry.first->name + "_row", entry.first->dtype};
  }

  void declare_row_loads(int64_t row_length) {
    int64_t steps = (row_length + kCudaBlockSize - 1) / kCudaBlockSize;
    for (const auto& [key, load] : row_loads_)
      out_ << "    " << value_type(load.dtype) << " " << load.slots << "[" << steps << "];\n";
  }

  // A load's let inside an unrolled row loop: from its slot when an earlier loop filled it, else from memory
  // (into the slot too when a later loop reads it). Returns false when the let is not such a load.
  bool row_load_let(const IrStatement& statement, const std::string& pad) {
    if (row_loop_variable_.empty() || row_loads_.empty() || !is_input_load(statement)) return false;
    auto found = row_loads_.find(row_load_key(statement, row_loop_variable_));
    if (found == row_loads_.end()) return false;
    RowLoad& load = found->second;
    std::string slot = load.slots + "[" + row_loop_variable_ + "_step]";
    if (load.filled) {
      out_ << pad << "const " << value_type(statement.dtype) << " " << defined_name(statement.name) << " = " << slot
           << ";\n";
    } else {
      out_ << pad << let_line(statement) << "\n" << pad << slot << " = " << defined_name(statement.name) << ";\n";
      load.filled = true;
    }
    return true;
  }

  static bool unrolled(int64_t length) { return length <= kCudaBlockSize * kMostUnrolledSteps; }
  // The slot of a block's strided loop variable: its step, counted in the unrolled loop or divided out.
  static std::string slot(const std::string& variable, int64_t length) {
    return unrolled(length) ? variable + "_step" : variable + " / " + std::to_string(kCudaBlockSize);
  }

  // Opens the block's strided loop of `variable` over [0, length) at `depth`; returns the depth of its body.
  // Short loops are unrolled (constant slot indices, all of a thread's loads in flight at once).
  int open_block_loop(const std::string& variable, int64_t length, int depth) {
    std::string pad(depth * 2, ' ');
    if (!unrolled(length)) {
      out_ << pad << "for (int64_t " << variable << " = threadIdx.x; " << variable << " < " << length << "; "
           << variable << " += " << kCudaBlockSize << ") {\n";
      return depth + 1;
    }
    int64_t steps = (length + kCudaBlockSize - 1) / kCudaBlockSize;
    std::string step = variable + "_step";
    out_ << pad << "#pragma unroll\n"
         << pad << "for (int " << step << " = 0; " << step << " < " << steps << "; ++" << step << ") {\n"
         << pad << "  [[maybe_unused]] const int64_t " << variable << " = threadIdx.x + " << step << " * "
         << kCudaBlockSize << ";\n";  // unread when every load of the loop comes from the row's registers
    if (length % kCudaBlockSize == 0) return depth + 1;
    out_ << pad << "  if (" << variable << " < " << length << ") {\n";
    return depth + 2;
  }
  // Closes the loops opened at `depth` whose body is at `body_depth`.
  void close_loop(int body_depth, int depth) {
    for (int level = body_depth - 1; level >= depth; --level) out_ << std::string(level * 2, ' ') << "}\n";
  }

  void statements(const std::vector<IrStatement>& list, int depth, bool cooperative) {
    std::string pad(depth * 2, ' ');
    for (const IrStatement& statement : list) {
      switch (statement.kind) {
        case IrStatement::Kind::Let:
          if (!row_load_let(statement, pad)) out_ << pad << let_line(statement) << "\n";
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
      spill_index = cooperative ? slot(loop, length) : loop;
    }
    int inner = depth;
    bool single_unrolled = cooperative && statement.loops.size() == 1 && unrolled(statement.loops[0].second);
    std::string outer_loop = row_loop_variable_;  // a nested loop's loads are not the row's
    row_loop_variable_.clear();
    if (single_unrolled) {
      inner = open_block_loop(statement.loops[0].first, statement.loops[0].second, depth);
      if (statement.loops[0].second == row_length_) row_loop_variable_ = statement.loops[0].first;
    } else if (cooperative) {
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
    row_loop_variable_ = outer_loop;
    close_loop(inner, depth);
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
  std::string copy_suffix_;  // appended to every variable of the unrolled copy being rendered
  std::map<std::string, RowLoad> row_loads_;  // canonical load text -> its register slots
  std::string row_loop_variable_;  // the unrolled loop over the row being rendered ("" outside one)
  int64_t row_length_ = 0;         // block per row with unrolled loops: the row's length
};

}  // namespace

RenderedCudaKernel render_cuda(const IrKernel& kernel) { return CudaRenderer(kernel).render(); }

}  // namespace metajit
