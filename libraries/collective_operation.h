// Collectives as entries of the lazy plan: a node whose value is a collective over the ranks of the job, computed
// by the run loop between the kernels that feed it and those that read it (core/host_operation.h). The kernels
// producing its input write the host buffer the collective reads (no copy through numpy), and its result feeds
// later kernels directly. Collectives are ordered host operations: every sync runs the pending ones in the order
// they were recorded, so each rank calls them in program order whether or not it reads the results.
//
// This file builds nodes and runs DistributedWorld's collectives on buffers; it must not know about Python.
#pragma once
#include <memory>
#include <string>

#include "core/host_operation.h"
#include "libraries/collectives.h"

namespace metajit {

class CollectiveOperation : public HostOperation {
 public:
  explicit CollectiveOperation(CollectiveCall call) : call_(std::move(call)) {}
  void run(void* output, const std::vector<const void*>& inputs) const override;
  // An all-reduce is started without waiting, so the kernels after it run while it moves; the others run at once.
  std::unique_ptr<HostWork> start(void* output, const std::vector<const void*>& inputs) const override;
  std::string describe() const override;  // "all_reduce sum", "broadcast from 0", "all_gather", ...
  bool ordered() const override { return true; }
  const CollectiveCall& call() const { return call_; }

 private:
  CollectiveCall call_;
};

// The pending result of `collective` ("all_reduce", "broadcast", "all_gather" or "reduce_scatter") over `input`:
// all_reduce and broadcast keep its shape; all_gather puts the world's copies along a new first dimension;
// reduce_scatter returns this rank's piece of the first dimension, which must divide by the world's size.
NodePtr collective(const std::string& collective, const NodePtr& input, ReduceOperation operation, int root,
                   const std::string& line);

}  // namespace metajit
