// METAJIT_CHECK_NAN=1 / mj.flags.check_nan: after every kernel, library call and Code op, the run loop scans its
// floating outputs; a NaN or infinity raises NonFiniteError naming the op, its user line and the ops fused into
// it. Only reads values: it must not change what runs or what is computed.
#pragma once
#include <stdexcept>
#include <vector>

#include "core/node.h"
#include "jit/plan/plan.h"
#include "jit/run/run_values.h"

namespace metajit {

struct NonFiniteError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
void set_check_non_finite(bool enabled);
bool check_non_finite();

// Raises when `output`'s value (in `values`) holds a NaN or infinity, naming the first of `inputs` that already
// held one, if any (then the first place it appeared was a value the kernel was given).
void check_kernel_output(const PlannedKernel& kernel, const Node& output, const std::vector<NodePtr>& inputs,
                         const RunValues& values);

}  // namespace metajit
