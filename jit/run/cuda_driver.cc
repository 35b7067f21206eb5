#include "jit/run/cuda_driver.h"

#include <dlfcn.h>

#include "jit/toolchain/nvrtc_compiler.h"

namespace metajit {

namespace {

constexpr int kAttributeMultiprocessorCount = 16;
constexpr int kAttributeComputeCapabilityMajor = 75;
constexpr int kAttributeComputeCapabilityMinor = 76;

struct Loaded {
  CudaDriver* driver = nullptr;
  std::string error;
};

std::string describe(const CudaDriver::Api& api, int status) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.get_error_name) api.get_error_name(status, &name);
  if (api.get_error_string) api.get_error_string(status, &text);
  return std::string(name ? name : "CUDA error " + std::to_string(status)) + (text ? std::string(" (") + text + ")" : "");
}

}  // namespace

class CudaDriverLoader {
 public:
  static Loaded load() {
    Loaded result;
    void* handle = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* error = ::dlerror();
      result.error = std::string("the NVIDIA driver library libcuda.so.1 was not found (") + (error ? error : "dlopen failed") +
                     "): this machine has no NVIDIA driver installed, so metajit runs on the CPU";
      return result;
    }
    CudaDriver::Api api;
    bool complete = bind(handle, api.init, "cuInit") && bind(handle, api.driver_get_version, "cuDriverGetVersion") &&
                    bind(handle, api.device_get_count, "cuDeviceGetCount") && bind(handle, api.device_get, "cuDeviceGet") &&
                    bind(handle, api.device_get_name, "cuDeviceGetName") &&
                    bind(handle, api.device_get_attribute, "cuDeviceGetAttribute") &&
                    bind(handle, api.device_total_mem, "cuDeviceTotalMem_v2");
    complete = complete && bind(handle, api.primary_context_retain, "cuDevicePrimaryCtxRetain") &&
               bind(handle, api.context_set_current, "cuCtxSetCurrent") &&
               bind(handle, api.memory_allocate, "cuMemAlloc_v2") && bind(handle, api.memory_free, "cuMemFree_v2") &&
               bind(handle, api.memory_information, "cuMemGetInfo_v2") &&
               bind(handle, api.copy_host_to_device, "cuMemcpyHtoDAsync_v2") &&
               bind(handle, api.copy_device_to_host, "cuMemcpyDtoHAsync_v2") &&
               bind(handle, api.stream_create, "cuStreamCreate") &&
               bind(handle, api.stream_synchronize, "cuStreamSynchronize") &&
               bind(handle, api.module_load_data, "cuModuleLoadData") &&
               bind(handle, api.module_get_function, "cuModuleGetFunction") &&
               bind(handle, api.launch_kernel, "cuLaunchKernel");
    bind(handle, api.get_error_name, "cuGetErrorName");
    bind(handle, api.memset_async, "cuMemsetD8Async");  // optional: only library calls that zero-fill need it
    bind(handle, api.get_error_string, "cuGetErrorString");
    if (!complete) {
      result.error = "libcuda.so.1 was found but lacks the driver API functions metajit needs (driver too old?)";
      return result;
    }
    if (int status = api.init(0)) {
      result.error = "the NVIDIA driver is installed but cuInit failed: " + describe(api, status);
      return result;
    }
    auto* driver = new CudaDriver();  // lives for the process, with its Api
    driver->api_ = new CudaDriver::Api(api);
    api.driver_get_version(&driver->version_);
    int count = 0;
    api.device_get_count(&count);
    for (int index = 0; index < count; ++index) {
      int device = 0;
      if (api.device_get(&device, index)) continue;
      CudaDevice info;
      info.index = index;
      char name[256] = {0};
      api.device_get_name(name, sizeof(name) - 1, device);
      info.name = name;
      int major = 0, minor = 0;
      api.device_get_attribute(&major, kAttributeComputeCapabilityMajor, device);
      api.device_get_attribute(&minor, kAttributeComputeCapabilityMinor, device);
      info.architecture = major * 10 + minor;
      api.device_get_attribute(&info.multiprocessors, kAttributeMultiprocessorCount, device);
      size_t bytes = 0;
      api.device_total_mem(&bytes, device);
      info.memory_bytes = int64_t(bytes);
      driver->devices_.push_back(info);
    }
    if (driver->devices_.empty()) {
      result.error = "the NVIDIA driver is installed but reports no CUDA device";
      delete driver->api_;
      delete driver;
      return result;
    }
    result.driver = driver;
    return result;
  }

 private:
  template <typename Function>
  static bool bind(void* handle, Function& function, const char* name) {
    function = reinterpret_cast<Function>(::dlsym(handle, name));
    return function != nullptr;
  }
};

static Loaded& loaded_driver() {
  static Loaded loaded = CudaDriverLoader::load();
  return loaded;
}

CudaDriver& CudaDriver::instance() {
  Loaded& loaded = loaded_driver();
  if (!loaded.driver) throw CudaUnavailableError(loaded.error);
  return *loaded.driver;
}

std::string CudaDriver::unavailable_reason() { return loaded_driver().error; }

std::string CudaDriver::describe(int status) const { return metajit::describe(*api_, status); }

}  // namespace metajit
