// A traced function's plan, kept to run again on new arguments without Python (mj.trace). Capturing turns one
// recording (meta_ops/trace_recording.h) and the sync that ends it into a table: where each value the plan reads
// comes from on a replay (an argument, a Var's value at that time, a leaf's gradient, a fresh random draw, or a
// constant of the trace) and where each value it computes goes (a result, a Var the function wrote in place, a
// leaf's .grad). What a replay could not reproduce is refused when capturing, naming the user's line. This file
// must not record or plan: it replays what the recording saw and the planner made.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/node.h"
#include "jit/plan/plan.h"
#include "jit/run/graph_executor.h"
#include "meta_ops/trace_recording.h"
#include "meta_ops/var.h"

namespace metajit {

struct Artifact;
class TracedFunction;
Artifact export_traced_function(const TracedFunction& traced, std::vector<std::string> input_names,
                                std::vector<std::string> output_names, const std::string& producer);

class TracedFunction {
 public:
  // Ends `recording` (it must be the calling thread's active one): computes `results`, the Vars the function
  // wrote and the gradients it set, in one sync whose plan is kept. `arguments` are the values the function was
  // called with (computed). Throws std::invalid_argument, naming the line, for what a replay could not reproduce.
  static std::shared_ptr<TracedFunction> capture(TraceRecording& recording, const std::vector<NodePtr>& arguments,
                                                 const std::vector<VarPtr>& results);

  // Runs the kept plan on `arguments` (the recorded shapes and dtypes, checked): gives the written Vars and the
  // leaves' gradients their new values and returns the results' values. Throws std::invalid_argument when an
  // argument or a Var the function read no longer has its recorded shape or dtype (the caller traces again).
  std::vector<NodePtr> replay(const std::vector<NodePtr>& arguments);
  // The checks replay() starts with, running nothing: throws std::invalid_argument as replay() would.
  void check(const std::vector<NodePtr>& arguments) const;

  // One line per value the plan reads and per value it gives back, saying where it comes from or goes.
  std::string describe() const;
  size_t kernel_count() const { return plan_ ? plan_->kernels.size() : 0; }
  size_t state_count() const { return state_count_; }
  size_t constant_count() const { return constant_count_; }

 private:
  friend Artifact export_traced_function(const TracedFunction& traced, std::vector<std::string> input_names,
                                         std::vector<std::string> output_names, const std::string& producer);
  // Where a value a replay needs comes from.
  struct Source {
    enum class Kind { Argument, VarValue, Gradient, Random, Constant, Computed } kind = Kind::Constant;
    int index = 0;                           // Argument: which; Computed: the position in the plan
    std::weak_ptr<Var> var;                  // VarValue
    std::weak_ptr<Node::GradientSlot> slot;  // Gradient
    RandomDistribution distribution{};       // Random
    NodePtr constant;                        // Constant (and the recorded value's shape and dtype for all)
    DType dtype{};
    Shape shape;
    Provenance made_at;
  };
  struct WrittenVar {
    std::weak_ptr<Var> var;
    Source value;
  };
  struct WrittenGradient {
    std::weak_ptr<Node::GradientSlot> slot;
    bool cleared = false;  // the function left the gradient None
    Source value;
  };

  Source source_of(const NodePtr& node, const TraceRecording& recording, const std::vector<NodePtr>& arguments,
                   bool computed_by_plan) const;
  static std::string describe(const Source& source);
  // The current value of a Var or .grad the function read, checked against the recorded shape and dtype (throws
  // std::invalid_argument); null for other sources.
  static NodePtr state_value(const Source& source);
  NodePtr value_of(const Source& source, const std::vector<NodePtr>& arguments,
                   const std::vector<NodePtr>& computed) const;

  std::shared_ptr<const Plan> plan_;
  CapturedRun run_;  // the plan with the devices it ran on (the signature's nodes are let go)
  size_t positions_ = 0;
  std::vector<std::pair<int, Source>> inputs_;  // plan positions read from outside the plan
  std::vector<NodePtr> templates_;              // per position computed by the plan: its node's description
  std::vector<uint8_t> releasable_;
  std::vector<std::pair<DType, Shape>> argument_types_;
  std::vector<Source> results_;
  std::vector<WrittenVar> written_;
  std::vector<WrittenGradient> gradients_;
  size_t state_count_ = 0;
  size_t constant_count_ = 0;
};

}  // namespace metajit
