#include "jit/codegen/cpp/runtime_support.h"

#include "jit/codegen/cpp/cpp_prelude.h"

namespace metajit {

const RuntimeSupport& cpp_runtime_support() {
  static const RuntimeSupport* support = [] {
    // MJ_RUNTIME_SUPPORT lets the prelude keep the full-range exp, which kernels skip.
    const std::string body = R"SUPPORT(
#if !defined(__AVX512F__)
extern "C" mj_float_vector mj_exp_outside_86(mj_float_vector x) { return mj_exp_any_range(x); }
#endif
extern "C" void metajit_kernel(void* const* buffers, int64_t begin, int64_t end) {
  void** table = (void**)buffers[0];
#if !defined(__AVX512F__)
  table[0] = (void*)&mj_exp_outside_86;
#else
  table[0] = 0;  // kernels inline the full form here
#endif
}
)SUPPORT";
    return new RuntimeSupport{"#define MJ_RUNTIME_SUPPORT 1\n" + cpp_prelude_for(body) + body, {"mj_exp_outside_86"}};
  }();
  return *support;
}

}  // namespace metajit
