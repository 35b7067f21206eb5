#include "jit/codegen/common/kernel_symbol.h"

namespace metajit {

const char* const kKernelSymbol = "metajit_kernel";

}  // namespace metajit
