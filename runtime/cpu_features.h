// Whether this machine's CPU can run kernels compiled for another's: an artifact records the CPU and the LLVM
// feature list its kernels were compiled for, and a kernel using an instruction set this CPU lacks would die of
// SIGILL mid-run. This file only compares feature lists; it must not load or run anything.
#pragma once
#include <string>
#include <vector>

namespace metajit {

// The features of `llvm_features` ("+avx2,-avx512f,+fma,...") that are enabled there and that this CPU reports
// absent. Only the instruction-set extensions the runtime can test (the vector and bit-manipulation ones compiled
// kernels use) are compared; others are taken as present.
std::vector<std::string> missing_cpu_features(const std::string& llvm_features);

}  // namespace metajit
