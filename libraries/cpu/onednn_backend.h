// oneDNN as the library backend for matched contractions: matrix products become dnnl::matmul on the
// tensors' own strides; convolutions (forward, backward data, backward weights) let oneDNN choose its blocked
// memory formats and reorder into and out of them. Primitives are created once per problem and cached.
#pragma once
#include <memory>

#include "jit/library_call/contraction.h"

namespace metajit {

// Registers oneDNN with the JIT (idempotent).
void install_onednn_backend();

// The library call for one contraction, or null when oneDNN would not run it well (it is not a matmul or a
// convolution, it is too small to be worth a call, or oneDNN only offers its slow reference implementation).
std::shared_ptr<const LibraryCall> onednn_library_call(const Contraction& contraction);

}  // namespace metajit
