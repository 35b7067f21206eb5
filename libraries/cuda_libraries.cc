#include "libraries/cuda_libraries.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "core/flags.h"
#include "jit/run/cuda_context.h"
#include "jit/run/cuda_driver.h"
#include "libraries/symbol_binding.h"

namespace metajit {
namespace {

std::mutex search_mutex;
std::vector<std::string>& search_directories() {
  static std::vector<std::string> directories;
  return directories;
}

// Opens `soname` from $`variable`, the search directories, the dynamic linker's path, $CUDA_HOME/lib64 and
// /usr/local/cuda/lib64, in that order. Null with every attempt and its error in `attempts` when none opens.
void* open_library(const char* soname, Flag variable, std::string* directory, std::string* attempts) {
  std::vector<std::pair<std::string, std::string>> candidates;  // path, its directory
  if (std::optional<std::string> explicit_path = flag_text(variable)) candidates.push_back({*explicit_path, ""});
  {
    std::lock_guard<std::mutex> lock(search_mutex);
    for (const std::string& folder : search_directories()) candidates.push_back({folder + "/" + soname, folder});
  }
  candidates.push_back({soname, ""});
  if (const char* home = std::getenv("CUDA_HOME")) candidates.push_back({std::string(home) + "/lib64/" + soname, ""});
  candidates.push_back({std::string("/usr/local/cuda/lib64/") + soname, "/usr/local/cuda/lib64"});
  for (const auto& [path, folder] : candidates) {
    if (void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      *directory = folder;
      return handle;
    }
    const char* error = ::dlerror();
    *attempts += "\n  " + path + ": " + (error ? error : "not found");
  }
  return nullptr;
}

// The CUDA context's stream, made current on this thread for the library's handle; false with the reason
// where there is no GPU.
bool context_stream(void** stream, std::string* reason) {
  std::string driver = CudaDriver::unavailable_reason();
  if (!driver.empty()) {
    *reason = "there is no usable GPU: " + driver;
    return false;
  }
  try {
    *stream = CudaContext::instance().stream();
    return true;
  } catch (const std::exception& error) {
    *reason = error.what();
    return false;
  }
}

struct LoadedCublas {
  CublasApi api;
  bool usable = false;
  std::string reason;
};

struct LoadedCudnn {
  CudnnApi api;
  bool usable = false;
  std::string reason;
};

LoadedCublas load_cublas() {
  LoadedCublas loaded;
  std::string directory, attempts, missing;
  void* library = open_library("libcublas.so.13", Flag::Cublas, &directory, &attempts);
  if (!library) {
    loaded.reason = "libcublas.so.13 was not found (pip install nvidia-cublas, or set METAJIT_CUBLAS); tried:" + attempts;
    return loaded;
  }
  int (*create)(void**) = nullptr;
  bind_symbol(library, create, "cublasCreate_v2", missing);
  bind_symbol(library, loaded.api.set_stream, "cublasSetStream_v2", missing);
  bind_symbol(library, loaded.api.sgemm_strided_batched, "cublasSgemmStridedBatched", missing);
  if (!missing.empty()) {
    loaded.reason = "libcublas.so.13 lacks " + missing;
    return loaded;
  }
  void* stream = nullptr;
  if (!context_stream(&stream, &loaded.reason)) return loaded;
  if (int status = create(&loaded.api.handle)) {
    loaded.reason = "cublasCreate failed with status " + std::to_string(status);
    return loaded;
  }
  if (int status = loaded.api.set_stream(loaded.api.handle, stream)) {
    loaded.reason = "cublasSetStream failed with status " + std::to_string(status);
    return loaded;
  }
  loaded.usable = true;
  return loaded;
}

LoadedCudnn load_cudnn() {
  LoadedCudnn loaded;
  std::string directory, attempts, missing;
  void* library = open_library("libcudnn.so.9", Flag::Cudnn, &directory, &attempts);
  if (!library) {
    loaded.reason = "libcudnn.so.9 was not found (pip install nvidia-cudnn-cu13, or set METAJIT_CUDNN); tried:" + attempts;
    return loaded;
  }
  // cuDNN 9's front library opens its parts by name when first used; opened here from its own folder first,
  // they are found however the process's library path is set.
  if (!directory.empty())
    for (const char* part : {"libcudnn_graph.so.9", "libcudnn_engines_precompiled.so.9",
                             "libcudnn_engines_runtime_compiled.so.9", "libcudnn_heuristic.so.9", "libcudnn_ops.so.9",
                             "libcudnn_cnn.so.9"})
      ::dlopen((directory + "/" + part).c_str(), RTLD_NOW | RTLD_GLOBAL);
  CudnnApi& api = loaded.api;
  int (*create)(void**) = nullptr;
  int (*set_stream)(void*, void*) = nullptr;
  bind_symbol(library, create, "cudnnCreate", missing);
  bind_symbol(library, set_stream, "cudnnSetStream", missing);
  bind_symbol(library, api.error_text, "cudnnGetErrorString", missing);
  bind_symbol(library, api.create_tensor, "cudnnCreateTensorDescriptor", missing);
  bind_symbol(library, api.set_tensor, "cudnnSetTensorNdDescriptor", missing);
  bind_symbol(library, api.destroy_tensor, "cudnnDestroyTensorDescriptor", missing);
  bind_symbol(library, api.create_filter, "cudnnCreateFilterDescriptor", missing);
  bind_symbol(library, api.set_filter, "cudnnSetFilterNdDescriptor", missing);
  bind_symbol(library, api.destroy_filter, "cudnnDestroyFilterDescriptor", missing);
  bind_symbol(library, api.create_convolution, "cudnnCreateConvolutionDescriptor", missing);
  bind_symbol(library, api.set_convolution, "cudnnSetConvolutionNdDescriptor", missing);
  bind_symbol(library, api.set_group_count, "cudnnSetConvolutionGroupCount", missing);
  bind_symbol(library, api.set_math_type, "cudnnSetConvolutionMathType", missing);
  bind_symbol(library, api.destroy_convolution, "cudnnDestroyConvolutionDescriptor", missing);
  bind_symbol(library, api.forward_algorithms, "cudnnGetConvolutionForwardAlgorithm_v7", missing);
  bind_symbol(library, api.backward_data_algorithms, "cudnnGetConvolutionBackwardDataAlgorithm_v7", missing);
  bind_symbol(library, api.backward_filter_algorithms, "cudnnGetConvolutionBackwardFilterAlgorithm_v7", missing);
  bind_symbol(library, api.forward, "cudnnConvolutionForward", missing);
  bind_symbol(library, api.backward_data, "cudnnConvolutionBackwardData", missing);
  bind_symbol(library, api.backward_filter, "cudnnConvolutionBackwardFilter", missing);
  if (!missing.empty()) {
    loaded.reason = "libcudnn.so.9 lacks " + missing;
    return loaded;
  }
  void* stream = nullptr;
  if (!context_stream(&stream, &loaded.reason)) return loaded;
  if (int status = create(&api.handle)) {
    loaded.reason = std::string("cudnnCreate failed: ") + api.error_text(status);
    return loaded;
  }
  if (int status = set_stream(api.handle, stream)) {
    loaded.reason = std::string("cudnnSetStream failed: ") + api.error_text(status);
    return loaded;
  }
  loaded.usable = true;
  return loaded;
}

LoadedCublas& loaded_cublas() {
  static LoadedCublas loaded = load_cublas();
  return loaded;
}

LoadedCudnn& loaded_cudnn() {
  static LoadedCudnn loaded = load_cudnn();
  return loaded;
}

}  // namespace

const CublasApi* cublas() { return loaded_cublas().usable ? &loaded_cublas().api : nullptr; }
const CudnnApi* cudnn() { return loaded_cudnn().usable ? &loaded_cudnn().api : nullptr; }
std::string cublas_unavailable_reason() { return loaded_cublas().reason; }
std::string cudnn_unavailable_reason() { return loaded_cudnn().reason; }

void add_cuda_library_search_directory(const std::string& directory) {
  std::lock_guard<std::mutex> lock(search_mutex);
  auto& directories = search_directories();
  if (std::find(directories.begin(), directories.end(), directory) == directories.end()) directories.push_back(directory);
}

}  // namespace metajit
