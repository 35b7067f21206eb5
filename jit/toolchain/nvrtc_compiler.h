// NVRTC, loaded with dlopen on first use so that metajit imports and runs without the CUDA toolkit. Compiles
// CUDA source to a CUBIN for one GPU architecture, or to PTX when the GPU is newer than this NVRTC knows (the
// driver then finishes the compile). Needs no GPU and no driver, so CI checks generated CUDA on CPU machines.
//
// Where libnvrtc.so.13 is looked for, in order: $METAJIT_NVRTC (a file), the directories added with
// add_search_directory (Python adds the nvidia-cuda-nvrtc wheel's), the dynamic linker's own search,
// $CUDA_HOME/lib64 and /usr/local/cuda/lib64.
#pragma once
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace metajit {

// A CUDA library or driver that is needed but missing; what() says which, where it was looked for and what to do.
struct CudaUnavailableError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct CudaBinary {
  std::string bytes;         // CUBIN (an ELF file) or PTX text
  bool is_ptx = false;
  std::string architecture;  // what it was compiled for: "sm_90" (CUBIN) or "compute_90" (PTX)
};

// Identity of a CUDA compile target, e.g. 90 for sm_90.
struct CudaTarget {
  int architecture = 90;
  static CudaTarget parse(const std::string& text);  // "sm_90", "90", "9.0"; std::invalid_argument otherwise
  std::string name() const { return "sm_" + std::to_string(architecture); }
};

class NvrtcCompiler {
 public:
  // The process's NVRTC; throws CudaUnavailableError naming every place it looked when it is missing.
  static NvrtcCompiler& instance();
  static void add_search_directory(const std::string& directory);  // before first use
  // "" when NVRTC can be loaded, otherwise why not (without throwing).
  static std::string unavailable_reason();

  const std::string& library_path() const { return path_; }
  std::string version() const;                  // "13.5"
  const std::vector<int>& supported_architectures() const { return architectures_; }  // 75, 80, ...
  // What changes the binary, for cache keys: NVRTC version, flags and target.
  std::string identity(const CudaTarget& target) const;
  // Source -> binary. Throws CompileError (jit/toolchain/compiler.h) with NVRTC's log, file named `file_name`.
  CudaBinary compile(const std::string& source, const CudaTarget& target,
                     const std::string& file_name = "kernel.cu") const;

  struct Api;  // the NVRTC functions, resolved with dlsym

 private:
  friend struct NvrtcLoader;
  NvrtcCompiler(void* handle, std::string path);
  void* handle_;
  std::string path_;
  std::unique_ptr<Api> api_;
  int major_ = 0, minor_ = 0;
  std::vector<int> architectures_;
};

}  // namespace metajit
