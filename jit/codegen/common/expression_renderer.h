// IR expressions -> C-family text, shared by the C++ and CUDA renderers. The two dialects differ only in how a
// few math functions and special float values are spelled (Clang builtins for the in-process C++ compiler,
// CUDA's device math library for NVRTC); every other helper (mj_exp, mj_floor_divide, mj_max, float16
// conversion) is defined under the same name by each dialect's prelude, so one expression renders one way.
#pragma once
#include <string>

#include "jit/ir/kernel_ir.h"

namespace metajit {

enum class SourceDialect : uint8_t { Cpp, Cuda };

class ExpressionRenderer {
 public:
  ExpressionRenderer(const IrKernel& kernel, SourceDialect dialect) : kernel_(kernel), dialect_(dialect) {}
  virtual ~ExpressionRenderer() = default;

  std::string expression(const IrExprPtr& node);
  // "const T name = value;" for a Let and "buffer[offset] = value;" for a Store (float16 stored converted),
  // without indentation: the statement lines both renderers share.
  std::string let_line(const IrStatement& statement);
  std::string store_line(const IrStatement& statement);
  // The reduction's starting value and one combining step, as expressions of `dtype`'s value type.
  std::string identity(ReduceOp op, DType dtype);
  std::string combine(ReduceOp op, DType dtype, const std::string& accumulator, const std::string& value);
  // NaN and infinity of a float type (Float32/Float16 computed as float, Float64 as double).
  std::string not_a_number(DType dtype);
  std::string infinity(DType dtype);

  // The C type values of `dtype` are computed in (float16 computes in float).
  static const char* value_type(DType dtype);
  // "<", "<=", ">", ">=", "==" or "!=" for a comparison; null for any other op.
  static const char* comparison_symbol(BinaryOp op);
  static const char* comparison_symbol(IndexOperator op);

 protected:
  // A Variable's text; the CUDA renderer maps a row's spilled terms to its per-thread slots and renames an
  // unrolled copy's variables.
  virtual std::string variable(const IrExprPtr& node) { return node->name; }
  // The name a Let defines (the CUDA renderer's unrolled copies each define their own).
  virtual std::string defined_name(const std::string& name) { return name; }

  const IrKernel& kernel_;
  SourceDialect dialect_;

 private:
  std::string float_literal(double value, DType dtype);
  // A libm-style function that Clang has as a builtin: "__builtin_floorf(x)" in C++, "floorf(x)" in CUDA.
  std::string builtin(const char* name, bool single, const std::string& argument);
  std::string cast(DType target, const IrExprPtr& operand);
  std::string unary(UnaryOp op, DType dtype, const IrExprPtr& operand);
  std::string binary(BinaryOp op, DType dtype, const IrExprPtr& left, const IrExprPtr& right);
  std::string index_binary(const IrExprPtr& node);
};

std::string integer_literal(int64_t value);

}  // namespace metajit
