// The fixed prelude every generated CUDA kernel starts with: the integer typedefs and the helpers the shared
// expression renderer calls (mj_exp, mj_floor_divide, float16 conversion, ...) under the same names as the C++
// prelude, plus the GPU-only pieces: a block-wide reduction (warp shuffles, then one shared-memory step) and
// atomic read-modify-write for scatter kernels. NVRTC compiles it with no header at all.
#pragma once
#include <string>

namespace metajit {

extern const std::string kCudaPrelude;

}  // namespace metajit
