// IR -> C++ text. Values compute in float for float16 storage (converted at loads and stores); index math is
// int64 with the index language's floor semantics, rendered as plain C operators where the range analysis
// proves both sides non-negative. Sum loops reassociate only their accumulation, so they vectorise. How the
// domain is walked (running sums, column sums, transposed tiles) and split over threads is decided by the IR
// passes (kernel.schedule, jit/ir/ir_passes.h); this file writes the loops for the form it is given.
#include "jit/codegen/cpp/cpp_renderer.h"

#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "jit/codegen/common/expression_renderer.h"
#include "jit/codegen/common/kernel_symbol.h"
#include "jit/codegen/cpp/cpp_prelude.h"
#include "jit/codegen/cpp/vector_expression_renderer.h"
#include "jit/ir/index_sums.h"
#include "jit/ir/loop_pieces.h"
#include "jit/ir/transposed_tiles.h"

namespace metajit {

namespace {
// The most lanes a vector has (AVX-512's 16 floats): a row whose length is a multiple of the parts times this
// needs no vector tail at any width.
constexpr int64_t kVectorLanesAtMost = 16;
}  // namespace

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
    loop_headers(statement.loops, depth);
    int inner = depth + int(statement.loops.size());
    std::string body_pad(inner * 2, ' ');
    // No reassociation here: integer keys vectorise without it, and the max-pool gradient recomputes these
    // values in other kernels and compares them for equality, so they must round as everywhere else.
    statements(statement.body, inner);
    out_ << body_pad << "const " << type << " " << value << " = " << expression(statement.value) << ";\n";
    out_ << body_pad << "const " << key_type << " " << value << "_key = mj_order_key(" << value << ");\n";
    out_ << body_pad << key << " = " << value << "_key " << (maximum ? ">" : "<") << " " << key << " ? " << value
         << "_key : " << key << ";\n";
    out_ << body_pad << nan << " |= (" << value << " != " << value << ");\n";
    loop_ends(statement.loops.size(), depth);
    out_ << pad << "const " << type << " " << statement.name << " = " << nan << " ? ("
         << not_a_number(statement.dtype) << ") : mj_from_order_key("
         << key << ");\n";
  }

  // The row-sized array a row sum keeps its terms in (IrStatement::spill). When the row's elements store to a
  // float32 output row in order, and nothing reads the terms after that store, the terms go in that output row
  // itself: its cache lines are then fetched while the sum computes, not in the element loop (softmax 15% faster).
  void stash_declaration(const IrStatement& statement, int depth) {
    std::string pad(depth * 2, ' ');
    int last = int(kernel_.domain.size()) - 1;
    std::string element = "i" + std::to_string(last);
    std::string read = statement.spill + "[" + element + "]";
    const std::vector<IrStatement>& body = kernel_.body;
    for (size_t index = 0; statement.value->dtype == DType::Float32 && index < body.size(); ++index) {
      const IrStatement& store = body[index];
      if (store.kind != IrStatement::Kind::Store || kernel_.buffers[store.buffer].dtype != DType::Float32 ||
          stash_hosts_.count(store.buffer) || !VectorExpressionRenderer::unit_stride(store.offset, element))
        continue;
      bool row_offset = reads_only_domain_indices(store.offset, last);
      bool read_later = false;
      for (size_t later = index + 1; later < body.size(); ++later)
        for (const IrExprPtr& part : {body[later].value, body[later].offset, body[later].condition})
          if (part && mentions_variable(part, read)) read_later = true;
      if (!row_offset || read_later) continue;
      stash_hosts_.insert(store.buffer);
      IrExprPtr row_start = ir_substitute(store.offset, element, ir_int(0));
      out_ << pad << "float* const " << statement.spill << " = &" << kernel_.buffers[store.buffer].name << "["
           << expression(row_start) << "];  // this row of the output, until its elements overwrite it\n";
      return;
    }
    out_ << pad << "alignas(64) " << value_type(statement.value->dtype) << " " << statement.spill << "["
         << statement.loops[0].second << "];\n";
  }

  // The unit-stride loads of a row loop, one per buffer.
  static void row_loads(const IrExprPtr& node, const std::string& variable, std::map<int, IrExprPtr>& loads) {
    if (node->kind == IrKind::Load && VectorExpressionRenderer::unit_stride(node->args[0], variable))
      loads.emplace(node->buffer, node->args[0]);
    for (const IrExprPtr& argument : node->args) row_loads(argument, variable, loads);
  }

  // A row reduction that reads a buffer an earlier reduction of the same row has already read (softmax's exp
  // pass after its max pass) runs from cache: meanwhile, fetch that buffer's row after next (17% on softmax).
  // Prefetches never fault, so an address past the buffer's end is harmless.
  std::string row_prefetches(const IrStatement& statement, const std::string& pad) {
    const std::string& variable = statement.loops[0].first;
    std::map<int, IrExprPtr> loads;
    for (const IrStatement& let : statement.body) row_loads(let.value, variable, loads);
    row_loads(statement.value, variable, loads);
    int rank = int(kernel_.domain.size());
    std::string row_index = "i" + std::to_string(rank - 2);
    IrExprPtr ahead = ir_index(IndexOperator::Add, ir_loop_variable(row_index, kernel_.domain[rank - 2]), ir_int(2));
    std::string text;
    for (const auto& [buffer, offset] : loads) {
      bool again = !row_buffers_read_.insert(buffer).second;
      if (!again || !reads_only_domain_indices(offset, rank - 1, variable)) continue;
      text += pad + "__builtin_prefetch(&" + kernel_.buffers[buffer].name + "[" +
              expression(ir_substitute(offset, row_index, ahead)) + "]);\n";
    }
    return text;
  }

  // A float32 sum, max or min over one loop that reads contiguously along it, as explicit SIMD: a few vector
  // accumulators side by side (independent dependency chains), then the rest one vector at a time, the last
  // vector partial. A row kernel's reductions over its row, and also a reduction kernel's own (x.exp().sum(-1),
  // cross entropy's passes), whose scalar loop LLVM vectorised with exp lane by lane. False when the loop does
  // not fit (see VectorExpressionRenderer); the caller renders it scalar.
  bool vector_row_reduction(const IrStatement& statement, int depth) {
    if (statement.loops.size() != 1 || statement.dtype != DType::Float32) return false;
    ReduceOp op = statement.reduce_op;
    bool sum = op == ReduceOp::Add, maximum = op == ReduceOp::Maximum;
    if (!sum && !maximum && op != ReduceOp::Minimum) return false;
    const std::string& variable = statement.loops[0].first;
    int64_t extent = statement.loops[0].second;
    VectorExpressionRenderer vector(*this, kernel_, variable), tail(*this, kernel_, variable);
    if (!vector.accepts(statement.body, false, statement.value) || !vector.varies(statement.value)) return false;
    tail.accepts(statement.body, false, statement.value);
    // Sums: two chains cover the add latency; max/min bodies are short, so four.
    int parts = sum ? 2 : 4;
    std::string pad(depth * 2, ' '), inner(depth * 2 + 4, ' ');
    std::string name = statement.name, lanes = name + "_lanes", nan_lanes = name + "_nan_lanes";
    std::string done = name + "_vectors_end", last = variable + "_lanes";
    auto per_part = [&](const std::string& text) {
      std::string list;
      for (int part = 0; part < parts; ++part) list += (part ? ", " : "") + text;
      return "{" + list + "}";
    };
    std::string identity = sum ? "0.0f" : maximum ? "-__builtin_inff()" : "__builtin_inff()";
    // One vector of terms into accumulator `slot`. In the tail, lanes past the end take the identity and are not
    // stored.
    auto step = [&](VectorExpressionRenderer& renderer, const std::string& slot, const std::string& indent,
                    bool partial) {
      out_ << renderer.statements(statement.body, indent);
      if (row_level_ && !partial) out_ << row_prefetches(statement, indent);
      std::string value = name + (sum ? "_term" : "_value"), text = renderer.vector_expression(statement.value);
      if (partial)
        text = "(__builtin_convertvector(mj_index_lanes(" + variable + ") < " + std::to_string(extent) +
               ", mj_mask_vector) ? " + text + " : mj_splat(" + identity + "))";
      out_ << indent << "const mj_float_vector " << value << " = " << text << ";\n";
      std::string accumulator = lanes + "[" + slot + "]";
      if (sum) {
        if (!statement.spill.empty())
          out_ << indent << (partial ? "mj_store_lanes(&" : "mj_store_vector(&") << statement.spill << "[" << variable
               << "], " << value << (partial ? ", " + last : "") << ");\n";
        out_ << indent << accumulator << " += " << value << ";\n";
        return;
      }
      // Lane by lane a tie between -0 and +0 keeps the earlier; the lanes are combined by order key (exact).
      out_ << indent << accumulator << " = " << value << (maximum ? " > " : " < ") << accumulator << " ? " << value
           << " : " << accumulator << ";\n";
      out_ << indent << nan_lanes << "[" << slot << "] |= (" << value << " != " << value << ");\n";
    };
    out_ << pad << "mj_float_vector " << lanes << "[" << parts << "] = " << per_part("mj_splat(" + identity + ")") << ";\n";
    if (!sum)
      out_ << pad << "mj_mask_vector " << nan_lanes << "[" << parts << "] = " << per_part("mj_splat_mask(false)") << ";\n";
    out_ << pad << "int64_t " << done << " = 0;\n";
    // The parts already unroll the loop. Unrolled fully (a short constant row), the next pass's loads of the same
    // row became the values this pass loaded, held across the passes in spilled registers: softmax's [4096, 1024]
    // kernel spilled 3 KB a row and ran 20-25% slower than with the loop kept.
    out_ << pad << "#pragma clang loop unroll(disable)\n";
    out_ << pad << "for (; " << done << " + " << parts << " * MJ_LANES <= " << extent << "; " << done << " += " << parts
         << " * MJ_LANES) {\n";
    out_ << pad << "  #pragma unroll\n";
    out_ << pad << "  for (int part = 0; part < " << parts << "; ++part) {\n";
    out_ << inner << "const int64_t " << variable << " = " << done << " + part * MJ_LANES;\n";
    step(vector, "part", inner, false);
    out_ << pad << "  }\n" << pad << "}\n";
    // The rest (fewer than `parts` vectors) a vector at a time, the last one partial: a scalar remainder of up to
    // 63 elements had made a row of 1023 2.5x (max) to 3.4x (a sum of exp) slower per element than one of 1024.
    if (extent % (parts * kVectorLanesAtMost) != 0) {
      tail.limit_lanes(last);
      out_ << pad << "#pragma clang loop unroll(disable) vectorize(disable)\n";
      out_ << pad << "for (; " << done << " < " << extent << "; " << done << " += MJ_LANES) {\n";
      out_ << pad << "  const int64_t " << variable << " = " << done << ";\n";
      out_ << pad << "  const int64_t " << last << " = " << extent << " - " << variable << " < MJ_LANES ? " << extent
           << " - " << variable << " : MJ_LANES;\n";
      step(tail, "0", pad + "  ", true);
      out_ << pad << "}\n";
    }
    std::string type = value_type(statement.dtype);
    if (sum) {
      std::string total = lanes + "[0]";
      for (int part = 1; part < parts; ++part) total += " + " + lanes + "[" + std::to_string(part) + "]";
      out_ << pad << type << " " << name << " = mj_sum_lanes(" << total << ");\n";
      return true;
    }
    std::string keys = name + "_lane_keys", nans = nan_lanes + "[0]";
    out_ << pad << "mj_mask_vector " << keys << " = mj_order_key(" << lanes << "[0]);\n";
    for (int part = 1; part < parts; ++part) {
      std::string key = "mj_order_key(" + lanes + "[" + std::to_string(part) + "])";
      out_ << pad << keys << " = " << key << (maximum ? " > " : " < ") << keys << " ? " << key << " : " << keys << ";\n";
      nans += " | " + nan_lanes + "[" + std::to_string(part) + "]";
    }
    out_ << pad << "const " << type << " " << name << " = mj_any_lane(" << nans << ") ? (" << not_a_number(statement.dtype)
         << ") : mj_from_order_key(" << (maximum ? "mj_max_lane(" : "mj_min_lane(") << keys << "));\n";
    return true;
  }

  // "for (...) {" for each loop of a reduction, outermost first, from depth on.
  void loop_headers(const std::vector<std::pair<std::string, int64_t>>& loops, int depth) {
    for (size_t level = 0; level < loops.size(); ++level) {
      const auto& loop = loops[level];
      out_ << std::string((depth + level) * 2, ' ') << "for (int64_t " << loop.first << " = 0; " << loop.first
           << " < " << loop.second << "; ++" << loop.first << ") {\n";
    }
  }

  void loop_ends(size_t count, int depth) {
    for (size_t level = count; level > 0; --level) out_ << std::string((depth + level - 1) * 2, ' ') << "}\n";
  }

  // A sum (or product, or logical reduction) loop.
  void reduce_loop(const IrStatement& statement, int depth) {
    std::string pad(depth * 2, ' ');
    out_ << pad << value_type(statement.dtype) << " " << statement.name << " = "
         << identity(statement.reduce_op, statement.dtype) << ";\n";
    loop_headers(statement.loops, depth);
    int inner = depth + int(statement.loops.size());
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
           << combine(statement.reduce_op, statement.dtype, statement.name, expression(statement.value)) << ";\n";
    }
    loop_ends(statement.loops.size(), depth);
  }

  void statements(const std::vector<IrStatement>& list, int depth) {
    for (const IrStatement& statement : list) this->statement(statement, depth);
  }

  void statement(const IrStatement& statement, int depth) {
    std::string pad(depth * 2, ' ');
    switch (statement.kind) {
      case IrStatement::Kind::Let:
        out_ << pad << let_line(statement) << "\n";
        break;
      case IrStatement::Kind::Store:
        out_ << pad << store_line(statement) << "\n";
        break;
      case IrStatement::Kind::ReduceLoop: {
        bool float_extremum = is_floating(statement.dtype) &&
                              (statement.reduce_op == ReduceOp::Maximum || statement.reduce_op == ReduceOp::Minimum);
        if (!statement.spill.empty()) stash_declaration(statement, depth);
        if (vector_row_reduction(statement, depth)) break;
        if (float_extremum)
          float_extremum_loop(statement, depth);
        else
          reduce_loop(statement, depth);
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

  // Declares i0 .. i(rank-2) from `row`, the index of a row (every dim but the last); or i0 .. i`highest` from
  // the flat index `remaining` over those dims, the quotients on the way named `quotient`<dim>. The indices are
  // `index_type` (mutable where a loop steps them).
  void row_indices() { row_indices("row", int(kernel_.domain.size()) - 2); }
  void row_indices(std::string remaining, int highest, const std::string& pad = "    ",
                   const std::string& index_type = "const int64_t ", const std::string& quotient = "row_") {
    const Shape& domain = kernel_.domain;
    for (int dim = highest; dim >= 0; --dim) {
      if (dim == 0) {
        out_ << pad << index_type << "i0 = " << remaining << ";\n";
      } else {
        out_ << pad << index_type << "i" << dim << " = " << remaining << " % " << domain[dim] << ";\n";
        out_ << pad << "const int64_t " << quotient << dim << " = " << remaining << " / " << domain[dim] << ";\n";
        remaining = quotient + std::to_string(dim);
      }
    }
  }

  // The element loop [begin, end) over `element` as explicit SIMD, MJ_LANES elements at a time, when every
  // statement has a vector form; false (nothing rendered) otherwise. The last vector may be partial: its loads
  // and stores take only the lanes left (mj_load_lanes), so the body is compiled once, not again as a scalar
  // remainder loop (an exp chain's compile went from about 15 to 11 ms).
  bool vector_element_loop(const std::string& element, const std::string& begin, const std::string& end,
                           const std::set<std::string>& stashes, int depth) {
    VectorExpressionRenderer vector(*this, kernel_, element, stashes);
    if (!vector.accepts(kernel_.body, true)) return false;
    std::string pad(depth * 2, ' '), lanes = element + "_lanes";
    vector.limit_lanes(lanes);
    out_ << pad << "for (int64_t " << element << " = " << begin << "; " << element << " < " << end << "; " << element
         << " += MJ_LANES) {\n";
    out_ << pad << "  const int64_t " << lanes << " = " << end << " - " << element << " < MJ_LANES ? " << end << " - "
         << element << " : MJ_LANES;\n";
    out_ << vector.statements(kernel_.body, pad + "  ");
    out_ << pad << "}\n";
    return true;
  }

  // Elementwise kernels go explicit SIMD only for exp (and sigmoid, tanh and erf, which use it), sin and cos: LLVM
  // vectorises everything else as well, but applies exp lane by lane at about twice the instructions (see the
  // vector mj_exp in the prelude), and sin and cos not at all (their libm fallback is a call).
  bool kernel_uses_vector_math() const {
    for (const IrStatement& statement : kernel_.body)
      for (const IrExprPtr& part : {statement.value, statement.offset, statement.condition})
        if (part && contains_vector_math(part)) return true;
    return false;
  }

  static bool contains_vector_math(const IrExprPtr& node) {
    if (node->kind == IrKind::Unary && node->dtype == DType::Float32) {
      UnaryOp op = UnaryOp(node->op);
      if (op == UnaryOp::Exp || op == UnaryOp::Sigmoid || op == UnaryOp::Tanh || op == UnaryOp::Sin || op == UnaryOp::Cos ||
          op == UnaryOp::Erf)
        return true;
    }
    for (const IrExprPtr& argument : node->args)
      if (contains_vector_math(argument)) return true;
    return false;
  }

  // The column sum for output elements [begin, end) of the last dim: the sum's loops go outside, and a tile of
  // columns accumulates side by side (a vectorised pass over a contiguous piece of each input row). Every column
  // still adds its terms in loop order, one after another.
  void column_sum_loops(const IrStatement& sum, const std::string& begin, const std::string& end, int depth) {
    const int64_t tile_width = kernel_.schedule.tile;
    std::string pad(depth * 2, ' '), inner_pad((depth + 1) * 2, ' ');
    std::string element = "i" + std::to_string(kernel_.domain.size() - 1);
    std::string columns = sum.name + "_columns", type = value_type(sum.dtype);
    out_ << pad << "for (int64_t tile = " << begin << "; tile < " << end << "; tile += " << tile_width << ") {\n";
    out_ << inner_pad << "const int64_t tile_end = " << end << " - tile < " << tile_width << " ? " << end
         << " : tile + " << tile_width << ";\n";
    out_ << inner_pad << type << " " << columns << "[" << tile_width << "];\n";
    out_ << inner_pad << "for (int64_t " << element << " = tile; " << element << " < tile_end; ++" << element << ") "
         << columns << "[" << element << " - tile] = " << identity(sum.reduce_op, sum.dtype) << ";\n";
    loop_headers(sum.loops, depth + 1);
    int inner = depth + 1 + int(sum.loops.size());
    std::string loop_pad(inner * 2, ' '), body_pad((inner + 1) * 2, ' ');
    out_ << loop_pad << "for (int64_t " << element << " = tile; " << element << " < tile_end; ++" << element << ") {\n";
    statements(sum.body, inner + 1);
    out_ << body_pad << columns << "[" << element << " - tile] = "
         << combine(sum.reduce_op, sum.dtype, columns + "[" + element + " - tile]", expression(sum.value)) << ";\n";
    out_ << loop_pad << "}\n";
    loop_ends(sum.loops.size(), depth + 1);
    out_ << inner_pad << "for (int64_t " << element << " = tile; " << element << " < tile_end; ++" << element << ") {\n";
    out_ << inner_pad << "  const " << type << " " << sum.name << " = " << columns << "[" << element << " - tile];\n";
    std::vector<IrStatement> rest;
    for (const IrStatement& statement : kernel_.body)
      if (&statement != &sum) rest.push_back(statement);
    statements(rest, depth + 2);
    out_ << inner_pad << "}\n";
    out_ << pad << "}\n";
  }

  // Work items are (every index before dim rank-2, a tile of the last dim). Each walks dim rank-2 in order with
  // one accumulator per column of its tile; the column loop is contiguous in memory, so it vectorises.
  void column_running_sum_body(const IrStatement& sum) {
    const int64_t tile_width = kernel_.schedule.tile;
    const Shape& domain = kernel_.domain;
    int rank = int(domain.size());
    int64_t along = domain[rank - 2], columns = domain[rank - 1], terms = sum.loops[0].second;
    int64_t tiles = std::max<int64_t>(1, (columns + tile_width - 1) / tile_width);
    std::string step = "i" + std::to_string(rank - 2), column = "i" + std::to_string(rank - 1);
    std::string totals = sum.name + "_columns", type = value_type(sum.dtype);
    out_ << "  for (int64_t item = begin; item < end; ++item) {\n";
    out_ << "    const int64_t tile = item % " << tiles << ";\n";
    row_indices("(item / " + std::to_string(tiles) + ")", rank - 3);
    out_ << "    const int64_t column_begin = tile * " << tile_width << ";\n";
    out_ << "    const int64_t column_end = column_begin + " << tile_width << " < " << columns << " ? column_begin + "
         << tile_width << " : " << columns << ";\n";
    out_ << "    " << type << " " << totals << "[" << std::min(tile_width, columns) << "];\n";
    out_ << "    for (int64_t " << column << " = column_begin; " << column << " < column_end; ++" << column << ") "
         << totals << "[" << column << " - column_begin] = " << identity(sum.reduce_op, sum.dtype) << ";\n";
    out_ << "    for (int64_t " << step << " = 0; " << step << " < " << along << "; ++" << step << ") {\n";
    out_ << "      for (int64_t " << column << " = column_begin; " << column << " < column_end; ++" << column << ") {\n";
    std::string total = totals + "[" + column + " - column_begin]";
    if (terms < along) out_ << "        if (" << step << " < " << terms << ")\n";
    out_ << "        {\n          const int64_t " << sum.loops[0].first << " = " << step << ";\n";
    statements(sum.body, 5);
    out_ << "          " << total << " = " << combine(sum.reduce_op, sum.dtype, total, expression(sum.value)) << ";\n";
    out_ << "        }\n";
    out_ << "        const " << type << " " << sum.name << " = " << total << ";\n";
    statements(std::vector<IrStatement>(kernel_.body.begin() + 1, kernel_.body.end()), 4);
    out_ << "      }\n    }\n  }\n";
  }

  // [begin, end) is a range of rows; each row's sum runs along it once, adding its terms in order.
  void running_sum_body(const IrStatement& sum) {
    const Shape& domain = kernel_.domain;
    int rank = int(domain.size());
    int64_t extent = domain[rank - 1], terms = sum.loops[0].second;
    std::string element = "i" + std::to_string(rank - 1);
    out_ << "  for (int64_t row = begin; row < end; ++row) {\n";
    row_indices();
    // The row's own reductions first (a long cumsum's offset: the scan of the block totals before this block).
    row_level_ = true;
    row_buffers_read_.clear();
    statements(kernel_.row_body, 2);
    row_level_ = false;
    if (terms == extent && vector_running_sum_loop(sum, element, extent)) {
      out_ << "  }\n";
      return;
    }
    out_ << "    " << value_type(sum.dtype) << " " << sum.name << " = " << identity(sum.reduce_op, sum.dtype) << ";\n";
    out_ << "    for (int64_t " << element << " = 0; " << element << " < " << extent << "; ++" << element << ") {\n";
    if (terms < extent) out_ << "      if (" << element << " < " << terms << ")\n";
    out_ << "      {\n        const int64_t " << sum.loops[0].first << " = " << element << ";\n";
    statements(sum.body, 4);
    out_ << "        " << sum.name << " = " << combine(sum.reduce_op, sum.dtype, sum.name, expression(sum.value))
         << ";\n      }\n";
    statements(std::vector<IrStatement>(kernel_.body.begin() + 1, kernel_.body.end()), 3);
    out_ << "    }\n  }\n";
  }

  // A float32 running sum's row as explicit SIMD: each vector of terms (the kept term of the guard, at r = i) is
  // scanned across its lanes (mj_prefix_sum), plus the total of the vectors before it, and the rest of the
  // element body runs on that vector. The chain from one vector to the next is one add and one lane read, not
  // one add per element (a block of cumsum was bound by the add's latency). The sums are the serial ones
  // reassociated within each vector. False (nothing rendered) when a statement has no vector form.
  bool vector_running_sum_loop(const IrStatement& sum, const std::string& element, int64_t extent) {
    if (sum.dtype != DType::Float32) return false;
    bool product = sum.reduce_op == ReduceOp::Multiply;
    IrExprPtr guarded = ir_running_sum_guard(sum, element);
    IrExprPtr condition = ir_let_value(sum, guarded->args[0]);
    IrExprPtr position = ir_loop_variable(element, extent);
    std::vector<IrStatement> vector_body;  // the sum's Lets but the guard's, at r = i; then the term
    for (const IrStatement& let : sum.body) {
      if (let.kind != IrStatement::Kind::Let) return false;
      if (let.value == condition || let.value == guarded) continue;
      vector_body.push_back(ir_substitute_and_fold(let, sum.loops[0].first, position));
    }
    std::string term = sum.name + "_term";
    vector_body.push_back(IrStatement::let(
        term, DType::Float32, ir_fold_by_ranges(ir_substitute(guarded->args[1], sum.loops[0].first, position))));
    // The scanned vector takes the sum's name: the element statements read it there.
    IrStatement scanned = IrStatement::let(sum.name, DType::Float32, ir_variable(term, DType::Float32));
    std::vector<IrStatement> elements(kernel_.body.begin() + 1, kernel_.body.end());
    std::vector<IrStatement> everything = vector_body;
    everything.push_back(scanned);
    everything.insert(everything.end(), elements.begin(), elements.end());
    VectorExpressionRenderer vector(*this, kernel_, element);
    // A term that is the same at every element (a scan of a broadcast scalar) stays a scalar Let: scalar loop.
    if (!vector.accepts(everything, true) || !vector.varies(ir_variable(sum.name, DType::Float32))) return false;
    std::string lanes = element + "_lanes", total = sum.name + "_before";
    vector.limit_lanes(lanes);
    out_ << "    float " << total << " = " << (product ? "1.0f" : "0.0f") << ";\n";
    out_ << "    for (int64_t " << element << " = 0; " << element << " < " << extent << "; " << element
         << " += MJ_LANES) {\n";
    out_ << "      const int64_t " << lanes << " = " << extent << " - " << element << " < MJ_LANES ? " << extent
         << " - " << element << " : MJ_LANES;\n";
    out_ << vector.statements(vector_body, "      ");
    out_ << "      const mj_float_vector " << sum.name << " = " << (product ? "mj_prefix_product(" : "mj_prefix_sum(")
         << term << ") " << (product ? "*" : "+") << " " << total << ";\n";
    out_ << "      " << total << " = " << sum.name << "[" << lanes << " - 1];\n";
    out_ << vector.statements(elements, "      ");
    out_ << "    }\n";
    return true;
  }

  // [begin, end) is a range of tiles: squares of the schedule's tile side over the dims `across` and last, for
  // every index of the other dims; the last dim's tiles vary fastest.
  void transposed_body(int across) {
    const Shape& domain = kernel_.domain;
    int rank = int(domain.size());
    int64_t tile = kernel_.schedule.tile;
    int64_t across_tiles = (domain[across] + tile - 1) / tile, last_tiles = (domain[rank - 1] + tile - 1) / tile;
    std::string last = "i" + std::to_string(rank - 1), over = "i" + std::to_string(across);
    out_ << "  for (int64_t tile = begin; tile < end; ++tile) {\n";
    out_ << "    const int64_t last_tile = tile % " << last_tiles << ";\n";
    out_ << "    const int64_t across_tile = tile / " << last_tiles << " % " << across_tiles << ";\n";
    std::string remaining = "tile / " + std::to_string(last_tiles * across_tiles);
    for (int dim = rank - 2; dim >= 0; --dim) {
      if (dim == across) continue;
      out_ << "    const int64_t i" << dim << " = " << remaining << " % " << domain[dim] << ";\n";
      remaining = "(" + remaining + " / " + std::to_string(domain[dim]) + ")";
    }
    auto bounds = [&](const std::string& variable, const std::string& tile_index, int64_t extent) {
      out_ << "    const int64_t " << variable << "_begin = " << tile_index << " * " << tile << ";\n";
      out_ << "    const int64_t " << variable << "_end = " << variable << "_begin + " << tile << " < " << extent
           << " ? " << variable << "_begin + " << tile << " : " << extent << ";\n";
    };
    bounds(over, "across_tile", domain[across]);
    bounds(last, "last_tile", domain[rank - 1]);
    // Each tile waits about one memory latency for its strided lines (every one on a page of its own); asking
    // for the next tile's lines now overlaps the waits (the 4096^2 transpose kernel on 2 threads: median 10.7-13.2 -> 8.6-10.9 ms).
    // Past the last tile the addresses run off the buffer, which a prefetch never faults on.
    std::set<std::string> prefetched;
    for (const IrExpr* load : transposed_tile_loads(kernel_, tile)) {
      if (!reads_only_domain_indices(load->args[0], rank - 1)) continue;
      IrExprPtr ahead = ir_substitute(load->args[0], last, ir_variable("ahead", DType::Int64));
      std::string address = kernel_.buffers[load->buffer].name + "[" +
                            expression(ir_substitute(ahead, over, ir_variable(over + "_begin", DType::Int64))) + "]";
      if (!prefetched.insert(address).second) continue;
      out_ << "    for (int64_t ahead = " << last << "_end; ahead < " << last << "_end + " << tile << "; ++ahead) "
           << "__builtin_prefetch(&" << address << ");\n";
    }
    full_tile_vectors(across);
    out_ << "    for (int64_t " << over << " = " << over << "_begin; " << over << " < " << over << "_end; ++" << over
         << ") {\n";
    out_ << "      #pragma clang loop unroll(disable) interleave_count(1)\n";
    out_ << "      for (int64_t " << last << " = " << last << "_begin; " << last << " < " << last << "_end; ++" << last
         << ") {\n";
    statements(kernel_.body, 4);
    out_ << "      }\n    }\n  }\n";
  }

  // `expression` with the nodes in `replacements` (by identity) replaced.
  static IrExprPtr replace_nodes(const IrExprPtr& expression, const std::map<const IrExpr*, IrExprPtr>& replacements) {
    auto found = replacements.find(expression.get());
    if (found != replacements.end()) return found->second;
    if (expression->args.empty()) return expression;
    std::vector<IrExprPtr> args;
    for (const IrExprPtr& argument : expression->args) args.push_back(replace_nodes(argument, replacements));
    return ir_with_args(expression, std::move(args));
  }

  // The full tiles of a float32 transposing kernel as vectors along the last dim: each strided load's 16 x 16
  // block is read as 16 contiguous vectors along `across` and transposed in registers (mj_transpose_tile); the
  // body then runs one vector of the last dim at a time, fully unrolled, taking the strided values from the
  // transposed rows. In the scalar tile loop LLVM fetched them with gathers (vgatherqps), one element a lane:
  // NCHW -> NHWC of [32, 64, 56, 56] took 5.4-6.0 ms on 2 threads, 3.6-3.8 ms this way. Tiles cut short by the
  // end of a dim keep the scalar loop. Emits nothing when a strided load or the body does not fit.
  void full_tile_vectors(int across) {
    int rank = int(kernel_.domain.size());
    const int64_t side = kernel_.schedule.tile;
    if (kernel_.domain[across] < side || kernel_.domain[rank - 1] < side) return;  // none full
    std::string last = "i" + std::to_string(rank - 1), over = "i" + std::to_string(across);
    std::map<const IrExpr*, IrExprPtr> replacements;
    std::vector<std::string> transposes;
    for (const IrExpr* load : transposed_tile_loads(kernel_, side)) {
      if (replacements.count(load)) continue;
      const IrExprPtr& offset = load->args[0];
      int64_t along_last = 0, along_over = 0;
      if (kernel_.buffers[load->buffer].dtype != DType::Float32 || load->dtype != DType::Float32 ||
          !reads_only_domain_indices(offset, rank - 1) || !index_coefficient(offset, last, &along_last) ||
          along_last <= 0 || !index_coefficient(offset, over, &along_over) || along_over != 1)
        return;
      std::string tile = "tile_" + std::to_string(replacements.size());
      IrExprPtr corner = ir_substitute(ir_substitute(offset, last, ir_variable(last + "_begin", DType::Int64)), over,
                                       ir_variable(over + "_begin", DType::Int64));
      transposes.push_back("      mj_float_vector " + tile + "[" + std::to_string(side) + " * " + std::to_string(side) +
                           " / MJ_LANES];\n      mj_transpose_tile(&" + kernel_.buffers[load->buffer].name + "[" +
                           expression(corner) + "], " + std::to_string(along_last) + "LL, " + tile + ");\n");
      replacements[load] = ir_variable(
          tile + "[tile_row * (" + std::to_string(side) + " / MJ_LANES) + tile_column / MJ_LANES]", DType::Float32);
    }
    if (replacements.empty()) return;
    std::vector<IrStatement> body = kernel_.body;
    for (IrStatement& statement : body) {
      if (statement.value) statement.value = replace_nodes(statement.value, replacements);
      if (statement.offset) statement.offset = replace_nodes(statement.offset, replacements);
    }
    VectorExpressionRenderer vector(*this, kernel_, last);
    for (const auto& [load, row] : replacements) vector.read_vector(row->name);
    if (!vector.accepts(body, true)) return;
    std::string tile = std::to_string(side);
    out_ << "    if (" << over << "_end - " << over << "_begin == " << tile << " && " << last << "_end - " << last
         << "_begin == " << tile << ") {\n";
    for (const std::string& transpose : transposes) out_ << transpose;
    // Constant tile coordinates once unrolled: the transposed rows stay in registers.
    out_ << "      #pragma unroll\n";
    out_ << "      for (int64_t tile_row = 0; tile_row < " << tile << "; ++tile_row) {\n";
    out_ << "        const int64_t " << over << " = " << over << "_begin + tile_row;\n";
    out_ << "        #pragma unroll\n";
    out_ << "        for (int64_t tile_column = 0; tile_column < " << tile << "; tile_column += MJ_LANES) {\n";
    out_ << "          const int64_t " << last << " = " << last << "_begin + tile_column;\n";
    out_ << vector.statements(body, "          ");
    out_ << "        }\n      }\n      continue;\n    }\n";
  }

  // The element loop once per piece, the element index there being `piece_begin + offset within the piece`:
  // the index ranges then decide every guard and clamp (ir_fold_by_ranges), so out-of-piece reads vanish and
  // the rest are plain loads that vectorise (a cat of three pieces was three clamped, guarded loads per element).
  void piece_loops(const std::vector<IrStatement>& body, const std::string& element, const std::vector<int64_t>& edges,
                   const char* loop_pragma, int depth) {
    std::string pad(depth * 2, ' '), within = piece_offset_variable(element);
    for (size_t piece = 0; piece + 1 < edges.size(); ++piece) {
      std::string low = std::to_string(edges[piece]), high = std::to_string(edges[piece + 1]);
      IrExprPtr index = ir_index(IndexOperator::Add, ir_loop_variable(within, edges[piece + 1] - edges[piece]),
                                 ir_int(edges[piece]));
      std::vector<IrStatement> piece_body;
      for (const IrStatement& statement : body) piece_body.push_back(ir_substitute_and_fold(statement, element, index));
      out_ << pad << "// columns [" << low << ", " << high << ")\n";
      out_ << pad << loop_pragma;
      out_ << pad << "for (int64_t " << element << " = column_begin > " << low << " ? column_begin : " << low << "; "
           << element << " < (column_end < " << high << " ? column_end : " << high << "); ++" << element << ") {\n";
      out_ << pad << "  const int64_t " << within << " = " << element << " - " << low << ";\n";
      statements(piece_body, depth + 1);
      out_ << pad << "}\n";
    }
  }

  // The element loop of a flat pointwise kernel over [column_begin, column_end): once per piece of the row
  // when the schedule cuts it into pieces (`edges`, jit/ir/loop_pieces.h), else once.
  void element_loops(const std::vector<IrStatement>& body, const std::string& element,
                     const std::vector<int64_t>& edges, const char* loop_pragma, int depth) {
    std::string pad(depth * 2, ' ');
    if (!edges.empty()) return piece_loops(body, element, edges, loop_pragma, depth);
    out_ << pad << loop_pragma;
    out_ << pad << "for (int64_t " << element << " = column_begin; " << element << " < column_end; ++" << element
         << ") {\n";
    statements(body, depth + 1);
    out_ << pad << "}\n";
  }

  // Row pieces (jit/ir/loop_pieces.h): each row belongs to one piece of the cut dim and picks that piece's copy
  // of the element loops, where the dim's index is `piece begin + offset` and the index ranges fold the other
  // pieces' reads away. False when the schedule cuts no outer dim.
  bool row_piece_loops(const std::string& element, const char* loop_pragma) {
    const IrSchedule& schedule = kernel_.schedule;
    if (schedule.row_piece_dim < 0) return false;
    const std::vector<int64_t>& edges = schedule.row_pieces;
    std::string variable = "i" + std::to_string(schedule.row_piece_dim), within = piece_offset_variable(variable);
    for (size_t piece = 0; piece + 1 < edges.size(); ++piece) {
      std::string low = std::to_string(edges[piece]), high = std::to_string(edges[piece + 1]);
      IrExprPtr index =
          ir_index(IndexOperator::Add, ir_loop_variable(within, edges[piece + 1] - edges[piece]), ir_int(edges[piece]));
      std::vector<IrStatement> piece_body;
      for (const IrStatement& statement : kernel_.body)
        piece_body.push_back(ir_substitute_and_fold(statement, variable, index));
      out_ << "    " << (piece == 0 ? "if (" : "} else if (") << variable << " < " << high << ") {  // rows [" << low
           << ", " << high << ") of dim " << schedule.row_piece_dim << "\n";
      out_ << "      const int64_t " << within << " = " << variable << " - " << low << ";\n";
      element_loops(piece_body, element, schedule.row_piece_columns[piece], loop_pragma, 3);
    }
    out_ << "    }\n";
    return true;
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
    const IrSchedule& schedule = kernel_.schedule;
    if (schedule.form == IrSchedule::Form::RunningSum) return running_sum_body(kernel_.body[schedule.statement]);
    if (schedule.form == IrSchedule::Form::ColumnRunningSum)
      return column_running_sum_body(kernel_.body[schedule.statement]);
    // Unrolling and interleaving the element loop buy nothing measurable on these memory-bound loops but
    // cost several milliseconds of compile time per kernel.
    const char* loop_pragma = "#pragma clang loop unroll(disable) interleave_count(1)\n";
    const IrStatement* columns =
        schedule.form == IrSchedule::Form::ColumnSum ? &kernel_.body[schedule.statement] : nullptr;
    if (rank == 1) {
      if (columns) return column_sum_loops(*columns, "begin", "end", 1);
      if (kernel_uses_vector_math() && vector_element_loop("i0", "begin", "end", {}, 1)) return;
      out_ << "  " << loop_pragma;
      out_ << "  for (int64_t i0 = begin; i0 < end; ++i0) {\n";
      statements(kernel_.body, 2);
      out_ << "  }\n";
      return;
    }
    int64_t last = domain[rank - 1];
    if (schedule.form == IrSchedule::Form::TransposedTiles) return transposed_body(schedule.across);
    if (!kernel_.row_body.empty()) {
      // [begin, end) is a range of whole rows: the row's reductions run once, then its elements.
      out_ << "  for (int64_t row = begin; row < end; ++row) {\n";
      row_indices();
      row_level_ = true;
      row_buffers_read_.clear();
      statements(kernel_.row_body, 2);
      row_level_ = false;
      std::string element = "i" + std::to_string(rank - 1);
      std::set<std::string> stashes;
      for (const IrStatement& statement : kernel_.row_body)
        if (!statement.spill.empty()) stashes.insert(statement.spill);
      if (!vector_element_loop(element, "0", std::to_string(last), stashes, 2)) {
        out_ << "    " << loop_pragma;
        out_ << "    for (int64_t " << element << " = 0; " << element << " < " << last << "; ++" << element << ") {\n";
        statements(kernel_.body, 3);
        out_ << "    }\n";
      }
      out_ << "  }\n";
      return;
    }
    // Rows shorter than a vector step their indices from one row to the next like an odometer: dividing the flat
    // index again for every row cost more than the row's elements (max-pool's tie mask, rows of 2 elements:
    // 16.7 ms for [32, 64, 28, 28, 2, 2]).
    bool stepped = !columns && rank > 1 && last < kVectorLanesAtMost;
    if (stepped) {
      out_ << "  const int64_t first_row = begin / " << last << ";\n";
      out_ << "  int64_t column_begin = begin - first_row * " << last << ";\n";
      row_indices("first_row", rank - 2, "  ", "int64_t ", "first_row_");  // stepped below
    }
    out_ << "  for (int64_t flat = begin; flat < end;) {\n";
    if (!stepped) {
      out_ << "    const int64_t row = flat / " << last << ";\n";
      out_ << "    const int64_t column_begin = flat - row * " << last << ";\n";
    }
    out_ << "    const int64_t column_end = (end - flat) < (" << last << " - column_begin) ? column_begin + (end - flat) : "
         << last << ";\n";
    if (!stepped) row_indices();
    std::string element = "i" + std::to_string(rank - 1);
    if (columns) {
      column_sum_loops(*columns, "column_begin", "column_end", 2);
    } else if (!kernel_uses_vector_math() || !vector_element_loop(element, "column_begin", "column_end", {}, 2)) {
      if (!row_piece_loops(element, loop_pragma))
        element_loops(kernel_.body, element, kernel_.schedule.column_pieces, loop_pragma, 2);
    }
    out_ << "    flat += column_end - column_begin;\n";
    if (stepped) {
      out_ << "    column_begin = 0;\n";
      step_row_indices(rank - 2, 2);
    }
    out_ << "  }\n";
  }

  // The next row: i`dim` + 1, carrying into the dims before it when it reaches its extent (i0 never wraps).
  void step_row_indices(int dim, int depth) {
    std::string pad(depth * 2, ' '), index = "i" + std::to_string(dim);
    if (dim == 0) {
      out_ << pad << "++i0;\n";
      return;
    }
    out_ << pad << "if (++" << index << " == " << kernel_.domain[dim] << ") {\n";
    out_ << pad << "  " << index << " = 0;\n";
    step_row_indices(dim - 1, depth + 1);
    out_ << pad << "}\n";
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
    const IrStatement* scan = kernel_.schedule.form == IrSchedule::Form::ReverseRunningSum
                                  ? &kernel_.body[kernel_.schedule.statement]
                                  : nullptr;
    size_t looped = scan ? domain.size() - 2 : domain.size();  // a reverse running sum walks its last two itself
    int depth = 1;
    for (size_t dim = 0; dim < looped; ++dim) {
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
    if (scan)
      reverse_running_sum_loop(*scan, depth);
    else
      statements(kernel_.body, depth);
    for (size_t dim = 0; dim < looped; ++dim) {
      --depth;
      out_ << std::string(depth * 2, ' ') << "}\n";
    }
  }

  // The gradient of a running sum, as a scatter (jit/ir/running_sums.h): walking i of the next-to-last dim
  // downwards, one accumulator gives each target r <= i its sum.
  void reverse_running_sum_loop(const IrStatement& scatter, int depth) {
    const Shape& domain = kernel_.domain;
    int rank = int(domain.size());
    std::string pad(depth * 2, ' '), inner((depth + 1) * 2, ' ');
    std::string target_index = "i" + std::to_string(rank - 1), source_index = "i" + std::to_string(rank - 2);
    std::string total = "running_total";
    out_ << pad << value_type(scatter.dtype) << " " << total << " = " << identity(ReduceOp::Add, scatter.dtype) << ";\n";
    out_ << pad << "for (int64_t " << source_index << " = " << domain[rank - 2] - 1 << "; " << source_index
         << " >= 0; --" << source_index << ") {\n";
    out_ << inner << "const int64_t " << target_index << " = " << source_index << ";\n";
    statements(std::vector<IrStatement>(kernel_.body.begin(), kernel_.body.end() - 1), depth + 1);
    out_ << inner << total << " = " << combine(ReduceOp::Add, scatter.dtype, total, expression(scatter.value))
         << ";\n";
    const IrBuffer& buffer = kernel_.buffers[scatter.buffer];
    std::string target = buffer.name + "[" + expression(scatter.offset) + "]";
    std::string current = buffer.dtype == DType::Float16 ? "mj_half_to_float(" + target + ")" : target;
    std::string updated = combine(ReduceOp::Add, scatter.dtype, current, total);
    if (buffer.dtype == DType::Float16) updated = "mj_float_to_half(" + updated + ")";
    std::string write = target + " = " + updated + ";\n";
    if (domain[rank - 1] < domain[rank - 2])
      out_ << inner << "if (" << target_index << " < " << domain[rank - 1] << ") " << write;
    else
      out_ << inner << write;
    out_ << pad << "}\n";
  }

  RenderedKernel render() {
    RenderedKernel rendered;
    std::ostringstream header;
    header << "// metajit kernel: " << (kernel_.kind == IrKernel::Kind::Pointwise ? "pointwise" : "scatter")
           << " over " << shape_to_string(kernel_.domain) << "\n// fused ops (op, shape, created at):\n";
    for (const std::string& line : kernel_.fused_ops) header << "//   " << line << "\n";
    rendered.header_comment = header.str();
    out_ << "\nstatic __attribute__((noinline)) void kernel_body(\n" << parameters() << ") {\n";
    if (kernel_.schedule.work_items < 0)
      throw std::logic_error("render_cpp: the kernel has not been through the C++ scheduling passes");
    if (kernel_.kind == IrKernel::Kind::Pointwise)
      pointwise_body();
    else
      scatter_body();
    rendered.work_items = kernel_.schedule.work_items;
    rendered.grain = kernel_.schedule.grain;
    out_ << "}\n\nextern \"C\" void " << kKernelSymbol << "(void* const* buffers, int64_t begin, int64_t end) {\n"
         << "  kernel_body(" << arguments() << ");\n}\n";
    std::string body = out_.str();
    rendered.source = cpp_prelude_for(body) + body;
    return rendered;
  }

 private:
  std::ostringstream out_;
  bool row_level_ = false;      // rendering a row kernel's row_body
  std::set<int> stash_hosts_;   // output buffers holding a row's terms (stash_declaration)
  std::set<int> row_buffers_read_;  // buffers the row's vector reductions have read so far (row_prefetches)
};

}  // namespace

RenderedKernel render_cpp(const IrKernel& kernel) { return Renderer(kernel).render(); }

}  // namespace metajit
