// The one table of metajit's settings: each METAJIT_* environment variable, declared once. Adding a setting means
// a row here, an enumerator in core/flags.h and a row in docs/configuration.md (tests/python/test_flags.py checks
// that the documentation and this table agree, defaults included). Data only: parsing lives in core/flags.cc.
// Build options (METAJIT_SANITIZE, ...) and variables of the test and benchmark harnesses are not settings of the
// library and are not listed.
#include "core/flags.h"

namespace metajit {

const std::vector<FlagDeclaration>& flag_declarations() {
  using Type = FlagType;
  static const std::vector<FlagDeclaration> table = {
      {Flag::CacheDirectory, "METAJIT_CACHE_DIR", Type::Text, "$XDG_CACHE_HOME/metajit, else ~/.cache/metajit", "", "",
       BadValue::Warn, FlagReader::Engine, "cache_dir", "the on-disk kernel cache (set but empty: memory only)"},
      // 2G: a kernel object is 5-50 KB, so that is tens of thousands of kernels.
      {Flag::CacheMaximumSize, "METAJIT_CACHE_MAX_SIZE", Type::Size, "2G", "", "a size", BadValue::Raise,
       FlagReader::Engine, "",
       "the most the on-disk kernel cache may take; least recently used kernels are removed past it"},
      {Flag::Log, "METAJIT_LOG", Type::Choice, "warning", "warning|info|plan|ir|source|debug", "a log level",
       BadValue::Warn, FlagReader::Engine, "log",
       "a ladder, each level printing what those before it print: info kernel keys as they load or compile, plan "
       "each plan, ir the kernel IR after each pass, source each rendered kernel, debug everything"},
      {Flag::NumberOfThreads, "METAJIT_NUM_THREADS", Type::Integer, "number of CPUs", "", "an integer", BadValue::Warn,
       FlagReader::Engine, "num_threads", "threads that kernels and oneDNN calls run on (0 or less: the default)"},
      {Flag::HugePages, "METAJIT_HUGE_PAGES", Type::Boolean, "0", "", "a boolean", BadValue::Warn, FlagReader::Engine,
       "", "map tensors of 2 MiB and more on their own, marked for transparent huge pages"},
      {Flag::Lowering, "METAJIT_LOWERING", Type::Boolean, "1", "", "a boolean", BadValue::Warn, FlagReader::Engine,
       "lowering", "run matrix products and convolutions in oneDNN (cuBLAS/cuDNN on a GPU)"},
      {Flag::MultipleOutputs, "METAJIT_MULTIPLE_OUTPUTS", Type::Boolean, "1", "", "a boolean", BadValue::Warn,
       FlagReader::Engine, "multiple_outputs",
       "let one kernel store several elementwise values of one shape that share inputs"},
      {Flag::ConvolutionAlgorithm, "METAJIT_CONV_ALGORITHM", Type::Choice, "auto", "auto|direct|winograd",
       "a convolution algorithm", BadValue::Warn, FlagReader::Engine, "conv_algorithm",
       "how lowered convolutions compute: Winograd where it pays, never, or wherever it applies"},
      {Flag::CheckNan, "METAJIT_CHECK_NAN", Type::Boolean, "0", "", "a boolean", BadValue::Warn, FlagReader::Engine,
       "check_nan", "scan every computed value; a NaN or infinity raises metajit.NonFiniteError"},
      {Flag::Compile, "METAJIT_COMPILE", Type::Choice, "auto", "auto|never", "a known policy", BadValue::Raise,
       FlagReader::Engine, "metajit.cache.set_compile_policy",
       "never: compile no kernel; serve them from bundles and the cache only"},
      {Flag::Bundle, "METAJIT_BUNDLE", Type::Text, "", "", "", BadValue::Warn, FlagReader::Python,
       "metajit.cache.load_bundle", "a deployment bundle (.mjb) to serve kernels from, loaded at import"},
      {Flag::DumpDirectory, "METAJIT_DUMP_DIR", Type::Text, "", "", "", BadValue::Warn, FlagReader::Engine, "",
       "write every kernel the process uses (source, object, CUDA source) and an index to this folder"},
      {Flag::RecordBundle, "METAJIT_RECORD_BUNDLE", Type::Text, "", "", "", BadValue::Warn, FlagReader::Python, "",
       "record every kernel used and write them to this bundle at exit (python -m metajit.cache pack)"},
      {Flag::Device, "METAJIT_DEVICE", Type::Choice, "cpu", "cpu|cuda|cuda-emulator", "a device", BadValue::Raise,
       FlagReader::Python, "use_cuda", "where kernels run; cuda falls back to the CPU with a warning"},
      {Flag::CudaArchitecture, "METAJIT_CUDA_ARCH", Type::Text, "the GPU's, else sm_90", "", "", BadValue::Warn,
       FlagReader::Python, "mj.inspect(..., arch=)", "the architecture CUDA kernels are compiled for (sm_90, 90, 9.0)"},
      {Flag::Nvrtc, "METAJIT_NVRTC", Type::Text, "", "", "", BadValue::Warn, FlagReader::Engine, "",
       "the path of libnvrtc.so.13, tried first"},
      {Flag::Cublas, "METAJIT_CUBLAS", Type::Text, "", "", "", BadValue::Warn, FlagReader::Engine, "",
       "the path of libcublas.so.13, tried first"},
      {Flag::Cudnn, "METAJIT_CUDNN", Type::Text, "", "", "", BadValue::Warn, FlagReader::Engine, "",
       "the path of libcudnn.so.9, tried first"},
      {Flag::Compiler, "METAJIT_COMPILER", Type::Choice, "clang", "clang|system", "a known compiler", BadValue::Raise,
       FlagReader::Engine, "", "clang: in-process Clang (the default); system: a clang++-14 or g++ subprocess"},
      {Flag::DistributedTimeout, "METAJIT_DISTRIBUTED_TIMEOUT", Type::Integer, "300", "", "an integer", BadValue::Warn,
       FlagReader::Engine, "",
       "seconds a collective waits for the other ranks before it stops the whole mpirun job with an error"},
      {Flag::Nccl, "METAJIT_NCCL", Type::Text, "", "", "", BadValue::Warn, FlagReader::Engine, "",
       "the path of libnccl.so.2, tried first"},
      {Flag::OverlapCollectives, "METAJIT_OVERLAP_COLLECTIVES", Type::Boolean, "1", "", "a boolean", BadValue::Warn,
       FlagReader::Engine, "", "start collectives early and let kernels run while they move; 0 runs each in place"},
      {Flag::DeviceMemoryLimit, "METAJIT_DEVICE_MEMORY_LIMIT", Type::Integer, "0", "", "an integer", BadValue::Warn,
       FlagReader::Engine, "device_memory_limit",
       "bytes of GPU memory metajit may hold (0: all there is); past it values move to host memory"},
      {Flag::MemoryBudget, "METAJIT_MEMORY_BUDGET", Type::Text, "0", "", "", BadValue::Warn, FlagReader::Engine,
       "memory_budget",
       "a training step's peak memory (bytes, K/M/G/T, or a fraction of its modelled peak; 0: off); backward "
       "recomputes forward values to stay under it"},
  };
  return table;
}

}  // namespace metajit
