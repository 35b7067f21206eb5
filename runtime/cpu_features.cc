#include "runtime/cpu_features.h"

#include <sstream>

namespace metajit {
namespace {

// __builtin_cpu_supports takes only a literal, hence one line per feature (LLVM and GCC spell these alike).
bool has_feature(const std::string& name, bool* known) {
  *known = true;
#define METAJIT_FEATURE(feature) \
  if (name == feature) return __builtin_cpu_supports(feature);
  METAJIT_FEATURE("sse3")
  METAJIT_FEATURE("ssse3")
  METAJIT_FEATURE("sse4.1")
  METAJIT_FEATURE("sse4.2")
  METAJIT_FEATURE("popcnt")
  METAJIT_FEATURE("avx")
  METAJIT_FEATURE("avx2")
  METAJIT_FEATURE("fma")
  METAJIT_FEATURE("bmi")
  METAJIT_FEATURE("bmi2")
  METAJIT_FEATURE("avx512f")
  METAJIT_FEATURE("avx512cd")
  METAJIT_FEATURE("avx512dq")
  METAJIT_FEATURE("avx512bw")
  METAJIT_FEATURE("avx512vl")
  METAJIT_FEATURE("avx512ifma")
  METAJIT_FEATURE("avx512vbmi")
  METAJIT_FEATURE("avx512vbmi2")
  METAJIT_FEATURE("avx512vnni")
  METAJIT_FEATURE("avx512bitalg")
  METAJIT_FEATURE("avx512vpopcntdq")
  METAJIT_FEATURE("avx512bf16")
#undef METAJIT_FEATURE
  *known = false;
  return true;
}

}  // namespace

std::vector<std::string> missing_cpu_features(const std::string& llvm_features) {
  __builtin_cpu_init();
  std::vector<std::string> missing;
  std::istringstream list(llvm_features);
  std::string entry;
  while (std::getline(list, entry, ',')) {
    if (entry.size() < 2 || entry[0] != '+') continue;
    std::string name = entry.substr(1);
    bool known = false;
    if (!has_feature(name, &known) && known) missing.push_back(name);
  }
  return missing;
}

}  // namespace metajit
