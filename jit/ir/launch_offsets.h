// Position-independent kernels: a constant element offset that every read of an input buffer adds (a slice
// x[t] of a sequence, a window of a larger tensor) moves out of the kernel's source into its launch, which
// passes the buffer's pointer that many elements on. The kernels of x[0], x[1], ... then have one source, one
// cache key and one compile: an LSTM's forward pass over 64 steps compiled 69 kernels before, one per step for
// the step's slice of the input projection; now 7.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "jit/ir/kernel_ir.h"

namespace metajit {

// Rewrites every Load of an input buffer of `kernel` whose reads all add at least a constant k > 0 to read at
// its offset minus k, and returns k per buffer (indexed like kernel.buffers; empty when nothing moved). Outputs
// are never moved. The launcher must add the returned offsets to the buffers' start addresses.
std::vector<int64_t> move_constant_offsets_to_launch(IrKernel& kernel);

// Comment lines for a kernel's header naming the moved offsets ("" when none): the source alone reads x[t] as
// if it were x[0].
std::string describe_launch_offsets(const IrKernel& kernel, const std::vector<int64_t>& offsets);

}  // namespace metajit
