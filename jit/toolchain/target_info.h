// The host CPU as LLVM resolves it, for compiler flags and cache keys. Never report the word "native":
// cache keys must name the concrete CPU and feature set so a cache copied to another machine misses safely.
#pragma once
#include <string>

namespace metajit {

std::string host_cpu_name();      // llvm::sys::getHostCPUName(), e.g. "icelake-client"
std::string host_cpu_features();  // sorted "+feature,-feature,..." from llvm::sys::getHostCPUFeatures()
// The entries of host_cpu_features() that host_cpu_name() does not already imply (a VM may hide some, e.g.
// "-pku"): with the CPU name they give the same feature set, and LLVM parses a short list at every compile
// rather than about 90 entries (a tenth of a small kernel's compile). x86 only; elsewhere all of them.
std::string host_cpu_feature_differences();
std::string host_triple();        // llvm::sys::getProcessTriple(), e.g. "x86_64-pc-linux-gnu"

// Registers the native LLVM target, asm printer and asm parser exactly once per process (thread-safe).
void initialize_native_target();

}  // namespace metajit
