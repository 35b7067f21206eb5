// Host CPU queries, computed once and cached. Must not start a JIT or compile anything.
#include "jit/toolchain/target_info.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>

#include <algorithm>
#include <mutex>
#include <vector>

namespace metajit {

std::string host_cpu_name() {
  static const std::string name = [] {
    std::string detected = llvm::sys::getHostCPUName().str();
    // LLVM 14 calls CPUs newer than itself "generic" (AMD Zen 5, family 0x1a), a name its own x86 front end
    // refuses. The baseline x86-64 with the host's feature list (host_cpu_features) builds the same ISA.
    if (detected == "generic" && host_triple().rfind("x86_64", 0) == 0) return std::string("x86-64");
    return detected;
  }();
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

std::string host_cpu_feature_differences() {
  static const std::string differences = [] {
    initialize_native_target();
    std::string error;
    const llvm::Target* target = llvm::TargetRegistry::lookupTarget(host_triple(), error);
    std::unique_ptr<llvm::MCSubtargetInfo> cpu_alone(
        target ? target->createMCSubtargetInfo(host_triple(), host_cpu_name(), "") : nullptr);
    if (!cpu_alone) return host_cpu_features();
    // The backend's own view of the CPU, not a separate table that might disagree with it.
    std::string joined;
    std::string features = host_cpu_features();
    for (size_t start = 0; start < features.size();) {
      size_t comma = std::min(features.find(',', start), features.size());
      std::string entry = features.substr(start, comma - start);
      start = comma + 1;
      bool implied = cpu_alone->checkFeatures("+" + entry.substr(1));
      if ((entry[0] == '+') != implied) joined += (joined.empty() ? "" : ",") + entry;
    }
    return joined;
  }();
  return differences;
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
