// NCCL (libnccl.so.2, from the nvidia-nccl-cu13 wheel), loaded with dlopen on first use, for collectives on CUDA
// tensors between the ranks of an mpirun job: the ranks agree on a communicator through a unique id that rank 0
// makes and broadcasts over MPI (libraries/collectives.h). Only the functions those collectives call are bound,
// with NCCL's C types spelled here (communicators and streams are pointers, results and enums are ints). Loading
// and making a unique id need no GPU, so a machine without one checks that NCCL is there and says what is missing.
// This file must not know about Vars, graphs or Python.
#pragma once
#include <cstddef>
#include <string>

namespace metajit {

struct NcclUniqueId {
  char internal[128];  // NCCL_UNIQUE_ID_BYTES
};

struct NcclApi {
  int (*get_version)(int* version) = nullptr;
  int (*get_unique_id)(NcclUniqueId* id) = nullptr;
  int (*comm_init_rank)(void** communicator, int ranks, NcclUniqueId id, int rank) = nullptr;
  int (*comm_destroy)(void* communicator) = nullptr;
  int (*comm_abort)(void* communicator) = nullptr;
  int (*comm_get_async_error)(void* communicator, int* result) = nullptr;
  const char* (*error_string)(int result) = nullptr;
  int (*all_reduce)(const void* send, void* receive, size_t count, int type, int operation, void* communicator,
                    void* stream) = nullptr;
  int (*broadcast)(const void* send, void* receive, size_t count, int type, int root, void* communicator,
                   void* stream) = nullptr;
  int (*all_gather)(const void* send, void* receive, size_t send_count, int type, void* communicator,
                    void* stream) = nullptr;
  int (*reduce_scatter)(const void* send, void* receive, size_t receive_count, int type, int operation,
                        void* communicator, void* stream) = nullptr;
  std::string path;  // where it was loaded from
  int version = 0;   // 23203 for 2.32.3
};

// ncclDataType_t and ncclRedOp_t values.
enum NcclType {
  kNcclInt8 = 0,
  kNcclUInt8 = 1,
  kNcclInt32 = 2,
  kNcclInt64 = 4,
  kNcclFloat16 = 6,
  kNcclFloat32 = 7,
  kNcclFloat64 = 8
};
enum NcclOperation { kNcclSum = 0, kNcclProduct = 1, kNcclMaximum = 2, kNcclMinimum = 3, kNcclAverage = 4 };

void add_nccl_search_directory(const std::string& directory);  // before first use (the wheel's folder)
// The process's NCCL, loaded on first call; throws std::runtime_error naming every place it looked.
const NcclApi& nccl_api();
std::string nccl_unavailable_reason();  // "" when NCCL loads

}  // namespace metajit
