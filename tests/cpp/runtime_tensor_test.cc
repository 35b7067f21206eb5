// Tests for the C++ runtime's public Tensor (runtime/include/metajit/runtime.h): zero-filled or copied memory,
// 64-byte aligned, typed access checked against the dtype, and refusals for what cannot be a tensor.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "metajit/runtime.h"

namespace metajit {
namespace {

TEST(RuntimeTensorTest, NewTensorsAreZeroFilledAndAligned) {
  Tensor tensor(DataType::Float32, {3, 5});
  EXPECT_EQ(tensor.numel(), 15);
  EXPECT_EQ(tensor.bytes(), 60u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(tensor.data()) % 64, 0u);
  for (int64_t index = 0; index < tensor.numel(); ++index) EXPECT_EQ(tensor.data_as<float>()[index], 0.0f);
}

TEST(RuntimeTensorTest, CopiesTheGivenElementsAndSharesMemoryBetweenCopies) {
  std::vector<int64_t> values{4, -2, 7, 9};
  Tensor tensor(DataType::Int64, {2, 2}, values.data());
  values[0] = 100;  // the tensor holds its own copy
  EXPECT_EQ(tensor.data_as<int64_t>()[0], 4);
  EXPECT_EQ(tensor.data_as<int64_t>()[3], 9);
  Tensor shared = tensor;  // copies of a Tensor share its memory
  shared.data_as<int64_t>()[1] = 5;
  EXPECT_EQ(tensor.data_as<int64_t>()[1], 5);
}

TEST(RuntimeTensorTest, RefusesWrongElementTypesNegativeExtentsAndMissingData) {
  Tensor tensor(DataType::Float64, {2});
  EXPECT_THROW(tensor.data_as<float>(), std::invalid_argument);
  EXPECT_NO_THROW(tensor.data_as<double>());
  EXPECT_THROW(Tensor(DataType::Float32, {2, -1}), std::invalid_argument);
  EXPECT_THROW(Tensor(DataType::Float32, {2}, nullptr), std::invalid_argument);
  EXPECT_STREQ(data_type_name(DataType::Bool), "bool");
  EXPECT_EQ(data_type_size(DataType::Float16), 2u);
}

}  // namespace
}  // namespace metajit
