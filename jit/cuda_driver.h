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
  // The process's driver; throws CudaUnavailableError (jit/nvrtc_compiler.h) with the reason when unusable.
  static CudaDriver& instance();
  // "" when a GPU can be used, otherwise why not: the library is missing, cuInit failed (with the driver's
  // own error name and text), or there is no device.
  static std::string unavailable_reason();

  int version() const { return version_; }  // e.g. 13000 for CUDA 13.0
  const std::vector<CudaDevice>& devices() const { return devices_; }

  struct Api;

 private:
  friend class CudaDriverLoader;
  CudaDriver() = default;
  int version_ = 0;
  std::vector<CudaDevice> devices_;
};

}  // namespace metajit
