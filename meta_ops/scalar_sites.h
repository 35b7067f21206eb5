// Python numbers that change from call to call at one place in a program (a learning rate set by hand each
// epoch, a warm-up factor, a loop counter): the first value a place passes is compiled into the kernel as a
// constant; once the place has passed a different value, its numbers enter kernels as 0-d input buffers, so a
// per-step schedule compiles its kernels once more and then never again (torch.compile's "automatic dynamic"
// rule). A place is an opaque site key the caller computes (the binding uses the Python frame's code object and
// instruction offset). This file decides and builds the operand; it must not know about Python.
#pragma once
#include <cstdint>
#include <string>

#include "core/node.h"

namespace metajit {

// Records that the scalar operand of `op_code` at `site` (0: unknown, never dynamic) held `value` (its bits; an
// integer's or a double's) and returns whether this site has held another value before. `describe` names the
// operation for the log line written when a site turns dynamic.
bool scalar_site_is_dynamic(uint64_t site, int op_code, uint64_t value_bits, const char* describe);

// A 0-d input holding `value` as `dtype`, broadcast to `shape`: the operand that replaces a constant at a
// dynamic site. `integer` selects which of the two values is meant. mj.stats()["dynamic_scalar_sites"]
// counts the sites that turned dynamic.
NodePtr scalar_argument(const Shape& shape, DType dtype, double value, int64_t integer_value, bool integer);

}  // namespace metajit
