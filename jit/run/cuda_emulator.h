// Runs generated CUDA kernels on the CPU, to test the CUDA renderer's numbers where there is no GPU (CI never
// has one). The kernel's own source is compiled by the in-process Clang with a small prelude that maps the
// CUDA names it uses (threadIdx, __syncthreads, __shfl_xor_sync, atomics) onto this emulator, which runs one
// block at a time with each of its threads as a fiber: a barrier or shuffle switches to the next thread, so
// every thread runs from one barrier to the next before any goes on. A barrier that some threads of a block
// never reach is reported as an error (on a GPU it would hang or corrupt the result).
// For tests only: it is slow, and it does not model memory races between threads.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/storage.h"
#include "jit/codegen/cuda/cuda_renderer.h"

namespace metajit {

// Runs `kernel`'s launches in order over `buffers` (the kernel's parameters, in order), each with at most
// `max_blocks` blocks, so the kernels' grid-stride loops are exercised. Throws std::runtime_error on a
// divergent barrier and CompileError when the emulation source does not compile.
void emulate_cuda_kernel(const RenderedCudaKernel& kernel, const std::vector<void*>& buffers, int64_t max_blocks);

// Device memory for running whole graphs through the emulator (mj.flags.use_cuda = "emulator"): host blocks
// that only emulated kernels touch, so the host/device copies of a buffer are real copies, as on a GPU.
DeviceMemory& emulated_device_memory();

}  // namespace metajit
