// Where a plan run keeps the values its kernels compute. A sync publishes each on its node (core/executor.h);
// mj.cuda.emulate keeps them in the run instead, so its graph stays pending and the CPU can compute the same
// values afterwards for comparison. Kernels read their inputs through it. It must not decide when a buffer may
// go before the run ends: that is jit/plan/buffer_lifetimes.h, and only for values published on their nodes.
#pragma once
#include <unordered_map>

#include "core/node.h"

namespace metajit {

class RunValues {
 public:
  enum class Where { OnNodes, KeptAside };
  explicit RunValues(Where where) : where_(where) {}

  bool on_nodes() const { return where_ == Where::OnNodes; }
  // The node's value, computed by this run or before it; null when neither.
  const StoragePtr& value(const Node& node) const;
  bool computed(const Node& node) const { return value(node) != nullptr; }
  // Gives `node` the value this run computed for it.
  void store(Node& node, StoragePtr storage);
  // Cuts the edges behind a value this run computed, as a sync does once a value is computed; nothing when the
  // values are kept aside (the graph must stay as it was).
  void cut_inputs(Node& node);

 private:
  Where where_;
  std::unordered_map<const Node*, StoragePtr> kept_aside_;
};

}  // namespace metajit
