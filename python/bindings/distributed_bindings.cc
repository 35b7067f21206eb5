// metajit._core's collectives: lazy plan entries over Vars (libraries/collective_operation.h), and the barrier,
// which runs at once (libraries/collectives.h); argument conversion only.
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
