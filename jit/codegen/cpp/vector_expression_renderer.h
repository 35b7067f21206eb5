// Expressions of one loop as explicit SIMD: every value that changes with the loop variable becomes an
// mj_float_vector (MJ_LANES consecutive iterations at once, see the C++ prelude) or an mj_mask_vector for
// comparisons, and the index values leading to them int64 (or float64) lanes; everything else stays scalar text
// from the scalar renderer, splatted where it meets a vector.
// The loop's accesses must be unit-stride in the loop variable. Used by the C++ renderer for the row loops of
// row kernels, where LLVM's own vectoriser leaves exp (it cannot use vscalefps) and float max (not without
// no-NaNs flags) several times slower than they need to be.
#pragma once
#include <set>
#include <string>
#include <vector>

#include "jit/codegen/common/expression_renderer.h"

namespace metajit {

class VectorExpressionRenderer {
 public:
  // `scalar` renders the invariant parts; `stashes` are row-sized arrays read back at the loop variable
  // ("sum_2_terms" is read as the Variable "sum_2_terms[i1]").
  VectorExpressionRenderer(ExpressionRenderer& scalar, const IrKernel& kernel, std::string loop_variable,
                           std::set<std::string> stashes = {});

  // Whether these statements (Lets, and Stores when `allow_stores`) and then `value` (may be null) can all be
  // rendered per vector. Records which Lets become vectors, so call it once before rendering.
  bool accepts(const std::vector<IrStatement>& statements, bool allow_stores, const IrExprPtr& value = nullptr);
  // Whether `node` changes with the loop variable (and so renders as a vector).
  bool varies(const IrExprPtr& node) const;
  // A vector expression for a varying node, scalar text otherwise.
  std::string expression(const IrExprPtr& node);
  // Vector text whatever the node: scalars are splatted.
  std::string vector_expression(const IrExprPtr& node);
  // The statements, vector Lets as vectors and Stores as vector stores; `pad` indents each line.
  std::string statements(const std::vector<IrStatement>& statements, const std::string& pad);

  // A Variable with exactly this name is a whole vector already in hand (a row of a transposed tile), used as is.
  void read_vector(std::string name) { vector_reads_.insert(std::move(name)); }

  // From now on loads and stores touch only the first `lanes` lanes (an expression of at most MJ_LANES, rendered
  // into the loop): the loop's last, partial vector runs the same body as the full ones.
  void limit_lanes(std::string lanes) { lanes_ = std::move(lanes); }

  // The vector type of a value of `dtype`: mj_float_vector, mj_mask_vector for Bool, mj_long_vector for Int64
  // (index values), mj_double_vector for Float64 (an arange computes in double before rounding to float).
  static const char* vector_type(DType dtype);
  // Whether `offset` is the loop variable plus terms that do not mention it.
  static bool unit_stride(const IrExprPtr& offset, const std::string& variable);

 private:
  bool accepts_value(const IrExprPtr& node) const;
  static bool has_lanes(DType dtype);  // whether vector_type has lanes of it
  static std::string mask_of(const std::string& comparison, DType operands);
  static std::string extremum(const std::string& left, const std::string& right, bool maximum);
  bool is_stash_read(const IrExprPtr& node) const;
  std::string load(const std::string& address) const;  // a vector load, of lanes_ lanes when set

  ExpressionRenderer& scalar_;
  const IrKernel& kernel_;
  std::string loop_variable_;
  std::set<std::string> stash_reads_;   // "sum_2_terms[i1]"
  std::set<std::string> vector_lets_;
  std::set<std::string> vector_reads_;
  std::string lanes_;  // empty: whole vectors
};

}  // namespace metajit
