// Renders a Code op (meta_ops/code.h) into a complete C++ kernel: the user's header and source wrapped with
// the names users of Jittor's Code op know (in0_p, in0_shape0, in0_stride0, in0_type, out0_p, ...), a typed
// accessor per buffer (in0(i, j), in0.shape[0]) and data["name"] for scalar constants. `#line` directives
// make the compiler report errors at lines of the user's own strings ("cpu_src:3:5: error: ...").
//
// Launch contract: buffers = [outputs..., inputs..., data], where data holds the data values followed by one
// error slot (zeroed) into which the kernel copies the `const char*` of a data name that was not given. Runs once, on the
// calling thread, with begin = 0 and end = 1.
#pragma once
#include <string>
#include <vector>

#include "core/node.h"
#include "jit/codegen/cpp/cpp_renderer.h"
#include "jit/codegen/cuda/cuda_renderer.h"
#include "meta_ops/code.h"

namespace metajit {

RenderedKernel render_code_kernel(const CodeOp& op, const std::vector<NodePtr>& inputs);

// The op's cuda_src as a CUDA kernel with the same names, one parameter per buffer (outputs, inputs, then the
// data values followed by an error slot that an unknown data["name"] sets to 1). Every thread runs the source
// with `thread_index` and `thread_count` to stride over the work; the launch covers out0 with one thread per
// element. Throws std::invalid_argument when the op has no cuda_src.
RenderedCudaKernel render_code_cuda_kernel(const CodeOp& op, const std::vector<NodePtr>& inputs);

// A compiler message about a Code op, for the user: the op and the Python line that created it, the
// compiler's diagnostics, and the user's source with line numbers.
std::string describe_code_compile_error(const CodeOp& op, const std::string& diagnostics, bool cuda = false);

// `text` with "N: " before each line, for showing source next to compiler messages.
std::string numbered_lines(const std::string& text);

}  // namespace metajit
