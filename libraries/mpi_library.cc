#include "libraries/mpi_library.h"

#include <dlfcn.h>

#include <stdexcept>

namespace metajit {
namespace {

// Debian's Open MPI 4 (openmpi-bin, libopenmpi-dev); the unversioned name only exists with the -dev package.
const char* const kLibraryNames[] = {"libmpi.so.40", "libmpi.so"};

struct Loaded {
  MpiApi api;
  std::string reason;  // why it could not be loaded, "" when it was
};

template <typename Pointer>
void resolve(void* library, Pointer& target, const char* name, std::string& missing) {
  target = reinterpret_cast<Pointer>(::dlsym(library, name));
  if (!target) missing += std::string(missing.empty() ? "" : ", ") + name;
}

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
  resolve(library, api.initialized, "MPI_Initialized", missing);
  resolve(library, api.finalized, "MPI_Finalized", missing);
  resolve(library, api.init_thread, "MPI_Init_thread", missing);
  resolve(library, api.finalize, "MPI_Finalize", missing);
  resolve(library, api.abort, "MPI_Abort", missing);
  resolve(library, api.comm_rank, "MPI_Comm_rank", missing);
  resolve(library, api.comm_size, "MPI_Comm_size", missing);
  resolve(library, api.comm_set_errhandler, "MPI_Comm_set_errhandler", missing);
  resolve(library, api.error_string, "MPI_Error_string", missing);
  resolve(library, api.test, "MPI_Test", missing);
  resolve(library, api.iallreduce, "MPI_Iallreduce", missing);
  resolve(library, api.ibcast, "MPI_Ibcast", missing);
  resolve(library, api.iallgather, "MPI_Iallgather", missing);
  resolve(library, api.ireduce_scatter_block, "MPI_Ireduce_scatter_block", missing);
  resolve(library, api.ibarrier, "MPI_Ibarrier", missing);
  // mpi.h's MPI_COMM_WORLD is `(MPI_Comm)&ompi_mpi_comm_world`, and so on: the addresses are the handles.
  resolve(library, api.world, "ompi_mpi_comm_world", missing);
  resolve(library, api.errors_return, "ompi_mpi_errors_return", missing);
  resolve(library, api.byte, "ompi_mpi_byte", missing);
  resolve(library, api.int8, "ompi_mpi_int8_t", missing);
  resolve(library, api.uint8, "ompi_mpi_uint8_t", missing);
  resolve(library, api.int32, "ompi_mpi_int32_t", missing);
  resolve(library, api.int64, "ompi_mpi_int64_t", missing);
  resolve(library, api.float32, "ompi_mpi_float", missing);
  resolve(library, api.float64, "ompi_mpi_double", missing);
  resolve(library, api.sum, "ompi_mpi_op_sum", missing);
  resolve(library, api.product, "ompi_mpi_op_prod", missing);
  resolve(library, api.maximum, "ompi_mpi_op_max", missing);
  resolve(library, api.minimum, "ompi_mpi_op_min", missing);
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
