// metajit._core's collectives: as lazy plan entries over Vars (libraries/collective_operation.h), and on numpy
// buffers for the few that run at once (libraries/collectives.h); argument conversion only.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "var_caster.h"

#include "core/dtype.h"
#include "core/executor.h"
#include "libraries/collective_operation.h"
#include "libraries/collectives.h"
#include "libraries/mpi_library.h"
#include "libraries/nccl_library.h"

namespace py = pybind11;
using namespace metajit;

namespace {

ReduceOperation operation_named(const std::string& name) {
  if (name == "sum") return ReduceOperation::Sum;
  if (name == "product") return ReduceOperation::Product;
  if (name == "max") return ReduceOperation::Maximum;
  if (name == "min") return ReduceOperation::Minimum;
  throw std::invalid_argument("unknown reduce operation '" + name + "' (sum, product, max, min)");
}

CollectiveCall call_for(const std::string& collective, const py::array& array, const std::string& dtype,
                        const std::string& line) {
  CollectiveCall call;
  call.collective = collective;
  call.dtype = dtype_from_name(dtype);
  call.shape.assign(array.shape(), array.shape() + array.ndim());
  call.line = line;
  return call;
}

void* writable(py::array& array) {
  if (!(array.flags() & py::array::c_style) || !array.writeable())
    throw std::invalid_argument("collectives need a writable C-contiguous array");
  return array.mutable_data();
}

}  // namespace

void bind_distributed(py::module_& module) {
  py::register_exception<CollectiveMismatchError>(module, "CollectiveMismatchError", PyExc_RuntimeError);
  module.def("distributed_world", [] {
    DistributedWorld& world = DistributedWorld::instance();
    py::dict info;
    info["launched"] = world.launched_by_mpirun();
    info["rank"] = world.rank();
    info["size"] = world.size();
    info["local_rank"] = world.local_rank();
    return info;
  });
  module.def("mpi_unavailable_reason", &mpi_unavailable_reason);
  module.def("add_nccl_search_directory", &add_nccl_search_directory);
  module.def("nccl_status", [] {
    py::dict status;
    std::string reason = nccl_unavailable_reason();
    status["reason"] = reason;
    if (reason.empty()) {
      const NcclApi& api = nccl_api();
      status["version"] = api.version;
      status["path"] = api.path;
    }
    return status;
  });
  module.def("nccl_unique_id", [] {
    NcclUniqueId id;
    int result = nccl_api().get_unique_id(&id);
    if (result != 0) throw std::runtime_error(std::string("ncclGetUniqueId: ") + nccl_api().error_string(result));
    return py::bytes(id.internal, sizeof id.internal);
  });
  module.def(
      "collective",
      [](const std::string& name, const NodePtr& input, const std::string& operation, int root,
         const std::string& line) { return collective(name, input, operation_named(operation), root, line); },
      "The pending result of a collective over `input`, computed in the plan of the next sync.");
  module.def(
      "sync_ordered_nodes",
      [] {
        py::gil_scoped_release release;
        sync_ordered_nodes();
      },
      "Runs the collectives recorded and not yet run.");
  module.def("collective_all_reduce",
             [](py::array array, const std::string& dtype, const std::string& operation, const std::string& line) {
               CollectiveCall call = call_for("all_reduce", array, dtype, line);
               call.operation = operation_named(operation);
               void* data = writable(array);
               py::gil_scoped_release release;
               DistributedWorld::instance().all_reduce(data, call);
             });
  module.def("collective_broadcast", [](py::array array, const std::string& dtype, int root, const std::string& line) {
    CollectiveCall call = call_for("broadcast", array, dtype, line);
    call.root = root;
    void* data = writable(array);
    py::gil_scoped_release release;
    DistributedWorld::instance().broadcast(data, call);
  });
  module.def("collective_all_gather",
             [](py::array input, py::array output, const std::string& dtype, const std::string& line) {
               CollectiveCall call = call_for("all_gather", input, dtype, line);
               const void* source = writable(input);
               void* target = writable(output);
               py::gil_scoped_release release;
               DistributedWorld::instance().all_gather(source, target, call);
             });
  module.def("collective_reduce_scatter", [](py::array input, py::array output, const std::string& dtype,
                                             const std::string& operation, const std::string& line) {
    CollectiveCall call = call_for("reduce_scatter", input, dtype, line);
    call.operation = operation_named(operation);
    const void* source = writable(input);
    void* target = writable(output);
    py::gil_scoped_release release;
    DistributedWorld::instance().reduce_scatter(source, target, call);
  });
  module.def("collective_barrier", [](const std::string& line) {
    CollectiveCall call;
    call.collective = "barrier";
    call.line = line;
    py::gil_scoped_release release;
    DistributedWorld::instance().barrier(call);
  });
  module.def("distributed_start", [] {
    py::gil_scoped_release release;
    DistributedWorld::instance().start();
  });
  module.def("distributed_finalize", [] { DistributedWorld::instance().finalize(); });
  module.def("distributed_abort",
             [](const std::string& message, int code) { DistributedWorld::instance().abort(message, code); });
}
