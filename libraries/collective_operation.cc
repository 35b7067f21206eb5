#include "libraries/collective_operation.h"

#include <cstring>
#include <stdexcept>

namespace metajit {

void CollectiveOperation::run(void* output, const std::vector<const void*>& inputs) const {
  DistributedWorld& world = DistributedWorld::instance();
  const void* input = inputs.at(0);
  if (call_.collective == "all_gather") return world.all_gather(input, output, call_);
  if (call_.collective == "reduce_scatter") return world.reduce_scatter(input, output, call_);
  if (call_.collective == "all_reduce") return world.all_reduce(input, output, call_);
  if (call_.collective == "broadcast") {  // in place over the output: the source rank's starts as its input
    size_t bytes = size_t(call_.element_count() * dtype_size(call_.dtype));
    if (bytes && (world.rank() == call_.root || world.size() == 1)) std::memcpy(output, input, bytes);
    return world.broadcast(output, call_);
  }
  throw std::logic_error("internal error: unknown collective " + call_.collective);
}

namespace {
class PendingCollectiveWork : public HostWork {
 public:
  explicit PendingCollectiveWork(std::unique_ptr<PendingCollective> pending) : pending_(std::move(pending)) {}
  bool test() override { return pending_->test(); }
  void wait() override { pending_->wait(); }

 private:
  std::unique_ptr<PendingCollective> pending_;
};
}  // namespace

std::unique_ptr<HostWork> CollectiveOperation::start(void* output, const std::vector<const void*>& inputs) const {
  if (call_.collective != "all_reduce") return HostOperation::start(output, inputs);
  std::unique_ptr<PendingCollective> pending =
      DistributedWorld::instance().start_all_reduce(inputs.at(0), output, call_);
  if (!pending) return nullptr;
  return std::make_unique<PendingCollectiveWork>(std::move(pending));
}

std::string CollectiveOperation::describe() const {
  if (call_.collective == "all_reduce" || call_.collective == "reduce_scatter")
    return call_.collective + " " + reduce_operation_name(call_.operation);
  if (call_.collective == "broadcast") return "broadcast from " + std::to_string(call_.root);
  return call_.collective;
}

NodePtr collective(const std::string& name, const NodePtr& input, ReduceOperation operation, int root,
                   const std::string& line) {
  CollectiveCall call;
  call.collective = name;
  call.dtype = input->dtype;
  call.shape = input->shape;
  call.operation = operation;
  call.root = root;
  call.line = line;
  int size = DistributedWorld::instance().size();
  Shape shape = input->shape;
  if (name == "all_gather") {
    shape.insert(shape.begin(), size);
  } else if (name == "reduce_scatter") {
    if (shape.empty() || shape[0] % size != 0)
      throw std::invalid_argument("reduce_scatter at " + line + ": the input's first dimension (" +
                                  (shape.empty() ? std::string("none") : std::to_string(shape[0])) +
                                  ") must divide into " + std::to_string(size) + " equal pieces, one per rank");
    shape[0] /= size;
  } else if (name == "broadcast") {
    if (root < 0 || root >= size)
      throw std::invalid_argument("broadcast at " + line + ": source rank " + std::to_string(root) +
                                  " is not in a world of " + std::to_string(size) + " ranks");
  } else if (name != "all_reduce") {
    throw std::invalid_argument("unknown collective '" + name + "'");
  }
  return make_host_operation(std::make_shared<CollectiveOperation>(std::move(call)), input->dtype, std::move(shape),
                             {input});
}

}  // namespace metajit
