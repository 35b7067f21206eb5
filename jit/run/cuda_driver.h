// The NVIDIA driver (libcuda.so.1), loaded with dlopen on first use: whether a GPU can be used, and what it
// is. Without the library or without a device, unavailable_reason() says which, in words a user can act on.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace metajit {

struct CudaDevice {
  int index = 0;
  std::string name;           // "NVIDIA H100 80GB HBM3"
  int architecture = 0;       // compute capability as one number: 90 for 9.0
  int multiprocessors = 0;
  int64_t memory_bytes = 0;
};

class CudaDriver {
 public:
  // The process's driver; throws CudaUnavailableError (jit/toolchain/nvrtc_compiler.h) with the reason when unusable.
  static CudaDriver& instance();
  // "" when a GPU can be used, otherwise why not: the library is missing, cuInit failed (with the driver's
  // own error name and text), or there is no device.
  static std::string unavailable_reason();

  int version() const { return version_; }  // e.g. 13000 for CUDA 13.0
  const std::vector<CudaDevice>& devices() const { return devices_; }

  // The subset of cuda.h metajit calls (CUresult, CUdevice are ints; CUdeviceptr is 64 bits; handles are
  // pointers). Bound with dlsym when the driver loads, so none of it is linked.
  struct Api {
    int (*init)(unsigned) = nullptr;
    int (*driver_get_version)(int*) = nullptr;
    int (*device_get_count)(int*) = nullptr;
    int (*device_get)(int*, int) = nullptr;
    int (*device_get_name)(char*, int, int) = nullptr;
    int (*device_get_attribute)(int*, int, int) = nullptr;
    int (*device_total_mem)(size_t*, int) = nullptr;
    int (*get_error_name)(int, const char**) = nullptr;
    int (*get_error_string)(int, const char**) = nullptr;
    int (*primary_context_retain)(void**, int) = nullptr;
    int (*context_set_current)(void*) = nullptr;
    int (*memory_allocate)(uint64_t*, size_t) = nullptr;
    int (*memory_free)(uint64_t) = nullptr;
    int (*memory_information)(size_t* free, size_t* total) = nullptr;
    int (*copy_host_to_device)(uint64_t, const void*, size_t, void* stream) = nullptr;
    int (*copy_device_to_host)(void*, uint64_t, size_t, void* stream) = nullptr;
    int (*memset_async)(uint64_t, unsigned char, size_t, void* stream) = nullptr;
    int (*stream_create)(void**, unsigned) = nullptr;
    int (*stream_synchronize)(void*) = nullptr;
    int (*module_load_data)(void**, const void*) = nullptr;
    int (*module_get_function)(void**, void*, const char*) = nullptr;
    int (*launch_kernel)(void* function, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,
                         unsigned block_y, unsigned block_z, unsigned shared_bytes, void* stream, void** parameters,
                         void** extra) = nullptr;
  };
  const Api& api() const { return *api_; }
  // The driver's name and text for a CUresult: "CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
  std::string describe(int status) const;

 private:
  friend class CudaDriverLoader;
  CudaDriver() = default;
  int version_ = 0;
  std::vector<CudaDevice> devices_;
  const Api* api_ = nullptr;
};

}  // namespace metajit
