// Sublinear memory for the backward pass (mj.flags.memory_budget): which forward values a gradient walk keeps for
// backward and which it recomputes there, and the recomputed copies (clones) that gradient rules then read instead
// of the forward nodes. Recomputation only adds nodes; it must never change, run or store a forward node, and with
// no budget (or a budget the step fits in) it adds none, so plans stay exactly as they were.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/node.h"

namespace metajit {

// The budget: 0 is off; a value in (0, 1) is a fraction of the step's peak as modelled without recomputation; 1 or
// more is bytes. Read from METAJIT_MEMORY_BUDGET on first use; set_memory_budget throws std::invalid_argument for a
// negative or non-finite value.
double memory_budget();
void set_memory_budget(double budget);

// What the last gradient walk under a budget decided, in modelled bytes (mj.memory_plan_report() in Python):
// `fits` is false when even the most recomputation the policy does leaves the model over the budget.
struct RecomputationReport {
  bool active = false;  // clones were made
  bool fits = true;
  int64_t budget_bytes = 0;
  int64_t held_bytes = 0;  // allocated when backward was recorded (parameters, inputs, state)
  int64_t unconstrained_peak_bytes = 0;
  int64_t planned_peak_bytes = 0;
  int64_t saved_bytes = 0;              // forward values backward reads, without recomputation
  int64_t kept_bytes = 0;               // forward values kept for backward, with it
  int64_t recomputed_nodes = 0;         // clones made
  int64_t recomputed_contractions = 0;  // of which reductions (matrix products, convolutions, sums)
  std::string stage;                    // "none", "elementwise", or "segments"
};
RecomputationReport last_recomputation_report();

// One gradient walk's recomputation. Built before the walk from the nodes it will visit (newest first) and the
// inputs whose gradients are wanted; value_for() then gives the node a gradient rule should read.
class Recomputation {
 public:
  Recomputation(const NodePtr& output, const std::vector<Node*>& order, const std::vector<NodePtr>& inputs);
  ~Recomputation();
  Recomputation(const Recomputation&) = delete;
  Recomputation& operator=(const Recomputation&) = delete;
  bool active() const { return active_; }
  // `node` itself when its value is kept (or recomputation is off), else a clone reading clones of its inputs down
  // to kept values. Clones are made once per walk and keep the node's requires_grad, so rules decide as before.
  NodePtr value_for(const NodePtr& node);

 private:
  bool is_kept(Node* node) const;
  bool active_ = false;
  std::unordered_set<Node*> kept_;  // recomputable forward nodes whose value backward reads as it is
  std::unordered_set<Node*> recomputable_;
  std::unordered_map<Node*, NodePtr> clones_;
  RecomputationReport report_;
};

}  // namespace metajit
