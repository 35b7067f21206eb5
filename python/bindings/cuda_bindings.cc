// Bindings of the CUDA backend: what is installed (driver, NVRTC), where kernels run, a graph's CUDA kernels for
// mj.inspect(device="cuda") and compiling them, and mj.cuda.emulate. They only convert arguments and results:
// planning, rendering and running stay in jit/run (cuda_graph_runner.h, cuda_kernel_inspection.h).
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "var_caster.h"

#include "jit/run/cuda_driver.h"
#include "jit/run/cuda_graph_runner.h"
#include "jit/run/cuda_kernel_inspection.h"
#include "jit/toolchain/cuda_binary_cache.h"
#include "jit/toolchain/kernel_cache.h"
#include "jit/toolchain/nvrtc_compiler.h"
#include "libraries/cuda_libraries.h"

namespace py = pybind11;
using namespace metajit;

namespace {

py::dict binary_result(const CudaBinary& binary, const std::string& origin) {
  py::dict result;
  result["binary"] = py::bytes(binary.bytes);
  result["format"] = binary.is_ptx ? "ptx" : "cubin";
  result["architecture"] = binary.architecture;
  result["origin"] = origin;
  return result;
}

}  // namespace

void bind_cuda(py::module_& module) {
  py::register_exception<CudaUnavailableError>(module, "CudaUnavailableError", PyExc_RuntimeError);
  module.def("add_nvrtc_search_directory", &NvrtcCompiler::add_search_directory);
  module.def("add_cuda_library_search_directory", &add_cuda_library_search_directory);
  module.def("cuda_status", [] {
    py::dict status;
    std::string driver_reason = CudaDriver::unavailable_reason();
    status["driver_reason"] = driver_reason;
    py::list devices;
    if (driver_reason.empty()) {
      CudaDriver& driver = CudaDriver::instance();
      status["driver_version"] = driver.version();
      for (const CudaDevice& device : driver.devices()) {
        py::dict entry;
        entry["index"] = device.index;
        entry["name"] = device.name;
        entry["architecture"] = device.architecture;
        entry["multiprocessors"] = device.multiprocessors;
        entry["memory_bytes"] = device.memory_bytes;
        devices.append(entry);
      }
    }
    status["devices"] = devices;
    std::string nvrtc_reason = NvrtcCompiler::unavailable_reason();
    status["nvrtc_reason"] = nvrtc_reason;
    if (nvrtc_reason.empty()) {
      NvrtcCompiler& nvrtc = NvrtcCompiler::instance();
      status["nvrtc_version"] = nvrtc.version();
      status["nvrtc_path"] = nvrtc.library_path();
      status["nvrtc_architectures"] = nvrtc.supported_architectures();
    }
    // cuBLAS and cuDNN load with the GPU's first plan: asking sooner would create the CUDA context.
    bool on_gpu = driver_reason.empty() && cuda_execution() == CudaExecution::Gpu;
    const char* not_yet = "not loaded: they load when kernels first run on the GPU";
    status["cublas_reason"] = on_gpu ? cublas_unavailable_reason() : not_yet;
    status["cudnn_reason"] = on_gpu ? cudnn_unavailable_reason() : not_yet;
    return status;
  }, "What the CUDA backend finds on this machine; never raises.");
  module.def("set_cuda_execution", [](const std::string& mode) {
    if (mode == "off") set_cuda_execution(CudaExecution::Off);
    else if (mode == "gpu") set_cuda_execution(CudaExecution::Gpu);
    else if (mode == "emulator") set_cuda_execution(CudaExecution::Emulator);
    else throw std::invalid_argument("CUDA execution is 'off', 'gpu' or 'emulator', not '" + mode + "'");
  });
  module.def("cuda_execution", [] {
    switch (cuda_execution()) {
      case CudaExecution::Gpu: return "gpu";
      case CudaExecution::Emulator: return "emulator";
      default: return "off";
    }
  });
  // x.cuda() / x.cpu() after x.sync(): make the value resident on that side (a copy when it is not yet).
  module.def("move_to_device", [](const NodePtr& node) {
    if (!device_memory()) use_device_memory(CudaExecution::Gpu);  // x.cuda() with kernels still on the CPU
    if (!node->storage) throw std::logic_error("internal error: move_to_device of a value not computed");
    py::gil_scoped_release release;
    node->storage->device_data();
  });
  module.def("move_to_host", [](const NodePtr& node) {
    if (!node->storage) throw std::logic_error("internal error: move_to_host of a value not computed");
    py::gil_scoped_release release;
    node->storage->data();
  });
  module.def("value_on_device", [](const NodePtr& node) { return node->storage && node->storage->on_device(); });
  module.def("value_on_host", [](const NodePtr& node) { return node->storage && node->storage->on_host(); });
  module.def("cuda_synchronize", [] {
    py::gil_scoped_release release;
    synchronize_cuda();
  });
  module.def("precompile_cuda", [](const std::vector<NodePtr>& nodes, int architecture) {
    CudaTarget target;
    target.architecture = architecture;
    py::gil_scoped_release release;  // NVRTC runs on the thread pool meanwhile
    return precompile_cuda(nodes, target);
  }, "Compiles the CUDA kernels computing these Vars for one architecture, in parallel; returns how many compiled.");
  module.def("nvrtc_compile", [](const std::string& source, int architecture) {
    CudaTarget target;
    target.architecture = architecture;
    CudaBinary binary;
    {
      py::gil_scoped_release release;
      binary = NvrtcCompiler::instance().compile(source, target);
    }
    return py::bytes(binary.bytes);
  }, "CUDA source -> CUBIN (PTX for an architecture NVRTC does not know) with the flags generated kernels get.");
  module.def("parse_cuda_architecture", [](const std::string& text) { return CudaTarget::parse(text).architecture; });

  module.def("plan_cuda", [](const std::vector<NodePtr>& nodes, int architecture) {
    CudaTarget target;
    target.architecture = architecture;
    py::list kernels;
    for (InspectedCudaKernel& kernel : inspect_cuda_kernels(nodes, target)) {
      py::dict entry;
      entry["key"] = kernel.key;
      entry["kind"] = kernel.code ? "code" : "generated";
      entry["ops"] = kernel.fused_ops;
      entry["header"] = kernel.rendered.header_comment;
      entry["body"] = kernel.rendered.source;
      entry["schedule"] = kernel.rendered.schedule;
      entry["library"] = py::none();
      entry["contraction"] = py::none();
      entry["cached"] = kernel.cached;
      py::list launches;
      for (const CudaLaunch& launch : kernel.rendered.launches)
        launches.append(py::make_tuple(launch.entry, launch.work_items, launch.block_per_item, launch.blocks_needed()));
      entry["launches"] = launches;
      entry["compile"] = py::cpp_function([kernel, target]() {
        CachedCudaBinary cached = compile_inspected_cuda_kernel(kernel, target);
        return binary_result(cached.binary, cached.origin);
      });
      kernels.append(entry);
    }
    return kernels;
  }, "The CUDA kernels that computing these Vars would launch, rendered for one architecture; runs nothing.");

  // mj.cuda.emulate: (bytes, dtype, shape) per node, computed by the CPU emulator of CUDA kernels.
  module.def("emulate_cuda", [](const std::vector<NodePtr>& nodes, int64_t max_blocks) {
    std::vector<StoragePtr> values = emulate_cuda(nodes, max_blocks);
    py::list results;
    for (size_t index = 0; index < nodes.size(); ++index) {
      const Node& node = *nodes[index];
      results.append(py::make_tuple(
          py::bytes(static_cast<const char*>(values[index]->data()), size_t(node.numel()) * dtype_size(node.dtype)),
          std::string(dtype_name(node.dtype)), node.shape));
    }
    return results;
  });

  // The CPU side of Kernel.compile(): the relocatable object of a planned C++ kernel, through the kernel cache.
  module.def("compile_cpu_kernel", [](const std::string& key, const std::string& source, const std::string& header) {
    return py::bytes(KernelCache::instance().object_bytes(key, source, header));
  });
}
