// Element types of metajit tensors and the one type-promotion rule set (PyTorch's, see docs/type_promotion.md).
// Knows nothing about graphs or kernels: just names, sizes and promotion.
#pragma once
#include <cstdint>
#include <string>

namespace metajit {

enum class DType : uint8_t { Bool, Int8, UInt8, Int32, Int64, Float16, Float32, Float64 };

constexpr int kDTypeCount = 8;

int dtype_size(DType dtype);
const char* dtype_name(DType dtype);          // "float32", ... (numpy spelling)
const char* dtype_c_type(DType dtype);        // storage type in generated C++ ("float", "uint16_t" for float16)
DType dtype_from_name(const std::string& name);  // throws std::invalid_argument naming the bad dtype
bool is_floating(DType dtype);
bool is_integral(DType dtype);                // integer types, not bool
// Type in which arithmetic on this dtype happens in a kernel (float16 computes in float32).
DType compute_dtype(DType dtype);

// Promotion category of an operand: a tensor, or a Python scalar that only decides the category (PyTorch rule).
enum class OperandKind : uint8_t { Tensor, Scalar };
// Result dtype of a binary arithmetic op on two operands, PyTorch style:
// bool < integer < floating categories; a scalar only lifts the category, never the width within it.
DType promote_types(DType left, OperandKind left_kind, DType right, OperandKind right_kind);
// Plain promotion of two tensor dtypes.
DType promote_types(DType left, DType right);

}  // namespace metajit
