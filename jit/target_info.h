// The host CPU as LLVM resolves it, for compiler flags and cache keys. Never report the word "native":
// cache keys must name the concrete CPU and feature set so a cache copied to another machine misses safely.
#pragma once
#include <string>

namespace metajit {

std::string host_cpu_name();      // llvm::sys::getHostCPUName(), e.g. "icelake-client"
std::string host_cpu_features();  // sorted "+feature,-feature,..." from llvm::sys::getHostCPUFeatures()
std::string host_triple();        // llvm::sys::getProcessTriple(), e.g. "x86_64-pc-linux-gnu"

// Registers the native LLVM target, asm printer and asm parser exactly once per process (thread-safe).
void initialize_native_target();

}  // namespace metajit
