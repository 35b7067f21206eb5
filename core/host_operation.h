// Work a plan runs on host buffers outside any kernel, as one entry among its kernels: a collective over the ranks
// of an mpirun job is the first (libraries/collective_operation.h). A NodeKind::HostOperation node is never fused:
// its inputs are computed into contiguous host buffers first, it writes its own output buffer, and later kernels
// read that like any value. Its payload says what it does; the node's dtype and shape say what it writes.
//
// Some host operations must run on every rank in the order they were recorded, whether or not anything reads
// their results (a collective a rank skipped would leave the others waiting): those are kept by the executor and
// computed at the next sync of any value (core/executor.h, add_ordered_node).
//
// This file knows nothing of MPI, kernels or Python.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/node.h"

namespace metajit {

// Work a host operation started and has not finished: the run loop goes on launching kernels that do not read its
// result, tests it between them, and waits for it before the first kernel that does (or at the end of the plan).
class HostWork {
 public:
  virtual ~HostWork() = default;
  virtual bool test() = 0;  // whether it has finished (and a chance for it to make progress)
  virtual void wait() = 0;
};

class HostOperation {
 public:
  virtual ~HostOperation() = default;
  // `output` is the node's buffer (its dtype and shape, row-major); `inputs` the buffers of its inputs in order.
  virtual void run(void* output, const std::vector<const void*>& inputs) const = 0;
  // Starts the work and returns what is left of it, or null when it is done (what run() does). The buffers stay
  // in place until the returned work has finished.
  virtual std::unique_ptr<HostWork> start(void* output, const std::vector<const void*>& inputs) const {
    run(output, inputs);
    return nullptr;
  }
  // Canonical text of what it does, without the user's line: part of the graph signature (plans are shared by
  // graphs that describe the same), and shown by mj.inspect and profiles, e.g. "all_reduce sum".
  virtual std::string describe() const = 0;
  // Run at the next sync in recording order on every rank, even if nothing reads the result.
  virtual bool ordered() const { return false; }
};

struct HostOperationPayload : NodePayload {
  explicit HostOperationPayload(std::shared_ptr<const HostOperation> operation) : operation(std::move(operation)) {}
  std::string describe() const override { return operation->describe(); }
  std::shared_ptr<const HostOperation> operation;
};

// A pending node computed by `operation` from `inputs` (any shapes); ordered operations are handed to the executor.
NodePtr make_host_operation(std::shared_ptr<const HostOperation> operation, DType dtype, Shape shape,
                            std::vector<NodePtr> inputs);
// The operation of a HostOperation node (throws std::logic_error for any other node).
const HostOperation& host_operation_of(const Node& node);

}  // namespace metajit
