#include "jit/toolchain/nvrtc_compiler.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include "core/flags.h"
#include "jit/toolchain/compiler.h"

namespace metajit {

// The subset of nvrtc.h used here; the ABI has been stable since CUDA 11 (nvrtcResult is an int enum).
struct NvrtcCompiler::Api {
  using Program = void*;
  const char* (*get_error_string)(int) = nullptr;
  int (*version)(int*, int*) = nullptr;
  int (*get_num_supported_archs)(int*) = nullptr;
  int (*get_supported_archs)(int*) = nullptr;
  int (*create_program)(Program*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  int (*destroy_program)(Program*) = nullptr;
  int (*compile_program)(Program, int, const char* const*) = nullptr;
  int (*get_program_log_size)(Program, size_t*) = nullptr;
  int (*get_program_log)(Program, char*) = nullptr;
  int (*get_ptx_size)(Program, size_t*) = nullptr;
  int (*get_ptx)(Program, char*) = nullptr;
  int (*get_cubin_size)(Program, size_t*) = nullptr;
  int (*get_cubin)(Program, char*) = nullptr;
};

namespace {

std::mutex search_mutex;
std::vector<std::string>& search_directories() {
  static std::vector<std::string> directories;
  return directories;
}

// Tries every place in order; returns the handle and its path, or null with the list of attempts.
void* open_library(std::string& path, std::string& attempts) {
  std::vector<std::string> candidates;
  if (std::optional<std::string> explicit_path = flag_text(Flag::Nvrtc)) candidates.push_back(*explicit_path);
  {
    std::lock_guard<std::mutex> lock(search_mutex);
    for (const std::string& directory : search_directories()) candidates.push_back(directory + "/libnvrtc.so.13");
  }
  candidates.push_back("libnvrtc.so.13");
  if (const char* home = std::getenv("CUDA_HOME")) candidates.push_back(std::string(home) + "/lib64/libnvrtc.so.13");
  candidates.push_back("/usr/local/cuda/lib64/libnvrtc.so.13");
  for (const std::string& candidate : candidates) {
    if (void* handle = ::dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      path = candidate;
      return handle;
    }
    const char* error = ::dlerror();
    attempts += "\n  " + candidate + ": " + (error ? error : "not found");
  }
  return nullptr;
}

template <typename Function>
void resolve(void* handle, Function& function, const char* name) {
  function = reinterpret_cast<Function>(::dlsym(handle, name));
  if (!function) throw CudaUnavailableError(std::string("libnvrtc.so.13 has no ") + name + " (is it NVRTC 13?)");
}

struct Loaded {
  NvrtcCompiler* compiler = nullptr;
  std::string error;
};

}  // namespace

CudaTarget CudaTarget::parse(const std::string& text) {
  std::string rest = text.rfind("sm_", 0) == 0 ? text.substr(3) : text;
  auto digit = [](char character) { return character >= '0' && character <= '9'; };
  CudaTarget target;
  if (rest.size() == 3 && digit(rest[0]) && rest[1] == '.' && digit(rest[2])) {
    target.architecture = (rest[0] - '0') * 10 + (rest[2] - '0');
  } else if ((rest.size() == 2 || rest.size() == 3) && std::all_of(rest.begin(), rest.end(), digit)) {
    target.architecture = std::stoi(rest);
  } else {
    throw std::invalid_argument("'" + text + "' is not a CUDA architecture; write it as sm_90, 90 or 9.0");
  }
  return target;
}

void NvrtcCompiler::add_search_directory(const std::string& directory) {
  std::lock_guard<std::mutex> lock(search_mutex);
  auto& directories = search_directories();
  if (std::find(directories.begin(), directories.end(), directory) == directories.end()) directories.push_back(directory);
}

struct NvrtcLoader {
  static NvrtcCompiler* create(void* handle, const std::string& path) { return new NvrtcCompiler(handle, path); }
};

static Loaded& loaded_compiler() {
  static Loaded loaded = [] {
    Loaded result;
    std::string path, attempts;
    void* handle = open_library(path, attempts);
    if (!handle) {
      result.error = "NVRTC (libnvrtc.so.13, the CUDA 13 runtime compiler) was not found. Looked in:" + attempts +
                     "\nInstall it with `pip install nvidia-cuda-nvrtc` (or the CUDA 13 toolkit), or point "
                     "METAJIT_NVRTC at the file.";
      return result;
    }
    try {
      result.compiler = NvrtcLoader::create(handle, path);  // lives for the process
    } catch (const std::exception& error) {
      result.error = error.what();
    }
    return result;
  }();
  return loaded;
}

NvrtcCompiler& NvrtcCompiler::instance() {
  Loaded& loaded = loaded_compiler();
  if (!loaded.compiler) throw CudaUnavailableError(loaded.error);
  return *loaded.compiler;
}

std::string NvrtcCompiler::unavailable_reason() { return loaded_compiler().error; }

NvrtcCompiler::NvrtcCompiler(void* handle, std::string path) : handle_(handle), path_(std::move(path)), api_(new Api) {
  resolve(handle_, api_->get_error_string, "nvrtcGetErrorString");
  resolve(handle_, api_->version, "nvrtcVersion");
  resolve(handle_, api_->get_num_supported_archs, "nvrtcGetNumSupportedArchs");
  resolve(handle_, api_->get_supported_archs, "nvrtcGetSupportedArchs");
  resolve(handle_, api_->create_program, "nvrtcCreateProgram");
  resolve(handle_, api_->destroy_program, "nvrtcDestroyProgram");
  resolve(handle_, api_->compile_program, "nvrtcCompileProgram");
  resolve(handle_, api_->get_program_log_size, "nvrtcGetProgramLogSize");
  resolve(handle_, api_->get_program_log, "nvrtcGetProgramLog");
  resolve(handle_, api_->get_ptx_size, "nvrtcGetPTXSize");
  resolve(handle_, api_->get_ptx, "nvrtcGetPTX");
  resolve(handle_, api_->get_cubin_size, "nvrtcGetCUBINSize");
  resolve(handle_, api_->get_cubin, "nvrtcGetCUBIN");
  api_->version(&major_, &minor_);
  int count = 0;
  if (api_->get_num_supported_archs(&count) == 0 && count > 0) {
    architectures_.resize(size_t(count));
    api_->get_supported_archs(architectures_.data());
    std::sort(architectures_.begin(), architectures_.end());
  }
  if (architectures_.empty()) throw CudaUnavailableError("NVRTC at " + path_ + " reports no supported GPU architecture");
}

std::string NvrtcCompiler::version() const { return std::to_string(major_) + "." + std::to_string(minor_); }

namespace {
// The compile flags; part of every CUDA cache key. No multiply-add contraction, as on the CPU
// (jit/toolchain/clang_compiler.cc): a value recomputed in several kernels must round alike in each, or a max
// gradient's tie mask misses. CUDA's math functions call fma themselves and keep it; generated kernels are
// memory-bound. NVVM's -O3 pipeline segfaults inside nvrtcCompileProgram on some fused kernels (a layer-norm
// backward feeding a generated matrix product; NVRTC 13.0 and 13.5, tests/python/test_cuda.py keeps the kernel),
// taking the process down; -O2 compiles them, and most kernels' binaries are the same at either level.
const char* const kFlags[] = {"-std=c++17", "--fmad=false", "-Xnvvm=-opt=2"};
}  // namespace

std::string NvrtcCompiler::identity(const CudaTarget& target) const {
  std::string text = "nvrtc " + version() + " " + target.name();
  for (const char* flag : kFlags) text += std::string(" ") + flag;
  return text;
}

CudaBinary NvrtcCompiler::compile(const std::string& source, const CudaTarget& target,
                                  const std::string& file_name) const {
  int wanted = target.architecture;
  if (wanted < architectures_.front())
    throw CudaUnavailableError("NVRTC " + version() + " cannot compile for " + target.name() + ": its oldest target is sm_" +
                               std::to_string(architectures_.front()));
  CudaBinary binary;
  // A GPU this NVRTC does not know gets PTX for the newest architecture it does know; the driver compiles that.
  bool known = std::binary_search(architectures_.begin(), architectures_.end(), wanted);
  int architecture = wanted;
  if (!known)
    for (int candidate : architectures_)
      if (candidate <= wanted) architecture = candidate;
  binary.is_ptx = !known;
  binary.architecture = (known ? "sm_" : "compute_") + std::to_string(architecture);
  std::vector<std::string> options{"--gpu-architecture=" + binary.architecture};
  for (const char* flag : kFlags) options.push_back(flag);
  std::vector<const char*> option_pointers;
  for (const std::string& option : options) option_pointers.push_back(option.c_str());

  Api::Program program = nullptr;
  int status = api_->create_program(&program, source.c_str(), file_name.c_str(), 0, nullptr, nullptr);
  if (status != 0) throw CompileError(std::string("nvrtcCreateProgram failed: ") + api_->get_error_string(status));
  struct Destroy {
    const Api* api;
    Api::Program* program;
    ~Destroy() { api->destroy_program(program); }
  } destroy{api_.get(), &program};
  status = api_->compile_program(program, int(option_pointers.size()), option_pointers.data());
  size_t log_size = 0;
  std::string log;
  if (api_->get_program_log_size(program, &log_size) == 0 && log_size > 1) {
    log.resize(log_size);
    api_->get_program_log(program, log.data());
    log.resize(log_size - 1);  // the terminating NUL
  }
  if (status != 0)
    throw CompileError(log.empty() ? std::string("NVRTC: ") + api_->get_error_string(status) : log);
  size_t size = 0;
  if (binary.is_ptx) {
    api_->get_ptx_size(program, &size);
    binary.bytes.resize(size);
    api_->get_ptx(program, binary.bytes.data());
    while (!binary.bytes.empty() && binary.bytes.back() == '\0') binary.bytes.pop_back();
  } else {
    api_->get_cubin_size(program, &size);
    binary.bytes.resize(size);
    api_->get_cubin(program, binary.bytes.data());
  }
  return binary;
}

}  // namespace metajit
