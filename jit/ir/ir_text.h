// The kernel IR as readable text: buffers, the iteration domain, the scheduling decisions taken so far, and the
// statements (lets, reduction loops, stores, scatter-accumulates) with their expressions written out. For people
// (METAJIT_LOG=ir, mj.inspect(...)[i].ir) and tests; the text is stable for a given IR, but it is never parsed
// back and never enters a cache key (the rendered source is what is keyed).
#pragma once
#include <string>

#include "jit/ir/kernel_ir.h"

namespace metajit {

// The whole kernel, one statement a line, nested statements indented by two spaces.
std::string ir_text(const IrKernel& kernel);
// One expression; loads name the buffer by its name in `kernel` when given, else "buffer<n>". An expression
// larger than a few thousand nodes when written out (a shared subexpression counts once per use) is summarised.
std::string ir_text(const IrExprPtr& expression, const IrKernel* kernel = nullptr);

}  // namespace metajit
