// Host CPU queries, computed once and cached. Must not start a JIT or compile anything.
#include "jit/target_info.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/TargetSelect.h>

#include <algorithm>
#include <mutex>
#include <vector>

namespace metajit {

std::string host_cpu_name() {
  static const std::string name = llvm::sys::getHostCPUName().str();
  return name;
}

std::string host_cpu_features() {
  static const std::string features = [] {
    llvm::StringMap<bool> feature_map;
    std::vector<std::string> entries;
    if (llvm::sys::getHostCPUFeatures(feature_map)) {
      for (const auto& feature : feature_map)
        entries.push_back((feature.getValue() ? "+" : "-") + feature.getKey().str());
    }
    // Sort by feature name (not by the +/- sign) so the string is stable and readable.
    std::sort(entries.begin(), entries.end(),
              [](const std::string& left, const std::string& right) { return left.substr(1) < right.substr(1); });
    std::string joined;
    for (const std::string& entry : entries) joined += (joined.empty() ? "" : ",") + entry;
    return joined;
  }();
  return features;
}

std::string host_triple() {
  static const std::string triple = llvm::sys::getProcessTriple();
  return triple;
}

void initialize_native_target() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
  });
}

}  // namespace metajit
