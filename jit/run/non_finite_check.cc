#include "jit/run/non_finite_check.h"

#include <atomic>
#include <cmath>
#include <string>

#include "core/flags.h"

namespace metajit {
namespace {

std::atomic<bool> check_non_finite_{flag_boolean(Flag::CheckNan)};

// Index of the first NaN or infinity in a buffer of `dtype`, or -1 (also for non-floating dtypes).
int64_t first_non_finite(const void* data, DType dtype, int64_t count) {
  if (dtype == DType::Float32) {
    const float* values = static_cast<const float*>(data);
    for (int64_t index = 0; index < count; ++index)
      if (!std::isfinite(values[index])) return index;
  } else if (dtype == DType::Float64) {
    const double* values = static_cast<const double*>(data);
    for (int64_t index = 0; index < count; ++index)
      if (!std::isfinite(values[index])) return index;
  } else if (dtype == DType::Float16) {
    const uint16_t* values = static_cast<const uint16_t*>(data);
    for (int64_t index = 0; index < count; ++index)
      if ((values[index] & 0x7c00) == 0x7c00) return index;  // exponent all ones: inf or NaN
  }
  return -1;
}

std::string describe_value(const void* data, DType dtype, int64_t index) {
  double value = dtype == DType::Float32   ? static_cast<const float*>(data)[index]
                 : dtype == DType::Float64 ? static_cast<const double*>(data)[index]
                                           : ((static_cast<const uint16_t*>(data)[index] & 0x3ff) ? NAN : INFINITY);
  if (std::isnan(value)) return "NaN";
  if (dtype == DType::Float16) return "an infinity";
  return value > 0 ? "+inf" : "-inf";
}

}  // namespace

void set_check_non_finite(bool enabled) { check_non_finite_ = enabled; }
bool check_non_finite() { return check_non_finite_; }

void check_kernel_output(const PlannedKernel& kernel, const Node& output, const std::vector<NodePtr>& inputs,
                         const RunValues& values) {
  const StoragePtr& storage = values.value(output);
  if (!is_floating(output.dtype) || !storage) return;
  int64_t index = first_non_finite(storage->data(), output.dtype, output.numel());
  if (index < 0) return;
  std::string message = "METAJIT_CHECK_NAN: " + output.op_name() + " " + shape_to_string(output.shape) +
                        " created at " + output.provenance.to_string() + " produced " +
                        describe_value(storage->data(), output.dtype, index) + " at flat index " +
                        std::to_string(index);
  for (size_t position = 0; position < inputs.size(); ++position) {
    const Node& input = *inputs[position];
    const StoragePtr& input_storage = values.value(input);
    if (!is_floating(input.dtype) || !input_storage) continue;
    int64_t bad = first_non_finite(input_storage->data(), input.dtype, input.numel());
    if (bad >= 0) {
      message += "; its input " + input.op_name() + " " + shape_to_string(input.shape) + " (created at " +
                 input.provenance.to_string() + ") already held " +
                 describe_value(input_storage->data(), input.dtype, bad) + " at flat index " + std::to_string(bad);
      break;
    }
  }
  if (kernel.library) message += "\nlibrary call: " + kernel.library->describe();
  if (!kernel.lowered.kernel.fused_ops.empty()) {
    message += "\nops computed in this kernel (op, shape, created at):";
    for (const std::string& op : kernel.lowered.kernel.fused_ops) message += "\n  " + op;
  }
  throw NonFiniteError(message);
}

}  // namespace metajit
