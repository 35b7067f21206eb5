#include "libraries/mpi_library.h"

#include <dlfcn.h>

#include <stdexcept>

#include "libraries/symbol_binding.h"

namespace metajit {
namespace {

// Debian's Open MPI 4 (openmpi-bin, libopenmpi-dev); the unversioned name only exists with the -dev package.
const char* const kLibraryNames[] = {"libmpi.so.40", "libmpi.so"};

struct Loaded {
  MpiApi api;
  std::string reason;  // why it could not be loaded, "" when it was
};

Loaded load() {
  Loaded loaded;
  void* library = nullptr;
  std::string errors;
  for (const char* name : kLibraryNames) {
    // RTLD_GLOBAL: Open MPI loads its own components (libmca_*) with dlopen, and they resolve symbols of libmpi.
    library = ::dlopen(name, RTLD_NOW | RTLD_GLOBAL);
    if (library) break;
    const char* error = ::dlerror();
    errors += std::string("\n  ") + (error ? error : name);
  }
  if (!library) {
    loaded.reason =
        "Open MPI's library libmpi.so.40 was not found (install Debian's openmpi-bin and "
        "libopenmpi-dev; `make test` does):" +
        errors;
    return loaded;
  }
  MpiApi& api = loaded.api;
  std::string missing;
  bind_symbol(library, api.initialized, "MPI_Initialized", missing);
  bind_symbol(library, api.finalized, "MPI_Finalized", missing);
  bind_symbol(library, api.init_thread, "MPI_Init_thread", missing);
  bind_symbol(library, api.finalize, "MPI_Finalize", missing);
  bind_symbol(library, api.abort, "MPI_Abort", missing);
  bind_symbol(library, api.comm_rank, "MPI_Comm_rank", missing);
  bind_symbol(library, api.comm_size, "MPI_Comm_size", missing);
  bind_symbol(library, api.comm_set_errhandler, "MPI_Comm_set_errhandler", missing);
  bind_symbol(library, api.error_string, "MPI_Error_string", missing);
  bind_symbol(library, api.test, "MPI_Test", missing);
  bind_symbol(library, api.iallreduce, "MPI_Iallreduce", missing);
  bind_symbol(library, api.ibcast, "MPI_Ibcast", missing);
  bind_symbol(library, api.iallgather, "MPI_Iallgather", missing);
  bind_symbol(library, api.ireduce_scatter_block, "MPI_Ireduce_scatter_block", missing);
  bind_symbol(library, api.ibarrier, "MPI_Ibarrier", missing);
  // mpi.h's MPI_COMM_WORLD is `(MPI_Comm)&ompi_mpi_comm_world`, and so on: the addresses are the handles.
  bind_symbol(library, api.world, "ompi_mpi_comm_world", missing);
  bind_symbol(library, api.errors_return, "ompi_mpi_errors_return", missing);
  bind_symbol(library, api.byte, "ompi_mpi_byte", missing);
  bind_symbol(library, api.int8, "ompi_mpi_int8_t", missing);
  bind_symbol(library, api.uint8, "ompi_mpi_uint8_t", missing);
  bind_symbol(library, api.int32, "ompi_mpi_int32_t", missing);
  bind_symbol(library, api.int64, "ompi_mpi_int64_t", missing);
  bind_symbol(library, api.float32, "ompi_mpi_float", missing);
  bind_symbol(library, api.float64, "ompi_mpi_double", missing);
  bind_symbol(library, api.sum, "ompi_mpi_op_sum", missing);
  bind_symbol(library, api.product, "ompi_mpi_op_prod", missing);
  bind_symbol(library, api.maximum, "ompi_mpi_op_max", missing);
  bind_symbol(library, api.minimum, "ompi_mpi_op_min", missing);
  if (!missing.empty())
    loaded.reason = "the MPI library loaded is not Open MPI 4 (metajit binds Open MPI's ABI); missing: " + missing;
  return loaded;
}

const Loaded& loaded() {
  static const Loaded instance = load();
  return instance;
}

}  // namespace

std::string MpiApi::error_text(int code) const {
  char text[512];  // MPI_MAX_ERROR_STRING is 256 in Open MPI
  int length = 0;
  if (error_string && error_string(code, text, &length) == 0) return std::string(text, size_t(length));
  return "MPI error " + std::to_string(code);
}

const MpiApi& mpi_api() {
  const Loaded& library = loaded();
  if (!library.reason.empty()) throw std::runtime_error(library.reason);
  return library.api;
}

std::string mpi_unavailable_reason() { return loaded().reason; }

}  // namespace metajit
