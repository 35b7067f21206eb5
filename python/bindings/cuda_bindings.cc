// Bindings of the CUDA backend's parts that need no GPU: what is installed (driver, NVRTC), planning a graph's
// CUDA kernels for mj.inspect(device="cuda"), and compiling them through the CUDA binary cache.
#include <pybind11/functional.h>
#include <list>
#include <map>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "var_caster.h"

#include "jit/codegen/code_ops/code_kernel.h"
#include "jit/codegen/cuda/cuda_renderer.h"
#include "jit/run/cuda_driver.h"
#include "jit/run/cuda_emulator.h"
#include "jit/run/cuda_graph_runner.h"
#include "jit/run/graph_executor.h"
#include "jit/toolchain/compiler.h"
#include "jit/toolchain/cuda_binary_cache.h"
#include "jit/toolchain/kernel_cache.h"
#include "jit/toolchain/kernel_entry.h"
#include "jit/toolchain/nvrtc_compiler.h"
#include "libraries/cuda_libraries.h"
#include "meta_ops/code.h"

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
    bool have_nvrtc = NvrtcCompiler::unavailable_reason().empty();
    py::list kernels;
    for (PlannedKernel& planned : plan_kernels(nodes, /*backend=*/nullptr, /*render_cpu_source=*/true)) {
      const NodePtr& output = planned.lowered.output;
      RenderedCudaKernel rendered;
      const CodeOp* code_op = nullptr;
      if (planned.code) {
        code_op = static_cast<const CodePayload&>(*output->payload).op.get();
        rendered = render_code_cuda_kernel(*code_op, output->inputs);
      } else {
        rendered = render_cuda(planned.lowered.kernel);
      }
      std::string key = have_nvrtc ? CudaBinaryCache::instance().key_for(rendered.source, target) : "";
      py::dict entry;
      entry["key"] = key;
      entry["kind"] = planned.code ? "code" : "generated";
      entry["ops"] = planned.lowered.kernel.fused_ops;
      entry["header"] = rendered.header_comment;
      entry["body"] = rendered.source;
      entry["schedule"] = rendered.schedule;
      entry["library"] = py::none();
      entry["contraction"] = py::none();
      entry["cached"] = key.empty() ? std::string() : CudaBinaryCache::instance().locate(key);
      py::list launches;
      for (const CudaLaunch& launch : rendered.launches)
        launches.append(py::make_tuple(launch.entry, launch.work_items, launch.block_per_item, launch.blocks_needed()));
      entry["launches"] = launches;
      // compile(): the binary for `target`, through the cache. A Code op's compile error is shown against the
      // user's cuda_src; a generated kernel that fails is a metajit bug and is reported with its source.
      NodePtr keep_output = output;
      std::shared_ptr<const CodeOp> keep_op = code_op ? static_cast<const CodePayload&>(*output->payload).op : nullptr;
      entry["compile"] = py::cpp_function([rendered, keep_output, keep_op, target]() {
        std::string key = CudaBinaryCache::instance().key_for(rendered.source, target);
        try {
          CachedCudaBinary cached = CudaBinaryCache::instance().get(key, rendered.source, rendered.header_comment, target);
          return binary_result(cached.binary, cached.origin);
        } catch (const CompileError& error) {
          if (keep_op) throw CompileError(describe_code_compile_error(*keep_op, error.what(), /*cuda=*/true));
          throw CompileError("while compiling the CUDA kernel for " + keep_output->op_name() + " created at " +
                             keep_output->provenance.to_string() +
                             ":\ninternal error: generated CUDA kernel failed to compile (this is a metajit bug; please "
                             "report it with this message)\n" + error.what() + "\n--- kernel source ---\n" +
                             rendered.header_comment + numbered_lines(rendered.source));
        }
      });
      kernels.append(entry);
    }
    return kernels;
  }, "The CUDA kernels that computing these Vars would launch, rendered for one architecture; runs nothing.");

  // Computes `nodes` by running their CUDA kernels in the CPU emulator (jit/run/cuda_emulator.h): tests of the CUDA
  // renderer's numbers on machines without a GPU. Returns (bytes, dtype, shape) per node.
  module.def("emulate_cuda", [](const std::vector<NodePtr>& nodes, int64_t max_blocks) {
    std::map<const Node*, std::vector<char>> values;
    std::list<std::vector<char>> unheld;
    auto data_of = [&](const NodePtr& node) -> void* {
      auto found = values.find(node.get());
      if (found != values.end()) return found->second.data();
      if (node->storage) return node->storage->data();
      throw std::logic_error("CUDA emulation: " + node->op_name() + " was neither computed nor emulated");
    };
    auto allocate = [&](const Node* node, DType dtype, const Shape& shape) -> void* {
      std::vector<char>& bytes = values[node];
      bytes.assign(std::max<size_t>(1, size_t(shape_numel(shape)) * dtype_size(dtype)), 0);
      return bytes.data();
    };
    for (PlannedKernel& planned : plan_kernels(nodes, /*backend=*/nullptr, /*render_cpu_source=*/true, /*multiple_outputs=*/false)) {
      const NodePtr& output = planned.lowered.output;
      std::vector<void*> buffers;
      RenderedCudaKernel rendered;
      std::vector<double> data;
      if (planned.code) {
        const CodePayload& payload = static_cast<const CodePayload&>(*output->payload);
        const CodeOp& op = *payload.op;
        rendered = render_code_cuda_kernel(op, output->inputs);
        std::vector<NodePtr> outputs = payload.outputs();
        if (values.count(output.get())) continue;  // a sibling output's launch computed it
        for (size_t index = 0; index < op.output_shapes.size(); ++index) {
          if (index < outputs.size() && outputs[index]) {
            buffers.push_back(allocate(outputs[index].get(), op.output_dtypes[index], op.output_shapes[index]));
          } else {  // an output nobody holds still needs a buffer of its own
            unheld.emplace_back(size_t(shape_numel(op.output_shapes[index])) * dtype_size(op.output_dtypes[index]) + 1);
            buffers.push_back(unheld.back().data());
          }
        }
        for (const NodePtr& input : output->inputs) buffers.push_back(data_of(input));
        data = op.data_values;
        data.push_back(0);
        buffers.push_back(data.data());
      } else {
        rendered = render_cuda(planned.lowered.kernel);
        buffers.push_back(allocate(output.get(), output->dtype, output->shape));
        for (const NodePtr& input : planned.lowered.inputs) buffers.push_back(data_of(input));
      }
      emulate_cuda_kernel(rendered, buffers, max_blocks);
      if (planned.code && data.back() != 0)
        throw std::runtime_error("the code op created at " + output->provenance.to_string() +
                                 " read a data[\"name\"] that is not in its data");
    }
    py::list results;
    for (const NodePtr& node : nodes) {
      const char* bytes = static_cast<const char*>(data_of(node));
      results.append(py::make_tuple(py::bytes(bytes, size_t(node->numel()) * dtype_size(node->dtype)),
                                    std::string(dtype_name(node->dtype)), node->shape));
    }
    return results;
  });

  // The CPU side of Kernel.compile(): the relocatable object of a planned C++ kernel, through the kernel cache.
  module.def("compile_cpu_kernel", [](const std::string& key, const std::string& source, const std::string& header) {
    KernelCache& cache = KernelCache::instance();
    cache.get(key, source, header);
    std::optional<std::string> entry = cache.entry_bytes(key);
    std::optional<KernelEntry> decoded = entry ? decode_kernel_entry(*entry) : std::nullopt;
    if (!decoded) throw std::runtime_error("kernel " + key + " compiled but its object is not available");
    return py::bytes(decoded->object);
  });
}
