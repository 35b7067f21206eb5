// Renders an IrKernel to CUDA source for NVRTC, from the same IR the C++ renderer reads. Every kernel loops
// grid-stride over its work items, so any grid size is correct and the launcher picks one for the device:
//   - thread per element: pointwise kernels; reductions inside them are each thread's own loop;
//   - block per element: pointwise kernels with few outputs and long reductions (a full sum, a column mean):
//     the block's threads split the reduction and combine it with warp shuffles and shared memory;
//   - thread per row / block per row: kernels with per-row reductions (softmax, layer norm), short rows on one
//     thread, longer rows on one block whose threads split both the reductions and the row's elements;
//   - scatter: one launch sets the output to the reduction's identity, a second accumulates every input
//     element into its target with atomics (so the order of float additions is not fixed).
// Pure text generation: no compiling, no GPU needed.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "jit/ir/kernel_ir.h"

namespace metajit {

constexpr int kCudaBlockSize = 256;  // threads per block of every generated kernel (the source relies on it)

struct CudaLaunch {
  std::string entry;          // the extern "C" __global__ function
  int64_t work_items = 0;     // elements, rows or domain points to cover
  bool block_per_item = false;  // one block per work item (else one thread per work item)
  int items_per_thread = 1;     // thread per item: items each thread takes per step of its loop
  // Blocks that cover the work once (the launcher may use fewer: every kernel strides over its items).
  int64_t blocks_needed() const {
    int64_t per_block = int64_t(kCudaBlockSize) * items_per_thread;
    return block_per_item ? work_items : (work_items + per_block - 1) / per_block;
  }
};

struct RenderedCudaKernel {
  std::string header_comment;     // what it computes, the schedule and the fused ops
  std::string source;             // prelude + kernel: compiled and hashed
  std::string schedule;           // "thread per element", "block per row", ...
  std::vector<CudaLaunch> launches;  // run in this order, each with the kernel's buffers as arguments
};

RenderedCudaKernel render_cuda(const IrKernel& kernel);

}  // namespace metajit
