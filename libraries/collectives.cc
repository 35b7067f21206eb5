#include "libraries/collectives.h"

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>

#include "core/flags.h"
#include "libraries/mpi_library.h"

namespace metajit {
namespace {

int environment_integer(const char* name, int otherwise) {
  const char* text = std::getenv(name);
  return text && *text ? std::atoi(text) : otherwise;
}

MpiApi::Handle mpi_type(const MpiApi& api, DType dtype) {
  switch (dtype) {
    case DType::Bool:
    case DType::UInt8: return api.uint8;
    case DType::Int8: return api.int8;
    case DType::Int32: return api.int32;
    case DType::Int64: return api.int64;
    case DType::Float32: return api.float32;
    case DType::Float64: return api.float64;
    case DType::Float16: break;
  }
  throw std::invalid_argument(std::string("collectives: no MPI type for ") + dtype_name(dtype) +
                              " (metajit.distributed reduces float16 as float32)");
}

MpiApi::Handle mpi_operation(const MpiApi& api, ReduceOperation operation) {
  switch (operation) {
    case ReduceOperation::Sum: return api.sum;
    case ReduceOperation::Product: return api.product;
    case ReduceOperation::Maximum: return api.maximum;
    case ReduceOperation::Minimum: return api.minimum;
  }
  return api.sum;
}

void check(const MpiApi& api, int status, const CollectiveCall& call, const char* function) {
  if (status != 0)
    throw std::runtime_error(std::string(function) + " failed in " + call.collective + " at " + call.line + ": " +
                             api.error_text(status));
}

int as_count(int64_t count, const CollectiveCall& call) {
  if (count > INT_MAX)
    throw std::invalid_argument(call.collective + " at " + call.line + ": " + std::to_string(count) +
                                " elements per rank is more than MPI's int count allows in one call");
  return int(count);
}

std::string describe(const CollectiveCall& call) {
  std::string text = call.collective + " " + dtype_name(call.dtype) + " [";
  for (size_t i = 0; i < call.shape.size(); ++i) text += (i ? ", " : "") + std::to_string(call.shape[i]);
  text += "]";
  if (call.collective == "all_reduce" || call.collective == "reduce_scatter")
    text += std::string(" ") + reduce_operation_name(call.operation);
  if (call.collective == "broadcast") text += " from rank " + std::to_string(call.root);
  return text + " at " + (call.line.empty() ? std::string("an unknown line") : call.line);
}

// What each rank sends the others before a collective; fixed size, so one all-gather of bytes carries it.
struct CallDescriptor {
  int64_t sequence;
  int64_t dimensions;
  int64_t shape[8];
  uint64_t shape_hash;  // of every extent, for shapes of more than 8 dims
  int32_t dtype, operation, root, padding;
  char collective[24];
  char line[160];
};

CallDescriptor descriptor_of(const CollectiveCall& call, int64_t sequence) {
  CallDescriptor descriptor;
  std::memset(&descriptor, 0, sizeof descriptor);
  descriptor.sequence = sequence;
  descriptor.dimensions = int64_t(call.shape.size());
  uint64_t hash = 1469598103934665603ull;
  for (size_t i = 0; i < call.shape.size(); ++i) {
    if (i < 8) descriptor.shape[i] = call.shape[i];
    hash = (hash ^ uint64_t(call.shape[i])) * 1099511628211ull;
  }
  descriptor.shape_hash = hash;
  descriptor.dtype = int32_t(call.dtype);
  descriptor.operation = int32_t(call.operation);
  descriptor.root = call.root;
  std::snprintf(descriptor.collective, sizeof descriptor.collective, "%s", call.collective.c_str());
  std::snprintf(descriptor.line, sizeof descriptor.line, "%s", call.line.c_str());
  return descriptor;
}

bool same_call(const CallDescriptor& a, const CallDescriptor& b) {
  return a.sequence == b.sequence && a.dimensions == b.dimensions && a.shape_hash == b.shape_hash &&
         a.dtype == b.dtype && a.operation == b.operation && a.root == b.root &&
         std::strncmp(a.collective, b.collective, sizeof a.collective) == 0;
}

CollectiveCall call_of(const CallDescriptor& descriptor) {
  CollectiveCall call;
  call.collective = descriptor.collective;
  call.dtype = DType(descriptor.dtype);
  for (int64_t i = 0; i < std::min<int64_t>(descriptor.dimensions, 8); ++i) call.shape.push_back(descriptor.shape[i]);
  call.operation = ReduceOperation(descriptor.operation);
  call.root = descriptor.root;
  call.line = descriptor.line;
  return call;
}

}  // namespace

const char* reduce_operation_name(ReduceOperation operation) {
  switch (operation) {
    case ReduceOperation::Sum: return "sum";
    case ReduceOperation::Product: return "product";
    case ReduceOperation::Maximum: return "max";
    case ReduceOperation::Minimum: return "min";
  }
  return "?";
}

int64_t CollectiveCall::element_count() const {
  int64_t count = 1;
  for (int64_t extent : shape) count *= extent;
  return count;
}

DistributedWorld& DistributedWorld::instance() {
  static DistributedWorld world;
  return world;
}

DistributedWorld::DistributedWorld() {
  // Open MPI's launcher tells each process its place; without it this process is the whole world.
  int size = environment_integer("OMPI_COMM_WORLD_SIZE", 0);
  if (size <= 0) return;
  launched_ = true;
  size_ = size;
  rank_ = environment_integer("OMPI_COMM_WORLD_RANK", 0);
  local_rank_ = environment_integer("OMPI_COMM_WORLD_LOCAL_RANK", rank_);
}

void DistributedWorld::start() {
  if (started_) return;
  if (finished_) throw std::runtime_error("metajit.distributed: a collective after MPI was finalized");
  const MpiApi& api = mpi_api();
  int initialized = 0;
  api.initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    // Serialized: collectives come from one thread at a time (Python's, later the run loop's).
    int status = api.init_thread(nullptr, nullptr, MpiApi::kThreadSerialized, &provided);
    if (status != 0) throw std::runtime_error("MPI_Init_thread failed: " + api.error_text(status));
  }
  api.comm_set_errhandler(api.world, api.errors_return);  // errors come back as codes, not as an abort
  int rank = 0, size = 1;
  api.comm_rank(api.world, &rank);
  api.comm_size(api.world, &size);
  rank_ = rank;
  size_ = size;
  started_ = true;
}

void DistributedWorld::wait(void* request, const CollectiveCall& call, const char* stage) {
  const MpiApi& api = mpi_api();
  auto timeout = std::chrono::seconds(flag_integer(Flag::DistributedTimeout).value_or(300));
  auto start = std::chrono::steady_clock::now();
  MpiApi::Handle handle = request;
  for (int64_t polls = 0;; ++polls) {
    int done = 0;
    check(api, api.test(&handle, &done, nullptr), call, "MPI_Test");
    if (done) return;
    // Spin briefly (a peer a few microseconds behind), then sleep so a rank waiting for a slow one yields the CPU.
    if (polls > 2000) std::this_thread::sleep_for(std::chrono::microseconds(polls > 20000 ? 1000 : 50));
    if (polls % 64 == 0 && std::chrono::steady_clock::now() - start > timeout)
      abort("metajit.distributed: rank " + std::to_string(rank_) + " waited " + std::to_string(timeout.count()) +
            " s " + stage + " " + describe(call) + " (collective #" + std::to_string(sequence_) +
            "): another rank did not reach it (it stopped, skipped this collective or is still busy). Stopping "
            "the job; METAJIT_DISTRIBUTED_TIMEOUT sets the limit in seconds.");
  }
}

void DistributedWorld::check_same_call(const CollectiveCall& call) {
  const MpiApi& api = mpi_api();
  CallDescriptor mine = descriptor_of(call, sequence_);
  std::vector<CallDescriptor> all(static_cast<size_t>(size_));
  MpiApi::Handle request = nullptr;
  check(api,
        api.iallgather(&mine, int(sizeof mine), api.byte, all.data(), int(sizeof mine), api.byte, api.world, &request),
        call, "MPI_Iallgather");
  wait(request, call, "for the other ranks to reach");
  bool same = true;
  for (const CallDescriptor& other : all) same = same && same_call(other, all[0]);
  if (same) return;
  std::string message = "metajit.distributed: the ranks called different collectives (collective #" +
                        std::to_string(sequence_) + "); every rank must make the same calls in the same order:";
  for (size_t rank = 0; rank < all.size(); ++rank) {
    message += "\n  rank " + std::to_string(rank) + ": " + describe(call_of(all[rank]));
    if (all[rank].sequence != sequence_) message += " (its collective #" + std::to_string(all[rank].sequence) + ")";
  }
  throw CollectiveMismatchError(message);
}

void DistributedWorld::all_reduce(const void* input, void* output, const CollectiveCall& call) {
  if (std::unique_ptr<PendingCollective> pending = start_all_reduce(input, output, call)) pending->wait();
}

std::unique_ptr<PendingCollective> DistributedWorld::start_all_reduce(const void* input, void* output,
                                                                      const CollectiveCall& call) {
  if (!begin(call)) {
    if (input != output && call.element_count())
      std::memcpy(output, input, size_t(call.element_count() * dtype_size(call.dtype)));
    return nullptr;
  }
  const MpiApi& api = mpi_api();
  auto pending = std::make_unique<PendingCollective>();
  pending->world_ = this;
  pending->call_ = call;
  // Every piece is started at once (MPI keeps collectives on one communicator in the order they start).
  int64_t remaining = call.element_count(), offset = 0;
  while (remaining > 0) {
    int count = int(std::min<int64_t>(remaining, INT_MAX / 2));
    const void* send = input == output ? MpiApi::in_place() : static_cast<const char*>(input) + offset;
    MpiApi::Handle request = nullptr;
    check(api,
          api.iallreduce(send, static_cast<char*>(output) + offset, count, mpi_type(api, call.dtype),
                         mpi_operation(api, call.operation), api.world, &request),
          call, "MPI_Iallreduce");
    pending->requests_.push_back(request);
    offset += int64_t(count) * dtype_size(call.dtype);
    remaining -= count;
  }
  return pending;
}

bool PendingCollective::test() {
  const MpiApi& api = mpi_api();
  while (!requests_.empty()) {
    int done = 0;
    MpiApi::Handle handle = requests_.front();
    check(api, api.test(&handle, &done, nullptr), call_, "MPI_Test");
    if (!done) return false;
    requests_.erase(requests_.begin());
  }
  return true;
}

void PendingCollective::wait() {
  for (void* request : requests_) world_->wait(request, call_, "in");
  requests_.clear();
}

void DistributedWorld::broadcast(void* data, const CollectiveCall& call) {
  if (call.root < 0 || call.root >= size_)
    throw std::invalid_argument("broadcast at " + call.line + ": source rank " + std::to_string(call.root) +
                                " is not in a world of " + std::to_string(size_) + " ranks");
  if (!begin(call)) return;
  const MpiApi& api = mpi_api();
  in_pieces(call, [&](int64_t offset, int count, MpiApi::Handle* request) {
    check(
        api,
        api.ibcast(static_cast<char*>(data) + offset, count, mpi_type(api, call.dtype), call.root, api.world, request),
        call, "MPI_Ibcast");
  });
}

void DistributedWorld::in_pieces(const CollectiveCall& call,
                                 const std::function<void(int64_t, int, void**)>& start_piece) {
  // MPI counts are ints: a larger buffer goes in pieces, each started and waited for in turn.
  int64_t remaining = call.element_count();
  int64_t offset = 0;
  while (remaining > 0) {
    int count = int(std::min<int64_t>(remaining, INT_MAX / 2));
    MpiApi::Handle request = nullptr;
    start_piece(offset, count, &request);
    wait(request, call, "in");
    offset += int64_t(count) * dtype_size(call.dtype);
    remaining -= count;
  }
}

void DistributedWorld::all_gather(const void* input, void* output, const CollectiveCall& call) {
  int64_t bytes = call.element_count() * dtype_size(call.dtype);
  if (size_ == 1) {
    if (bytes) std::memcpy(output, input, size_t(bytes));
    return;
  }
  begin(call);
  const MpiApi& api = mpi_api();
  int count = as_count(call.element_count(), call);
  MpiApi::Handle type = mpi_type(api, call.dtype);
  MpiApi::Handle request = nullptr;
  check(api, api.iallgather(input, count, type, output, count, type, api.world, &request), call, "MPI_Iallgather");
  wait(request, call, "in");
}

void DistributedWorld::reduce_scatter(const void* input, void* output, const CollectiveCall& call) {
  if (call.shape.empty() || call.shape[0] % size_ != 0)
    throw std::invalid_argument("reduce_scatter at " + call.line + ": the input's first dimension must divide into " +
                                std::to_string(size_) + " equal pieces, one per rank");
  int64_t piece = call.element_count() / size_;
  if (size_ == 1) {
    if (piece) std::memcpy(output, input, size_t(piece * dtype_size(call.dtype)));
    return;
  }
  begin(call);
  const MpiApi& api = mpi_api();
  MpiApi::Handle request = nullptr;
  check(api,
        api.ireduce_scatter_block(input, output, as_count(piece, call), mpi_type(api, call.dtype),
                                  mpi_operation(api, call.operation), api.world, &request),
        call, "MPI_Ireduce_scatter_block");
  wait(request, call, "in");
}

bool DistributedWorld::begin(const CollectiveCall& call) {
  if (size_ == 1) return false;
  start();
  check_same_call(call);
  ++sequence_;
  return true;
}

void DistributedWorld::barrier(const CollectiveCall& call) {
  if (!begin(call)) return;
  const MpiApi& api = mpi_api();
  MpiApi::Handle request = nullptr;
  check(api, api.ibarrier(api.world, &request), call, "MPI_Ibarrier");
  wait(request, call, "in");
}

void DistributedWorld::finalize() {
  if (!started_ || finished_) return;
  finished_ = true;
  const MpiApi& api = mpi_api();
  int finalized = 0;
  api.finalized(&finalized);
  if (!finalized) api.finalize();
}

void DistributedWorld::abort(const std::string& message, int code) {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  if (launched_ && size_ > 1) {
    const MpiApi& api = mpi_api();
    int initialized = 0;
    api.initialized(&initialized);
    if (initialized) api.abort(api.world, code);  // ends every rank; does not return
  }
  std::_Exit(code);
}

}  // namespace metajit
