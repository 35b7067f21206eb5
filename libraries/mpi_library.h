// Open MPI's C library (libmpi.so.40, Debian's libopenmpi3), loaded with dlopen on first use like NVRTC and cuDNN,
// so that metajit neither links it nor needs it: without mpirun the world has one rank and nothing here is loaded.
// Only the functions the collectives (libraries/collectives.h) call are bound. MPI's handles are Open MPI's
// pointers to its own structs, and its predefined objects (MPI_COMM_WORLD, MPI_FLOAT, MPI_SUM, ...) are the
// addresses of global structs that mpi.h's macros name; both are spelled here, which ties this file to Open MPI's
// ABI (stable across its 4.x releases). This file must not know about Vars, graphs or Python.
#pragma once
#include <string>

namespace metajit {

struct MpiApi {
  using Handle = void*;  // MPI_Comm, MPI_Datatype, MPI_Op, MPI_Request, MPI_Errhandler: pointers in Open MPI
  int (*initialized)(int* flag) = nullptr;
  int (*finalized)(int* flag) = nullptr;
  int (*init_thread)(int* argc, char*** argv, int required, int* provided) = nullptr;
  int (*finalize)() = nullptr;
  int (*abort)(Handle communicator, int code) = nullptr;
  int (*comm_rank)(Handle communicator, int* rank) = nullptr;
  int (*comm_size)(Handle communicator, int* size) = nullptr;
  int (*comm_set_errhandler)(Handle communicator, Handle handler) = nullptr;
  int (*error_string)(int code, char* text, int* length) = nullptr;
  int (*test)(Handle* request, int* done, void* status) = nullptr;
  int (*iallreduce)(const void* send, void* receive, int count, Handle type, Handle operation, Handle communicator,
                    Handle* request) = nullptr;
  int (*ibcast)(void* buffer, int count, Handle type, int root, Handle communicator, Handle* request) = nullptr;
  int (*iallgather)(const void* send, int send_count, Handle send_type, void* receive, int receive_count,
                    Handle receive_type, Handle communicator, Handle* request) = nullptr;
  int (*ireduce_scatter_block)(const void* send, void* receive, int count, Handle type, Handle operation,
                               Handle communicator, Handle* request) = nullptr;
  int (*ibarrier)(Handle communicator, Handle* request) = nullptr;

  // Predefined objects.
  Handle world = nullptr;
  Handle errors_return = nullptr;
  Handle byte = nullptr, int8 = nullptr, uint8 = nullptr, int32 = nullptr, int64 = nullptr, float32 = nullptr,
         float64 = nullptr;
  Handle sum = nullptr, product = nullptr, maximum = nullptr, minimum = nullptr;

  static constexpr int kThreadSerialized = 2;                     // MPI_THREAD_SERIALIZED
  static void* in_place() { return reinterpret_cast<void*>(1); }  // MPI_IN_PLACE

  std::string error_text(int code) const;
};

// The process's Open MPI, loaded on first call. Throws std::runtime_error saying what to install when it is missing.
const MpiApi& mpi_api();
// "" when Open MPI's library can be loaded, otherwise why not (without throwing).
std::string mpi_unavailable_reason();

}  // namespace metajit
