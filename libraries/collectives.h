// Collectives over the processes of an `mpirun` job (Open MPI, libraries/mpi_library.h), on host buffers: all-reduce,
// broadcast, all-gather, reduce-scatter and barrier. Without mpirun the world is one rank, Open MPI is never
// loaded and every collective returns at once with the buffer as it was.
//
// Failure is loud, never a hang. Before each collective the ranks exchange what they are about to call (the
// collective, dtype, shape, root or operation, and the caller's line): a rank that calls it differently makes every
// rank throw CollectiveMismatchError naming each rank's call. Every wait is bounded by METAJIT_DISTRIBUTED_TIMEOUT:
// past it the waiting rank prints which collective and line it waited in and stops the whole job with MPI_Abort,
// since the peers it waits for cannot be unblocked any other way.
//
// This file works on bytes and shapes; it must not know about Vars, graphs or Python.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace metajit {

enum class ReduceOperation { Sum, Product, Maximum, Minimum };
const char* reduce_operation_name(ReduceOperation operation);  // "sum", "product", "max", "min"

// What one rank asks for; every rank must ask for the same (the line may differ).
struct CollectiveCall {
  std::string collective;  // "all_reduce", "broadcast", ...
  DType dtype = DType::Float32;
  std::vector<int64_t> shape;  // of the input
  ReduceOperation operation = ReduceOperation::Sum;
  int root = -1;     // broadcast's source rank
  std::string line;  // the user's line, "train.py:12"
  int64_t element_count() const;
};

class CollectiveMismatchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class DistributedWorld;

// A collective started without waiting (its requests, one per piece), so that kernels can run while it moves.
class PendingCollective {
 public:
  // Whether every piece has finished; Open MPI makes progress only inside calls like this one.
  bool test();
  // Until it has finished, bounded by METAJIT_DISTRIBUTED_TIMEOUT like every wait.
  void wait();

 private:
  friend class DistributedWorld;
  DistributedWorld* world_ = nullptr;
  CollectiveCall call_;
  std::vector<void*> requests_;  // the pieces not known to be finished
};

class DistributedWorld {
 public:
  static DistributedWorld& instance();  // the job this process was started in (one rank without mpirun)

  bool launched_by_mpirun() const { return launched_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }

  // `output` receives the reduction of every rank's `input` (call.element_count() elements of call.dtype); the two
  // may be the same buffer.
  void all_reduce(const void* input, void* output, const CollectiveCall& call);
  // The same started without waiting; null when it finished at once (a world of one rank). Every rank must start
  // its collectives in the same order; the buffers must stay until the collective has finished.
  std::unique_ptr<PendingCollective> start_all_reduce(const void* input, void* output, const CollectiveCall& call);
  // In place; `data` of call.root is copied to every rank.
  void broadcast(void* data, const CollectiveCall& call);
  // `output` holds size() copies of `input`'s shape, rank 0's first.
  void all_gather(const void* input, void* output, const CollectiveCall& call);
  // `input`'s first dimension is size() pieces; `output` (one piece) is their reduction over the ranks, this
  // rank's piece.
  void reduce_scatter(const void* input, void* output, const CollectiveCall& call);
  void barrier(const CollectiveCall& call);

  // MPI_Init_thread, once. Open MPI's initialisation waits for every rank, so a job calls it on every rank as it
  // starts (metajit.distributed does at import under mpirun), not at a first collective that one rank may skip.
  void start();
  // Ends MPI at a normal exit. abort() stops every rank of the job (an uncaught error on one rank).
  void finalize();
  [[noreturn]] void abort(const std::string& message, int code = 1);

 private:
  friend class PendingCollective;
  DistributedWorld();
  // Before a collective: false in a world of one rank (nothing to do), else starts MPI and checks that every rank
  // makes the same call.
  bool begin(const CollectiveCall& call);
  void check_same_call(const CollectiveCall& call);
  void wait(void* request, const CollectiveCall& call, const char* stage);
  // Runs a collective in pieces of at most INT_MAX / 2 elements (MPI counts are ints), each started at its byte
  // offset into the buffers.
  void in_pieces(const CollectiveCall& call, const std::function<void(int64_t, int, void**)>& start_piece);

  bool launched_ = false;
  bool started_ = false;
  bool finished_ = false;
  int rank_ = 0, size_ = 1, local_rank_ = 0;
  int64_t sequence_ = 0;  // collectives called so far, to name the one that failed
};

}  // namespace metajit
