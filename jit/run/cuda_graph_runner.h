// Running graphs on the GPU: when CUDA execution is on, the JIT's graph runner hands every sync here. The same
// fused groups as on the CPU (without library calls) are rendered to CUDA, compiled by NVRTC through the CUDA
// binary cache, loaded once per process and launched on the context's stream. Outputs live in device memory;
// a value is copied to the host only when the host reads it (core/storage.h).
//
// Under the emulator (mj.flags.use_cuda = "emulator") the same plans run through jit/run/cuda_emulator.h on the
// CPU, so machines without a GPU (CI) test everything here except the driver calls.
#pragma once
#include <vector>

#include "core/node.h"
#include "jit/toolchain/nvrtc_compiler.h"

namespace metajit {

enum class CudaExecution { Off, Gpu, Emulator };

// Off: kernels run on the CPU (values already on a device are downloaded when read). Gpu throws
// CudaUnavailableError without a usable GPU. A process uses one kind of device memory, so switching between
// Gpu and Emulator once either has run throws std::invalid_argument.
void set_cuda_execution(CudaExecution mode);
CudaExecution cuda_execution();
// Registers the device memory of `kind` (Gpu or Emulator) for values, without moving kernels there (x.cuda()
// while kernels run on the CPU). Throws like set_cuda_execution.
void use_device_memory(CudaExecution kind);

// Computes `targets` (none computed yet) with CUDA kernels. Called by the JIT's graph runner.
void run_on_cuda(const std::vector<NodePtr>& targets);

// Runs a plan made by run_on_cuda again on `nodes` (a traced function's replay, jit/run/graph_executor.h), on the
// GPU or the emulator as `where` says; `releasable` as in jit/run/run_loop.h.
struct Plan;
void run_plan_on_cuda(const Plan& plan, const std::vector<NodePtr>& nodes, const std::vector<uint8_t>& releasable,
                      CudaExecution where);

// Waits until every queued GPU kernel and copy has finished (no-op without a GPU context).
void synchronize_cuda();
// mj.gc(): cached free device blocks back to the driver (no-op without a GPU context).
void release_cached_device_memory();
// mj.cuda.precompile: compiles (or loads) every CUDA kernel computing `targets` would launch, for `target`, in
// parallel; runs nothing and needs no GPU. Returns how many were compiled. Compile errors wait for the launch
// (or kernel.compile()) to report them.
int precompile_cuda(const std::vector<NodePtr>& targets, const CudaTarget& target);
// mj.cuda.emulate: computes `targets` by running their CUDA kernels in the CPU emulator through the run loop, each
// launch given at most `max_blocks` blocks, and returns their values in host memory, in order. The values are kept
// aside, not published: the graph stays pending, so the CPU can compute the same values afterwards to compare.
// Planned without library calls or kernels with several outputs, and rendered from the IR as lowered.
std::vector<StoragePtr> emulate_cuda(const std::vector<NodePtr>& targets, int64_t max_blocks);
// mj._core.clear_memory_cache: the next launches read their CUDA binaries from the disk cache (or bundle) again.
void forget_cuda_kernels_in_memory();

}  // namespace metajit
