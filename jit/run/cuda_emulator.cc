#include "jit/run/cuda_emulator.h"

#include <ucontext.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>

#include "core/stats.h"
#include "jit/codegen/common/kernel_symbol.h"
#include "jit/toolchain/kernel_cache.h"

namespace metajit {
namespace {

// Put before the kernel's source. MjEmulatorApi must match EmulatorApi below field for field.
const char* const kEmulationPrelude = R"PRELUDE(// ---- metajit CUDA emulation (tests only) ----
struct mj_dim3 { unsigned int x, y, z; };
struct MjEmulatorApi {
  mj_dim3 thread_index, block_index, block_dim, grid_dim;
  void (*synchronize)();
  unsigned long long (*exchange)(unsigned long long bits, int lane_offset);
  void (*run_blocks)(void (*thunk)(int, void* const*), int entry, void* const* buffers, long long begin, long long end);
};
static MjEmulatorApi* mj_api;
#define threadIdx (mj_api->thread_index)
#define blockIdx (mj_api->block_index)
#define blockDim (mj_api->block_dim)
#define gridDim (mj_api->grid_dim)
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(threads)
#define __shared__ static
extern "C" {
float expf(float); float logf(float); float sinf(float); float cosf(float); float tanhf(float); float powf(float, float);
float fmodf(float, float); float fabsf(float); float sqrtf(float); float floorf(float); float ceilf(float);
float rintf(float); float copysignf(float, float);
float log1pf(float); float expm1f(float); float log2f(float); float log10f(float); float erff(float);
float tanf(float); float asinf(float); float acosf(float); float atanf(float); float sinhf(float); float coshf(float);
double log1p(double); double expm1(double); double log2(double); double log10(double); double erf(double);
double tan(double); double asin(double); double acos(double); double atan(double); double sinh(double);
double cosh(double);
double exp(double); double log(double); double sin(double); double cos(double); double tanh(double);
double pow(double, double); double fmod(double, double); double fabs(double); double sqrt(double); double floor(double);
double ceil(double); double rint(double); double copysign(double, double);
}
static inline void __syncthreads() { mj_api->synchronize(); }
template <typename T> static inline T __shfl_xor_sync(unsigned int, T value, int offset) {
  unsigned long long bits = 0;
  __builtin_memcpy(&bits, &value, sizeof(T));
  bits = mj_api->exchange(bits, offset);
  T result;
  __builtin_memcpy(&result, &bits, sizeof(T));
  return result;
}
static inline float __int_as_float(int bits) { float value; __builtin_memcpy(&value, &bits, 4); return value; }
static inline float __uint_as_float(unsigned int bits) { float value; __builtin_memcpy(&value, &bits, 4); return value; }
static inline unsigned int __float_as_uint(float value) { unsigned int bits; __builtin_memcpy(&bits, &value, 4); return bits; }
static inline double __longlong_as_double(long long bits) { double value; __builtin_memcpy(&value, &bits, 8); return value; }
// One thread runs at a time, so atomics are plain read-modify-writes.
template <typename T> static inline T mj_emulated_add(T* address, T value) { T old = *address; *address = old + value; return old; }
static inline float atomicAdd(float* address, float value) { return mj_emulated_add(address, value); }
static inline double atomicAdd(double* address, double value) { return mj_emulated_add(address, value); }
static inline int atomicAdd(int* address, int value) { return mj_emulated_add(address, value); }
static inline unsigned long long atomicAdd(unsigned long long* address, unsigned long long value) { return mj_emulated_add(address, value); }
template <typename T> static inline T atomicCAS(T* address, T expected, T desired) {
  T old = *address;
  if (old == expected) *address = desired;
  return old;
}
)PRELUDE";

// Put after it: calls entry k with the buffers cast to its parameter types, and the exported launcher.
const char* const kEmulationLauncher = R"LAUNCHER(
template <int... I> struct mj_indices {};
template <int N, int... I> struct mj_make_indices : mj_make_indices<N - 1, N - 1, I...> {};
template <int... I> struct mj_make_indices<0, I...> { using type = mj_indices<I...>; };
template <typename... P, int... I> static void mj_call_with(void (*function)(P...), void* const* buffers, mj_indices<I...>) {
  function(((P)buffers[I])...);
}
template <typename... P> static void mj_call(void (*function)(P...), void* const* buffers) {
  mj_call_with(function, buffers, typename mj_make_indices<sizeof...(P)>::type());
}
)LAUNCHER";

struct Dim3 {
  unsigned int x = 0, y = 1, z = 1;
};
using Thunk = void (*)(int, void* const*);
struct EmulatorApi {
  Dim3 thread_index, block_index, block_dim, grid_dim;
  void (*synchronize)();
  uint64_t (*exchange)(uint64_t bits, int lane_offset);
  void (*run_blocks)(Thunk thunk, int entry, void* const* buffers, int64_t begin, int64_t end);
};

constexpr size_t kStackBytes = 128 * 1024;

struct BlockRun {
  ucontext_t scheduler;
  ucontext_t fibers[kCudaBlockSize];
  std::vector<char> stacks = std::vector<char>(kStackBytes * kCudaBlockSize);
  bool finished[kCudaBlockSize];
  uint64_t slots[kCudaBlockSize];
  int current = 0;
  Thunk thunk = nullptr;
  int entry = 0;
  void* const* buffers = nullptr;
  // Set instead of throwing: run_blocks is called from JIT code, which has no unwind tables.
  std::string error;
};

std::mutex emulator_mutex;  // one emulated launch at a time: the API and the fibers are shared
EmulatorApi api;
BlockRun* run = nullptr;

void synchronize() {
  int self = run->current;
  swapcontext(&run->fibers[self], &run->scheduler);
}

uint64_t exchange(uint64_t bits, int lane_offset) {
  int self = run->current;
  run->slots[self] = bits;
  synchronize();
  int partner = self ^ lane_offset;
  uint64_t received = partner < kCudaBlockSize ? run->slots[partner] : bits;
  synchronize();  // nobody overwrites a slot before every thread has read its partner's
  return received;
}

void fiber_main() {
  run->thunk(run->entry, run->buffers);
  run->finished[run->current] = true;
}  // returns to the scheduler through uc_link

// getcontext returns twice as far as the compiler knows (it never does here: the context only seeds makecontext),
// so it lives in a function of its own, with no locals of run_blocks for -Wclobbered to worry about.
void prepare_fiber(int thread) {
  getcontext(&run->fibers[thread]);
  run->fibers[thread].uc_stack.ss_sp = run->stacks.data() + size_t(thread) * kStackBytes;
  run->fibers[thread].uc_stack.ss_size = kStackBytes;
  run->fibers[thread].uc_link = &run->scheduler;
  makecontext(&run->fibers[thread], fiber_main, 0);
  run->finished[thread] = false;
}

void run_blocks(Thunk thunk, int entry, void* const* buffers, int64_t begin, int64_t end) {
  run->thunk = thunk;
  run->entry = entry;
  run->buffers = buffers;
  for (int64_t block = begin; block < end; ++block) {
    api.block_index.x = unsigned(block);
    for (int thread = 0; thread < kCudaBlockSize; ++thread) prepare_fiber(thread);
    for (;;) {  // one round: every live thread runs to its next barrier or to its end
      int waiting = 0, ended = 0;
      for (int thread = 0; thread < kCudaBlockSize; ++thread) {
        if (run->finished[thread]) continue;
        run->current = thread;
        api.thread_index.x = unsigned(thread);
        swapcontext(&run->scheduler, &run->fibers[thread]);
        (run->finished[thread] ? ended : waiting)++;
      }
      if (waiting == 0) break;
      if (ended > 0) {
        run->error = "CUDA emulation: in block " + std::to_string(block) + ", " + std::to_string(waiting) +
                     " threads wait at a barrier that " + std::to_string(ended) +
                     " threads of the block never reach (the kernel would hang on a GPU)";
        return;
      }
    }
  }
}

std::string emulation_source(const RenderedCudaKernel& kernel) {
  std::string source = kEmulationPrelude;
  std::vector<std::string> entries;
  for (const CudaLaunch& launch : kernel.launches)
    if (std::find(entries.begin(), entries.end(), launch.entry) == entries.end()) entries.push_back(launch.entry);
  for (const std::string& entry : entries) source += "#define " + entry + " mj_cuda_" + entry + "\n";
  source += kernel.source;
  for (const std::string& entry : entries) source += "#undef " + entry + "\n";
  source += kEmulationLauncher;
  source += "static void mj_thunk(int launch, void* const* buffers) {\n  switch (launch) {\n";
  for (size_t index = 0; index < kernel.launches.size(); ++index)
    source += "    case " + std::to_string(index) + ": mj_call(mj_cuda_" + kernel.launches[index].entry +
              ", buffers); break;\n";
  source += "  }\n}\n";
  source += "extern \"C\" void " + std::string(kKernelSymbol) +
            "(void* const* arguments, long long begin, long long end) {\n"
            "  mj_api = (MjEmulatorApi*)arguments[0];\n"
            "  mj_api->run_blocks(mj_thunk, (int)(long long)arguments[1], arguments + 2, begin, end);\n}\n";
  return source;
}

class EmulatedDeviceMemory : public DeviceMemory {
 public:
  void* allocate(size_t bytes) override {
    size_t rounded = allocation_size_class(std::max<size_t>(bytes, 256));
    void* block = std::aligned_alloc(256, rounded);
    if (!block)
      throw AllocationError("cannot allocate " + std::to_string(bytes) + " bytes of emulated GPU memory (" +
                            std::to_string(int64_t(stats().device_bytes_allocated.load())) +
                            " bytes in use by metajit)");
    add_device_bytes_allocated(int64_t(rounded));
    return block;
  }
  void release(void* block, size_t bytes) override {
    add_device_bytes_allocated(-int64_t(allocation_size_class(std::max<size_t>(bytes, 256))));
    std::free(block);
  }
  void copy_to_host(void* host, const void* device, size_t bytes) override { std::memcpy(host, device, bytes); }
  void copy_to_device(void* device, const void* host, size_t bytes) override { std::memcpy(device, host, bytes); }
};

}  // namespace

DeviceMemory& emulated_device_memory() {
  static EmulatedDeviceMemory* memory = new EmulatedDeviceMemory();  // storages may outlive statics
  return *memory;
}

void emulate_cuda_kernel(const RenderedCudaKernel& kernel, const std::vector<void*>& buffers, int64_t max_blocks) {
  KernelCache& cache = KernelCache::instance();
  std::string source = emulation_source(kernel);
  KernelFunction function = cache.get(cache.key_for(source), source, "// CUDA emulation of:\n" + kernel.header_comment);
  std::lock_guard<std::mutex> lock(emulator_mutex);
  static BlockRun* block_run = new BlockRun();  // 32 MiB of fiber stacks, kept for the next launch
  run = block_run;
  api.synchronize = &synchronize;
  api.exchange = &exchange;
  api.run_blocks = &run_blocks;
  api.block_dim.x = kCudaBlockSize;
  for (size_t index = 0; index < kernel.launches.size(); ++index) {
    const CudaLaunch& launch = kernel.launches[index];
    if (launch.work_items <= 0) continue;
    int64_t blocks = std::max<int64_t>(1, std::min(launch.blocks_needed(), max_blocks));
    api.grid_dim.x = unsigned(blocks);
    std::vector<void*> arguments{&api, reinterpret_cast<void*>(static_cast<intptr_t>(index))};
    arguments.insert(arguments.end(), buffers.begin(), buffers.end());
    run->error.clear();
    function(arguments.data(), 0, blocks);
    if (!run->error.empty()) throw std::runtime_error(run->error);
  }
}

}  // namespace metajit
