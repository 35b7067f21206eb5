// Plans are cached by the structure of the pending graph. A training loop builds the same graph every step, so
// after the first step a sync only walks the graph once to compute its signature and replays the kernel list
// (which kernels, which nodes they read and write) instead of fusing, lowering and rendering again.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "jit/buffer_lifetimes.h"
#include "jit/graph_executor.h"

namespace metajit {

// The pending graph behind some targets, as text that fixes everything planning looks at (kinds, dtypes,
// shapes, op payloads, constants, which inputs are computed, how nodes are shared, where they were created) and
// the nodes in the order the text numbers them.
struct GraphSignature {
  std::string text;
  std::vector<NodePtr> nodes;
  std::vector<int> targets;  // positions of the targets in `nodes`
};
GraphSignature graph_signature(const std::vector<NodePtr>& targets);

// A plan with its nodes replaced by positions in the signature's node list, so it holds no graph alive.
struct CachedPlan {
  std::vector<PlannedKernel> kernels;          // lowered.output / siblings / inputs / origins cleared
  std::vector<int> outputs;                    // per kernel: position of its output node
  std::vector<std::vector<int>> siblings;      // per kernel: positions of its further outputs (usually none)
  std::vector<std::vector<int>> inputs;        // per kernel: positions of its input nodes
  BufferLifetimes lifetimes;                   // which buffers may go before the run ends, and when
};

class PlanCache {
 public:
  PlanCache();
  static PlanCache& instance();
  std::shared_ptr<const CachedPlan> find(const std::string& signature);
  // Strips `kernels` of their nodes (positions from `signature`) and stores the result.
  std::shared_ptr<const CachedPlan> insert(const GraphSignature& signature, std::vector<PlannedKernel> kernels);
  void clear();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace metajit
