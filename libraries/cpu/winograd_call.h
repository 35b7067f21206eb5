// Our own Winograd convolutions (libraries/cpu/winograd_convolution.h) as a library call, for CPUs where oneDNN has no
// Winograd kernels: when they apply to a matched convolution, and when they pay over oneDNN's direct kernels.
#pragma once
#include <memory>

#include "jit/library_call/contraction.h"
#include "jit/library_call/contraction_patterns.h"

namespace metajit {

// 3x3, stride 1, one group, 2-D, the same dilation along both dims and a leading padding winograd_takes(). A
// forward bias and post-ops are applied as the outputs are written.
bool winograd_applies(const ConvolutionProblem& problem);

// Where our Winograd beats oneDNN 2.6's direct AVX2 kernels (timings in docs/lowering.md).
bool winograd_beats_direct(const ConvolutionProblem& problem);

// The call for a problem winograd_applies() to.
std::shared_ptr<const LibraryCall> winograd_call(const ConvolutionProblem& problem, size_t output_bytes);

}  // namespace metajit
