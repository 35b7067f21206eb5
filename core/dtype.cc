// Type tables and the PyTorch-style promotion lattice.
#include "core/dtype.h"

#include <stdexcept>

namespace metajit {

int dtype_size(DType dtype) {
  switch (dtype) {
    case DType::Bool: case DType::Int8: case DType::UInt8: return 1;
    case DType::Float16: return 2;
    case DType::Int32: case DType::Float32: return 4;
    case DType::Int64: case DType::Float64: return 8;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Bool: return "bool";
    case DType::Int8: return "int8";
    case DType::UInt8: return "uint8";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Float16: return "float16";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
  }
  return "?";
}

const char* dtype_c_type(DType dtype) {
  switch (dtype) {
    case DType::Bool: return "bool";
    case DType::Int8: return "int8_t";
    case DType::UInt8: return "uint8_t";
    case DType::Int32: return "int32_t";
    case DType::Int64: return "int64_t";
    case DType::Float16: return "uint16_t";
    case DType::Float32: return "float";
    case DType::Float64: return "double";
  }
  return "?";
}

DType dtype_from_name(const std::string& name) {
  for (int index = 0; index < kDTypeCount; ++index) {
    auto dtype = static_cast<DType>(index);
    if (name == dtype_name(dtype)) return dtype;
  }
  if (name == "float" || name == "float_") return DType::Float32;
  if (name == "double") return DType::Float64;
  if (name == "half") return DType::Float16;
  if (name == "int" || name == "long") return DType::Int64;
  if (name == "bool_") return DType::Bool;
  throw std::invalid_argument("unknown dtype '" + name +
                              "' (expected bool, int8, uint8, int32, int64, float16, float32 or float64)");
}

bool is_floating(DType dtype) {
  return dtype == DType::Float16 || dtype == DType::Float32 || dtype == DType::Float64;
}

bool is_integral(DType dtype) {
  return dtype == DType::Int8 || dtype == DType::UInt8 || dtype == DType::Int32 || dtype == DType::Int64;
}

DType compute_dtype(DType dtype) { return dtype == DType::Float16 ? DType::Float32 : dtype; }

namespace {

int category(DType dtype) { return dtype == DType::Bool ? 0 : is_floating(dtype) ? 2 : 1; }

}  // namespace

DType promote_types(DType left, DType right) {
  if (left == right) return left;
  int left_category = category(left), right_category = category(right);
  if (left_category != right_category) return left_category > right_category ? left : right;
  if (left_category == 2) return dtype_size(left) >= dtype_size(right) ? left : right;
  // Integers: uint8 mixed with a signed type needs the next signed width (uint8+int8 -> int16 in numpy; we have
  // no int16, so int32, as documented).
  bool left_unsigned = left == DType::UInt8, right_unsigned = right == DType::UInt8;
  if (left_unsigned != right_unsigned) {
    DType signed_type = left_unsigned ? right : left;
    return signed_type == DType::Int8 ? DType::Int32 : signed_type;
  }
  return dtype_size(left) >= dtype_size(right) ? left : right;
}

DType promote_types(DType left, OperandKind left_kind, DType right, OperandKind right_kind) {
  if (left_kind == right_kind) return promote_types(left, right);
  DType tensor = left_kind == OperandKind::Tensor ? left : right;
  DType scalar = left_kind == OperandKind::Tensor ? right : left;
  if (category(scalar) <= category(tensor)) return tensor;
  // A float scalar on an integer/bool tensor gives the default float; an int scalar on a bool tensor gives int64.
  return category(scalar) == 2 ? DType::Float32 : DType::Int64;
}

}  // namespace metajit
